package templates

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/human"
	"github.com/sluice-io/sluice/kafkaview"
)

// configDoc is a topic config's one-line documentation: the broker's, or
// the project's key table's when the broker gives none.
func configDoc(c kafkaview.ConfigEntry) string {
	if c.Doc != "" {
		return c.Doc
	}
	if k, ok := config.LookupTopic(c.Name); ok {
		return k.Doc
	}
	return ""
}

// configChoices are the values a config of a few words takes (a select in
// the form), the current value among them even when it is not one of the
// known words; nil for a free-text config.
func configChoices(c kafkaview.ConfigEntry) []string {
	k, ok := config.LookupTopic(c.Name)
	if !ok {
		return nil
	}
	ch := k.Choices()
	if len(ch) > 0 && !slices.Contains(ch, c.Value) {
		ch = append([]string{c.Value}, ch...)
	}
	return ch
}

// ConfigUnit says how a config's number is read: "ms" for a duration in
// milliseconds, "bytes" for a size, "" for anything else.
func ConfigUnit(name string) string {
	switch {
	case strings.HasSuffix(name, ".ms"):
		return "ms"
	case strings.HasSuffix(name, ".bytes") && name != "index.interval.bytes":
		return "bytes"
	}
	return ""
}

// ConfigHuman is a config's number in words: "7 d" for 604800000 ms,
// "1 GiB", "no limit" for -1 or the largest long; "" when the value is not
// a number of a known unit, or says nothing more than the number does.
func ConfigHuman(name, value string) string {
	unit := ConfigUnit(name)
	if unit == "" {
		return ""
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return ""
	}
	if n == -1 || n == math.MaxInt64 {
		return "no limit"
	}
	if n < 0 {
		return ""
	}
	if unit == "ms" {
		if n < 1000 {
			return ""
		}
		return human.Duration(time.Duration(n) * time.Millisecond)
	}
	if n < 1024 {
		return ""
	}
	return human.BytesText(n)
}

// ConfigValueFromForm turns what a person typed for a config into Kafka's
// form: "7d" into milliseconds for a duration, "1GiB" into bytes for a
// size; other values are returned as typed.
func ConfigValueFromForm(name, typed string) (string, error) {
	typed = strings.TrimSpace(typed)
	if typed == "" {
		return typed, nil
	}
	var n int64
	var err error
	switch ConfigUnit(name) {
	case "ms":
		n, err = human.ParseMillis(typed)
	case "bytes":
		n, err = human.ParseBytes(typed)
	default:
		return typed, nil
	}
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10), nil
}
