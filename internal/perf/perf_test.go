package perf

import (
	"bytes"
	"context"
	"encoding/json"
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
