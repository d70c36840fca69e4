package moves_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
	"github.com/sluice-io/sluice/reassign"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/moves"
	"github.com/sluice-io/sluice/web/webtest"
)

// movesJSON is GET /moves as JSON.
type movesJSON struct {
	Moves     []reassign.Progress `json:"moves"`
	Copied    int64               `json:"bytes_copied"`
	Total     int64               `json:"bytes_total"`
	Throttled []string            `json:"throttled_topics"`
	Err       string              `json:"error"`
}

// TestMovesOnCluster drives the page against three brokers on ZooKeeper:
// a throttled drain previewed (what moves where, bytes to copy), started,
// seen in progress in bytes, and its throttle removed by the leading
// console's cleaner once it completed, with the page not open; then a
// throttled move cancelled from the page, its partition back on its
// replicas and its throttle gone.
func TestMovesOnCluster(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three brokers, throttled copying")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()+"/moves"),
		testcluster.LogLevel(slog.LevelInfo), testcluster.Settings("auto.create.topics.enable=false"))
	cl := c.Client(kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b1, b2, b3 := c.Node(0).ID(), c.Node(1).ID(), c.Node(2).ID()

	createAssigned(ctx, t, cl, "slow", []int32{b1, b2})
	const recordBytes, records = 64 << 10, 64 // 4 MiB
	produce(ctx, t, cl, "slow", records, recordBytes)
	waitReplicas(ctx, t, adm, "slow", []int32{b1, b2})

	con := newConsole(t, c.Addrs(), moves.Options{CleanupInterval: 200 * time.Millisecond, Grace: 2 * time.Second})
	op := con.signedIn("op", web.RoleOperator)

	// The preview: slow-0 moves from broker 2 to 3, 4 MiB to copy.
	const rate = 256 << 10 // the first 10 s' worth passes at once: 2.5 of 4 MiB
	form := url.Values{"kind": {"drain"}, "broker": {strconv.Itoa(int(b2))}, "throttle": {"256KiB"}}
	r := op.Post("/moves", "/moves/preview", form)
	webtest.ExpectStatus(t, r, 200)
	webtest.ExpectContains(t, r, fmt.Sprintf("Drain broker %d", b2), `id="move-confirm"`, "4.0 MiB to copy, throttled to 256 KiB/s.", "slow")
	token := op.CSRF("/account")
	op.Accept = "application/json"
	jr := op.Do("POST", "/moves/preview", withCSRF(form, token))
	op.Accept = ""
	var pv struct {
		Plan  string          `json:"plan"`
		Steps []reassign.Step `json:"steps"`
		Bytes int64           `json:"bytes_to_copy"`
	}
	if err := json.Unmarshal([]byte(jr.Text), &pv); err != nil {
		t.Fatalf("%v: %s", err, jr.Text)
	}
	if len(pv.Steps) != 1 || pv.Steps[0].Topic != "slow" || !slices.Equal(pv.Steps[0].From, []int32{b1, b2}) ||
		!slices.Equal(pv.Steps[0].To, []int32{b1, b3}) || pv.Bytes < records*recordBytes || pv.Bytes > 2*records*recordBytes {
		t.Fatalf("preview %+v", pv)
	}

	// Start it; the throttle is on the brokers and the topic.
	form.Set("plan", pv.Plan)
	r = op.Post("/moves", "/moves/start", form)
	webtest.ExpectStatus(t, r, 303)
	if got := con.audit("moves.start"); len(got) != 1 || got[0].Outcome != "ok" || got[0].Target != fmt.Sprintf("Drain broker %d", b2) {
		t.Fatalf("audit %+v", got)
	}
	if got := topicConfig(ctx, t, adm, "slow", config.FollowerThrottledReplicas); got != fmt.Sprintf("0:%d", b3) {
		t.Errorf("slow's follower list while it moves: %q", got)
	}
	if got := brokerConfig(ctx, t, adm, b3, config.FollowerThrottledRate); got != strconv.Itoa(rate) {
		t.Errorf("broker %d's follower rate while slow moves: %q", b3, got)
	}

	// Progress in bytes, from the cluster: part copied, part not.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		var v movesJSON
		if r := op.GetJSON("/moves", &v); r.StatusCode != 200 {
			return fmt.Errorf("status %d", r.StatusCode)
		}
		if len(v.Moves) != 1 || v.Moves[0].Topic != "slow" || !slices.Equal(v.Moves[0].Adding, []int32{b3}) {
			return fmt.Errorf("moves %+v", v)
		}
		if v.Total < records*recordBytes || v.Copied <= 0 || v.Copied >= v.Total {
			return fmt.Errorf("copied %d of %d", v.Copied, v.Total)
		}
		if !slices.Equal(v.Throttled, []string{"slow"}) {
			return fmt.Errorf("throttled %v", v.Throttled)
		}
		return nil
	})
	webtest.ExpectContains(t, op.Get("/moves"), `id="moves-total"`, `id="move-slow-0"`, "copied")

	// Nobody looks at the page: the move completes at the throttle's pace
	// and the cleaner removes the throttle.
	testutil.CheckFor(t, 90*time.Second, 250*time.Millisecond, func() error {
		moving, err := reassign.InProgress(ctx, adm, nil)
		if err != nil || len(moving) > 0 {
			return fmt.Errorf("moving %v %v", moving, err)
		}
		for _, k := range []string{config.LeaderThrottledReplicas, config.FollowerThrottledReplicas} {
			if got := topicConfig(ctx, t, adm, "slow", k); got != "" {
				return fmt.Errorf("slow keeps %s=%q", k, got)
			}
		}
		for _, b := range []int32{b1, b2, b3} {
			for _, k := range []string{config.LeaderThrottledRate, config.FollowerThrottledRate} {
				if got := brokerConfig(ctx, t, adm, b, k); got != "" {
					return fmt.Errorf("broker %d keeps %s=%q", b, k, got)
				}
			}
		}
		left, err := con.srv.Store().SettingsWithPrefix(ctx, "moves.")
		if err != nil || len(left) > 0 {
			return fmt.Errorf("records %v %v", left, err)
		}
		return nil
	})
	waitReplicas(ctx, t, adm, "slow", []int32{b1, b3})

	// A throttled move cancelled: slow onto all three brokers, at 32 KiB/s
	// (it would take minutes), cancelled from the page.
	form = url.Values{"kind": {"topic"}, "topic": {"slow"}, "brokers": {fmt.Sprintf("%d,%d,%d", b1, b2, b3)}, "rf": {"3"}, "throttle": {"32KiB"}}
	token = op.CSRF("/account")
	op.Accept = "application/json"
	jr = op.Do("POST", "/moves/preview", withCSRF(form, token))
	op.Accept = ""
	if err := json.Unmarshal([]byte(jr.Text), &pv); err != nil || len(pv.Steps) != 1 || !slices.Equal(pv.Steps[0].Adding, []int32{b2}) {
		t.Fatalf("preview of rf 3: %v %s", err, jr.Text)
	}
	form.Set("plan", pv.Plan)
	webtest.ExpectStatus(t, op.Post("/moves", "/moves/start", form), 303)
	testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var v movesJSON
		op.GetJSON("/moves", &v)
		if len(v.Moves) != 1 {
			return fmt.Errorf("moves %+v", v)
		}
		return nil
	})
	if got := topicConfig(ctx, t, adm, "slow", config.FollowerThrottledReplicas); got != fmt.Sprintf("0:%d", b2) {
		t.Errorf("slow's follower list while it moves: %q", got)
	}
	r = op.Post("/moves", "/moves/cancel", url.Values{"topic": {"slow"}, "partition": {"0"}})
	webtest.ExpectStatus(t, r, 303)
	if got := con.audit("moves.cancel"); len(got) != 1 || got[0].Outcome != "ok" || got[0].Target != "slow-0" {
		t.Fatalf("audit of the cancel %+v", got)
	}
	testutil.CheckFor(t, 30*time.Second, 250*time.Millisecond, func() error {
		moving, err := reassign.InProgress(ctx, adm, nil)
		if err != nil || len(moving) > 0 {
			return fmt.Errorf("moving %v %v", moving, err)
		}
		for _, k := range []string{config.LeaderThrottledReplicas, config.FollowerThrottledReplicas} {
			if got := topicConfig(ctx, t, adm, "slow", k); got != "" {
				return fmt.Errorf("slow keeps %s=%q", k, got)
			}
		}
		for _, b := range []int32{b1, b2, b3} {
			if got := brokerConfig(ctx, t, adm, b, config.FollowerThrottledRate); got != "" {
				return fmt.Errorf("broker %d keeps its rate %q", b, got)
			}
		}
		return nil
	})
	waitReplicas(ctx, t, adm, "slow", []int32{b1, b3})
}

