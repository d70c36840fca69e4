package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage"
)

// Replication, follower side: num.replica.fetchers fetcher goroutines per
// leader broker (Kafka's ReplicaFetcherThreads), each with its own
// connection, multiplexing the partitions this broker follows there; a
// partition always goes to the same one (fetcherIndex, Kafka's formula). For each partition it
// first truncates the log's divergent tail (OffsetForLeaderEpoch, KIP-101 and
// KIP-279), then fetches from the log end with Fetch requests that carry
// this broker's id as replica id, appends what comes back with the leader's
// offsets, and takes the leader's high watermark (capped at its own log end)
// and log start. The leader learns each follower's log end from these
// fetches (Partition.UpdateFollower). Each fetcher keeps a fetch session
// (KIP-227) with its leader: after the first full fetch it sends only the
// partitions whose position changed, and the leader answers only for those
// with news, so an idle follower of thousands of partitions exchanges a few
// bytes per poll.

// followTarget is one partition to follow: its leader and leader epoch.
type followTarget struct {
	p      *Partition
	leader int32
	epoch  int32
}

// replicaFetchers owns the fetcher goroutines.
type replicaFetchers struct {
	b   *Broker
	log *slog.Logger

	mu       sync.Mutex
	closed   bool
	n        int // num.replica.fetchers the fetchers were last laid out for
	bySource map[fetcherKey]*fetcher
	wg       sync.WaitGroup
}

func newReplicaFetchers(b *Broker) *replicaFetchers {
	return &replicaFetchers{b: b, log: b.log.With("component", "replica-fetcher"), bySource: map[fetcherKey]*fetcher{}}
}

// fetcherKey names a fetcher: its leader and its index among that leader's.
type fetcherKey struct {
	source int32
	index  int
}

// fetcherIndex is the fetcher of tp among n, as Kafka picks it:
// abs(31 * topic.hashCode() + partition) % n, with Java's String.hashCode.
func fetcherIndex(tp storage.TopicPartition, n int) int {
	if n <= 1 {
		return 0
	}
	var h int32
	for _, r := range tp.Topic {
		if r > 0xffff { // a UTF-16 surrogate pair, as Java hashes it
			r -= 0x10000
			h = 31*h + int32(0xd800+(r>>10))
			h = 31*h + int32(0xdc00+(r&0x3ff))
			continue
		}
		h = 31*h + int32(r)
	}
	v := 31*h + tp.Partition
	if v == -1<<31 {
		v = 0 // Kafka's Utils.abs
	} else if v < 0 {
		v = -v
	}
	return int(v) % n
}

// update makes the fetchers follow exactly targets: partitions whose leader
// or epoch changed start again (with truncation) on the right fetcher;
// fetchers left without partitions stop.
func (r *replicaFetchers) update(targets map[storage.TopicPartition]followTarget) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	// num.replica.fetchers is dynamic: with a new value, every partition
	// whose fetcher index changes moves (from its log end, after the
	// truncation check) and the fetchers left without partitions stop.
	n := r.b.numReplicaFetchers()
	if r.n != 0 && n != r.n {
		r.log.Info("num.replica.fetchers changed: partitions move between fetchers", "from", r.n, "to", n)
	}
	r.n = n
	for key, f := range r.bySource {
		f.mu.Lock()
		for tp, st := range f.parts {
			t, ok := targets[tp]
			if !ok || t.leader != key.source || fetcherIndex(tp, n) != key.index || t.epoch != st.epoch || t.p != st.p {
				delete(f.parts, tp)
			}
		}
		f.mu.Unlock()
	}
	for tp, t := range targets {
		key := fetcherKey{t.leader, fetcherIndex(tp, n)}
		f := r.bySource[key]
		if f == nil {
			f = newFetcher(r, t.leader)
			r.bySource[key] = f
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				f.run()
			}()
		}
		f.mu.Lock()
		if _, ok := f.parts[tp]; !ok {
			f.parts[tp] = &followState{p: t.p, epoch: t.epoch}
		}
		f.mu.Unlock()
		f.poke()
	}
	for src, f := range r.bySource {
		f.mu.Lock()
		empty := len(f.parts) == 0
		f.mu.Unlock()
		if empty {
			f.stop()
			delete(r.bySource, src)
		}
	}
}

