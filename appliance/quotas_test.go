package appliance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

func quotaAdmin(t *testing.T, app *App) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func sp(s string) *string { return &s }

// describedQuotas renders DescribeClientQuotas as sorted lines
// "user=a,client-id=<default>: producer_byte_rate=1000".
func describedQuotas(t *testing.T, adm *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := adm.DescribeClientQuotas(ctx, strict, comps)
	if err != nil {
		t.Fatalf("describe client quotas: %v", err)
	}
	var out []string
	for _, d := range got {
		var vals []string
		for _, v := range d.Values {
			vals = append(vals, fmt.Sprintf("%s=%g", v.Key, v.Value))
		}
		sort.Strings(vals)
		out = append(out, strings.Trim(d.Entity.String(), "{}")+": "+strings.Join(vals, ","))
	}
	sort.Strings(out)
	return out
}

func alterQuota(t *testing.T, adm *kadm.Client, entity kadm.ClientQuotaEntity, ops ...kadm.AlterClientQuotaOp) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
	if err != nil {
		t.Fatalf("alter client quotas: %v", err)
	}
	if len(res) != 1 {
		t.Fatalf("%d results", len(res))
	}
	return res[0].Err
}

// TestClientQuotasAdmin: AlterClientQuotas and DescribeClientQuotas with
// kadm, defaults included, Kafka's filters and errors; a user's quotas
// and SCRAM credentials share its config without losing either; the
// quotas survive a restart.
func TestClientQuotasAdmin(t *testing.T) {
	dir := t.TempDir()
	addr := testutil.FreeAddr(t)
	app := startApplianceIn(t, dir, "listeners=PLAINTEXT://"+addr)
	adm := quotaAdmin(t, app)
	ctx := context.Background()

	user := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "user", Name: n}
	}
	client := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "client-id", Name: n}
	}
	set := func(k string, v float64) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Value: v} }

	// A SCRAM credential first: the user's quota goes in the same config.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e  kadm.ClientQuotaEntity
		op []kadm.AlterClientQuotaOp
	}{
		{kadm.ClientQuotaEntity{user(sp("alice"))}, []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1000), set("request_percentage", 12.5)}},
		{kadm.ClientQuotaEntity{user(nil)}, []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 2000)}},
		{kadm.ClientQuotaEntity{user(sp("alice")), client(nil)}, []kadm.AlterClientQuotaOp{set("producer_byte_rate", 3000)}},
		{kadm.ClientQuotaEntity{user(sp("alice")), client(sp("app"))}, []kadm.AlterClientQuotaOp{set("producer_byte_rate", 4000)}},
		{kadm.ClientQuotaEntity{client(sp("app/1 ü"))}, []kadm.AlterClientQuotaOp{set("producer_byte_rate", 5000)}},
		{kadm.ClientQuotaEntity{client(nil)}, []kadm.AlterClientQuotaOp{set("producer_byte_rate", 6000)}},
	} {
		if err := alterQuota(t, adm, c.e, c.op...); err != nil {
			t.Fatalf("alter %s: %v", c.e, err)
		}
	}
	all := []string{
		"client-id=<default>: producer_byte_rate=6000",
		"client-id=app/1 ü: producer_byte_rate=5000",
		"user=<default>: consumer_byte_rate=2000",
		"user=alice, client-id=<default>: producer_byte_rate=3000",
		"user=alice, client-id=app: producer_byte_rate=4000",
		"user=alice: producer_byte_rate=1000,request_percentage=12.5",
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}
	check("everything", describedQuotas(t, adm, false), all)
	check("exact user, strict", describedQuotas(t, adm, true, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: sp("alice"), MatchType: 0}),
		[]string{"user=alice: producer_byte_rate=1000,request_percentage=12.5"})
	check("exact user", describedQuotas(t, adm, false, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: sp("alice"), MatchType: 0}),
		[]string{"user=alice, client-id=<default>: producer_byte_rate=3000", "user=alice, client-id=app: producer_byte_rate=4000", "user=alice: producer_byte_rate=1000,request_percentage=12.5"})
	check("default client ids", describedQuotas(t, adm, false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 1}),
		[]string{"client-id=<default>: producer_byte_rate=6000", "user=alice, client-id=<default>: producer_byte_rate=3000"})
	check("any client id, strict", describedQuotas(t, adm, true, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}),
		[]string{"client-id=<default>: producer_byte_rate=6000", "client-id=app/1 ü: producer_byte_rate=5000"})

	// Kafka's refusals, each on its own entry.
	for _, c := range []struct {
		e  kadm.ClientQuotaEntity
		op kadm.AlterClientQuotaOp
	}{
		{kadm.ClientQuotaEntity{user(sp("bob"))}, set("no_such_quota", 1)},
		{kadm.ClientQuotaEntity{user(sp("bob"))}, set("producer_byte_rate", 1.5)},
		{kadm.ClientQuotaEntity{user(sp("bob"))}, set("producer_byte_rate", 0)},
		{kadm.ClientQuotaEntity{user(sp(""))}, set("producer_byte_rate", 10)},
		{kadm.ClientQuotaEntity{user(sp("bob")), user(sp("carol"))}, set("producer_byte_rate", 10)},
		{kadm.ClientQuotaEntity{{Type: "ip", Name: sp("10.0.0.1")}}, set("connection_creation_rate", 10)},
		{kadm.ClientQuotaEntity{}, set("producer_byte_rate", 10)},
	} {
		if err := alterQuota(t, adm, c.e, c.op); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("alter %s %s=%g: %v, want INVALID_REQUEST", c.e, c.op.Key, c.op.Value, err)
		}
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}, {Type: "user", MatchType: 1}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("duplicate filter component: %v, want INVALID_REQUEST", err)
	}
	// validate_only writes nothing.
	res, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{user(sp("bob"))}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 10)}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("validate: %v %v", err, res)
	}
	check("after validate_only", describedQuotas(t, adm, false), all)

	// The credential is intact beside the quota, and stays when the
	// quotas go; the quotas stay when the credential goes.
	scram := func() int {
		d, err := adm.DescribeUserSCRAMs(ctx, "alice")
		if err != nil {
			return -1
		}
		return len(d["alice"].CredInfos)
	}
	if n := scram(); n != 1 {
		t.Fatalf("alice has %d SCRAM credentials after the quota, want 1", n)
	}
	if err := alterQuota(t, adm, kadm.ClientQuotaEntity{user(sp("alice"))}, kadm.AlterClientQuotaOp{Key: "request_percentage", Remove: true}); err != nil {
		t.Fatal(err)
	}
	if n := scram(); n != 1 {
		t.Fatalf("alice has %d SCRAM credentials after removing a quota, want 1", n)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil); err != nil {
		t.Fatal(err)
	}
	all[5] = "user=alice: producer_byte_rate=1000"
	check("after the credential went", describedQuotas(t, adm, false), all)

	// A restart keeps them.
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	app = startApplianceIn(t, dir, "listeners=PLAINTEXT://"+addr)
	t.Cleanup(func() { app.Close() })
	check("after a restart", describedQuotas(t, quotaAdmin(t, app), false), all)
}

