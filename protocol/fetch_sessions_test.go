package protocol_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
