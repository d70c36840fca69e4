package soak

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The soak test's arithmetic and readers: untagged, so `go test` checks
// them without running a soak.

// theilSen is the Theil–Sen slope of ys over xs: the median of the slopes
// between every pair of points. Unlike a least-squares fit, one outlier (a
// garbage collection just before a sample, a segment roll) cannot tilt it.
// It returns NaN for fewer than two distinct xs.
func theilSen(xs, ys []float64) float64 {
	var slopes []float64
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if dx := xs[j] - xs[i]; dx != 0 {
				slopes = append(slopes, (ys[j]-ys[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return math.NaN()
	}
	slices.Sort(slopes)
	n := len(slopes)
	if n%2 == 1 {
		return slopes[n/2]
	}
	return (slopes[n/2-1] + slopes[n/2]) / 2
}

// procRSSKiB is VmRSS of pid in KiB.
func procRSSKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return statusField(f, "VmRSS:")
}

// statusField reads a "Name:  123 kB" line of /proc/PID/status.
func statusField(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s line", name)
}

// procOpenFiles is the number of file descriptors pid has open.
func procOpenFiles(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}

// metricValue sums the samples of a counter or gauge (or a histogram's
// count) named name in Prometheus text, whose labels include want.
func metricValue(text, name string, want map[string]string) (float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, err
	}
	fam, ok := fams[name]
	if !ok {
		return 0, fmt.Errorf("no metric %s", name)
	}
	var sum float64
	found := false
outer:
	for _, m := range fam.GetMetric() {
		for k, v := range want {
			match := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					match = true
				}
			}
			if !match {
				continue outer
			}
		}
		found = true
		switch {
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	if !found {
		return 0, fmt.Errorf("no %s sample with labels %v", name, want)
	}
	return sum, nil
}

// sseReader reads server-sent events: it returns each event's name and
// data (several data lines joined by "\n").
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &sseReader{sc: sc}
}

// next returns the next event; io.EOF at the end of the stream.
func (s *sseReader) next() (event, data string, err error) {
	var lines []string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if event != "" || len(lines) > 0 {
				if event == "" {
					event = "message"
				}
				return event, strings.Join(lines, "\n"), nil
			}
		case strings.HasPrefix(line, ":"): // a comment (keep-alive)
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := s.sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", io.EOF
}

// limits are the growth a broker may show after warm-up, per minute.
type limits struct {
	RSSMiB, Goroutines, OpenFiles float64
}

// brokerSample is one broker at one sampling instant.
type brokerSample struct {
	RSSKiB     int64
	Goroutines float64
	OpenFiles  int
	Err        string
}

// point is every broker at one sampling instant.
type point struct {
	At      time.Duration // since the load started
	Brokers []brokerSample
}

// row is one window of the table: each broker's figures are the medians of
// the points taken in the window.
type row struct {
	point
	ProduceRate, MiBRate float64 // records/s and MiB/s produced in the window
	ProduceP99, E2EP99   float64 // ms; NaN when the window had none
	ConsumeRate          float64 // records/s received by the measuring group
	TailRecords          int64   // "records" events of the live tail so far
	TailDropped          int64   // records the tail counted as dropped so far
	Matched              float64 // the comparison's matched records so far
	Evaluations          float64 // alert evaluations so far
}

// slopeCheck is the growth of one series of one broker after warm-up.
type slopeCheck struct {
	Broker   int
	What     string
	PerMin   float64
	Limit    float64
	First    float64 // at the first sample after warm-up
	Last     float64
	Exceeded bool
}

// checkSlopes fits each broker's RSS, goroutines and open files over the
// points at or after warmup and compares the slopes with lim.
func checkSlopes(points []point, warmup time.Duration, lim limits) ([]slopeCheck, error) {
	var after []point
	for _, r := range points {
		if r.At >= warmup {
			after = append(after, r)
		}
	}
	if len(after) < 3 {
		return nil, fmt.Errorf("%d samples after the %v warm-up: need at least 3 to fit a slope (a longer SOAK_DURATION)", len(after), warmup)
	}
	nb := len(after[0].Brokers)
	var out []slopeCheck
	for b := range nb {
		series := []struct {
			what  string
			limit float64
			get   func(brokerSample) float64
		}{
			{"RSS MiB", lim.RSSMiB, func(s brokerSample) float64 { return float64(s.RSSKiB) / 1024 }},
			{"goroutines", lim.Goroutines, func(s brokerSample) float64 { return s.Goroutines }},
			{"open files", lim.OpenFiles, func(s brokerSample) float64 { return float64(s.OpenFiles) }},
		}
		for _, s := range series {
			var xs, ys []float64
			for _, r := range after {
				if b >= len(r.Brokers) || r.Brokers[b].Err != "" {
					continue
				}
				xs = append(xs, r.At.Minutes())
				ys = append(ys, s.get(r.Brokers[b]))
			}
			if len(xs) < 3 {
				return nil, fmt.Errorf("broker %d: %d readable samples of %s after warm-up", b+1, len(xs), s.what)
			}
			slope := theilSen(xs, ys)
			out = append(out, slopeCheck{Broker: b + 1, What: s.what, PerMin: slope, Limit: s.limit,
				First: ys[0], Last: ys[len(ys)-1], Exceeded: slope > s.limit})
		}
	}
	return out, nil
}

