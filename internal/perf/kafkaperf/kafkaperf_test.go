package kafkaperf

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

func newKfake(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// partitionEnds returns the end offset of every partition of topic.
func partitionEnds(t *testing.T, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lo, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func TestProduceThenConsume(t *testing.T) {
	brokers := newKfake(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name        string
		acks        string
		compression string
		payload     string
		producers   int
		consumers   int
		partitions  int32
	}{
		{"acks1-none", "1", "none", "random", 1, 1, 1},
		{"acksall-zstd-3p", "all", "zstd", "text", 2, 2, 3},
		{"acks0-lz4", "0", "lz4", "text", 1, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 5000
			var progress bytes.Buffer
			topic := "perf-" + tc.name
			res, err := Produce(ctx, ProduceConfig{
				Common:     Common{Brokers: brokers, Topic: topic, Progress: &progress},
				NumRecords: n, RecordSize: 64, Acks: tc.acks, Compression: tc.compression,
				Payload: tc.payload, Partitions: tc.partitions, Producers: tc.producers,
				Linger: time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Records != n || res.Errors != 0 || res.FirstError != "" {
				t.Fatalf("produce: %d records, %d errors (%s), want %d and 0", res.Records, res.Errors, res.FirstError, n)
			}
			if res.Bytes != n*64 {
				t.Fatalf("produce: %d bytes, want %d", res.Bytes, n*64)
			}
			if res.Latency == nil || res.Latency.Count != n || res.Latency.P99 < res.Latency.P50 || res.Latency.Max < res.Latency.P999 {
				t.Fatalf("produce latency summary wrong: %+v", res.Latency)
			}
			if res.RecordsPerSec <= 0 || res.Config["acks"] != map[string]string{"0": "0", "1": "1", "all": "all"}[tc.acks] {
				t.Fatalf("produce rate %v, config %v", res.RecordsPerSec, res.Config)
			}
			if wantIdem := tc.acks == "all"; res.Config["idempotent"] != wantIdem {
				t.Fatalf("idempotent = %v, want %v for acks=%s", res.Config["idempotent"], wantIdem, tc.acks)
			}

			// The broker holds exactly n records over the asked partitions.
			// With acks=0 a record counts as sent once written to the
			// socket, so the broker may still be appending the last ones.
			testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				ends := partitionEnds(t, brokers, topic)
				if len(ends) != int(tc.partitions) {
					return fmt.Errorf("topic has %d partitions, want %d", len(ends), tc.partitions)
				}
				var total int64
				for _, e := range ends {
					total += e
				}
				if total != n {
					return fmt.Errorf("broker holds %d records, want %d", total, n)
				}
				return nil
			})

			cres, err := Consume(ctx, ConsumeConfig{
				Common:     Common{Brokers: brokers, Topic: topic},
				NumRecords: n, Consumers: tc.consumers,
			})
			if err != nil {
				t.Fatal(err)
			}
			if cres.Records != n || cres.Bytes != n*64 || cres.FirstError != "" {
				t.Fatalf("consume: %d records, %d bytes (%s), want %d and %d", cres.Records, cres.Bytes, cres.FirstError, n, n*64)
			}
			if cres.RecordsPerSec <= 0 || cres.Latency != nil {
				t.Fatalf("consume: rate %v, latency %+v", cres.RecordsPerSec, cres.Latency)
			}
		})
	}
}

func TestConsumeMoreThanThereIsStopsIdle(t *testing.T) {
	brokers := newKfake(t)
	ctx := testCtx(t)
	if _, err := Produce(ctx, ProduceConfig{Common: Common{Brokers: brokers, Topic: "short"},
		NumRecords: 100, RecordSize: 10}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := Consume(ctx, ConsumeConfig{Common: Common{Brokers: brokers, Topic: "short"},
		NumRecords: 101, IdleTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 100 || !strings.Contains(res.FirstError, "read 100 of 101") || !strings.Contains(res.FirstError, "idle") {
		t.Fatalf("got %d records, first error %q", res.Records, res.FirstError)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("idle timeout of 500ms took %v", el)
	}

	// A topic that does not exist is an error, not a hang.
	_, err = Consume(ctx, ConsumeConfig{Common: Common{Brokers: brokers, Topic: "missing", SetupTimeout: 5 * time.Second},
		NumRecords: 1})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("consume of a missing topic: %v", err)
	}
}

func TestEndToEnd(t *testing.T) {
	brokers := newKfake(t)
	ctx := testCtx(t)
	// Records already in the topic must not be counted or replayed.
	if _, err := Produce(ctx, ProduceConfig{Common: Common{Brokers: brokers, Topic: "e2e"},
		NumRecords: 50, RecordSize: 100, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := EndToEnd(ctx, E2EConfig{ProduceConfig: ProduceConfig{
		Common:     Common{Brokers: brokers, Topic: "e2e"},
		NumRecords: 2000, RecordSize: 100, Throughput: 2000, Partitions: 2,
	}})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if res.Records != 2000 || res.Errors != 0 || res.FirstError != "" {
		t.Fatalf("e2e: %d records, %d errors (%s), want 2000", res.Records, res.Errors, res.FirstError)
	}
	if el < 900*time.Millisecond {
		t.Fatalf("2000 records at 2000/s took %v: the rate cap was not held", el)
	}
	if res.RecordsPerSec < 1500 || res.RecordsPerSec > 2500 {
		t.Fatalf("e2e rate %v, want about 2000", res.RecordsPerSec)
	}
	if res.Latency == nil || res.Latency.Count != 2000 || res.ProduceLatency == nil || res.ProduceLatency.Count != 2000 {
		t.Fatalf("e2e latency summaries: %+v / %+v", res.Latency, res.ProduceLatency)
	}
	// On loopback against an in-memory broker, end-to-end latency is well
	// under a second; a wrong clock or stamp would show as nonsense here.
	if res.Latency.Min < 0 || res.Latency.Max > 5000 {
		t.Fatalf("e2e latency out of range: %+v", res.Latency)
	}

	if _, err := EndToEnd(ctx, E2EConfig{ProduceConfig: ProduceConfig{Common: Common{Brokers: brokers, Topic: "e2e"},
		NumRecords: 10, RecordSize: 4, Throughput: 10}}); err == nil {
		t.Fatal("e2e with 4-byte records accepted")
	}
	if _, err := EndToEnd(ctx, E2EConfig{ProduceConfig: ProduceConfig{Common: Common{Brokers: brokers, Topic: "e2e"},
		NumRecords: 10, RecordSize: 100, Throughput: -1}}); err == nil {
		t.Fatal("e2e without a rate accepted")
	}
}

func TestBadConfigAndUnreachable(t *testing.T) {
	ctx := testCtx(t)
	bad := []ProduceConfig{
		{Common: Common{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, NumRecords: 0},
		{Common: Common{Brokers: nil, Topic: "t"}, NumRecords: 1},
		{Common: Common{Brokers: []string{"127.0.0.1:1"}}, NumRecords: 1},
		{Common: Common{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, NumRecords: 1, Acks: "2"},
		{Common: Common{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, NumRecords: 1, Compression: "brotli"},
		{Common: Common{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, NumRecords: 1, Payload: "zeros"},
		{Common: Common{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, NumRecords: 1, Acks: "1", Idempotent: ptr(true)},
	}
	for i, cfg := range bad {
		if _, err := Produce(ctx, cfg); err == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
	// Nothing listens on the address: a clear error within the setup timeout.
	addr := testutil.FreeAddr(t)
	start := time.Now()
	_, err := Produce(ctx, ProduceConfig{Common: Common{Brokers: []string{addr}, Topic: "t", SetupTimeout: time.Second},
		NumRecords: 1})
	if err == nil || !strings.Contains(err.Error(), addr) && !strings.Contains(err.Error(), "did not finish") {
		t.Fatalf("unreachable broker: %v", err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("unreachable broker took %v to report", el)
	}
}

func ptr[T any](v T) *T { return &v }
