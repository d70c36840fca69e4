package lag

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestCollectBoundsDecompression: a group committed at a batch that expands
// to 200 MiB (held by a cluster that did not check it: kfake here) costs
// the collector a bounded amount of memory, not the batch's expanded size
// (franz-go's DefaultDecompressor allows 2 GiB); the partition's lag in
// records is still reported.
func TestCollectBoundsDecompression(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "bombs"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tds, err := kadm.NewClient(cl).ListTopics(ctx, "bombs")
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
	kresp, err := req.RequestWith(ctx, cl)
	if err != nil || kresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce the bomb: %v %+v", err, kresp)
	}
	produce(t, c.ListenAddrs(), "bombs", 0, 1, 1, kgo.NoCompression())
	var os kadm.Offsets
	os.AddOffset("bombs", 0, 0, -1)
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	peak := testutil.WatchHeap(2 * time.Millisecond)
	gs, err := NewCollector(cl).Collect(ctx, "g")
	grown := peak()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("heap peak %d MiB over the start", grown>>20)
	if grown > 128<<20 {
		t.Fatalf("collecting took the heap %d MiB up", grown>>20)
	}
	if p := findPart(t, find(t, gs, "g"), "bombs", 0); p.Lag != 2 {
		t.Fatalf("lag %+v", p)
	}
}
