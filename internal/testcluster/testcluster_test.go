package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// produceConsume writes n records to topic through c and reads them back.
func produceConsume(t *testing.T, c *testcluster.Cluster, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.Client()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", got, n, err)
		}
		got += fs.NumRecords()
	}
}

// TestSingleBroker: one broker with its metadata in its data directory
// serves a client, and keeps its records across a restart on the same
// address.
func TestSingleBroker(t *testing.T) {
	c := testcluster.New(t, testcluster.Settings("num.partitions=2"))
	if c.Broker() == nil || c.App() == nil || len(c.Addrs()) != 1 || c.Node(0).ID() != 1001 {
		t.Fatalf("accessors: broker %v app %v addrs %v id %d", c.Broker(), c.App(), c.Addrs(), c.Node(0).ID())
	}
	if got := c.App().Config().NumPartitions; got != 2 {
		t.Fatalf("num.partitions=%d, want the setting 2", got)
	}
	c.CreateTopic("kept", 2, 1, nil)
	produceConsume(t, c, "kept", 10)
	n := c.Node(0)
	n.Restart()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := n.Admin().ListEndOffsets(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 10 {
		t.Fatalf("%d records after the restart, want 10", total)
	}
}

// TestZooKeeperCluster: three brokers on one ZooKeeper form a cluster that
// replicates.
func TestZooKeeperCluster(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()+"/testcluster"))
	for i, n := range c.Nodes() {
		if n.ID() != int32(i+1) {
			t.Fatalf("broker %d has id %d", i, n.ID())
		}
	}
	c.CreateTopic("replicated", 1, 3, nil)
	produceConsume(t, c, "replicated", 10)
}
