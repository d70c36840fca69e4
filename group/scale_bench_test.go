package group_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkGroupRebalance: a group of 100 franz-go consumers over a topic
// of 1,000 partitions on the in-process broker, with the eager (range)
// and the cooperative-sticky protocol and franz-go's default heartbeat
// (3 s, which paces how soon members notice a rebalance). Once the group is
// stable a 101st member joins; the figure is the time from its start until
// every partition is assigned to exactly one member and it has its share.
// Run:
//
//	go test -run '^$' -bench GroupRebalance -benchtime 1x -timeout 20m ./group/
func BenchmarkGroupRebalance(b *testing.B) {
	if testing.Short() {
		b.Skip("101 consumers over 1,000 partitions")
	}
	const members, partitions = 100, 1000
	n := startNode(b)
	topic := "rebalance"
	// Created with a long timeout: 1,000 logs on a loaded machine take
	// longer than the test helper waits.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 300_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), n.client(kgo.RequestTimeoutOverhead(5*time.Minute)))
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		b.Fatalf("create %s: %v", topic, err)
	}
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"eager-range", kgo.RangeBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		b.Run(bal.name, func(b *testing.B) {
			for i := range b.N {
				group := fmt.Sprintf("scale-%s-%d-%d", bal.name, i, time.Now().UnixNano())
				var mu sync.Mutex
				owned := make([]map[int32]bool, members+1)
				start := func(m int) *kgo.Client {
					owned[m] = map[int32]bool{}
					cl := n.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(bal.b),
						kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
							mu.Lock()
							for _, p := range a[topic] {
								owned[m][p] = true
							}
							mu.Unlock()
						}),
						kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
							mu.Lock()
							for _, p := range r[topic] {
								delete(owned[m], p)
							}
							mu.Unlock()
						}),
						kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
							mu.Lock()
							for _, p := range r[topic] {
								delete(owned[m], p)
							}
							mu.Unlock()
						}))
					ctx, cancel := context.WithCancel(context.Background())
					go func() {
						for ctx.Err() == nil {
							cl.PollFetches(ctx)
						}
					}()
					b.Cleanup(func() { cancel(); cl.Close() })
					return cl
				}
				// balanced: every partition owned once, by the first k
				// members, each with at least min.
				balanced := func(k, least int) bool {
					mu.Lock()
					defer mu.Unlock()
					seen := make(map[int32]int, partitions)
					for m := range k {
						if len(owned[m]) < least {
							return false
						}
						for p := range owned[m] {
							seen[p]++
						}
					}
					if len(seen) != partitions {
						return false
					}
					for _, c := range seen {
						if c != 1 {
							return false
						}
					}
					return true
				}
				wait := func(what string, k, least int) time.Duration {
					t0 := time.Now()
					for !balanced(k, least) {
						if time.Since(t0) > 5*time.Minute {
							b.Fatalf("%s: not balanced in 5 minutes", what)
						}
						time.Sleep(20 * time.Millisecond)
					}
					return time.Since(t0)
				}
				b.StopTimer()
				t0 := time.Now()
				for m := range members {
					start(m)
				}
				formed := wait("100 members", members, partitions/members)
				b.StartTimer()
				joined := time.Now()
				start(members)
				took := wait("a member joins", members+1, partitions/(members+1))
				b.StopTimer()
				b.ReportMetric(took.Seconds(), "s/rebalance")
				b.Logf("%s: 100 members over %d partitions stable %v after the first started (%v after the last); the 101st member's join rebalanced in %v",
					bal.name, partitions, joined.Sub(t0).Round(time.Millisecond), formed.Round(time.Millisecond), took.Round(time.Millisecond))
			}
		})
	}
}
