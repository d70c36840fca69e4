package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// A follower fetches with a fetch session (KIP-227): a full fetch opens
// it, the next ones name only partitions whose position changed (none when
// nothing did), each with the next epoch; when the leader no longer knows
// the session the follower starts again with a full fetch. The leader is
// played by the test.
func TestFollowerFetchSession(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, co := startBroker(t, Config{ReplicaFetchWaitMax: 50 * time.Millisecond}, false)
	ctx := context.Background()
	port := ln.Addr().(*net.TCPAddr).Port
	if err := co.RegisterBroker(ctx, cluster.Broker{ID: 2, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT",
		SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: int32(port)}}}); err != nil {
		t.Fatal(err)
	}
	if err := co.CreateTopic(ctx, cluster.Topic{Name: "f", ID: cluster.NewUUID(), Replicas: [][]int32{{2, 1}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := co.CreatePartitionState(ctx, "f", 0, cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 1}}); err != nil {
		t.Fatal(err)
	}
	batch := recordtest.Batch(t, 2, 10, time.Now().UnixMilli(), record.CompressionNone)
	binary.BigEndian.PutUint32(batch[12:16], 1) // partition leader epoch 1

	type seen struct {
		id, epoch int32
		parts     map[int32]int64 // partition -> fetch offset
	}
	got := make(chan seen, 100)
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			defer c.Close()
			var buf []byte
			for n := 0; ; n++ {
				frame, grown, err := kwire.ReadFrame(c, buf, 8, 1<<20)
				buf = grown
				if err != nil {
					return nil // the follower went away
				}
				key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
				corr := int32(binary.BigEndian.Uint32(frame[4:]))
				if key != 1 {
					return fmt.Errorf("request key %d, want Fetch", key)
				}
				body := frame[8:]
				cl := int(int16(binary.BigEndian.Uint16(body)))
				body = body[2+max(cl, 0):]
				if body, err = kwire.SkipTags(body); err != nil {
					return err
				}
				req := kmsg.NewPtrFetchRequest()
				req.Version = version
				if err := req.ReadFrom(body); err != nil {
					return err
				}
				s := seen{id: req.SessionID, epoch: req.SessionEpoch, parts: map[int32]int64{}}
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						s.parts[rp.Partition] = rp.FetchOffset
					}
				}
				got <- s
				resp := kmsg.NewPtrFetchResponse()
				resp.Version = version
				resp.SessionID = 77
				switch n {
				case 0: // open the session, with records
					rt := kmsg.NewFetchResponseTopic()
					rt.Topic = "f"
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 2, 2, 0
					rp.RecordBatches = batch
					rt.Partitions = append(rt.Partitions, rp)
					resp.Topics = append(resp.Topics, rt)
				case 1: // nothing new
				case 2:
					resp.ErrorCode, resp.SessionID = kerr.FetchSessionIDNotFound.Code, 0
				default:
					time.Sleep(20 * time.Millisecond)
				}
				if _, err := c.Write(kwire.AppendResponse(nil, corr, resp)); err != nil {
					return nil
				}
			}
		}()
	}()
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{0, 0, map[int32]int64{0: 0}},  // full: opens
		{77, 1, map[int32]int64{0: 2}}, // the position moved
		{77, 2, map[int32]int64{}},     // nothing moved: no partitions
		{0, 0, map[int32]int64{0: 2}},  // the session was lost: full again
		{77, 1, map[int32]int64{}},
	}
	for i, w := range want {
		select {
		case s := <-got:
			if s.id != w.id || s.epoch != w.epoch || fmt.Sprint(s.parts) != fmt.Sprint(w.parts) {
				t.Fatalf("fetch %d: session %d epoch %d partitions %v; want %d %d %v", i, s.id, s.epoch, s.parts, w.id, w.epoch, w.parts)
			}
		case err := <-errc:
			t.Fatalf("leader: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("fetch %d: none within 10s", i)
		}
	}
	p, _ := b.Partition("f", 0)
	if p.LogEndOffset() != 2 {
		t.Fatalf("follower log end %d, want 2", p.LogEndOffset())
	}
}

