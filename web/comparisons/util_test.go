package comparisons_test

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

var cssRe = regexp.MustCompile(`<link rel="stylesheet" href="(/static/comparisons\.css\?v=[0-9a-f]+)">`)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func testTime() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }

// diffTable is the differences table of a detail page ("" when none).
func diffTable(body string) string {
	i := strings.Index(body, `<table class="diffs">`)
	if i < 0 {
		return ""
	}
	return body[i:]
}
