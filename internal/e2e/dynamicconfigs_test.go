package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// TestDynamicBrokerConfigs: on one node, a dynamic broker config changes
// what the broker does without a restart (a lower message.max.bytes refuses
// a bigger batch), DescribeConfigs shows Kafka's sources and synonyms, keys
// read at start are refused with a message saying to restart, and the
// change survives a restart.
func TestDynamicBrokerConfigs(t *testing.T) {
	c := testcluster.New(t, testcluster.Settings("log.retention.hours=48", "log.retention.check.interval.ms=200"))
	testDynamicBrokerConfigs(t, c)
}

// TestDynamicBrokerConfigsZooKeeper: the same on three brokers sharing a
// ZooKeeper: a cluster default set through one broker applies on every
// broker (/config/brokers/<default> and its change notification), a
// per-broker config only on its broker, and both survive restarts.
func TestDynamicBrokerConfigsZooKeeper(t *testing.T) {
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()),
		testcluster.Settings("log.retention.hours=48", "log.retention.check.interval.ms=200", "default.replication.factor=3", "offsets.topic.replication.factor=3"))
	testDynamicBrokerConfigs(t, c)
}

func testDynamicBrokerConfigs(t *testing.T, c *testcluster.Cluster) {
	ctx := ctxFor(t, 120*time.Second)
	adm := c.Admin()
	n0 := c.Node(0)
	id0 := n0.ID()
	rf := int16(len(c.Nodes()))
	if _, err := adm.CreateTopic(ctx, 1, rf, nil, "dyn"); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4000)
	produce := func(n *testcluster.Node) error {
		cl := n.Client(kgo.RecordRetries(20), kgo.ProducerBatchCompression(kgo.NoCompression())) // MESSAGE_TOO_LARGE is not retried
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "dyn", Value: big}).FirstErr()
	}
	if err := produce(n0); err != nil {
		t.Fatalf("4000-byte batch before the change: %v", err)
	}
	alter := func(resource string, cfgs ...kadm.AlterConfig) error {
		t.Helper()
		var rs kadm.AlterConfigsResponses
		var err error
		if resource == "" {
			rs, err = adm.AlterBrokerConfigs(ctx, cfgs)
		} else {
			var id int32
			fmt.Sscan(resource, &id)
			rs, err = adm.AlterBrokerConfigs(ctx, cfgs, id)
		}
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Err != nil {
			return fmt.Errorf("%w: %s", rs[0].Err, rs[0].ErrMessage)
		}
		return nil
	}
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v} }
	del := func(k string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k} }

	// The cluster default lowers message.max.bytes on every broker.
	if err := alter("", set("message.max.bytes", "1024"), set("log.retention.ms", "3600000")); err != nil {
		t.Fatalf("set the cluster default: %v", err)
	}
	refusedEverywhere := func() {
		t.Helper()
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if err := produce(n0); !errors.Is(err, kerr.MessageTooLarge) {
				return fmt.Errorf("4000-byte batch with message.max.bytes=1024: %v, want MESSAGE_TOO_LARGE", err)
			}
			return nil
		})
	}
	refusedEverywhere()
	// Every broker has it in force, with Kafka's source and synonyms.
	for _, n := range c.Nodes() {
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			rc := describeBroker(t, ctx, adm, n.ID())
			return wantConfig(rc, "message.max.bytes", "1024", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
				kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDefaultConfig)
		})
	}
	// The topic sees it as its default's source; the static key stays a synonym.
	tc, err := adm.DescribeTopicConfigs(ctx, "dyn")
	if err != nil {
		t.Fatal(err)
	}
	trc, _ := tc.On("dyn", nil)
	if err := wantConfig(trc, "retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDefaultConfig); err != nil {
		t.Error(err)
	}
	// The default entity lists what is set on it.
	drs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drc, _ := drs.On("", nil)
	if err := wantConfig(drc, "log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig); err != nil || len(drc.Configs) != 2 {
		t.Errorf("default entity: %v %+v", err, drc.Configs)
	}

	// A per-broker config wins over the default on its broker only: set on
	// the partition's leader, the batch is accepted again.
	td, err := adm.ListTopics(ctx, "dyn")
	if err != nil {
		t.Fatal(err)
	}
	leader := td["dyn"].Partitions[0].Leader
	if err := alter(fmt.Sprint(leader), set("message.max.bytes", "1000000")); err != nil {
		t.Fatalf("set on broker %d: %v", leader, err)
	}
	if err := produce(n0); err != nil {
		t.Fatalf("leader %d's own message.max.bytes=1000000: %v", leader, err)
	}
	if err := wantConfig(describeBroker(t, ctx, adm, leader), "message.max.bytes", "1000000", kmsg.ConfigSourceDynamicBrokerConfig,
		kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDefaultConfig); err != nil {
		t.Error(err)
	}
	for _, n := range c.Nodes() {
		if n.ID() == leader {
			continue
		}
		if err := wantConfig(describeBroker(t, ctx, adm, n.ID()), "message.max.bytes", "1024", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
			kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDefaultConfig); err != nil {
			t.Errorf("broker %d: %v", n.ID(), err)
		}
	}
	if err := alter(fmt.Sprint(leader), del("message.max.bytes")); err != nil {
		t.Fatal(err)
	}
	refusedEverywhere()

	// Keys read at start are refused, saying so; bad names and values too.
	for _, tc := range []struct {
		cfg  kadm.AlterConfig
		code error
		msg  string
	}{
		{set("num.partitions", "3"), kerr.InvalidRequest, "restart"},
		{set("log.retention.hours", "1"), kerr.InvalidRequest, "log.retention.ms"},
		{set("num.io.threads", "16"), kerr.InvalidRequest, "no meaning for Sluice"},
		{set("message.max.byte", "1"), kerr.InvalidConfig, "did you mean message.max.bytes"},
		{set("message.max.bytes", "big"), kerr.InvalidConfig, "message.max.bytes"},
		{set("log.segment.bytes", "10"), kerr.InvalidConfig, "log.segment.bytes"},
	} {
		err := alter("", tc.cfg)
		if !errors.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s=%s: %v, want %v saying %q", tc.cfg.Name, *tc.cfg.Value, err, tc.code, tc.msg)
		}
	}
	// Another broker's configs are altered on that broker: kadm sends them there.
	if len(c.Nodes()) > 1 {
		id1 := c.Node(1).ID()
		if err := alter(fmt.Sprint(id1), set("log.segment.bytes", "1048576")); err != nil {
			t.Fatalf("set on broker %d: %v", id1, err)
		}
		if err := wantConfig(describeBroker(t, ctx, adm, id1), "log.segment.bytes", "1048576", kmsg.ConfigSourceDynamicBrokerConfig,
			kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDefaultConfig); err != nil {
			t.Error(err)
		}
		if err := wantConfig(describeBroker(t, ctx, adm, id0), "log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig,
			kmsg.ConfigSourceDefaultConfig); err != nil {
			t.Error(err)
		}
	}

	// Restart every broker: the dynamic configs are kept by the coordinator.
	for _, n := range c.Nodes() {
		n.Restart()
	}
	adm = c.Admin()
	refusedEverywhere()
	if err := wantConfig(describeBroker(t, ctx, adm, id0), "message.max.bytes", "1024", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDefaultConfig); err != nil {
		t.Error(err)
	}
	// Removing the default brings the static value back, without a restart.
	if err := alter("", del("message.max.bytes")); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error { return produce(n0) })
	if err := wantConfig(describeBroker(t, ctx, adm, id0), "log.retention.hours", "48", kmsg.ConfigSourceStaticBrokerConfig,
		kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDefaultConfig); err != nil {
		t.Error(err)
	}

	// A lower log.retention.ms default deletes the old segments of a topic
	// that does not set retention.ms, without a restart.
	seg := "1024"
	if _, err := adm.CreateTopic(ctx, 1, rf, map[string]*string{"segment.bytes": &seg}, "ret"); err != nil {
		t.Fatal(err)
	}
	cl := n0.Client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	for range 12 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ret", Value: make([]byte, 600)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	startOffset := func() int64 {
		t.Helper()
		so, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := so.Lookup("ret", 0)
		return o.Offset
	}
	if o := startOffset(); o != 0 {
		t.Fatalf("start offset %d before the change", o)
	}
	if err := alter("", set("log.retention.ms", "1000")); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if o := startOffset(); o < 6 {
			return fmt.Errorf("start offset %d: old segments not deleted under log.retention.ms=1000", o)
		}
		return nil
	})
}

func describeBroker(t *testing.T, ctx context.Context, adm *kadm.Client, id int32) kadm.ResourceConfig {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(fmt.Sprint(id), nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker %d: %v %v", id, err, rc.Err)
	}
	return rc
}

// wantConfig checks a config's value and source and the sources of its
// synonyms, in order (kadm asks for synonyms).
func wantConfig(rc kadm.ResourceConfig, name, value string, source kmsg.ConfigSource, synonyms ...kmsg.ConfigSource) error {
	for _, c := range rc.Configs {
		if c.Key != name {
			continue
		}
		if c.MaybeValue() != value || c.Source != source {
			return fmt.Errorf("%s = %q from %v, want %q from %v", name, c.MaybeValue(), c.Source, value, source)
		}
		var got []kmsg.ConfigSource
		for _, s := range c.Synonyms {
			got = append(got, s.Source)
		}
		if fmt.Sprint(got) != fmt.Sprint(synonyms) {
			return fmt.Errorf("%s synonyms %v, want %v", name, c.Synonyms, synonyms)
		}
		return nil
	}
	return fmt.Errorf("%s not described", name)
}