// TestProducerQuotaThrottles: a franz-go producer over its
// producer_byte_rate is held to the quota (within 10 %, measured after the
// first windows) while another client id, without a quota, is not.
func TestProducerQuotaThrottles(t *testing.T) {
	testutil.Heavy(t, "produces for about 16 s")
	dir := t.TempDir()
	app := startApplianceIn(t, dir, "listeners=PLAINTEXT://"+testutil.FreeAddr(t), "quota.window.num=3", "auto.create.topics.enable=true")
	t.Cleanup(func() { app.Close() })
	adm := quotaAdmin(t, app)
	const quota = 256 << 10
	if err := alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: sp("slow")}}, kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: quota}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "quota-slow"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "quota-fast"); err != nil {
		t.Fatal(err)
	}

	const run, warm = 16 * time.Second, 6 * time.Second
	start := time.Now()
	type point struct {
		at    time.Duration
		bytes int64
	}
	produce := func(clientID, topic string, points *[]point, mu *sync.Mutex) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.ClientID(clientID),
			kgo.ProducerBatchMaxBytes(32<<10), kgo.MaxBufferedRecords(64), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.ProducerBatchCompression(kgo.NoCompression())) // the quota counts bytes on the wire
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(run))
		defer cancel()
		value := make([]byte, 4<<10)
		var failed atomic.Value
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
				if err != nil {
					if ctx.Err() == nil {
						failed.Store(err)
					}
					return
				}
				mu.Lock()
				*points = append(*points, point{time.Since(start), int64(len(r.Value))})
				mu.Unlock()
			})
		}
		if err, _ := failed.Load().(error); err != nil {
			return err
		}
		return nil
	}
	var slow, fast []point
	var slowMu, fastMu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- produce("slow", "quota-slow", &slow, &slowMu) }()
	go func() { defer wg.Done(); errs <- produce("fast", "quota-fast", &fast, &fastMu) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rate := func(ps []point, from, to time.Duration) float64 {
		var n int64
		for _, p := range ps {
			if p.at >= from && p.at < to {
				n += p.bytes
			}
		}
		return float64(n) / (to - from).Seconds()
	}
	slowRate := rate(slow, warm, run)
	fastRate := rate(fast, warm, run)
	t.Logf("slow %.0f B/s (quota %d), fast %.0f B/s", slowRate, quota, fastRate)
	if slowRate < 0.9*quota || slowRate > 1.1*quota {
		t.Errorf("throttled producer made %.0f B/s, want %d ±10 %%", slowRate, quota)
	}
	if fastRate < 4*quota {
		t.Errorf("unthrottled producer made only %.0f B/s", fastRate)
	}
	// The throttle shows in the metric, for the throttled client only.
	fams, err := app.Metrics().Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var slowSecs, fastSecs float64
	for _, f := range fams {
		if f.GetName() != "sluice_broker_client_throttle_seconds_total" {
			continue
		}
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["quota_type"] != "produce" {
				continue
			}
			switch labels["client_id"] {
			case "slow":
				slowSecs += m.GetCounter().GetValue()
			case "fast":
				fastSecs += m.GetCounter().GetValue()
			}
		}
	}
	if slowSecs < 1 || fastSecs != 0 {
		t.Errorf("throttle seconds: slow %v (want > 1), fast %v (want 0)", slowSecs, fastSecs)
	}
}