// close stops every fetcher and waits for them.
func (r *replicaFetchers) close() {
	r.mu.Lock()
	r.closed = true
	for src, f := range r.bySource {
		f.stop()
		delete(r.bySource, src)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// followState is a partition on a fetcher.
type followState struct {
	p         *Partition
	epoch     int32
	truncated bool      // the divergent tail is gone: fetch
	retryAt   time.Time // after an error, wait until then
	// caughtUp: the last fetch brought the log to the leader's high
	// watermark (Kafka's isReplicaInSync): the follower's throttle no
	// longer holds it back.
	caughtUp bool
	// pos is the partition's position as the last request computed it,
	// valid while posOK: only this fetcher moves a followed log (its
	// answers, truncations and restarts clear posOK), so an idle
	// partition's position is not read from the log again on every
	// request. (Owned by the fetcher's goroutine and the workers it
	// waits for.)
	pos   fetchPosition
	posOK bool
}

// fetcher follows the partitions led by one broker.
type fetcher struct {
	r      *replicaFetchers
	source int32
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}

	mu    sync.Mutex
	parts map[storage.TopicPartition]*followState
	conn  *brokerConn

	// session is the fetch session with the leader (run's goroutine only).
	session fetchSession
	// Reused by run from one request to the next (run's goroutine only):
	// an idle follower of thousands of partitions polls twice a second.
	states          map[storage.TopicPartition]*followState
	truncate, fetch []storage.TopicPartition
	spare           map[storage.TopicPartition]fetchPosition // the map the next request's positions go in
}

// fetchSession is a follower's fetch session with its leader (KIP-227): its
// id (0: none), the epoch of the next request, and each partition's position
// as the leader last heard it.
type fetchSession struct {
	id    int32
	epoch int32
	sent  map[storage.TopicPartition]fetchPosition
}

// fetchPosition is what a follower's fetch says of a partition.
type fetchPosition struct {
	epoch     int32 // current leader epoch
	offset    int64 // fetch offset: the log end
	lastEpoch int32 // epoch of the last batch, -1: none
	logStart  int64
}

// nextSessionEpoch is the epoch after e (wrapping to 1, as Kafka's).
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

func newFetcher(r *replicaFetchers, source int32) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &fetcher{r: r, source: source, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		parts: map[storage.TopicPartition]*followState{}}
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// stop ends the fetcher (an in-flight request is aborted by closing its
// connection). r.mu should be held.
func (f *fetcher) stop() {
	f.cancel()
	f.mu.Lock()
	if f.conn != nil {
		f.conn.Close()
	}
	f.mu.Unlock()
}

// sleep waits d, returning early when woken or stopped.
func (f *fetcher) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-f.wake:
	case <-t.C:
	}
}

// current returns st when it is still the partition's follow state.
func (f *fetcher) current(tp storage.TopicPartition, st *followState) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[tp] == st
}

func (f *fetcher) run() {
	b := f.r.b
	log := f.r.log.With("leader", f.source)
	defer func() {
		f.mu.Lock()
		if f.conn != nil {
			f.conn.Close()
			f.conn = nil
		}
		f.mu.Unlock()
	}()
	var lastErr string
	for f.ctx.Err() == nil {
		// The follower's throttle: while its quota is exceeded, the
		// throttled partitions not caught up stay out of the fetch.
		var img *Image
		if b.followerQuota.active() && b.followerQuota.exceeded(b.now()) {
			img = b.Image()
		}
		held := false
		f.mu.Lock()
		conn := f.conn
		now := time.Now()
		truncate, fetch := f.truncate[:0], f.fetch[:0]
		var next time.Time
		if f.states == nil {
			f.states = make(map[storage.TopicPartition]*followState, len(f.parts))
		}
		states := f.states
		clear(states)
		for tp, st := range f.parts {
			states[tp] = st
			if now.Before(st.retryAt) {
				if next.IsZero() || st.retryAt.Before(next) {
					next = st.retryAt
				}
				continue
			}
			switch {
			case !st.truncated:
				truncate = append(truncate, tp)
			case img != nil && !st.caughtUp && img.isThrottled(tp, followerThrottled):
				held = true
			default:
				fetch = append(fetch, tp)
			}
		}
		f.mu.Unlock()
		f.truncate, f.fetch = truncate, fetch
		if len(truncate) == 0 && len(fetch) == 0 {
			wait := time.Second
			if held {
				wait = throttleRecheck
			}
			if !next.IsZero() {
				wait = min(wait, time.Until(next))
			}
			f.sleep(wait)
			continue
		}
		if conn == nil {
			addr, err := b.brokerAddr(f.source)
			if err == nil {
				conn, err = dialBroker(f.ctx, addr, b.clientID(), b.cfg.ReplicaSocketTimeout, b.cfg.InterBrokerAuth)
			}
			if err != nil {
				if msg := err.Error(); msg != lastErr {
					log.Warn("cannot reach the leader; retrying", "err", err, "every", b.cfg.ReplicaFetchBackoff)
					lastErr = msg
				}
				f.sleep(b.cfg.ReplicaFetchBackoff)
				continue
			}
			f.mu.Lock()
			if f.ctx.Err() != nil {
				f.mu.Unlock()
				conn.Close()
				return
			}
			f.conn = conn
			f.mu.Unlock()
			lastErr = ""
		}
		var err error
		if len(truncate) > 0 {
			err = f.truncateLogs(conn, truncate, states)
		} else {
			err = f.fetchRecords(conn, fetch, states)
		}
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			if msg := err.Error(); msg != lastErr {
				log.Warn("replica fetch failed; reconnecting", "err", err)
				lastErr = msg
			}
			f.mu.Lock()
			f.conn.Close()
			f.conn = nil
			f.mu.Unlock()
			f.sleep(b.cfg.ReplicaFetchBackoff)
		}
	}
}

