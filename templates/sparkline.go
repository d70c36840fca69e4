package templates

import (
	"context"
	"strings"
)

// Spark is a small line chart without axes, computed on the server: a
// series' shape, with its values in the tooltips.
type Spark struct {
	W, H  float64
	Line  string // SVG path
	Area  string
	Bands []SparkBand // one hover band per point
	Label string      // what it shows, for the tooltip and screen readers
	Empty bool
}

// SparkBand is the hover area of one point.
type SparkBand struct {
	X, W  float64
	Title string
}

// NewSpark lays out values (oldest first) in a w×h box; format renders a
// value for the tooltips, times (parallel to values, may be nil) are
// shown in the viewer's zone.
func NewSpark(ctx context.Context, pts []Point, w, h float64, label string, format func(float64) string) Spark {
	sp := Spark{W: w, H: h, Label: label}
	if len(pts) < 2 {
		sp.Empty = true
		return sp
	}
	lo, hi := pts[0].V, pts[0].V
	for _, p := range pts {
		lo, hi = min(lo, p.V), max(hi, p.V)
	}
	lo = min(lo, 0)
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	pad := 2.0
	x := func(i int) float64 { return pad + (w-2*pad)*float64(i)/float64(len(pts)-1) }
	y := func(v float64) float64 { return h - pad - (h-2*pad)*(v-lo)/span }
	var line, area strings.Builder
	for i, p := range pts {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		line.WriteString(cmd + f1(x(i)) + "," + f1(y(p.V)))
		area.WriteString(cmd + f1(x(i)) + "," + f1(y(p.V)))
	}
	area.WriteString("L" + f1(x(len(pts)-1)) + "," + f1(h-pad) + "L" + f1(x(0)) + "," + f1(h-pad) + "Z")
	sp.Line, sp.Area = line.String(), area.String()
	step := (w - 2*pad) / float64(len(pts)-1)
	for i, p := range pts {
		title := format(p.V)
		if !p.At.IsZero() {
			title = TimeText(ctx, p.At)[11:] + " · " + title
		}
		sp.Bands = append(sp.Bands, SparkBand{X: max(0, x(i)-step/2), W: step, Title: title})
	}
	last := pts[len(pts)-1].V
	sp.Label = label + ": " + format(last) + " now, " + format(lo) + " to " + format(hi) + " over the period"
	return sp
}
