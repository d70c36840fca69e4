package broker

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
)

// TestIncrementalAlterTopicConfigsConcurrent: incremental changes of
// different keys made at the same time are all kept (each applies its
// operations to the configs as stored and writes them back only if they
// did not change meanwhile), and DescribeTopicConfigs answers from the
// store: a change written there is described before the image has it.
func TestIncrementalAlterTopicConfigsConcurrent(t *testing.T) {
	b, co := newTestBroker(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := co.CreateTopic(ctx, cluster.Topic{Name: "c", ID: cluster.NewUUID(), Replicas: [][]int32{{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	keys := []string{"retention.ms", "segment.ms", "retention.bytes", "max.message.bytes", "segment.bytes", "delete.retention.ms"}
	want := map[string]string{}
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		v := fmt.Sprint(1_000_000 + i)
		want[k] = v
		wg.Go(func() {
			errs[i] = b.IncrementalAlterTopicConfigs(ctx, "c", []ConfigOp{{Name: k, Op: 0, Value: v}}, false)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("alter %s: %v", keys[i], err)
		}
	}
	got, err := b.TopicConfigs(ctx, "c")
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("after %d concurrent changes: %v %v, want %v", len(keys), got, err, want)
	}

	// Written to the store behind the broker's back: described at once.
	if err := co.SetTopicConfig(ctx, "c", map[string]string{"retention.ms": "42"}); err != nil {
		t.Fatal(err)
	}
	entries, err := b.DescribeTopicConfigs(ctx, "c", []string{"retention.ms"}, false)
	if err != nil || len(entries) != 1 || entries[0].Value == nil || *entries[0].Value != "42" || entries[0].Source != SourceDynamicTopic {
		t.Fatalf("described %+v %v", entries, err)
	}
	if _, err := b.DescribeTopicConfigs(ctx, "nope", nil, false); err == nil {
		t.Fatal("an unknown topic was described")
	}
}
