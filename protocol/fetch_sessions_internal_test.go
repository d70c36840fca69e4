package protocol

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
)

// The session cache is bounded: when full, a new consumer session gets none
// unless the least recently used one is idle past the eviction time; a
// follower's takes a consumer's place at once.
func TestFetchSessionCacheBound(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newFetchSessions(2)
	c.now = func() time.Time { return now }
	open := func(replica int32) int32 {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 12, replica, 0, 0
		sf, code := c.begin(req)
		if code != 0 {
			t.Fatalf("begin: %d", code)
		}
		if sf.s == nil {
			return 0
		}
		resp := &fetchResponse{version: 12}
		sf.fillFull(req, resp)
		sf.finish(resp)
		return resp.sessionID
	}
	a := open(-1)
	now = now.Add(time.Second)
	b := open(-1)
	if a == 0 || b == 0 || a == b {
		t.Fatalf("sessions %d %d", a, b)
	}
	if id := open(-1); id != 0 || c.len() != 2 {
		t.Fatalf("full cache gave a consumer session %d (%d sessions)", id, c.len())
	}
	now = now.Add(time.Second)
	f := open(2)
	if f == 0 || c.len() != 2 {
		t.Fatalf("a follower got no session in a cache of consumers (%d)", f)
	}
	if _, ok := c.sessions[a]; ok {
		t.Fatal("the follower's session did not take the least recently used one's place")
	}
	now = now.Add(fetchSessionEvictAfter)
	if id := open(-1); id == 0 {
		t.Fatal("an idle session was not evicted")
	}
	if _, ok := c.sessions[b]; ok {
		t.Fatal("the idle consumer session is still there")
	}
}

// A partition that returned records moves to the end of its session, so
// that a response budget taken by the first partitions does not starve the
// others.
func TestFetchSessionRotates(t *testing.T) {
	c := newFetchSessions(10)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 12, -1, 0, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	for p := range 3 {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	sf, _ := c.begin(req)
	resp := &fetchResponse{version: 12}
	fillFetchPartitions(req, resp)
	sf.fillFull(req, resp)
	resp.req.Partitions[0].Records = broker.MemoryRecords([]byte("x"))
	sf.finish(resp)

	req.SessionID, req.SessionEpoch, req.Topics = resp.sessionID, 1, nil
	sf, code := c.begin(req)
	if code != 0 || !sf.incremental {
		t.Fatalf("incremental begin: %d", code)
	}
	resp = &fetchResponse{version: 12}
	sf.fillIncremental(req, resp)
	var order []int32
	for _, fp := range resp.req.Partitions {
		order = append(order, fp.Partition)
	}
	if !slices.Equal(order, []int32{1, 2, 0}) {
		t.Fatalf("session order %v, want [1 2 0]", order)
	}
	if len(resp.topics) != 1 || resp.topics[0].partitions != 3 {
		t.Fatalf("topics %+v", resp.topics)
	}
	sf.finish(resp)
}
