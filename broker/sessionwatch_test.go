package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// sessionFollower plays a follower's fetch session the way package
// protocol drives it: the partition is fetched when the session's watch
// marked it changed (or on the first fetch), an empty fetch otherwise.
type sessionFollower struct {
	t     *testing.T
	b     *Broker
	sw    *SessionWatch
	fp    FetchPartition
	first bool
}

// fetch sends one fetch of the session (max wait 0) and reports whether
// the partition was read.
func (s *sessionFollower) fetch() bool {
	s.t.Helper()
	read := s.first || len(s.sw.Take()) > 0
	s.first = false
	req := &FetchRequest{ReplicaID: 2, MaxBytes: 1 << 20, Session: s.sw}
	if read {
		req.Partitions = []FetchPartition{s.fp}
	}
	s.b.Fetch(context.Background(), req, nil)
	defer req.Release()
	if read {
		fp := &req.Partitions[0]
		if fp.Err != nil {
			s.t.Fatalf("session fetch: %v", fp.Err)
		}
		s.fp.Watch, s.fp.Hint = fp.Watch, fp.Hint
	}
	return read
}

// TestSessionKeepsIdleFollowerInISR: a follower caught up at the log end
// whose fetch session then sends only empty incremental fetches stays in
// the ISR past replica.lag.time.max.ms without the leader reading the
// partition (Kafka's rule for a caught-up, idle follower); an append after
// a long quiet spell does not make it a laggard before its next read; and
// once its session stops fetching it leaves the ISR after the lag period.
func TestSessionKeepsIdleFollowerInISR(t *testing.T) {
	clock := clockwork.NewFakeClock()
	ctx := context.Background()
	b, co, p := newLeaderBrokerWith(t, Config{ReplicaLagTimeMax: time.Minute, Clock: clock}, nil)
	info, err := p.AppendRecords(batchOf(t, 5), 1)
	if err != nil {
		t.Fatal(err)
	}
	end := info.LastOffset + 1
	s := &sessionFollower{t: t, b: b, sw: NewSessionWatch(2), first: true,
		fp: FetchPartition{Topic: "r", FetchOffset: end, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}
	// The first read moves the high watermark (a change after it): the
	// next fetch reads again and finds it quiet.
	s.fetch()
	s.fetch()
	if s.fp.Watch == nil || s.fp.Hint.p == nil {
		t.Fatal("a read at the log end is not quiet in its session")
	}
	if s.fetch() {
		t.Fatal("an idle partition was read again")
	}

	// Five minutes of empty fetches every 15 s: still caught up.
	for range 20 {
		clock.Advance(15 * time.Second)
		if s.fetch() {
			t.Fatal("an idle partition was read again")
		}
		if p.lagging(clock.Now(), time.Minute) {
			t.Fatal("an idle follower fetching every 15 s counts as lagging")
		}
	}
	if isr := storedISR(t, co); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v after five minutes of idle session fetches", isr)
	}

	// An append 10 s after the last fetch, five minutes after the last
	// read: the follower was caught up at that fetch, so 45 s later it is
	// not a laggard yet.
	clock.Advance(10 * time.Second)
	if _, err := p.AppendRecords(batchOf(t, 1), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(45 * time.Second)
	if p.lagging(clock.Now(), time.Minute) {
		t.Fatal("an append after a quiet spell made the idle follower a laggard at once")
	}
	// Its next fetch reads the partition (marked by the append) and finds
	// the records there.
	if !s.fetch() {
		t.Fatal("an append did not mark the partition for the session's next fetch")
	}

	// The follower stops fetching: it leaves the ISR after the lag period.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(wctx, 1); err != nil { // the ISR manager's ticker
		t.Fatal(err)
	}
	clock.Advance(61 * time.Second)
	eventually(t, "the follower that stopped fetching leaves the ISR", func() bool {
		clock.Advance(time.Millisecond)
		return slices.Equal(storedISR(t, co), []int32{1})
	})
}

// TestSessionWatchMarks: every change of a watched partition marks it once
// until taken; a closed watch is no longer marked; the session's channel is
// signalled only for what the session waits for.
func TestSessionWatchMarks(t *testing.T) {
	_, _, p := newLeaderBroker(t, time.Minute)
	sw := NewSessionWatch(-1) // a consumer's: woken by high watermark moves
	w := p.watchSession(sw)
	p.notify(WakeOnAppend)
	p.notify(WakeOnAppend)
	select {
	case <-sw.c:
		t.Fatal("an append alone woke a consumer's session")
	default:
	}
	if got := sw.Take(); len(got) != 1 || got[0] != w {
		t.Fatalf("taken %v, want the partition once", got)
	}
	if got := sw.Take(); len(got) != 0 {
		t.Fatalf("taken again: %v", got)
	}
	p.notify(WakeOnHighWatermark)
	select {
	case <-sw.c:
	default:
		t.Fatal("a high watermark move did not wake a consumer's session")
	}
	w.Close()
	sw.Take()
	p.notify(WakeOnAny)
	if got := sw.Take(); len(got) != 0 {
		t.Fatalf("a closed watch was marked: %v", got)
	}
}

// TestRetentionMarksSessions: a log start moved by retention (no append,
// no DeleteRecords) is a change of the partition: a follower's fetch
// session is told of it, and a read hint taken before it is not used, so
// the next fetch answers the new log start offset.
func TestRetentionMarksSessions(t *testing.T) {
	b, _, p := newLeaderBroker(t, time.Minute)
	if _, err := p.AppendRecords(batchOf(t, 2), 1); err != nil {
		t.Fatal(err)
	}
	if err := p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	info, err := p.AppendRecords(batchOf(t, 3), 1)
	if err != nil {
		t.Fatal(err)
	}
	end := info.LastOffset + 1
	if err := p.UpdateFollower(2, end); err != nil {
		t.Fatal(err)
	}
	s := &sessionFollower{t: t, b: b, sw: NewSessionWatch(2), first: true,
		fp: FetchPartition{Topic: "r", FetchOffset: end, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}
	for i := 0; i < 5 && s.fetch(); i++ {
	}
	if s.fetch() {
		t.Fatal("the caught-up follower's session still reads the partition")
	}
	if s.fp.Hint.p == nil {
		t.Fatal("no read hint at the log end")
	}

	cfg := p.log.Config()
	cfg.RetentionMs = 1
	if err := p.log.SetConfigChecked(cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "retention deleted the first segment", func() bool {
		n, err := p.log.DeleteOldSegments()
		return err == nil && n > 0
	})
	if got := p.LogStartOffset(); got != 2 {
		t.Fatalf("log start %d after retention, want 2", got)
	}
	if len(s.sw.Take()) != 1 {
		t.Fatal("retention's log start move did not mark the partition in the session")
	}
	req := &FetchRequest{ReplicaID: 2, MaxBytes: 1 << 20, Session: s.sw, Partitions: []FetchPartition{s.fp}}
	b.Fetch(context.Background(), req, nil)
	defer req.Release()
	if fp := req.Partitions[0]; fp.Err != nil || fp.LogStartOffset != 2 {
		t.Fatalf("fetch with the old hint after retention: err %v, log start %d, want 2", fp.Err, fp.LogStartOffset)
	}
}
