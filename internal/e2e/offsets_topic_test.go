package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// offsetsTopicViaMetadata asks n for __consumer_offsets with a Metadata
// request allowing auto-creation (franz-go's kmsg, as a tool reading the
// offsets topic does) and checks the answer: the topic with its
// offsets.topic.num.partitions partitions, internal, every partition led,
// and replication factor rf.
func offsetsTopicViaMetadata(t *testing.T, n *node, partitions, rf int) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	cl := n.Client()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("__consumer_offsets")
	req.Topics = append(req.Topics, rt)
	// The first answer may come before every leader is known
	// (LEADER_NOT_AVAILABLE, which clients retry); a retry must not be
	// needed for the topic to be created.
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		mt := resp.Topics[0]
		led := 0
		for _, p := range mt.Partitions {
			if p.Leader >= 0 && p.ErrorCode == 0 && len(p.Replicas) == rf {
				led++
			}
		}
		if mt.ErrorCode == 0 && mt.IsInternal && len(mt.Partitions) == partitions && led == partitions {
			return
		}
		last = fmt.Sprintf("error %v, internal %v, %d partitions, %d led with %d replicas", kerr.ErrorForCode(mt.ErrorCode), mt.IsInternal, len(mt.Partitions), led, rf)
		if mt.ErrorCode != 0 && mt.ErrorCode != kerr.LeaderNotAvailable.Code {
			t.Fatalf("Metadata for __consumer_offsets on a fresh broker: %s", last)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Metadata for __consumer_offsets: %s", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMetadataCreatesOffsetsTopic: on a fresh broker, where no consumer
// group has existed, a Metadata request for __consumer_offsets that allows
// auto-creation creates it with the offsets.topic.* settings, even with
// auto.create.topics.enable=false (which keeps ordinary topics from being
// created), as Kafka does: Burrow and other tools reading the offsets topic
// start on a brand-new cluster. Asked with franz-go and with sarama (what
// Burrow uses), on a single node and on a two-broker cluster.
func TestMetadataCreatesOffsetsTopic(t *testing.T) {
	t.Run("single/kgo", func(t *testing.T) {
		n := startNode(t, "auto.create.topics.enable=false", "offsets.topic.num.partitions=7")
		offsetsTopicViaMetadata(t, n, 7, 1)
		// Ordinary topics are still not auto-created.
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("ordinary")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxFor(t, 10*time.Second), n.Client())
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("ordinary topic with auto.create.topics.enable=false: %v", kerr.ErrorForCode(code))
		}
	})
	t.Run("single/sarama", func(t *testing.T) {
		n := startNode(t, "auto.create.topics.enable=false")
		cfg := sarama.NewConfig()
		cfg.ClientID = "sluice-e2e"
		cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
		client, err := sarama.NewClient([]string{n.Addr()}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		parts, err := client.Partitions("__consumer_offsets")
		if err != nil {
			t.Fatalf("sarama Partitions(__consumer_offsets) on a fresh broker: %v", err)
		}
		if len(parts) != 50 {
			t.Fatalf("%d partitions, want offsets.topic.num.partitions = 50", len(parts))
		}
	})
	t.Run("cluster/kgo", func(t *testing.T) {
		testutil.Heavy(t, "ZooKeeper")
		zk := zktest.Start(t, zktest.Options{})
		c := testcluster.New(t, testcluster.Brokers(2), testcluster.ZooKeeper(zk.Addr()),
			testcluster.Settings("auto.create.topics.enable=false", "offsets.topic.num.partitions=6"))
		nodes := c.Nodes()
		// Both brokers registered, so the replication factor (3 by
		// default) is capped at 2.
		cl := nodes[0].Client()
		ctx := ctxFor(t, 30*time.Second)
		for {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Brokers) == 2 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		offsetsTopicViaMetadata(t, nodes[1], 6, 2)
	})
}
