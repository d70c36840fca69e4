package kafkaview

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestReadBoundsDecompression: a page view of a partition holding a batch
// that expands to 200 MiB (kfake accepts it unchecked) stays within a
// bounded heap and says why the partition could not be read, instead of
// expanding the batch (the console went from 30 to 944 MiB RSS).
func TestReadBoundsDecompression(t *testing.T) {
	ctx := context.Background()
	_, c := newCluster(t)
	if err := c.CreateTopic(ctx, NewTopic{Name: "bombs", Partitions: 1, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
	tds, err := c.Admin().ListTopics(ctx, "bombs")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "bombs", tds["bombs"].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testutil.GzipBomb(200 << 20)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, c.Kgo()); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce the bomb: %v", err)
	}
	produceN(t, c, "bombs", 3, func(i int) *kgo.Record { return &kgo.Record{Value: []byte("after")} })

	runtime.GC()
	peak := testutil.WatchHeap(2 * time.Millisecond)
	res, err := c.Read(ctx, Query{Topic: "bombs", Partition: -1, From: FromEarliest, Limit: 50})
	grown := peak()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("heap peak %d MiB over the start; warnings %q", grown>>20, res.Warnings)
	if grown > 128<<20 {
		t.Fatalf("reading took the heap %d MiB up", grown>>20)
	}
	if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, " "), "MaxDecompressBatchBytes") {
		t.Fatalf("no warning about the batch: %+v", res)
	}
}