// retry marks a partition to be retried after d.
func (f *fetcher) retry(st *followState, d time.Duration) {
	f.mu.Lock()
	st.retryAt = time.Now().Add(d)
	st.posOK = false
	f.mu.Unlock()
}

func (f *fetcher) setTruncated(st *followState, v bool) {
	f.mu.Lock()
	st.truncated = v
	st.retryAt = time.Time{}
	st.posOK = false
	f.mu.Unlock()
}

// notReady is how long a partition waits after the leader said it does
// not lead it (yet) at that epoch: it learns of its leadership at about the
// same time as this broker learns of it.
const notReady = 100 * time.Millisecond

// truncateLogs asks the leader where each partition's latest epoch ends
// (OffsetForLeaderEpoch) and cuts the log there (KIP-279: when the leader
// answers with an older epoch, also no further than where that epoch ends
// here).
func (f *fetcher) truncateLogs(conn *brokerConn, tps []storage.TopicPartition, states map[storage.TopicPartition]*followState) error {
	b := f.r.b
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 3
	req.ReplicaID = b.cfg.BrokerID
	byTopic := map[string]int{}
	asked := 0
	for _, tp := range tps {
		st := states[tp]
		l := st.p.log
		epoch, ok := l.LatestEpoch()
		if !ok {
			// No epochs: an empty log (nothing to cut) or one without
			// leader epochs, cut back to the high watermark.
			if err := st.p.truncateAsFollower(st.epoch, l.HighWatermark()); err != nil && !errors.Is(err, errStaleFollower) {
				f.r.log.Warn("truncate", "partition", tp.String(), "err", err)
			}
			f.setTruncated(st, true)
			continue
		}
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.CurrentLeaderEpoch = st.epoch
		rp.LeaderEpoch = epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		asked++
	}
	if asked == 0 {
		return nil
	}
	resp, err := conn.request(f.ctx, req, 0)
	if err != nil {
		return err
	}
	for _, rt := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		for _, rp := range rt.Partitions {
			tp := storage.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			st := states[tp]
			if st == nil || !f.current(tp, st) {
				continue
			}
			if rp.ErrorCode != 0 {
				f.partitionError(tp, st, rp.ErrorCode, "offset for leader epoch")
				continue
			}
			l := st.p.log
			to := rp.EndOffset
			mine, _ := l.LatestEpoch()
			switch {
			case rp.LeaderEpoch < 0 || rp.EndOffset < 0:
				// The leader knows no epoch at or below ours: keep only
				// what was committed.
				to = l.HighWatermark()
			case rp.LeaderEpoch < mine:
				if e, end := l.EndOffsetForEpoch(rp.LeaderEpoch); e == rp.LeaderEpoch && end < to {
					to = end
				}
			}
			to = min(to, l.LogEndOffset())
			if err := st.p.truncateAsFollower(st.epoch, to); err != nil {
				if !errors.Is(err, errStaleFollower) {
					f.r.log.Error("truncate", "partition", tp.String(), "to", to, "err", err)
					f.retry(st, f.r.b.cfg.ReplicaFetchBackoff)
				}
				continue
			}
			f.setTruncated(st, true)
		}
	}
	return nil
}

