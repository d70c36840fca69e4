package kafkaperf

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestLoad: producers spread records over every topic at the asked rate
// for the asked time, the consumer group receives every one of them, and a
// fresh group is deleted at the end.
func TestLoad(t *testing.T) {
	testutil.Heavy(t, "a timed load against kfake, 4 s")
	brokers := newKfake(t)
	ctx := testCtx(t)
	cfg := LoadConfig{
		ProduceConfig: ProduceConfig{
			Common:     Common{Brokers: brokers, Topic: "load", ProgressInterval: 200 * time.Millisecond},
			RecordSize: 64, Throughput: 2000, Partitions: 3, Producers: 2, Linger: time.Millisecond,
		},
		Topics: 2, Consumers: 2, Duration: 1500 * time.Millisecond,
	}
	var mu sync.Mutex
	live := map[string]int{}
	cfg.OnSample = func(track string, s perf.Sample) {
		mu.Lock()
		live[track]++
		mu.Unlock()
	}
	start := time.Now()
	res, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 1400*time.Millisecond {
		t.Fatalf("a 1.5 s load took %v", el)
	}
	if res.Mode != "load" || res.FirstError != "" || res.Errors != 0 {
		t.Fatalf("load: mode %q, %d errors, first %q", res.Mode, res.Errors, res.FirstError)
	}
	p, c := res.Produce, res.Consume
	if p == nil || c == nil {
		t.Fatalf("load result without both sides: %+v", res)
	}
	// 2000/s for 1.5 s.
	if p.Records < 2700 || p.Records > 3001 || p.RecordsPerSec < 1600 || p.RecordsPerSec > 2400 {
		t.Fatalf("produced %d records at %.0f/s, want about 3000 at 2000/s", p.Records, p.RecordsPerSec)
	}
	if c.Records != p.Records || c.Bytes != p.Bytes || c.Latency == nil || c.Latency.Count != uint64(p.Records) {
		t.Fatalf("consumed %d records (%d bytes, latency %+v), produced %d (%d bytes)", c.Records, c.Bytes, c.Latency, p.Records, p.Bytes)
	}
	if p.Latency == nil || p.Latency.Count != uint64(p.Records) || c.Latency.Max > 5000 || c.Latency.P999 > c.Latency.Max {
		t.Fatalf("latencies: produce %+v, e2e %+v", p.Latency, c.Latency)
	}
	if len(p.Samples) < 5 || len(c.Samples) < 5 || p.Samples[2].P99SoFar == nil {
		t.Fatalf("samples: %d produce, %d consume", len(p.Samples), len(c.Samples))
	}
	mu.Lock()
	if live["produce"] != len(p.Samples) || live["consume"] != len(c.Samples) {
		t.Errorf("OnSample saw %v, the result has %d produce and %d consume samples", live, len(p.Samples), len(c.Samples))
	}
	mu.Unlock()
	if res.Config["total_partitions"] != 6 || res.Config["topics"] != 2 {
		t.Fatalf("config echo %v", res.Config)
	}

	// Both topics got records. (How they spread over partitions is the
	// client's sticky partitioner's business: it switches partition per
	// 64 KiB, so a small run may leave some empty.)
	ends := map[string]int{}
	var total int64
	for _, topic := range []string{"load-0", "load-1"} {
		for _, e := range partitionEnds(t, brokers, topic) {
			if e > 0 {
				ends[topic]++
			}
			total += e
		}
	}
	if total != p.Records || ends["load-0"] < 1 || ends["load-1"] < 1 {
		t.Fatalf("the topics hold %d records (want %d), non-empty partitions %v", total, p.Records, ends)
	}

	// The run's group was deleted.
	group := res.Config["group"].(string)
	if !strings.HasPrefix(group, "sluice-perf-") {
		t.Fatalf("group %q", group)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	groups, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups[group]; ok {
		t.Errorf("group %s still exists after the run", group)
	}

	// A named group is kept, and a second run with it counts only its own
	// records even where the group resumes at older ones.
	named := cfg
	named.Group, named.Topics, named.Consumers, named.Duration = "sizing", 1, 1, 500*time.Millisecond
	for range 2 {
		res, err = Load(ctx, named)
		if err != nil || res.FirstError != "" || res.Consume.Records != res.Produce.Records {
			t.Fatalf("named group: %v, %q, consumed %d of %d", err, res.FirstError, res.Consume.Records, res.Produce.Records)
		}
	}
	groups, err = kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups["sizing"]; !ok {
		t.Error("the named group was deleted")
	}

	// Produce only, no rate cap, bounded by --num-records.
	res, err = Load(ctx, LoadConfig{ProduceConfig: ProduceConfig{Common: Common{Brokers: brokers, Topic: "fast"},
		NumRecords: 5000, RecordSize: 10}, Duration: time.Minute})
	if err != nil || res.Records != 5000 || res.Consume != nil || res.Seconds > 30 {
		t.Fatalf("produce-only load: %v, %d records in %.1fs, consume %+v", err, res.Records, res.Seconds, res.Consume)
	}
}

func TestLoadBadConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	common := Common{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}
	for i, cfg := range []LoadConfig{
		{ProduceConfig: ProduceConfig{Common: common, RecordSize: 100}},                                         // no duration
		{ProduceConfig: ProduceConfig{Common: common, RecordSize: 4}, Consumers: 1, Duration: time.Second},      // too short to stamp
		{ProduceConfig: ProduceConfig{Common: common, RecordSize: 100}, Consumers: -1, Duration: time.Second},   // negative consumers
		{ProduceConfig: ProduceConfig{Common: common, RecordSize: 100}, Topics: 1 << 20, Duration: time.Second}, // too many topics
		{ProduceConfig: ProduceConfig{Common: common, RecordSize: 100, Acks: "2"}, Duration: time.Second},       // bad acks
		{ProduceConfig: ProduceConfig{Common: Common{Topic: "t"}, RecordSize: 100}, Duration: time.Second},      // no brokers
	} {
		if _, err := Load(ctx, cfg); err == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
}
