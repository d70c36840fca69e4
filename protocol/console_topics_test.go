package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestConsoleTopicsAreInternal: the console's topics are internal — listed
// so, never deleted — and take a produce from a broker's host (here the
// test runs on the broker's machine, as the console does), while
// __consumer_offsets still refuses every client's produce.
func TestConsoleTopicsAreInternal(t *testing.T) {
	n := startBenchNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"__sluice_console", "__consumer_offsets"} {
		if err := n.coord.CreateTopic(ctx, cluster.Topic{Name: name, ID: cluster.NewUUID(), Replicas: [][]int32{{1}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, n.addr)
	defer c.Close()
	produce := func(topic string) int16 {
		var code int16
		testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			prod := kmsg.NewPtrProduceRequest()
			prod.Version, prod.Acks, prod.TimeoutMillis = 9, -1, 5000
			prod.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: benchBatch(t, 1, 10)}}}}
			var pr kmsg.ProduceResponse
			pr.Version = prod.Version
			if err := c.roundTrip(prod, &pr); err != nil {
				return err
			}
			code = pr.Topics[0].Partitions[0].ErrorCode
			if code == kerr.NotLeaderForPartition.Code || code == kerr.UnknownTopicOrPartition.Code {
				return kerr.ErrorForCode(code)
			}
			return nil
		})
		return code
	}
	if code := produce("__sluice_console"); code != 0 {
		t.Fatalf("the console's produce from the broker's host: %v", kerr.ErrorForCode(code))
	}
	if code := produce("__consumer_offsets"); code != kerr.InvalidTopicException.Code {
		t.Fatalf("a client's produce to __consumer_offsets: %v", kerr.ErrorForCode(code))
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("__sluice_console")}}
	var mr kmsg.MetadataResponse
	mr.Version = md.Version
	if err := c.roundTrip(md, &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Topics) != 1 || !mr.Topics[0].IsInternal {
		t.Fatalf("__sluice_console in metadata: %+v", mr.Topics)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis = 4, 5000
	del.TopicNames = []string{"__sluice_console"}
	var dr kmsg.DeleteTopicsResponse
	dr.Version = del.Version
	if err := c.roundTrip(del, &dr); err != nil {
		t.Fatal(err)
	}
	if code := dr.Topics[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("deleting __sluice_console: %v", kerr.ErrorForCode(code))
	}
}
