package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
)

// TestCoordinatorAppendWakesFollowerFetch: a coordinator's append (an
// end-transaction marker, a transactional offset commit) wakes a
// follower's fetch parked at the log end, as a producer's append does; the
// appender waits for the high watermark (acks=all), which moves only once
// the follower fetched, so a fetch left parked until its max wait would
// hold every marker and offset commit of a replicated partition for
// replica.fetch.wait.max.ms.
func TestCoordinatorAppendWakesFollowerFetch(t *testing.T) {
	b, _, p := newLeaderBroker(t, time.Minute)
	info, err := p.AppendRecords(batchOf(t, 2), 1)
	if err != nil {
		t.Fatal(err)
	}
	end := info.LastOffset + 1
	if err := p.UpdateFollower(2, end); err != nil {
		t.Fatal(err)
	}
	follower := make(chan *FetchRequest, 1)
	go func() {
		req := &FetchRequest{ReplicaID: 2, MaxWait: 10 * time.Second, MinBytes: 1, MaxBytes: 1 << 20,
			Partitions: []FetchPartition{{Topic: "r", FetchOffset: end, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}}}
		b.Fetch(context.Background(), req, nil)
		t.Cleanup(req.Release)
		follower <- req
	}()
	eventually(t, "the follower's fetch parked", func() bool { return b.purgatory[delayedFetch].Load() == 1 })

	marker := record.AppendEndTxnMarker(nil, record.EndTxnMarker{ProducerID: 9, ProducerEpoch: 0, Commit: false}, time.Now().UnixMilli())
	if _, err := p.AppendAsCoordinator(marker); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-follower:
		if got := req.Partitions[0]; got.Err != nil || got.Records.Len() != int64(len(marker)) {
			t.Fatalf("follower's fetch: %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the coordinator's append did not wake the follower's fetch")
	}
}
