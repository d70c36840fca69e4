package perf

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Latency summarises a Histogram in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Avg   float64 `json:"avg"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

// LatencyOf summarises h, whose values are nanoseconds. It returns nil for
// an empty histogram, so an unmeasured latency is absent rather than zero.
func LatencyOf(h *Histogram) *Latency {
	if h == nil || h.Count() == 0 {
		return nil
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return &Latency{
		Count: h.Count(),
		Avg:   h.Mean() / 1e6,
		Min:   ms(h.Min()),
		P50:   ms(h.Quantile(0.50)),
		P95:   ms(h.Quantile(0.95)),
		P99:   ms(h.Quantile(0.99)),
		P999:  ms(h.Quantile(0.999)),
		Max:   ms(h.Max()),
	}
}

func (l *Latency) String() string {
	return fmt.Sprintf("avg %s, p50 %s, p95 %s, p99 %s, p99.9 %s, max %s ms",
		fmtMs(l.Avg), fmtMs(l.P50), fmtMs(l.P95), fmtMs(l.P99), fmtMs(l.P999), fmtMs(l.Max))
}

func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// Result is what one load generator run reports. The JSON form is what the
// benchmark harness reads, so its field names are an interface: add fields,
// do not rename them.
type Result struct {
	Mode    string `json:"mode"`   // produce, consume or e2e
	System  string `json:"system"` // kafka or nats: the protocol spoken
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"` // payload bytes (key + value)
	Errors  int64  `json:"errors"`
	// FirstError is the first failure seen, when Errors > 0 or the run
	// stopped early.
	FirstError    string  `json:"first_error,omitempty"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MiBPerSec     float64 `json:"mib_per_sec"`
	// Latency is send to acknowledgement for produce, and the producer's
	// send time to the consumer's receipt for e2e. Consume has none.
	Latency *Latency `json:"latency_ms,omitempty"`
	// ProduceLatency is send to acknowledgement during an e2e run.
	ProduceLatency *Latency `json:"produce_latency_ms,omitempty"`
	// Produce and Consume are the two sides of a load run (mode "load",
	// where the fields above repeat the produce side); Consume's latency
	// is end to end.
	Produce *Side `json:"produce,omitempty"`
	Consume *Side `json:"consume,omitempty"`
	// Samples is what the progress lines reported, one per interval, for
	// the produce, consume and e2e modes.
	Samples []Sample `json:"samples,omitempty"`
	// Config echoes the settings of the run.
	Config map[string]any `json:"config,omitempty"`
}

// Side is the produce or the consume half of a load run.
type Side struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Errors        int64   `json:"errors"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MiBPerSec     float64 `json:"mib_per_sec"`
	// Latency is send to acknowledgement for the produce side, send to
	// receipt (end to end) for the consume side.
	Latency *Latency `json:"latency_ms,omitempty"`
	// Samples is what the progress lines reported, one per interval.
	Samples []Sample `json:"samples,omitempty"`
}

// SetElapsed records the duration of the side and derives its rates.
func (s *Side) SetElapsed(d time.Duration) {
	s.Seconds = d.Seconds()
	if s.Seconds > 0 {
		s.RecordsPerSec = float64(s.Records) / s.Seconds
		s.MiBPerSec = float64(s.Bytes) / s.Seconds / (1 << 20)
	}
}

// SetElapsed records the duration of the run and derives the rates.
func (r *Result) SetElapsed(d time.Duration) {
	r.Seconds = d.Seconds()
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / r.Seconds
		r.MiBPerSec = float64(r.Bytes) / r.Seconds / (1 << 20)
	}
}

// WriteJSON writes r as one line of JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("perf: encoding result: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// WriteText writes the human summary of r.
func (r *Result) WriteText(w io.Writer) error {
	if r.Mode == "load" {
		return r.writeLoadText(w)
	}
	var b strings.Builder
	verb := map[string]string{"produce": "produced", "consume": "consumed", "e2e": "produced and consumed"}[r.Mode]
	if verb == "" {
		verb = r.Mode
	}
	fmt.Fprintf(&b, "%d records %s in %.2f s: %.0f records/s, %.2f MiB/s\n",
		r.Records, verb, r.Seconds, r.RecordsPerSec, r.MiBPerSec)
	switch r.Mode {
	case "e2e":
		if r.Latency != nil {
			fmt.Fprintf(&b, "end-to-end latency: %s\n", r.Latency)
		}
		if r.ProduceLatency != nil {
			fmt.Fprintf(&b, "produce latency:    %s\n", r.ProduceLatency)
		}
	default:
		if r.Latency != nil {
			fmt.Fprintf(&b, "latency: %s\n", r.Latency)
		}
	}
	if r.Errors > 0 || r.FirstError != "" {
		fmt.Fprintf(&b, "errors: %d (first: %s)\n", r.Errors, r.FirstError)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLoadText writes a load run's summary: one line of settings and a
// table with a row per side.
func (r *Result) writeLoadText(w io.Writer) error {
	var b strings.Builder
	if d := r.Config["description"]; d != nil {
		fmt.Fprintf(&b, "%v\n", d)
	}
	fmt.Fprintf(&b, "%-8s %11s %8s %10s %8s  %-10s %8s %8s %8s %8s %8s %8s\n", "", "records", "seconds", "records/s", "MiB/s",
		"latency", "avg ms", "p50", "p95", "p99", "p99.9", "max")
	row := func(name string, s *Side, what string) {
		if s == nil {
			return
		}
		fmt.Fprintf(&b, "%-8s %11d %8.2f %10.0f %8.2f", name, s.Records, s.Seconds, s.RecordsPerSec, s.MiBPerSec)
		if l := s.Latency; l != nil {
			fmt.Fprintf(&b, "  %-10s %8s %8s %8s %8s %8s %8s", what, fmtMs(l.Avg), fmtMs(l.P50), fmtMs(l.P95), fmtMs(l.P99),
				fmtMs(l.P999), fmtMs(l.Max))
		}
		b.WriteString("\n")
	}
	row("produce", r.Produce, "send→ack")
	row("consume", r.Consume, "end to end")
	if r.Errors > 0 || r.FirstError != "" {
		fmt.Fprintf(&b, "errors: %d (first: %s)\n", r.Errors, r.FirstError)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