// windowRow is the row of the points in (from, to]: each broker's median
// RSS, goroutines and open files (a sample that failed counts as missing;
// a broker with none in the window is "?").
func windowRow(points []point, from, to time.Duration, brokers int) row {
	r := row{point: point{At: to, Brokers: make([]brokerSample, brokers)}}
	for b := range brokers {
		var rss, gor, fds []float64
		for _, p := range points {
			if p.At <= from || p.At > to || b >= len(p.Brokers) || p.Brokers[b].Err != "" {
				continue
			}
			rss = append(rss, float64(p.Brokers[b].RSSKiB))
			gor = append(gor, p.Brokers[b].Goroutines)
			fds = append(fds, float64(p.Brokers[b].OpenFiles))
		}
		if len(rss) == 0 {
			r.Brokers[b].Err = "no sample in the window"
			continue
		}
		r.Brokers[b] = brokerSample{RSSKiB: int64(median(rss)), Goroutines: median(gor), OpenFiles: int(math.Round(median(fds)))}
	}
	return r
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// table renders rows as Markdown: one row per window, each broker's figures
// as b1 / b2 / b3.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| min | RSS MiB | goroutines | open files | produce rec/s | MiB/s | produce p99 ms | e2e p99 ms | consumed rec/s | tail rows (dropped) | compared pairs | alert evals |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	per := func(r row, f func(brokerSample) string) string {
		parts := make([]string, len(r.Brokers))
		for i, s := range r.Brokers {
			if s.Err != "" {
				parts[i] = "?"
			} else {
				parts[i] = f(s)
			}
		}
		return strings.Join(parts, " / ")
	}
	ms := func(v float64) string {
		if math.IsNaN(v) {
			return "—"
		}
		if v >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %.1f | %s | %s | %s | %.0f | %.2f | %s | %s | %.0f | %d (%d) | %.0f | %.0f |\n",
			r.At.Minutes(),
			per(r, func(s brokerSample) string { return fmt.Sprintf("%.0f", float64(s.RSSKiB)/1024) }),
			per(r, func(s brokerSample) string { return fmt.Sprintf("%.0f", s.Goroutines) }),
			per(r, func(s brokerSample) string { return strconv.Itoa(s.OpenFiles) }),
			r.ProduceRate, r.MiBRate, ms(r.ProduceP99), ms(r.E2EP99), r.ConsumeRate,
			r.TailRecords, r.TailDropped, r.Matched, r.Evaluations)
	}
	return b.String()
}

// slopeTable renders the checks as Markdown.
func slopeTable(checks []slopeCheck) string {
	var b strings.Builder
	b.WriteString("| broker | series | after warm-up: first → last | slope per minute | limit | |\n|---|---|---|---|---|---|\n")
	for _, c := range checks {
		verdict := "flat"
		if c.Exceeded {
			verdict = "**grows**"
		}
		fmt.Fprintf(&b, "| %d | %s | %.0f → %.0f | %+.2f | %.2f | %s |\n", c.Broker, c.What, c.First, c.Last, c.PerMin, c.Limit, verdict)
	}
	return b.String()
}

func TestTheilSen(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4, 5, 6, 7}
	ys := []float64{10, 12, 14, 16, 18, 20, 22, 24} // slope 2
	if got := theilSen(xs, ys); got != 2 {
		t.Fatalf("slope %v, want 2", got)
	}
	// One wild point (a collection just before a sample) does not tilt it;
	// least squares would say about 7.
	ys[7] = 100
	if got := theilSen(xs, ys); math.Abs(got-2) > 1e-9 {
		t.Fatalf("slope with an outlier %v, want 2", got)
	}
	flat := []float64{50, 52, 49, 51, 50, 48, 52, 50}
	if got := theilSen(xs, flat); math.Abs(got) > 0.5 {
		t.Fatalf("noisy flat series: slope %v", got)
	}
	if !math.IsNaN(theilSen([]float64{1}, []float64{1})) || !math.IsNaN(theilSen([]float64{1, 1}, []float64{1, 2})) {
		t.Fatal("a slope from fewer than two distinct x")
	}
}

