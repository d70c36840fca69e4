package templates

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/consoledb"
)

// Chart is a lag history drawn as SVG paths, computed on the server so the
// page needs no chart library and shows with scripts off.
type Chart struct {
	W, H        float64
	Left, Right float64 // plot area edges
	Top, Bottom float64
	Line        string // path of the lag in records
	Area        string // the same, closed to the x axis
	TimeLine    string // path of the lag in time, scaled to its own axis
	YTicks      []Tick
	TimeTicks   []Tick // right axis (lag in time)
	XTicks      []Tick
	MaxLag      int64
	MaxLagAt    time.Time
	MaxTime     time.Duration
	Last        consoledb.LagPoint
	Points      int
	Empty       bool
	Summary     string
	// Since and Until are the span drawn: the range asked for, narrowed
	// to the samples there are (Fitted) so ten minutes of history are not
	// squeezed against the right edge of a week.
	Since, Until time.Time
	Fitted       bool
	// Bands are the hover areas of the samples, one per point, whose
	// tooltips give its time and values.
	Bands []ChartBand
	// Markers are the events on the timeline (alerts, offset resets).
	Markers []ChartMarker
}

// ChartBand is the hover area of one sample.
type ChartBand struct {
	X, W  float64
	Title string
}

// ChartMarker is an event drawn as a vertical line with its tooltip.
type ChartMarker struct {
	X     float64
	Kind  string // fired, resolved, acknowledged, reset
	Title string
	Href  string
}

// Tick is one axis label at a position.
type Tick struct {
	Pos   float64
	Label string
}

// maxChartPoints bounds the points drawn; longer histories are reduced by
// keeping each bucket's largest lag.
const maxChartPoints = 600

// NewChart lays out pts between since and until. Gaps longer than three
// sampling intervals break the line, so a console that was down does not
// draw a straight line across the outage.
func NewChart(ctx context.Context, pts []consoledb.LagPoint, since, until time.Time, interval time.Duration) Chart {
	return NewChartWithEvents(ctx, pts, since, until, interval, nil)
}

// NewChartWithEvents is NewChart with events drawn as markers. The span
// starts at the first sample when the samples begin well after since.
func NewChartWithEvents(ctx context.Context, pts []consoledb.LagPoint, since, until time.Time, interval time.Duration, events []ChartEvent) Chart {
	c := Chart{W: 1200, H: 260, Left: 64, Right: 1200 - 64, Top: 12, Bottom: 260 - 30}
	c.Points = len(pts)
	if len(pts) == 0 || !until.After(since) {
		c.Empty = true
		return c
	}
	if first := pts[0].At; first.Sub(since) > until.Sub(since)/20 {
		pad := max(interval, until.Sub(first)/50)
		since, c.Fitted = first.Add(-pad), true
	}
	c.Since, c.Until = since, until
	pts = downsample(pts, maxChartPoints)
	var maxTime time.Duration
	for _, p := range pts {
		if p.Lag > c.MaxLag || c.MaxLagAt.IsZero() {
			c.MaxLag, c.MaxLagAt = p.Lag, p.At
		}
		maxTime = max(maxTime, p.LagTime)
	}
	c.MaxTime = maxTime
	c.Last = pts[len(pts)-1]
	yMax, yStep := niceScale(float64(c.MaxLag))
	span := until.Sub(since).Seconds()
	x := func(t time.Time) float64 { return c.Left + (c.Right-c.Left)*t.Sub(since).Seconds()/span }
	y := func(v float64) float64 { return c.Bottom - (c.Bottom-c.Top)*v/yMax }
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		c.YTicks = append(c.YTicks, Tick{Pos: y(v), Label: shortCount(v)})
	}
	tMax, tStep := niceDurationScale(maxTime.Seconds())
	ty := func(d time.Duration) float64 { return c.Bottom - (c.Bottom-c.Top)*d.Seconds()/tMax }
	if maxTime > 0 {
		for v := 0.0; v <= tMax+tStep/2; v += tStep {
			c.TimeTicks = append(c.TimeTicks, Tick{Pos: ty(time.Duration(v * float64(time.Second))), Label: Dur(time.Duration(v * float64(time.Second)))})
		}
	}
	// A gap is three times the usual spacing of the points drawn: the
	// sampling interval, or wider where the history was sampled less
	// often or the points were thinned out for a long range.
	gap := 3 * max(interval, medianSpacing(pts))
	if gap <= 0 {
		gap = 3 * time.Minute
	}
	var line, area, tline strings.Builder
	segStart := -1
	closeArea := func(i int) {
		if segStart < 0 {
			return
		}
		area.WriteString("L" + f1(x(pts[i].At)) + "," + f1(c.Bottom) + "L" + f1(x(pts[segStart].At)) + "," + f1(c.Bottom) + "Z")
	}
	for i, p := range pts {
		px, py := f1(x(p.At)), f1(y(float64(p.Lag)))
		newSeg := i == 0 || p.At.Sub(pts[i-1].At) > gap
		if newSeg {
			if i > 0 {
				closeArea(i - 1)
			}
			segStart = i
			line.WriteString("M" + px + "," + py)
			area.WriteString("M" + px + "," + py)
			if maxTime > 0 {
				tline.WriteString("M" + px + "," + f1(ty(p.LagTime)))
			}
			continue
		}
		line.WriteString("L" + px + "," + py)
		area.WriteString("L" + px + "," + py)
		if maxTime > 0 {
			tline.WriteString("L" + px + "," + f1(ty(p.LagTime)))
		}
	}
	closeArea(len(pts) - 1)
	c.Line, c.Area, c.TimeLine = line.String(), area.String(), tline.String()
	c.XTicks = timeTicks(ctx, since, until, x)
	// One hover band per point, reaching halfway to its neighbours.
	for i, p := range pts {
		left, right := x(p.At), x(p.At)
		if i > 0 {
			left = (x(pts[i-1].At) + x(p.At)) / 2
		} else {
			left = max(c.Left, left-4)
		}
		if i < len(pts)-1 {
			right = (x(p.At) + x(pts[i+1].At)) / 2
		} else {
			right = min(c.Right, right+4)
		}
		title := TimeText(ctx, p.At) + "\n" + Plural(p.Lag, "record", "records") + " behind"
		if maxTime > 0 {
			title += ", " + Dur(p.LagTime) + " behind"
		}
		c.Bands = append(c.Bands, ChartBand{X: left, W: max(right-left, 1), Title: title})
	}
	for _, ev := range events {
		if ev.At.Before(since) || ev.At.After(until) {
			continue
		}
		c.Markers = append(c.Markers, ChartMarker{X: x(ev.At), Kind: ev.Kind, Title: TimeText(ctx, ev.At) + "\n" + ev.Label, Href: ev.Href})
	}
	c.Summary = "Lag of " + Plural(c.Last.Lag, "record", "records") + " at the last sample; the most was " + Count(c.MaxLag) + " at " + TimeText(ctx, c.MaxLagAt) + "."
	return c
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// downsample keeps at most n points: the largest lag of each bucket.
func downsample(pts []consoledb.LagPoint, n int) []consoledb.LagPoint {
	if len(pts) <= n {
		return pts
	}
	out := make([]consoledb.LagPoint, 0, n)
	per := float64(len(pts)) / float64(n)
	for b := 0; b < n; b++ {
		lo, hi := int(float64(b)*per), int(float64(b+1)*per)
		if hi > len(pts) {
			hi = len(pts)
		}
		if lo >= hi {
			continue
		}
		best := pts[lo]
		for _, p := range pts[lo+1 : hi] {
			if p.Lag > best.Lag {
				best.Lag = p.Lag
			}
			best.LagTime = max(best.LagTime, p.LagTime)
		}
		best.At = pts[hi-1].At
		out = append(out, best)
	}
	return out
}

