package schemas

import (
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	tpl "github.com/sluice-io/sluice/templates/schemas"
)

// maxDiffLines bounds the lines of each side a diff is computed for (the
// matcher is quadratic in the worst case); longer schemas are not diffed.
const maxDiffLines = 4000

// sideBySide aligns the lines of a and b (difflib's matching blocks, as
// Python's difflib): equal lines side by side, replaced ones paired, lines
// only on one side against a blank.
func sideBySide(a, b string) tpl.DiffView {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al) > maxDiffLines || len(bl) > maxDiffLines {
		return tpl.DiffView{TooLarge: true}
	}
	var v tpl.DiffView
	m := difflib.NewMatcher(al, bl)
	for _, op := range m.GetOpCodes() {
		switch op.Tag {
		case 'e':
			for i, j := op.I1, op.J1; i < op.I2; i, j = i+1, j+1 {
				v.Rows = append(v.Rows, tpl.DiffRow{Kind: "same", Left: al[i], Right: bl[j], LeftN: i + 1, RightN: j + 1})
			}
		default:
			n := max(op.I2-op.I1, op.J2-op.J1)
			for k := range n {
				r := tpl.DiffRow{Kind: "change"}
				if i := op.I1 + k; i < op.I2 {
					r.Left, r.LeftN = al[i], i+1
				} else {
					r.Kind = "ins"
				}
				if j := op.J1 + k; j < op.J2 {
					r.Right, r.RightN = bl[j], j+1
				} else {
					r.Kind = "del"
				}
				v.Rows = append(v.Rows, r)
				v.Changed++
			}
		}
	}
	return v
}
