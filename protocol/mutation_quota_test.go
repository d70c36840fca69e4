package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/quota"
)

// throttleHook keeps the longest throttle_time_ms a client was given.
type throttleHook struct {
	mu  sync.Mutex
	max time.Duration
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	h.max = max(h.max, d)
	h.mu.Unlock()
}

func (h *throttleHook) longest() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max
}

// TestControllerMutationQuota: a client id with a controller_mutation_rate
// of one partition a second (a bucket of 11) creates topics: those within
// the bucket and the first one past it are created, the next ones get
// THROTTLING_QUOTA_EXCEEDED and the response a throttle time of the debt;
// CreatePartitions and DeleteTopics count the same way. Another client id
// is unaffected; a CreateTopics v5 request (before KIP-599's error)
// has every topic created and is throttled instead, and so is Metadata's
// auto-creation.
func TestControllerMutationQuota(t *testing.T) {
	testutil.Heavy(t, "creates and deletes some 200 partitions, about 4 s")
	reg := metrics.New()
	m := quota.New(quota.Config{})
	m.Set(map[cluster.QuotaEntity]map[string]float64{
		{ClientID: "mutator"}: {cluster.QuotaControllerMutationRate: 1},
		{ClientID: "legacy"}:  {cluster.QuotaControllerMutationRate: 1},
		{ClientID: "deleter"}: {cluster.QuotaControllerMutationRate: 1},
		{ClientID: "auto"}:    {cluster.QuotaControllerMutationRate: 1},
	})
	n := startNodeWith(t, nil, func(b *broker.Config) { b.AutoCreateTopics, b.NumPartitions = true, 30 },
		func(c *protocol.Config) { c.Quotas, c.Metrics = m, reg })
	client := func(id string, opts ...kgo.Opt) (*kadm.Client, *kgo.Client, *throttleHook) {
		hook := &throttleHook{}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.addr), kgo.ClientID(id), kgo.WithHooks(hook)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl), cl, hook
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := func(cl *kgo.Client, parts map[string]int32) map[string]error {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		for _, name := range []string{"a", "b", "c", "d", "x", "y", "l1", "l2"} {
			if p, ok := parts[name]; ok {
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, p, 1
				req.Topics = append(req.Topics, rt)
			}
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("create topics: %v", err)
		}
		out := map[string]error{}
		for _, st := range resp.Topics {
			out[st.Topic] = kerr.ErrorForCode(st.ErrorCode)
		}
		return out
	}

	// 6 of 11, then 20: the first topic past the bucket goes through,
	// leaving a debt of 15 partitions (15 s at 1 a second).
	_, mut, mutHook := client("mutator")
	got := create(mut, map[string]int32{"a": 6, "b": 20, "c": 1, "d": 1})
	for topic, want := range map[string]error{"a": nil, "b": nil, "c": kerr.ThrottlingQuotaExceeded, "d": kerr.ThrottlingQuotaExceeded} {
		if got[topic] != want {
			t.Errorf("topic %s: %v, want %v", topic, got[topic], want)
		}
	}
	// The throttle is the debt's refill time, less the time since the
	// refusal (bounds loose for a loaded machine: b's creation refills
	// the bucket meanwhile).
	if th := mutHook.longest(); th < 5*time.Second || th > 15*time.Second {
		t.Errorf("throttle %v, want up to 15s", th)
	}
	if tok, ok := m.Tokens("ANONYMOUS", "mutator", time.Now()); !ok || tok > -5 || tok < -15 {
		t.Errorf("bucket %v %v, want a debt of up to 15", tok, ok)
	}

	// Another client id: no quota, no throttle.
	other, otherCl, otherHook := client("other")
	for topic, err := range create(otherCl, map[string]int32{"x": 30, "y": 30}) {
		if err != nil {
			t.Errorf("unquoted client, topic %s: %v", topic, err)
		}
	}
	if th := otherHook.longest(); th != 0 {
		t.Errorf("unquoted client throttled %v", th)
	}

	// CreatePartitions (v3) and DeleteTopics (v5) count partitions too:
	// x grows by 25 (past the bucket of 11: accepted, a debt of 14), then
	// deleting y (30 partitions) is refused.
	del, delCl, delHook := client("deleter")
	cp, err := del.CreatePartitions(ctx, 25, "x")
	if err != nil || cp["x"].Err != nil {
		t.Fatalf("create 25 partitions: %v %v", err, cp["x"].Err)
	}
	if th := delHook.longest(); th != 0 {
		t.Errorf("throttled %v before refusing anything", th)
	}
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.TopicNames, dreq.TimeoutMillis = []string{"y"}, 30000
	dresp, err := dreq.RequestWith(ctx, delCl)
	if err != nil {
		t.Fatal(err)
	}
	if dresp.Version != 5 {
		t.Fatalf("DeleteTopics v%d", dresp.Version)
	}
	if e := kerr.ErrorForCode(dresp.Topics[0].ErrorCode); e != kerr.ThrottlingQuotaExceeded {
		t.Errorf("delete y: %v, want THROTTLING_QUOTA_EXCEEDED", e)
	}
	if ms := dresp.ThrottleMillis; ms < 5000 || ms > 14000 {
		t.Errorf("delete: throttle_time_ms %d, want up to 14000", ms)
	}
	// x and y as before; the other client may delete y.
	if md, err := other.ListTopics(ctx, "x", "y"); err != nil || len(md["x"].Partitions) != 55 || len(md["y"].Partitions) != 30 {
		t.Fatalf("x and y after the refusal: %d and %d partitions, %v", len(md["x"].Partitions), len(md["y"].Partitions), err)
	}
	if r, err := other.DeleteTopics(ctx, "y"); err != nil || r["y"].Err != nil {
		t.Fatalf("unquoted client deleting y: %v %v", err, r["y"].Err)
	}

	// CreateTopics v5: the topics past the bucket are created, the
	// response throttled for the debt (30 of 11: 19 s).
	v := kversion.Stable()
	v.SetMaxKeyVersion(19, 5)
	_, old, oldHook := client("legacy", kgo.MaxVersions(v))
	for topic, err := range create(old, map[string]int32{"l1": 10, "l2": 20}) {
		if err != nil {
			t.Errorf("v5, topic %s: %v", topic, err)
		}
	}
	if th := oldHook.longest(); th < 10*time.Second || th > 19*time.Second {
		t.Errorf("v5 throttle %v, want up to 19s", th)
	}

	// Metadata's auto-creation counts permissively: 30 partitions of 11,
	// created, a throttle of up to 19 s.
	_, auto, _ := client("auto")
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.AllowAutoTopicCreation = true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("auto-created")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, auto)
	if err != nil {
		t.Fatal(err)
	}
	if ms := mresp.ThrottleMillis; ms < 10000 || ms > 19000 {
		t.Errorf("auto-creating 30 partitions: throttle_time_ms %d, want up to 19000", ms)
	}
	if md, err := other.ListTopics(ctx, "auto-created"); err != nil || len(md["auto-created"].Partitions) != 30 {
		t.Errorf("auto-created topic: %d partitions, %v", len(md["auto-created"].Partitions), err)
	}

	// The throttle time is counted per client under controller_mutation.
	for _, id := range []string{"mutator", "deleter", "legacy", "auto"} {
		if got := scrape(t, reg, "sluice_broker_client_throttle_seconds_total", `quota_type="controller_mutation"`, fmt.Sprintf(`client_id=%q`, id)); got < 1 {
			t.Errorf("%s: throttle seconds %v", id, got)
		}
	}
	if got := scrape(t, reg, "sluice_broker_client_throttle_seconds_total", `client_id="other"`); got != -1 {
		t.Errorf("other client: throttle seconds %v", got)
	}
}