func TestCheckSlopes(t *testing.T) {
	var rows []point
	for i := range 11 {
		at := time.Duration(i) * 30 * time.Second
		rows = append(rows, point{At: at, Brokers: []brokerSample{
			{RSSKiB: 100 << 10, Goroutines: 300, OpenFiles: 80},             // flat
			{RSSKiB: int64(100+10*i) << 10, Goroutines: 300, OpenFiles: 80}, // +20 MiB a minute
			{RSSKiB: 100 << 10, Goroutines: float64(300 + 7*i), OpenFiles: 80 + i},
		}})
	}
	// Broker 1 leaks early (warm-up) only.
	rows[0].Brokers[0].RSSKiB, rows[1].Brokers[0].RSSKiB = 10<<10, 50<<10
	checks, err := checkSlopes(rows, time.Minute, limits{RSSMiB: 4, Goroutines: 5, OpenFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range checks {
		got[fmt.Sprintf("%d %s", c.Broker, c.What)] = c.Exceeded
	}
	want := map[string]bool{
		"1 RSS MiB": false, "1 goroutines": false, "1 open files": false,
		"2 RSS MiB": true, "2 goroutines": false, "2 open files": false,
		"3 RSS MiB": false, "3 goroutines": true, "3 open files": false, // 2 files a minute is the limit itself
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: exceeded %v, want %v (%+v)", k, got[k], w, checks)
		}
	}
	if _, err := checkSlopes(rows[:4], time.Minute, limits{}); err == nil {
		t.Error("a fit from two samples after warm-up")
	}
	var trs []row
	for _, p := range rows[:2] {
		trs = append(trs, row{point: p})
	}
	md := table(trs) + slopeTable(checks)
	for _, want := range []string{"| min | RSS MiB |", "| 0.5 | 50 / 110 / 100 |", "**grows**", "+20.00"} {
		if !strings.Contains(md, want) {
			t.Errorf("tables lack %q:\n%s", want, md)
		}
	}
}

func TestReaders(t *testing.T) {
	if rss, err := procRSSKiB(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("own RSS: %v %v", rss, err)
	}
	if n, err := procOpenFiles(os.Getpid()); err != nil || n < 3 {
		t.Fatalf("own open files: %v %v", n, err)
	}
	if _, err := statusField(strings.NewReader("Name: x\n"), "VmRSS:"); err == nil {
		t.Fatal("status without VmRSS accepted")
	}

	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 321
# TYPE sluice_migration_records gauge
sluice_migration_records{comparison="1",outcome="matched"} 40
sluice_migration_records{comparison="1",outcome="missing"} 2
sluice_migration_records{comparison="2",outcome="matched"} 5
# TYPE sluice_alerting_evaluation_duration_seconds histogram
sluice_alerting_evaluation_duration_seconds_bucket{le="+Inf"} 17
sluice_alerting_evaluation_duration_seconds_sum 0.5
sluice_alerting_evaluation_duration_seconds_count 17
`
	for _, tc := range []struct {
		name string
		want map[string]string
		v    float64
	}{
		{"go_goroutines", nil, 321},
		{"sluice_migration_records", map[string]string{"outcome": "matched"}, 45},
		{"sluice_migration_records", map[string]string{"outcome": "matched", "comparison": "1"}, 40},
		{"sluice_alerting_evaluation_duration_seconds", nil, 17},
	} {
		if v, err := metricValue(text, tc.name, tc.want); err != nil || v != tc.v {
			t.Errorf("%s %v = %v, %v; want %v", tc.name, tc.want, v, err, tc.v)
		}
	}
	if _, err := metricValue(text, "nope", nil); err == nil {
		t.Error("a missing metric read")
	}
	if _, err := metricValue(text, "sluice_migration_records", map[string]string{"outcome": "gone"}); err == nil {
		t.Error("a missing label read")
	}

	r := newSSEReader(strings.NewReader(": keep-alive\n\nevent: note\ndata: Live\n\nevent: records\ndata: <tr>a</tr>\ndata: <tr>b</tr>\n\ndata: plain\n\n"))
	var got []string
	for {
		ev, data, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev+"="+data)
	}
	if want := []string{"note=Live", "records=<tr>a</tr>\n<tr>b</tr>", "message=plain"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestWindowRow(t *testing.T) {
	pts := []point{
		{At: 5 * time.Second, Brokers: []brokerSample{{RSSKiB: 100 << 10, Goroutines: 10, OpenFiles: 5}, {Err: "gone"}}},
		{At: 10 * time.Second, Brokers: []brokerSample{{RSSKiB: 300 << 10, Goroutines: 30, OpenFiles: 7}, {Err: "gone"}}},
		{At: 15 * time.Second, Brokers: []brokerSample{{RSSKiB: 200 << 10, Goroutines: 20, OpenFiles: 6}, {Err: "gone"}}},
		{At: 35 * time.Second, Brokers: []brokerSample{{RSSKiB: 900 << 10, Goroutines: 90, OpenFiles: 9}, {RSSKiB: 1}}},
	}
	r := windowRow(pts, 0, 30*time.Second, 2)
	if r.At != 30*time.Second || r.Brokers[0] != (brokerSample{RSSKiB: 200 << 10, Goroutines: 20, OpenFiles: 6}) || r.Brokers[1].Err == "" {
		t.Fatalf("window row %+v: want the medians of the first three points, broker 2 missing", r)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("median %v", got)
	}
}