// TestConsumerQuotaThrottles: a franz-go consumer over its
// consumer_byte_rate is held to the quota (within 10 %, after the first
// windows).
func TestConsumerQuotaThrottles(t *testing.T) {
	testutil.Heavy(t, "consumes for about 16 s")
	dir := t.TempDir()
	app := startApplianceIn(t, dir, "listeners=PLAINTEXT://"+testutil.FreeAddr(t), "quota.window.num=3")
	t.Cleanup(func() { app.Close() })
	adm := quotaAdmin(t, app)
	const quota = 256 << 10
	if err := alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: sp("reader")}}, kadm.AlterClientQuotaOp{Key: "consumer_byte_rate", Value: quota}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "quota-read"); err != nil {
		t.Fatal(err)
	}
	// 16 MiB to read: more than the run can take at the quota.
	// Batches of at most 16 KiB: a fetch returns its first batch whole.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.DefaultProduceTopic("quota-read"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 4<<10)
	for i := 0; i < 4096; i++ {
		pcl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := pcl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pcl.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.ClientID("reader"), kgo.ConsumeTopics("quota-read"),
		kgo.FetchMaxBytes(16<<10), kgo.FetchMaxPartitionBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const run, warm = 16 * time.Second, 6 * time.Second
	start := time.Now()
	var total int64
	rctx, cancel := context.WithDeadline(ctx, start.Add(run))
	defer cancel()
	for rctx.Err() == nil {
		fs := cl.PollFetches(rctx)
		if time.Since(start) < warm {
			continue
		}
		fs.EachRecord(func(r *kgo.Record) { total += int64(len(r.Value)) })
	}
	rate := float64(total) / (run - warm).Seconds()
	t.Logf("consumer %.0f B/s (quota %d)", rate, quota)
	if rate < 0.9*quota || rate > 1.1*quota {
		t.Errorf("throttled consumer read %.0f B/s, want %d ±10 %%", rate, quota)
	}
}

// TestRequestQuotaThrottles: a client over its request_percentage gets a
// throttle time on any request (ListGroups here); another does not.
func TestRequestQuotaThrottles(t *testing.T) {
	app := startApplianceIn(t, t.TempDir(), "listeners=PLAINTEXT://"+testutil.FreeAddr(t))
	t.Cleanup(func() { app.Close() })
	adm := quotaAdmin(t, app)
	if err := alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: sp("busy")}}, kadm.AlterClientQuotaOp{Key: "request_percentage", Value: 0.001}); err != nil {
		t.Fatal(err)
	}
	throttled := func(clientID string, n int) bool {
		hook := &requestThrottleHook{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.ClientID(clientID), kgo.WithHooks(hook))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := 0; i < n && !hook.seen.Load(); i++ {
			// ListGroups: not answered from the client's metadata cache.
			if _, err := cl.Request(ctx, kmsg.NewPtrListGroupsRequest()); err != nil {
				t.Fatal(err)
			}
		}
		return hook.seen.Load()
	}
	if !throttled("busy", 200) {
		t.Error("a client over its request_percentage was never throttled")
	}
	if throttled("idle", 50) {
		t.Error("a client without a quota was throttled")
	}
}

type requestThrottleHook struct{ seen atomic.Bool }

func (h *requestThrottleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.seen.Store(true)
	}
}

// TestMutationQuotaThroughAppliance: a controller_mutation_rate set with
// AlterClientQuotas reaches the listener, sized by
// controller.quota.window.num: with a rate of 1 and 3 windows the bucket
// holds 3 partitions, so of topics of 5 and 1 partitions the first is
// created (emptying the bucket) and the second is refused.
func TestMutationQuotaThroughAppliance(t *testing.T) {
	app := startApplianceIn(t, t.TempDir(), "listeners=PLAINTEXT://"+testutil.FreeAddr(t), "controller.quota.window.num=3")
	t.Cleanup(func() { app.Close() })
	adm := quotaAdmin(t, app)
	if err := alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: sp("provisioner")}}, kadm.AlterClientQuotaOp{Key: "controller_mutation_rate", Value: 1}); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.ClientID("provisioner"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The quota reaches the broker within a moment of being set: until
	// then both topics are created.
	attempt := 0
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		attempt++
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		for i, n := range []int32{5, 1} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("prov-%d-%d", attempt, i), n, 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
			t.Fatalf("first topic: %v", err)
		}
		if err := kerr.ErrorForCode(resp.Topics[1].ErrorCode); err != kerr.ThrottlingQuotaExceeded {
			return fmt.Errorf("second topic: %v, want THROTTLING_QUOTA_EXCEEDED", err)
		}
		if resp.ThrottleMillis <= 0 || resp.ThrottleMillis > 2000 {
			return fmt.Errorf("throttle_time_ms %d, want up to 2000", resp.ThrottleMillis)
		}
		return nil
	})
}