// niceScale returns an axis maximum and tick step (1, 2 or 5 times a power
// of ten) covering v with about four ticks.
func niceScale(v float64) (top, step float64) {
	if v <= 0 {
		return 1, 1
	}
	raw := v / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch r := raw / mag; {
	case r <= 1:
		step = mag
	case r <= 2:
		step = 2 * mag
	case r <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	if step < 1 {
		step = 1
	}
	top = math.Ceil(v/step) * step
	return top, step
}

func shortCount(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', -1, 64) + "G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// timeTicks places about six labels on round times in the viewer's zone.
func timeTicks(ctx context.Context, since, until time.Time, x func(time.Time) float64) []Tick {
	loc := RequestOf(ctx).Loc
	span := until.Sub(since)
	steps := []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 6 {
			step = s
			break
		}
	}
	layout := "15:04"
	if span > 36*time.Hour {
		layout = "Jan 2 15:04"
	}
	// Round in the viewer's zone so labels fall on local hours and days.
	local := since.In(loc)
	_, offset := local.Zone()
	off := time.Duration(offset) * time.Second
	t := since.Add(off).Truncate(step).Add(-off)
	if t.Before(since) {
		t = t.Add(step)
	}
	var out []Tick
	for ; !t.After(until); t = t.Add(step) {
		out = append(out, Tick{Pos: x(t), Label: t.In(loc).Format(layout)})
	}
	return out
}

// medianSpacing is the median time between consecutive points.
func medianSpacing(pts []consoledb.LagPoint) time.Duration {
	if len(pts) < 2 {
		return 0
	}
	d := make([]time.Duration, 0, len(pts)-1)
	for i := 1; i < len(pts); i++ {
		d = append(d, pts[i].At.Sub(pts[i-1].At))
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// niceDurationScale is niceScale for seconds: the axis ends on a round
// duration (1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h,
// days) so its labels read "30 min", not "33 min 20 s".
func niceDurationScale(v float64) (top, step float64) {
	if v <= 0 {
		return 1, 1
	}
	steps := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800}
	step = steps[len(steps)-1]
	for _, s := range steps {
		if v/s <= 4 {
			step = s
			break
		}
	}
	return math.Ceil(v/step) * step, step
}