// fetchRecords sends one Fetch for the partitions and applies the response.
func (f *fetcher) fetchRecords(conn *brokerConn, tps []storage.TopicPartition, states map[storage.TopicPartition]*followState) error {
	b := f.r.b
	cfg := &b.cfg
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = cfg.BrokerID
	req.MaxWaitMillis = int32(cfg.ReplicaFetchWaitMax.Milliseconds())
	req.MinBytes = cfg.ReplicaFetchMinBytes
	req.MaxBytes = cfg.ReplicaFetchResponseMaxBytes
	// A fetch session with the leader (KIP-227): the first fetch sends
	// every partition and opens it; later ones send only the partitions
	// whose position changed, added or left, and the leader answers only
	// for partitions with news.
	incremental := f.session.id != 0
	req.SessionID, req.SessionEpoch = f.session.id, 0
	if incremental {
		req.SessionEpoch = f.session.epoch
	}
	want := f.spare
	if want == nil {
		want = make(map[storage.TopicPartition]fetchPosition, len(tps))
	}
	clear(want)
	f.spare = nil
	byTopic := map[string]int{}
	for _, tp := range tps {
		st := states[tp]
		pos := st.pos
		if !st.posOK {
			l := st.p.log
			pos = fetchPosition{epoch: st.epoch, offset: l.LogEndOffset(), lastEpoch: -1, logStart: l.LogStartOffset()}
			if e, ok := l.LatestEpoch(); ok {
				pos.lastEpoch = e
			}
			st.pos, st.posOK = pos, true
		}
		want[tp] = pos
		if incremental && f.session.sent[tp] == pos {
			continue
		}
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.CurrentLeaderEpoch = pos.epoch
		rp.FetchOffset = pos.offset
		rp.LastFetchedEpoch = pos.lastEpoch
		rp.LogStartOffset = pos.logStart
		rp.PartitionMaxBytes = cfg.ReplicaFetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	if incremental {
		forgotten := map[string]int{}
		for tp := range f.session.sent {
			if _, ok := want[tp]; ok {
				continue
			}
			i, ok := forgotten[tp.Topic]
			if !ok {
				i = len(req.ForgottenTopics)
				forgotten[tp.Topic] = i
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic = tp.Topic
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
		}
	}
	resp, err := conn.request(f.ctx, req, cfg.ReplicaFetchWaitMax)
	if err != nil {
		// Whether the leader saw this epoch is unknown: start over.
		f.session = fetchSession{}
		return err
	}
	fr := resp.(*kmsg.FetchResponse)
	switch fr.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code:
		// The leader restarted or evicted the session: a full fetch next.
		f.session = fetchSession{}
		return nil
	default:
		f.session = fetchSession{}
		return kerr.ErrorForCode(fr.ErrorCode)
	}
	switch {
	case fr.SessionID == 0:
		f.session = fetchSession{} // the leader keeps no session: full fetches
	case !incremental || fr.SessionID != f.session.id:
		f.spare = f.session.sent
		f.session = fetchSession{id: fr.SessionID, epoch: 1, sent: want}
	default:
		f.session.epoch = nextSessionEpoch(f.session.epoch)
		f.spare, f.session.sent = f.session.sent, want
	}
	var img *Image // for the follower's throttle
	if b.followerQuota.active() {
		img = b.Image()
	}
	type answer struct {
		tp storage.TopicPartition
		st *followState
		rp *kmsg.FetchResponseTopicPartition
	}
	var answers, newEpoch []answer
	for i := range fr.Topics {
		rt := &fr.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			tp := storage.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			st := states[tp]
			if st == nil || !f.current(tp, st) {
				continue
			}
			if rp.ErrorCode == 0 && startsNewEpoch(st.p.log, rp.RecordBatches) {
				newEpoch = append(newEpoch, answer{tp, st, rp})
				continue
			}
			answers = append(answers, answer{tp, st, rp})
		}
	}
	for _, a := range answers {
		f.applyAnswer(a.tp, a.st, a.rp, img)
	}
	// After a failover a fetch brings the first batch of a new leader
	// epoch for every partition that changed leader. Its append no longer
	// writes the leader-epoch checkpoint (storage.Log.syncEpochs), but a
	// topic with flush.messages=1 fsyncs every append, the checkpoint with
	// it: in parallel the file system commits those fsyncs together. (The
	// appends of different partitions are independent.)
	if len(newEpoch) < 2 {
		for _, a := range newEpoch {
			f.applyAnswer(a.tp, a.st, a.rp, img)
		}
		return nil
	}
	parallelDo(len(newEpoch), followerAppendWorkers, func(i int) {
		a := newEpoch[i]
		f.applyAnswer(a.tp, a.st, a.rp, img)
	})
	return nil
}

