package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// TestTopicConfigsReadAfterWriteZooKeeper: on three brokers sharing a
// ZooKeeper, a topic config changed through one broker is what each of the
// others describes right after (Kafka answers DescribeConfigs for a topic
// from /config/topics/<t>, not from a cache the change notification has
// not reached yet), and an IncrementalAlterConfigs through another broker
// right after the first keeps the first change (its base is the znode,
// written back only if unchanged meanwhile).
func TestTopicConfigsReadAfterWriteZooKeeper(t *testing.T) {
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()),
		testcluster.Settings("default.replication.factor=3", "offsets.topic.replication.factor=3"))
	ctx := ctxFor(t, 180*time.Second)
	c.CreateTopic("rw", 1, 3, nil)
	// Every broker knows the topic (alters check it in their image).
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		for _, n := range c.Nodes() {
			if _, ok := n.Broker().Image().Topics["rw"]; !ok {
				return fmt.Errorf("broker %d does not know the topic yet", n.ID())
			}
		}
		return nil
	})

	type node struct {
		id int32
		cl *kgo.Client
	}
	var nodes []node
	for _, n := range c.Nodes() {
		nodes = append(nodes, node{n.ID(), n.Client()})
	}
	alter := func(n node, ops map[string]string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "rw"
		for k, v := range ops {
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name, rc.Op, rc.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
			r.Configs = append(r.Configs, rc)
		}
		req.Resources = append(req.Resources, r)
		resp, err := brokerRequest(ctx, n.cl, n.id, req)
		if err != nil {
			t.Fatalf("alter through broker %d: %v", n.id, err)
		}
		res := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
		if len(res) != 1 || res[0].ErrorCode != 0 {
			t.Fatalf("alter through broker %d: %+v", n.id, res)
		}
	}
	describe := func(n node) map[string]string {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "rw"
		req.Resources = append(req.Resources, r)
		resp, err := brokerRequest(ctx, n.cl, n.id, req)
		if err != nil {
			t.Fatalf("describe on broker %d: %v", n.id, err)
		}
		res := resp.(*kmsg.DescribeConfigsResponse).Resources
		if len(res) != 1 || res[0].ErrorCode != 0 {
			t.Fatalf("describe on broker %d: %+v", n.id, res)
		}
		out := map[string]string{}
		for _, e := range res[0].Configs {
			if e.Source == kmsg.ConfigSourceDynamicTopicConfig && e.Value != nil {
				out[e.Name] = *e.Value
			}
		}
		return out
	}

	// Set through one broker, described at once on the two others.
	for i := range 50 {
		by := nodes[i%3]
		v := strconv.Itoa(3_600_000 + i)
		alter(by, map[string]string{"retention.ms": v})
		for j := 1; j <= 2; j++ {
			n := nodes[(i+j)%3]
			if got := describe(n)["retention.ms"]; got != v {
				t.Fatalf("round %d: retention.ms=%s set through broker %d; broker %d describes %q", i, v, by.id, n.id, got)
			}
		}
	}

	// Two incremental changes of different keys through two brokers, one
	// right after the other: neither is lost.
	for i := range 25 {
		a, b, d := nodes[i%3], nodes[(i+1)%3], nodes[(i+2)%3]
		seg, maxb := strconv.Itoa(60_000+i), strconv.Itoa(100_000+i)
		alter(a, map[string]string{"segment.ms": seg})
		alter(b, map[string]string{"max.message.bytes": maxb})
		want := map[string]string{"retention.ms": strconv.Itoa(3_600_000 + 49), "segment.ms": seg, "max.message.bytes": maxb}
		if got := describe(d); !maps.Equal(got, want) {
			t.Fatalf("round %d: segment.ms through broker %d, then max.message.bytes through broker %d; broker %d describes %v, want %v",
				i, a.id, b.id, d.id, got, want)
		}
	}
}

// brokerRequest sends req to broker id itself (kgo would pick any broker
// for a topic's configs).
func brokerRequest(ctx context.Context, cl *kgo.Client, id int32, req kmsg.Request) (kmsg.Response, error) {
	resp, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", id, err)
	}
	return resp, nil
}
