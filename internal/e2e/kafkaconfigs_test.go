package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestKafkaTopicConfigsAccepted: a topic spec written for Kafka, with the
// topic configs Kafka has and Sluice does not act on (as MirrorMaker 2 and
// Terraform apply them), creates and alters cleanly, and DescribeConfigs
// reports them with their source; a bad value is still refused, and the
// broker key behind one (log.cleaner.max.compaction.lag.ms) is its
// STATIC_BROKER_CONFIG default.
func TestKafkaTopicConfigsAccepted(t *testing.T) {
	n := startNode(t, "log.cleaner.max.compaction.lag.ms=86400000")
	adm := n.Admin()
	ctx := ctxFor(t, 30*time.Second)
	str := func(s string) *string { return &s }
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"retention.ms":                            str("3600000"),
		"max.compaction.lag.ms":                   str("600000"),
		"message.timestamp.before.max.ms":         str("86400000"),
		"message.downconversion.enable":           str("false"),
		"follower.replication.throttled.replicas": str("*"),
		"preallocate":                             str("true"),
	}, "spec")
	if err != nil || resp.Err != nil {
		t.Fatalf("create with Kafka's topic configs: %v %v", err, resp.Err)
	}
	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "spec")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("spec", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe: %v %v", err, rc.Err)
		}
		out := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			out[c.Key] = c
		}
		return out
	}
	got := describe()
	for name, want := range map[string]string{
		"max.compaction.lag.ms":                   "600000",
		"message.timestamp.before.max.ms":         "86400000",
		"message.downconversion.enable":           "false",
		"follower.replication.throttled.replicas": "*",
		"preallocate":                             "true",
	} {
		c, ok := got[name]
		if !ok || c.MaybeValue() != want || c.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
			t.Errorf("%s: %+v, want %s from DYNAMIC_TOPIC_CONFIG", name, c, want)
		}
	}
	if c := got["message.timestamp.after.max.ms"]; c.MaybeValue() != "9223372036854775807" || c.Source.String() != "DEFAULT_CONFIG" {
		t.Errorf("message.timestamp.after.max.ms %+v", c)
	}
	if c := got["retention.ms"]; c.MaybeValue() != "3600000" {
		t.Errorf("retention.ms %+v", c)
	}

	// IncrementalAlterConfigs: DELETE returns to the broker's static value.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: "max.compaction.lag.ms"},
		{Op: kadm.SetConfig, Name: "segment.jitter.ms", Value: str("1000")},
	}, "spec")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, ar)
	}
	got = describe()
	if c := got["max.compaction.lag.ms"]; c.MaybeValue() != "86400000" || c.Source.String() != "STATIC_BROKER_CONFIG" {
		t.Errorf("max.compaction.lag.ms after DELETE: %+v", c)
	}
	if c := got["segment.jitter.ms"]; c.MaybeValue() != "1000" {
		t.Errorf("segment.jitter.ms %+v", c)
	}

	// Values are still checked: wrong type, out of range, tiered storage.
	for name, v := range map[string]string{
		"max.compaction.lag.ms":         "soon",
		"message.downconversion.enable": "maybe",
		"local.retention.ms":            "-3",
		"remote.storage.enable":         "true",
	} {
		ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: str(v)}}, "spec")
		if err != nil {
			t.Fatal(err)
		}
		if e := ar[0].Err; !errors.Is(e, kerr.InvalidConfig) && !errors.Is(e, kerr.PolicyViolation) {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG or POLICY_VIOLATION", name, v, e)
		}
	}
}
