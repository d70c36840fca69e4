package protocol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestBrokerOnlyRequestsNeedTheBrokersAddress: ControlledShutdown and a
// Fetch with a replica id (a follower's) are answered only for a
// registered broker, on a connection from an address that broker
// registered. A client posing as broker 2 (registered at 192.0.2.7) from
// 127.0.0.1 gets CLUSTER_AUTHORIZATION_FAILED and TOPIC_AUTHORIZATION_FAILED
// (as Kafka answers them without ClusterAction), and its fetch does not
// move the high watermark of a partition broker 2 follows; a broker id
// nobody registered is refused too. A broker registered as "localhost" may
// send them from 127.0.0.1.
func TestBrokerOnlyRequestsNeedTheBrokersAddress(t *testing.T) {
	n := startBenchNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id, host := range map[int32]string{2: "192.0.2.7", 3: "localhost"} {
		err := n.coord.RegisterBroker(ctx, cluster.Broker{ID: id, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: 9092}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// "r" is led here and followed by broker 2 (in the ISR).
	if err := n.coord.CreateTopic(ctx, cluster.Topic{Name: "r", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}}}, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.addr)
	defer c.Close()
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("r")}}
		var mr kmsg.MetadataResponse
		mr.Version = md.Version
		if err := c.roundTrip(md, &mr); err != nil {
			return err
		}
		if len(mr.Brokers) != 3 || len(mr.Topics) != 1 || len(mr.Topics[0].Partitions) != 1 ||
			mr.Topics[0].Partitions[0].Leader != 1 || len(mr.Topics[0].Partitions[0].ISR) != 2 {
			return fmt.Errorf("metadata %+v", mr)
		}
		return nil
	})

	// Records the follower has not fetched: the high watermark stays at 0.
	prod := kmsg.NewPtrProduceRequest()
	prod.Version, prod.Acks, prod.TimeoutMillis = 9, 1, 5000
	prod.Topics = []kmsg.ProduceRequestTopic{{Topic: "r", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: benchBatch(t, 3, 10)}}}}
	// Metadata names the leader once the image is published, which may be
	// before the broker has applied it to its local partition: until then
	// the produce gets NOT_LEADER_OR_FOLLOWER, as a client would, and is
	// retried.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var pr kmsg.ProduceResponse
		pr.Version = prod.Version
		if err := c.roundTrip(prod, &pr); err != nil {
			t.Fatal(err)
		}
		if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 {
			if code != kerr.NotLeaderForPartition.Code {
				t.Fatalf("produce: %v", kerr.ErrorForCode(code))
			}
			return kerr.ErrorForCode(code)
		}
		return nil
	})
	highWatermark := func() int64 {
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.Version, lo.ReplicaID = 7, -1
		lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "r", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
		var lr kmsg.ListOffsetsResponse
		lr.Version = lo.Version
		if err := c.roundTrip(lo, &lr); err != nil {
			t.Fatal(err)
		}
		return lr.Topics[0].Partitions[0].Offset
	}
	if hw := highWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the follower fetched", hw)
	}

	fetchAs := func(replica int32) int16 {
		f := kmsg.NewPtrFetchRequest()
		f.Version, f.ReplicaID, f.MaxBytes = 12, replica, 1<<20
		f.Topics = []kmsg.FetchRequestTopic{{Topic: "r", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 3, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}}}
		var fr kmsg.FetchResponse
		fr.Version = f.Version
		if err := c.roundTrip(f, &fr); err != nil {
			t.Fatal(err)
		}
		return fr.Topics[0].Partitions[0].ErrorCode
	}
	for _, id := range []int32{2, 99} {
		if code := fetchAs(id); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("fetch posing as broker %d: %v, want TOPIC_AUTHORIZATION_FAILED", id, kerr.ErrorForCode(code))
		}
	}
	if hw := highWatermark(); hw != 0 {
		t.Fatalf("a fetch posing as follower 2 moved the high watermark to %d", hw)
	}
	if code := fetchAs(3); code == kerr.TopicAuthorizationFailed.Code {
		t.Fatal("broker 3, registered as localhost, refused a fetch from 127.0.0.1")
	}

	shutdown := func(id int32) int16 {
		cs := kmsg.NewPtrControlledShutdownRequest()
		cs.Version, cs.BrokerID, cs.BrokerEpoch = 3, id, -1
		var csr kmsg.ControlledShutdownResponse
		csr.Version = cs.Version
		if err := c.roundTrip(cs, &csr); err != nil {
			t.Fatal(err)
		}
		return csr.ErrorCode
	}
	for _, id := range []int32{2, 99} {
		if code := shutdown(id); code != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("ControlledShutdown of broker %d from 127.0.0.1: %v, want CLUSTER_AUTHORIZATION_FAILED", id, kerr.ErrorForCode(code))
		}
	}
	if code := shutdown(3); code == kerr.ClusterAuthorizationFailed.Code {
		t.Fatal("broker 3, registered as localhost, refused its ControlledShutdown from 127.0.0.1")
	}
	// Broker 2 is still in the ISR, its shutdown never happened.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("r")}}
	var mr kmsg.MetadataResponse
	mr.Version = md.Version
	if err := c.roundTrip(md, &mr); err != nil {
		t.Fatal(err)
	}
	if isr := mr.Topics[0].Partitions[0].ISR; len(isr) != 2 {
		t.Fatalf("ISR %v after refused requests", isr)
	}
}