func withCSRF(form url.Values, token string) url.Values {
	out := url.Values{"_csrf": {token}}
	for k, v := range form {
		out[k] = v
	}
	return out
}

// topicConfig is a topic's own value of a config ("" when not set on it).
func topicConfig(ctx context.Context, t *testing.T, adm *kadm.Client, topic, key string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Key == key && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
				return cfg.MaybeValue()
			}
		}
	}
	return ""
}

// brokerConfig is a broker's dynamic value of a config ("" when not set).
func brokerConfig(ctx context.Context, t *testing.T, adm *kadm.Client, broker int32, key string) string {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Key == key && (cfg.Source == kmsg.ConfigSourceDynamicBrokerConfig || cfg.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig) {
				return cfg.MaybeValue()
			}
		}
	}
	return ""
}

// createAssigned creates a one-partition topic on the given replicas.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, replicas []int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: error %d", topic, code)
	}
}

// produce writes n random records of size bytes each.
func produce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n, size int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	rs := make([]*kgo.Record, n)
	for i := range rs {
		value := make([]byte, size)
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		rs[i] = &kgo.Record{Topic: topic, Value: value}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// waitReplicas waits until the topic's partition 0 has exactly these
// replicas, all in sync.
func waitReplicas(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, want []int32) {
	t.Helper()
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		p := md.Topics[topic].Partitions[0]
		if !reassign.SameSet(p.Replicas, want) || !reassign.SameSet(p.ISR, want) {
			return fmt.Errorf("%s: replicas %v ISR %v, want %v", topic, p.Replicas, p.ISR, want)
		}
		return nil
	})
}
