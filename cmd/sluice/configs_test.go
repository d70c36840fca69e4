package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestConfigsUnknownBroker: `configs describe --broker N` and `configs
// alter --broker N` for an id that is not a broker of the cluster say so,
// naming the brokers there are, instead of franz-go's "request
// DescribeConfigs has 1 separate shard errors, first: unknown broker".
func TestConfigsUnknownBroker(t *testing.T) {
	b := startTestBroker(t, testBrokerKinds(false)[0])
	waitForBroker(t, b.addr)
	code, stdout, _ := runCLI(t, b.addr, "", "cluster", "-o", "json")
	var c clusterJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &c) != nil || len(c.Brokers) == 0 {
		t.Fatalf("cluster: exit %d: %s", code, stdout)
	}
	missing := int32(1)
	for _, br := range c.Brokers {
		missing = max(missing, br.ID+1)
	}
	want := fmt.Sprintf("broker %d is not a broker of this cluster (its brokers: %d)", missing, c.Brokers[0].ID)
	for _, args := range [][]string{
		{"configs", "describe", "--broker", fmt.Sprint(missing)},
		{"configs", "alter", "--broker", fmt.Sprint(missing), "--set", "log.retention.ms=1000"},
	} {
		code, _, stderr := runCLI(t, b.addr, "", args...)
		if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "shard errors") {
			t.Errorf("%v: exit %d, want 1 and %q:\n%s", args, code, want, stderr)
		}
	}
}

// TestErrKafkaShardErrors: a request split over brokers that fails shows
// each broker's own error (its answer, or why it could not be asked) and
// still unwraps to the client's error.
func TestErrKafkaShardErrors(t *testing.T) {
	se := &kadm.ShardErrors{Name: "DescribeConfigs", AllFailed: true, Errs: []kadm.ShardError{
		{Err: kerr.InvalidRequest, Broker: kadm.BrokerDetail{NodeID: 1001}},
		{Err: kerr.InvalidRequest, Broker: kadm.BrokerDetail{NodeID: 1001}},
		{Err: context.Canceled, Broker: kadm.BrokerDetail{NodeID: -1}},
	}}
	err := errKafka("describe configs of broker 1001", se)
	want := "describe configs of broker 1001: broker 1001: " + kerr.InvalidRequest.Error() + "; " + context.Canceled.Error()
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if !errors.Is(err, kerr.InvalidRequest) || !errors.Is(err, context.Canceled) {
		t.Error("the error no longer unwraps to the shard errors")
	}
	if got := errKafka("list topics", kerr.UnknownServerError).Error(); got != "list topics: "+kerr.UnknownServerError.Error() {
		t.Errorf("plain error: %q", got)
	}
}
