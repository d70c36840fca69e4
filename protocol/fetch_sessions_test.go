package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/internal/testutil"
)

// Fetch sessions (KIP-227): a full fetch with epoch 0 opens a session;
// incremental fetches send only changes and get only partitions with news
// (records, or a moved high watermark), fetched from the session's
// positions; stale epochs and unknown ids are refused; a forgotten partition
// is no longer fetched; epoch -1 closes the session.
func TestFetchSessions(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()
	b1 := benchBatch(t, 5, 100)
	if ec := produceErr(c.recv(c.send(produceFrame(-1, b1)))); ec != 0 {
		t.Fatalf("produce error %d", ec)
	}
	fetch := func(id, epoch int32, maxWait int32, parts []kmsg.FetchRequestTopicPartition, forget []int32) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, maxWait, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		if len(parts) > 0 {
			req.Topics = []kmsg.FetchRequestTopic{{Topic: "bench", Partitions: parts}}
		}
		if len(forget) > 0 {
			req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "bench", Partitions: forget}}
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		if err := c.roundTrip(req, resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	at := func(offset int64) []kmsg.FetchRequestTopicPartition {
		return []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: offset, CurrentLeaderEpoch: -1,
			LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}
	}
	records := func(r *kmsg.FetchResponse) (parts int, bytes int, hw int64) {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts++
				bytes += len(p.RecordBatches)
				hw = p.HighWatermark
			}
		}
		return
	}

	// Open: a full answer and a session id.
	r := fetch(0, 0, 0, at(0), nil)
	if r.ErrorCode != 0 || r.SessionID == 0 {
		t.Fatalf("full fetch opening a session: error %d, session id %d", r.ErrorCode, r.SessionID)
	}
	id := r.SessionID
	if parts, bytes, hw := records(r); parts != 1 || bytes != len(b1) || hw != 5 {
		t.Fatalf("first answer: %d partitions, %d record bytes, hw %d", parts, bytes, hw)
	}

	// Incremental, the position moved to the end: nothing new, so no
	// partitions (after max_wait).
	r = fetch(id, 1, 50, at(5), nil)
	if parts, _, _ := records(r); r.ErrorCode != 0 || r.SessionID != id || parts != 0 {
		t.Fatalf("idle incremental fetch: error %d, session %d, %d partitions; want none", r.ErrorCode, r.SessionID, parts)
	}

	// New records: an incremental fetch naming no partition reads from
	// the session's position and answers with them.
	b2 := benchBatch(t, 3, 100)
	if ec := produceErr(c.recv(c.send(produceFrame(-1, b2)))); ec != 0 {
		t.Fatalf("produce error %d", ec)
	}
	r = fetch(id, 2, 5000, nil, nil)
	if parts, bytes, hw := records(r); r.ErrorCode != 0 || parts != 1 || bytes != len(b2) || hw != 8 {
		t.Fatalf("incremental fetch after an append: error %d, %d partitions, %d bytes (want %d), hw %d",
			r.ErrorCode, parts, bytes, len(b2), hw)
	}

	// A stale epoch, an unknown id.
	if r = fetch(id, 2, 0, nil, nil); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("stale epoch: error %d, want INVALID_FETCH_SESSION_EPOCH", r.ErrorCode)
	}
	if r = fetch(id+1, 1, 0, nil, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}

	// Forgotten: no longer fetched, even with records there.
	r = fetch(id, 3, 0, nil, []int32{0})
	if parts, _, _ := records(r); r.ErrorCode != 0 || parts != 0 {
		t.Fatalf("forgetting the partition: error %d, %d partitions", r.ErrorCode, parts)
	}
	start := time.Now()
	r = fetch(id, 4, 100, nil, nil)
	if parts, _, _ := records(r); r.ErrorCode != 0 || parts != 0 {
		t.Fatalf("empty session: error %d, %d partitions", r.ErrorCode, parts)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("an empty session's fetch took %v", time.Since(start))
	}
	// Added again at offset 0: everything.
	r = fetch(id, 5, 0, at(0), nil)
	if parts, bytes, _ := records(r); parts != 1 || bytes != len(b1)+len(b2) {
		t.Fatalf("partition added again: %d partitions, %d bytes", parts, bytes)
	}

	// Epoch -1 closes it: a sessionless full answer, then the id is gone.
	r = fetch(id, -1, 0, at(0), nil)
	if parts, _, _ := records(r); r.ErrorCode != 0 || r.SessionID != 0 || parts != 1 {
		t.Fatalf("closing fetch: error %d, session %d, %d partitions", r.ErrorCode, r.SessionID, parts)
	}
	if r = fetch(id, 6, 0, nil, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	// Sessionless fetches stay sessionless.
	if r = fetch(0, -1, 0, at(0), nil); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("sessionless fetch: error %d, session %d", r.ErrorCode, r.SessionID)
	}
}

