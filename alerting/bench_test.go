package alerting

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkEvaluate10kPartitions measures one evaluation round over 100
// groups × 100 partitions (10,000 group partitions) with a records rule, a
// time rule and a Burrow group_status rule, SQLite included. A tenth of the
// groups is over the thresholds, so alerts are stored and notified too.
func BenchmarkEvaluate10kPartitions(b *testing.B) {
	clk := newClock()
	src := &scriptedLag{}
	for g := 0; g < 100; g++ {
		gl := GroupLag{Group: fmt.Sprintf("group-%03d", g), State: "Stable", Members: 3}
		for p := 0; p < 100; p++ {
			lag := int64(p % 5)
			if g%10 == 0 {
				lag = 10000 + int64(p)
			}
			gl.Partitions = append(gl.Partitions, PartitionLag{Topic: fmt.Sprintf("topic-%d", p%10), Partition: int32(p), Committed: 1000, LogEnd: 1000 + lag, Lag: lag, LagTime: time.Duration(lag) * time.Millisecond})
		}
		src.groups = append(src.groups, gl)
	}
	env := newTestService(b, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src; c.Interval = time.Minute })
	hook := newReceiver(b, 200)
	n := env.webhook(b, hook, "")
	env.rule(b, Rule{Name: "records", Kind: KindLagRecords, Threshold: 50000, NotifierIDs: []int64{n.ID}})
	env.rule(b, Rule{Name: "seconds", Kind: KindLagSeconds, Threshold: 5, NotifierIDs: []int64{n.ID}})
	env.rule(b, Rule{Name: "burrow", Kind: KindGroupStatus, NotifierIDs: []int64{n.ID}})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Offsets move each round so the Burrow windows fill like a live cluster.
		for gi := range src.groups {
			for pi := range src.groups[gi].Partitions {
				src.groups[gi].Partitions[pi].Committed += 10
			}
		}
		clk.Add(time.Minute)
		if err := env.svc.EvaluateNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := env.svc.Status(); st.Firing == 0 {
		b.Fatalf("nothing fired: %+v", st)
	}
}