// TestReadHint: a fetch that found nothing at a follower's log end leaves a
// hint; the next fetch with it answers without reading yet still counts as
// the follower's fetch (its lag clock moves, so an idle follower stays in
// the ISR), and any change — an append (also one that lands while the
// fetch is parked), a log start move, a lost leadership — is read in full.
func TestReadHint(t *testing.T) {
	b, co, p := newLeaderBroker(t, time.Minute)
	info, err := p.AppendRecords(batchOf(t, 2), 1)
	if err != nil {
		t.Fatal(err)
	}
	end := info.LastOffset + 1
	fetch := func(hint ReadHint, wait time.Duration) *FetchPartition {
		t.Helper()
		req := &FetchRequest{ReplicaID: 2, MaxWait: wait, MinBytes: 1, MaxBytes: 1 << 20,
			Partitions: []FetchPartition{{Topic: "r", FetchOffset: end, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, Hint: hint}}}
		b.Fetch(context.Background(), req, nil)
		t.Cleanup(req.Release)
		return &req.Partitions[0]
	}
	caughtUp := func() time.Time {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.followers[2].lastCaughtUp
	}

	fp := fetch(ReadHint{}, 0)
	if fp.Err != nil || fp.Records.Len() != 0 || fp.Hint.p != p || fp.HighWatermark != end {
		t.Fatalf("first read at the log end: err %v, %d bytes, hint %+v, high watermark %d", fp.Err, fp.Records.Len(), fp.Hint, fp.HighWatermark)
	}
	// That fetch moved the high watermark (the follower reached the log
	// end), a change after its read: the next one reads again.
	fp = fetch(fp.Hint, 0)
	hint := fp.Hint
	before := caughtUp()
	time.Sleep(5 * time.Millisecond)
	fp = fetch(hint, 0)
	if fp.Err != nil || fp.Records.Len() != 0 || fp.Hint != hint || fp.HighWatermark != end || fp.LogStartOffset != 0 {
		t.Fatalf("quiet read: err %v, %d bytes, hint %+v (want %+v), offsets %d %d", fp.Err, fp.Records.Len(), fp.Hint, hint, fp.HighWatermark, fp.LogStartOffset)
	}
	if !caughtUp().After(before) {
		t.Fatal("a quiet read did not count as the follower's fetch: its lag clock stood still")
	}

	// An append while the fetch is parked with the hint wakes it, and it
	// reads the records.
	done := make(chan *FetchPartition, 1)
	go func() { done <- fetch(hint, 10*time.Second) }()
	eventually(t, "the fetch parked", func() bool { return b.purgatory[delayedFetch].Load() == 1 })
	if _, err := p.AppendRecords(batchOf(t, 3), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case fp = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an append did not wake a fetch parked with a hint")
	}
	if fp.Err != nil || fp.Records.Len() == 0 || fp.Hint != (ReadHint{}) {
		t.Fatalf("after an append: err %v, %d bytes, hint %+v", fp.Err, fp.Records.Len(), fp.Hint)
	}
	// An append before the fetch: the stale hint is not used.
	if fp = fetch(hint, 0); fp.Records.Len() == 0 {
		t.Fatal("a stale hint hid an append")
	}

	// Caught up again; then the log start moves: the new one is answered.
	end = p.LogEndOffset()
	if fp = fetch(ReadHint{}, 0); fp.Hint.p == nil {
		t.Fatal("no hint at the log end")
	}
	hint = fp.Hint
	if err := p.UpdateFollower(2, end); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecords(2); err != nil {
		t.Fatal(err)
	}
	if fp = fetch(hint, 0); fp.LogStartOffset != 2 {
		t.Fatalf("log start %d after DeleteRecords, want 2", fp.LogStartOffset)
	}
	hint = fp.Hint

	// Leadership moves away: the hint does not hide it.
	st, err := co.PartitionState(context.Background(), "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Leader, st.LeaderEpoch = 2, st.LeaderEpoch+1
	if _, err := co.SetPartitionState(context.Background(), "r", 0, st); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broker 1 no longer leads", func() bool { l, _ := p.Leader(); return !l })
	if fp = fetch(hint, 0); fp.Err == nil {
		t.Fatal("a hint answered for a partition this broker no longer leads")
	}
}