// A session over many idle partitions: an incremental fetch answers with
// no partition; a change on one of them is answered on the next incremental
// fetch, with that partition alone, whether it landed before the fetch or
// while the fetch was parked; and once read, the partition is quiet again.
func TestFetchSessionOneChangeOfMany(t *testing.T) {
	const parts = 40
	n := startBenchNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := n.brk.CreateTopic(ctx, broker.TopicSpec{Name: "many", Partitions: parts, ReplicationFactor: 1}, false, 0); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		for p := range int32(parts) {
			if _, err := n.brk.LeaderPartition("many", p); err != nil {
				return err
			}
		}
		return nil
	})
	c := dialRaw(t, n.addr)
	defer c.Close()
	request := func(id, epoch, maxWait int32, named map[int32]int64) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, maxWait, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		if len(named) > 0 {
			rt := kmsg.FetchRequestTopic{Topic: "many"}
			for p := range int32(parts) {
				if off, ok := named[p]; ok {
					rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, FetchOffset: off,
						CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20})
				}
			}
			req.Topics = []kmsg.FetchRequestTopic{rt}
		}
		return req
	}
	decode := func(body []byte) *kmsg.FetchResponse {
		t.Helper()
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		if err := resp.ReadFrom(body[1:]); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch error %d", resp.ErrorCode)
		}
		return resp
	}
	answered := func(r *kmsg.FetchResponse) map[int32]int {
		got := map[int32]int{}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
				}
				got[rp.Partition] = len(rp.RecordBatches)
			}
		}
		return got
	}
	appendTo := func(p int32) int {
		t.Helper()
		lp, err := n.brk.LeaderPartition("many", p)
		if err != nil {
			t.Fatal(err)
		}
		b := benchBatch(t, 3, 50)
		if _, err := lp.AppendRecords(b, 1); err != nil {
			t.Fatal(err)
		}
		return len(b)
	}

	all := map[int32]int64{}
	for p := range int32(parts) {
		all[p] = 0
	}
	r := decode(c.recv(c.send(frame(request(0, 0, 0, all)))))
	id := r.SessionID
	if id == 0 || len(answered(r)) != parts {
		t.Fatalf("opening fetch: session %d, %d partitions", id, len(answered(r)))
	}
	if got := answered(decode(c.recv(c.send(frame(request(id, 1, 0, nil)))))); len(got) != 0 {
		t.Fatalf("idle incremental fetch answered %v", got)
	}

	// A change before the fetch.
	size := appendTo(29)
	got := answered(decode(c.recv(c.send(frame(request(id, 2, 5000, nil))))))
	if len(got) != 1 || got[29] != size {
		t.Fatalf("after an append to partition 29: answered %v, want 29 with %d bytes", got, size)
	}
	// Read: quiet again at its new position.
	if got := answered(decode(c.recv(c.send(frame(request(id, 3, 0, map[int32]int64{29: 3})))))); len(got) != 0 {
		t.Fatalf("after moving past the records: answered %v", got)
	}

	// A change while the fetch is parked (sent first; if the append
	// comes before it parks, the answer is the same).
	corr := c.send(frame(request(id, 4, 10000, nil)))
	time.Sleep(50 * time.Millisecond)
	size = appendTo(7)
	got = answered(decode(c.recv(corr)))
	if len(got) != 1 || got[7] != size {
		t.Fatalf("after an append to partition 7 while parked: answered %v, want 7 with %d bytes", got, size)
	}
	if got := answered(decode(c.recv(c.send(frame(request(id, 5, 0, map[int32]int64{7: 3})))))); len(got) != 0 {
		t.Fatalf("after moving past the records: answered %v", got)
	}
}
