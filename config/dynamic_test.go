package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCheckDynamic(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		err         error  // nil: accepted
		msg         string // part of the message
	}{
		{"log.retention.ms", "60000", nil, ""},
		{"message.max.bytes", "1024", nil, ""},
		{"unclean.leader.election.enable", "true", nil, ""},
		{"log.cleanup.policy", "compact, delete", nil, ""},
		{"num.partitions", "3", ErrNotDynamic, "restart"},
		{"log.retention.hours", "1", ErrNotDynamic, "set log.retention.ms instead"},
		{"num.io.threads", "8", ErrNotDynamic, "no meaning for Sluice"},
		{"message.max.byte", "1", ErrUnknownDynamic, "did you mean message.max.bytes"},
		{"no.such.thing.at.all", "1", ErrUnknownDynamic, ""},
		{"message.max.bytes", "big", nil, "message.max.bytes"},
		{"log.segment.bytes", "10", nil, "between"},
		{"log.message.timestamp.type", "Whenever", nil, "one of"},
	} {
		err := CheckDynamic(tc.name, tc.value)
		switch {
		case tc.err == nil && tc.msg == "":
			if err != nil {
				t.Errorf("%s=%s refused: %v", tc.name, tc.value, err)
			}
		case err == nil:
			t.Errorf("%s=%s accepted", tc.name, tc.value)
		case tc.err != nil && !errors.Is(err, tc.err), !strings.Contains(err.Error(), tc.msg):
			t.Errorf("%s=%s: %v, want %v saying %q", tc.name, tc.value, err, tc.err, tc.msg)
		}
	}
	dyn := DynamicKeys()
	for _, k := range []string{"log.retention.ms", "log.segment.bytes", "message.max.bytes", "unclean.leader.election.enable", "min.insync.replicas"} {
		if !slices.Contains(dyn, k) {
			t.Errorf("%s is not dynamic", k)
		}
	}
	for _, k := range dyn {
		// The dynamic keys that give no topic default, each read at run time
		// by the part of the broker named.
		runtime := map[string]string{
			LeaderThrottledRate: "replication quotas", FollowerThrottledRate: "replication quotas",
			"num.replica.fetchers":   "replica fetchers (broker/replication.go)",
			"max.connections":        "the listener (appliance: dynamicConnectionLimits)",
			"max.connections.per.ip": "the listener (appliance: dynamicConnectionLimits)",
		}
		if kk, _ := Lookup(k); kk.Topic == "" && runtime[k] == "" || kk.Mode == ReadOnly {
			t.Errorf("dynamic key %s gives no topic default or is read-only in Kafka", k)
		}
	}
	for _, k := range []string{LeaderThrottledRate, FollowerThrottledRate} {
		if !slices.Contains(dyn, k) {
			t.Errorf("%s is not dynamic", k)
		}
		if err := CheckDynamic(k, "1048576"); err != nil {
			t.Errorf("%s=1048576: %v", k, err)
		}
		if err := CheckDynamic(k, "0"); err == nil {
			t.Errorf("%s=0 accepted", k)
		}
	}
}

// TestTopicDefaultsWith: a broker's own dynamic config wins over the
// cluster default, which wins over the file; a stored value that is not
// valid is skipped.
func TestTopicDefaultsWith(t *testing.T) {
	c, err := Parse(map[string]string{"log.retention.hours": "48", "message.max.bytes": "2000"})
	if err != nil {
		t.Fatal(err)
	}
	d := c.TopicDefaultsWith(Dynamic{
		Broker:  map[string]string{"message.max.bytes": "1000", "log.segment.bytes": "10"},
		Default: map[string]string{"message.max.bytes": "1500", "log.retention.ms": "60000", "num.partitions": "9"},
	})
	for name, want := range map[string]TopicDefault{
		"max.message.bytes": {BrokerKey: "message.max.bytes", Value: "1000", Level: LevelDynamicBroker},
		"retention.ms":      {BrokerKey: "log.retention.ms", Value: "60000", Level: LevelDynamicDefault},
		"segment.bytes":     {BrokerKey: "log.segment.bytes", Value: "1073741824", Level: LevelDefault},
	} {
		if got := d[name]; got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if got := c.TopicDefaultsWith(Dynamic{})["retention.ms"]; got.Value != "172800000" || got.Level != LevelStatic || got.BrokerKey != "log.retention.hours" {
		t.Errorf("without dynamic configs: %+v", got)
	}
}
