package webtest

import (
	"fmt"
	"regexp"
	"strings"
)

// Units on every zero: a quantity the console shows carries its unit, zero
// included (0 B, 0 msgs, 0 records, 0 msg/s, 0 members), so that a "0"
// never leaves the reader guessing what is counted. BareZeros finds the
// numeric table cells (td.num) and the figures (.stat) of a page that
// show a bare zero; a cell under a column that names or places something
// (IdentifierColumns: a partition, a broker, an offset) is not a quantity.

// ZeroFinding is one cell or figure showing a bare zero.
type ZeroFinding struct {
	Page, Where, Text string
}

func (f ZeroFinding) String() string {
	return fmt.Sprintf("%s: %s shows %q", f.Page, f.Where, f.Text)
}

// IdentifierColumns are the column headers and figure labels of numbers
// that identify or place rather than count.
var IdentifierColumns = map[string]bool{
	"Partition": true, "Leader": true, "Broker": true, "ID": true, "Id": true, "Node": true, "Controller": true,
	"Offset": true, "Committed": true, "Start offset": true, "End offset": true, "Log start": true, "Log end": true,
	"High watermark": true, "Last stable offset": true, "Epoch": true, "Producer epoch": true, "Producer ID": true,
	"Generation": true, "Replicas": true, "In sync": true, "Port": true, "Version": true, "Next": true,
}

var (
	tableRE    = regexp.MustCompile(`(?s)<table[^>]*>(.*?)</table>`)
	thRE       = regexp.MustCompile(`(?s)<th[^>]*>(.*?)</th>`)
	trRE       = regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`)
	tdRE       = regexp.MustCompile(`(?s)<td([^>]*)>(.*?)</td>`)
	statRE     = regexp.MustCompile(`(?s)<div class="label">(.*?)</div>\s*<div class="value">(.*?)</div>`)
	bareZeroRE = regexp.MustCompile(`^[0.,]*0[0.,]*$`)
	numClassRE = regexp.MustCompile(`class="[^"]*\bnum\b`)
	svgRE      = regexp.MustCompile(`(?s)<svg.*?</svg>`)
	tagRE      = regexp.MustCompile(`(?s)<[^>]*>`)
	spaceRE    = regexp.MustCompile(`\s+`)
)

// CellText is an HTML fragment's text: SVG dropped, tags dropped, the
// entities templ writes decoded, spaces folded.
func CellText(h string) string {
	s := tagRE.ReplaceAllString(svgRE.ReplaceAllString(h, " "), " ")
	s = strings.NewReplacer("&#39;", "'", "&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&nbsp;", " ", "\u00a0", " ").Replace(s)
	return strings.TrimSpace(spaceRE.ReplaceAllString(s, " "))
}

// BareZeros scans the HTML of page for numeric cells and figures showing
// a bare zero.
func BareZeros(page, html string) []ZeroFinding {
	var out []ZeroFinding
	for _, tbl := range tableRE.FindAllStringSubmatch(html, -1) {
		var heads []string
		for _, th := range thRE.FindAllStringSubmatch(tbl[1], -1) {
			heads = append(heads, CellText(th[1]))
		}
		for _, tr := range trRE.FindAllStringSubmatch(tbl[1], -1) {
			for i, td := range tdRE.FindAllStringSubmatch(tr[1], -1) {
				if !numClassRE.MatchString(td[1]) {
					continue
				}
				head := ""
				if i < len(heads) {
					head = heads[i]
				}
				if IdentifierColumns[head] {
					continue
				}
				if text := CellText(td[2]); bareZeroRE.MatchString(text) {
					out = append(out, ZeroFinding{page, fmt.Sprintf("column %q", head), text})
				}
			}
		}
	}
	for _, st := range statRE.FindAllStringSubmatch(html, -1) {
		label := CellText(st[1])
		if IdentifierColumns[label] {
			continue
		}
		if text := CellText(st[2]); bareZeroRE.MatchString(text) {
			out = append(out, ZeroFinding{page, fmt.Sprintf("figure %q", label), text})
		}
	}
	return out
}

// ExpectNoBareZeros fails t with every finding.
func ExpectNoBareZeros(t interface {
	Helper()
	Fatalf(string, ...any)
}, findings []ZeroFinding) {
	t.Helper()
	if len(findings) == 0 {
		return
	}
	var b strings.Builder
	for _, f := range findings {
		b.WriteString("\n  " + f.String())
	}
	t.Fatalf("%d bare zeros (a zero needs its unit):%s", len(findings), b.String())
}