// startsNewEpoch reports whether batches (a fetch response's records for
// l) begin with a leader epoch newer than any l has.
func startsNewEpoch(l *storage.Log, batches []byte) bool {
	// A v2 batch: base offset (8), length (4), partition leader epoch (4),
	// magic (1).
	if len(batches) < 17 || batches[16] != 2 {
		return false
	}
	epoch := int32(binary.BigEndian.Uint32(batches[12:16]))
	latest, ok := l.LatestEpoch()
	return epoch >= 0 && (!ok || epoch > latest)
}

// followerAppendWorkers bounds the partitions of one fetch response
// appended at once.
const followerAppendWorkers = 32

// applyAnswer applies one partition of a fetch response: an error, a
// divergence to truncate, or records to append with the leader's high
// watermark and log start. Safe to run for several partitions at once.
func (f *fetcher) applyAnswer(tp storage.TopicPartition, st *followState, rp *kmsg.FetchResponseTopicPartition, img *Image) {
	b := f.r.b
	cfg := &b.cfg
	st.posOK = false // whatever the answer does to the log
	if rp.ErrorCode != 0 {
		if rp.ErrorCode == kerr.OffsetOutOfRange.Code {
			f.outOfRange(tp, st, rp.LogStartOffset)
			return
		}
		f.partitionError(tp, st, rp.ErrorCode, "fetch")
		return
	}
	if rp.DivergingEpoch.Epoch >= 0 && rp.DivergingEpoch.EndOffset >= 0 {
		// The leader saw our last epoch diverge (KIP-595): cut
		// where it says, no further than our own end of that epoch.
		to := rp.DivergingEpoch.EndOffset
		if e, end := st.p.log.EndOffsetForEpoch(rp.DivergingEpoch.Epoch); e == rp.DivergingEpoch.Epoch && end < to {
			to = end
		}
		if err := st.p.truncateAsFollower(st.epoch, to); err != nil && !errors.Is(err, errStaleFollower) {
			f.r.log.Error("truncate", "partition", tp.String(), "to", to, "err", err)
			f.retry(st, cfg.ReplicaFetchBackoff)
		}
		return
	}
	records := record.WholeBatches(rp.RecordBatches)
	if err := st.p.appendAsFollower(st.epoch, records, rp.HighWatermark, rp.LogStartOffset); err != nil {
		if errors.Is(err, errStaleFollower) {
			return
		}
		// Records that do not follow the log end: find the
		// divergence again.
		f.r.log.Warn("append as follower failed; truncating again", "partition", tp.String(), "err", err)
		f.setTruncated(st, false)
		f.retry(st, cfg.ReplicaFetchBackoff)
		return
	}
	st.p.leaderHW.Store(rp.HighWatermark)
	caughtUp := rp.HighWatermark <= st.p.log.LogEndOffset()
	f.mu.Lock()
	st.caughtUp = caughtUp
	f.mu.Unlock()
	if img != nil && img.isThrottled(tp, followerThrottled) {
		b.followerQuota.record(b.now(), len(records))
	}
}

// outOfRange handles OFFSET_OUT_OF_RANGE: behind the leader's log start,
// start over there; otherwise the log runs past the leader's (an unclean
// election), so truncate again.
func (f *fetcher) outOfRange(tp storage.TopicPartition, st *followState, leaderLogStart int64) {
	l := st.p.log
	if leaderLogStart >= 0 && l.LogEndOffset() < leaderLogStart {
		if err := st.p.restartAsFollower(st.epoch, leaderLogStart); err != nil && !errors.Is(err, errStaleFollower) {
			f.r.log.Error("restart log", "partition", tp.String(), "at", leaderLogStart, "err", err)
			f.retry(st, f.r.b.cfg.ReplicaFetchBackoff)
		}
		return
	}
	f.setTruncated(st, false)
}

// partitionError backs a partition off after an error from the leader: not
// (yet) the leader at our epoch, or a stale epoch — this broker's metadata
// will move it — or anything else, logged.
func (f *fetcher) partitionError(tp storage.TopicPartition, st *followState, code int16, what string) {
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code,
		kerr.UnknownTopicOrPartition.Code, kerr.LeaderNotAvailable.Code:
		f.retry(st, notReady)
	default:
		f.r.log.Warn(what+" error from the leader", "partition", tp.String(), "err", kerr.ErrorForCode(code))
		f.retry(st, f.r.b.cfg.ReplicaFetchBackoff)
	}
}
