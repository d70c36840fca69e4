package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestPayload(t *testing.T) {
	p, err := NewPayload(PayloadRandom, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.At(0), p.At(1)
	if len(a) != 100 || len(b) != 100 || cap(a) != 100 {
		t.Fatalf("lengths %d, %d (cap %d), want 100", len(a), len(b), cap(a))
	}
	if bytes.Equal(a, b) {
		t.Fatal("consecutive records are identical")
	}
	// Far past the pool, records still have the right size.
	if v := p.At(1 << 40); len(v) != 100 {
		t.Fatalf("record 2^40 has %d bytes", len(v))
	}
	if _, err := NewPayload("zeros", 10, 1); err == nil {
		t.Fatal("unknown payload kind accepted")
	}
	if _, err := NewPayload(PayloadRandom, -1, 1); err == nil {
		t.Fatal("negative size accepted")
	}

	text, err := NewPayload(PayloadText, 1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range text.At(7) {
		if (c < 'a' || c > 'z') && c != ' ' {
			t.Fatalf("text payload byte %q is neither a-z nor a space", c)
		}
	}

	// What a 1 MB batch of each kind compresses to with the zstd settings
	// franz-go uses (default level, 64 KiB window): random must not shrink
	// (so a codec cannot flatter a run), text must (so a codec run does
	// real work).
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	ratio := func(p *Payload) float64 {
		var batch []byte
		for i := range int64(1000) {
			batch = append(batch, p.At(i)...)
		}
		return float64(len(enc.EncodeAll(batch, nil))) / float64(len(batch))
	}
	r1024, _ := NewPayload(PayloadRandom, 1024, 2)
	if r := ratio(r1024); r < 0.99 {
		t.Errorf("random payload compressed to %.2f of its size; it must be incompressible", r)
	}
	if r := ratio(text); r > 0.5 || r < 0.2 {
		t.Errorf("text payload compressed to %.2f of its size, want roughly 0.35", r)
	}

	v := make([]byte, 16)
	PutSendTime(v, 1234567890123)
	if got, ok := SendTime(v); !ok || got != 1234567890123 {
		t.Fatalf("SendTime = %d, %v", got, ok)
	}
	if _, ok := SendTime(v[:7]); ok {
		t.Fatal("SendTime of a 7-byte value reported ok")
	}
}

func TestPacerHoldsRate(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	p := NewPacer(2000, start)
	for i := range int64(201) {
		if err := p.Wait(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	// Record 200 is due at 100 ms.
	if el := time.Since(start); el < 99*time.Millisecond || el > 2*time.Second {
		t.Fatalf("201 records at 2000/s took %v, want about 100ms", el)
	}

	// Unlimited never waits; a cancelled context stops a wait.
	un := NewPacer(-1, time.Now())
	if err := un.Wait(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	slow := NewPacer(1, time.Now())
	if err := slow.Wait(cctx, 100); err == nil {
		t.Fatal("wait on a cancelled context returned nil")
	}
}

func TestRecorderMeterProgress(t *testing.T) {
	m := new(Meter)
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	prog := StartProgress(w, m, 20*time.Millisecond, "produce")
	r := m.NewRecorder()
	now := time.Now()
	for i := range 1000 {
		r.Record(100, time.Duration(i)*time.Microsecond, now)
	}
	r.Flush()
	if m.Records() != 1000 || m.Bytes() != 100_000 {
		t.Fatalf("meter %d records %d bytes, want 1000 and 100000", m.Records(), m.Bytes())
	}
	if r.Hist.Count() != 1000 {
		t.Fatalf("recorder histogram has %d values", r.Hist.Count())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		s := out.String()
		mu.Unlock()
		if strings.Contains(s, "1000 records total") {
			if !strings.Contains(s, "records/s") || !strings.Contains(s, "latency avg") {
				t.Fatalf("progress line lacks rate or latency: %q", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress line with the total within 5s: %q", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	prog.Stop()
	prog.Stop() // idempotent
	StartProgress(nil, m, time.Second, "x").Stop()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestResultOutput(t *testing.T) {
	h := NewHistogram()
	for i := int64(1); i <= 1000; i++ {
		h.Record(i * 1000) // 1 µs .. 1 ms
	}
	r := &Result{Mode: "produce", System: "kafka", Records: 1000, Bytes: 100_000, Latency: LatencyOf(h),
		Config: map[string]any{"acks": "1"}}
	r.SetElapsed(500 * time.Millisecond)
	if r.RecordsPerSec != 2000 {
		t.Fatalf("records/s %v, want 2000", r.RecordsPerSec)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not parse: %v: %s", err, js.String())
	}
	lat := back["latency_ms"].(map[string]any)
	for _, k := range []string{"avg", "p50", "p95", "p99", "p99_9", "max", "count"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency_ms lacks %q: %s", k, js.String())
		}
	}
	if p99 := lat["p99"].(float64); p99 < 0.99 || p99 > 0.992 {
		t.Errorf("p99 = %v ms, want 0.990", p99)
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1000 records produced", "2000 records/s", "p99.9", "max"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text summary lacks %q:\n%s", want, txt.String())
		}
	}
}

func BenchmarkRecorderRecord(b *testing.B) {
	m := new(Meter)
	r := m.NewRecorder()
	now := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		r.Record(100, time.Duration(200_000+i&4095), now)
	}
	r.Flush()
}

// TestProgressTracks: one line per interval for all tracks, with each
// track's rate and p99 (of the interval and of the run so far), and the
// same figures kept as Samples.
func TestProgressTracks(t *testing.T) {
	prod, cons := new(Meter), new(Meter)
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	p := StartTracks(w, 30*time.Millisecond, []Track{
		{Label: "produce", Meter: prod, Latency: "latency"},
		{Label: "consume", Meter: cons, Latency: "e2e"},
	})
	pr, cr := prod.NewRecorder(), cons.NewRecorder()
	now := time.Now()
	// 1..1000 µs: p99 is 990 µs; end to end twice that.
	for i := 1; i <= 1000; i++ {
		pr.Record(100, time.Duration(i)*time.Microsecond, now)
		cr.Record(100, 2*time.Duration(i)*time.Microsecond, now)
	}
	pr.Flush()
	cr.Flush()
	testutilWait(t, func() bool { return len(p.samplesSoFar(1)) >= 2 })
	p.Stop()
	p.Stop()

	mu.Lock()
	text := out.String()
	mu.Unlock()
	first := strings.SplitN(text, "\n", 2)[0]
	for _, want := range []string{"produce", "consume", "records/s", "MiB/s", "latency p99", "e2e p99", "so far"} {
		if !strings.Contains(first, want) {
			t.Errorf("progress line lacks %q: %q", want, first)
		}
	}
	near := func(got *float64, want float64) bool {
		return got != nil && *got >= want && *got <= want*(1+maxRelErr)
	}
	for i, want := range []float64{0.990, 1.980} {
		ss := p.Samples(i)
		if len(ss) < 2 {
			t.Fatalf("track %d: %d samples", i, len(ss))
		}
		// The first interval saw all 1000 values, the later ones none.
		s0, last := ss[0], ss[len(ss)-1]
		if s0.Records != 1000 || !near(s0.P99, want) || !near(s0.P99SoFar, want) || s0.Max == nil || math.Abs(*s0.Max-want/0.99) > 1e-9 {
			t.Errorf("track %d first sample %+v: want 1000 records, p99 and p99 so far %.3f ms", i, s0, want)
		}
		if last.P99 != nil || !near(last.P99SoFar, want) || last.RecordsPerSec != 0 {
			t.Errorf("track %d idle sample: p99 %v, so far %v, rate %v; want none, %.3f, 0", i, last.P99, last.P99SoFar, last.RecordsPerSec, want)
		}
		if s0.Seconds <= 0 || last.Seconds <= s0.Seconds {
			t.Errorf("track %d sample times %v, %v", i, s0.Seconds, last.Seconds)
		}
	}
	if p.Samples(2) != nil || p.Samples(-1) != nil {
		t.Error("samples of a track that does not exist")
	}
	// No interval: nothing printed, nothing kept.
	q := StartTracks(w, 0, []Track{{Label: "x", Meter: prod}})
	q.Stop()
	if q.Samples(0) != nil {
		t.Error("a progress without interval kept samples")
	}
}

func testutilWait(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLoadResultOutput(t *testing.T) {
	h := NewHistogram()
	for i := int64(1); i <= 1000; i++ {
		h.Record(i * 1000)
	}
	side := func(n int64) *Side {
		s := &Side{Records: n, Bytes: n * 100, Latency: LatencyOf(h), Samples: []Sample{{Seconds: 1, Records: n}}}
		s.SetElapsed(2 * time.Second)
		return s
	}
	r := &Result{Mode: "load", System: "kafka", Records: 1000, Bytes: 100_000, Produce: side(1000), Consume: side(1000),
		Config: map[string]any{"description": "2 producer(s), 1 consumer(s)"}}
	r.SetElapsed(2 * time.Second)
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(txt.String()), "\n")
	if len(lines) != 4 || lines[0] != "2 producer(s), 1 consumer(s)" {
		t.Fatalf("load summary: want a description, a header and two rows:\n%s", txt.String())
	}
	for _, want := range []string{"records/s", "MiB/s", "p99", "p99.9", "max"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("header lacks %q: %q", want, lines[1])
		}
	}
	if f := strings.Fields(lines[2]); f[0] != "produce" || f[1] != "1000" || f[3] != "500" || f[len(f)-1] != "1.000" {
		t.Errorf("produce row %q: want 1000 records at 500/s, max 1.000 ms", lines[2])
	}
	if !strings.HasPrefix(lines[3], "consume") || !strings.Contains(lines[3], "end to end") {
		t.Errorf("consume row %q", lines[3])
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"produce", "consume"} {
		s, ok := back[k].(map[string]any)
		if !ok {
			t.Fatalf("JSON lacks %q: %s", k, js.String())
		}
		for _, f := range []string{"records", "records_per_sec", "mib_per_sec", "latency_ms", "samples"} {
			if _, ok := s[f]; !ok {
				t.Errorf("%s lacks %q", k, f)
			}
		}
	}
}
