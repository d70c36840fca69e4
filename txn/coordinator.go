package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/record"
)

// Node is a broker's id and address (FindCoordinator's answer).
type Node struct {
	ID   int32
	Host string
	Port int32
}

// Backend is what the coordinator needs of the broker. BrokerBackend
// implements it over package broker.
type Backend interface {
	// EnsureTopic creates __transaction_state unless it exists and waits
	// (until ctx is done) for its leaders.
	EnsureTopic(ctx context.Context) error
	// Leader is the broker leading __transaction_state-partition, with its
	// address on listener; false when there is none.
	Leader(partition int32, listener string) (Node, bool)
	// Append appends one batch to __transaction_state-partition as its
	// leader in leaderEpoch and returns once it is committed (acks=all).
	// A *kerr.Error is mapped as Kafka maps append errors.
	Append(ctx context.Context, partition, leaderEpoch int32, batch []byte) error
	// Read returns whole batches of __transaction_state-partition from
	// offset (or the log start), the offset read from and the log end.
	Read(ctx context.Context, partition int32, offset int64, maxBytes int32) (batches []byte, from, logEnd int64, err error)
	// AllocateProducerID hands out a producer id never handed out before.
	AllocateProducerID(ctx context.Context) (int64, error)
	// WriteTxnMarkers sends the marker to the leader of each of its
	// partitions and returns each partition's error code.
	WriteTxnMarkers(ctx context.Context, m kmsg.WriteTxnMarkersRequestMarker) map[TopicPartition]int16
	// PartitionExists reports whether topic has partition.
	PartitionExists(topic string, partition int32) bool
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("txn: coordinator closed")

// Options configure New.
type Options struct {
	Config  Config
	Backend Backend
	Logger  *slog.Logger     // nil: discard
	Now     func() time.Time // nil: time.Now
}

// Coordinator is the transaction coordinator of one broker. Requests run
// on the connections' goroutines under one mutex for the state; appends to
// __transaction_state run outside it, with the transaction's pending
// transition set so that no other change of that transaction interleaves.
// Goroutines it starts (loads, marker senders, the timers) stop with Close
// or when their partition is resigned.
type Coordinator struct {
	cfg     Config
	log     *slog.Logger
	backend Backend
	now     func() time.Time

	mu     sync.Mutex
	parts  map[int32]*partState
	closed bool

	bg       context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	createMu sync.Mutex

	commits, aborts, timedOut atomic.Int64
}

// partState is one __transaction_state partition this broker leads.
type partState struct {
	id     int32
	epoch  int32 // the partition's leader epoch: the coordinator epoch
	loaded bool
	txns   map[string]*metadata
	ctx    context.Context // cancelled on resignation
	cancel context.CancelFunc
}

// New starts a coordinator; it coordinates nothing until BecomeLeader.
func New(opts Options) (*Coordinator, error) {
	if opts.Backend == nil {
		return nil, errors.New("txn: no backend")
	}
	cfg := opts.Config.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	bg, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, log: log, backend: opts.Backend, now: now,
		parts: make(map[int32]*partState), bg: bg, cancel: cancel}
	c.wg.Add(1)
	go c.timers()
	return c, nil
}

// Close stops every goroutine of the coordinator and waits for them.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.closed = true
	for p, ps := range c.parts {
		ps.cancel()
		delete(c.parts, p)
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// go runs fn on a goroutine Close waits for; false after Close.
func (c *Coordinator) spawn(fn func()) bool {
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// ---- leadership ----

// BecomeLeader makes this broker the coordinator of the transactional ids
// of __transaction_state-partition at leaderEpoch: the partition is loaded
// (COORDINATOR_LOAD_IN_PROGRESS meanwhile), then its transactions preparing
// a commit or abort are completed. Repeating it for the same epoch does
// nothing.
func (c *Coordinator) BecomeLeader(partition, leaderEpoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if ps, ok := c.parts[partition]; ok {
		if ps.epoch == leaderEpoch {
			return
		}
		ps.cancel()
	}
	ctx, cancel := context.WithCancel(c.bg)
	ps := &partState{id: partition, epoch: leaderEpoch, txns: make(map[string]*metadata), ctx: ctx, cancel: cancel}
	c.parts[partition] = ps
	c.spawn(func() { c.load(ps) })
}

// Resign drops the partition's transactions: their requests get
// NOT_COORDINATOR and their marker senders stop; the next leader resumes.
func (c *Coordinator) Resign(partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps, ok := c.parts[partition]; ok {
		ps.cancel()
		delete(c.parts, partition)
	}
}

// load replays the partition and installs its transactions.
func (c *Coordinator) load(ps *partState) {
	backoff := 100 * time.Millisecond
	for {
		txns, err := c.readPartition(ps.ctx, ps.id)
		if err == nil {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.parts[ps.id] != ps {
				return
			}
			ps.txns, ps.loaded = txns, true
			for _, md := range txns {
				if md.state == PrepareCommit || md.state == PrepareAbort {
					md := md
					c.spawn(func() { c.sendMarkers(ps, md, md.state == PrepareCommit) })
				}
			}
			c.log.Info("loaded __transaction_state partition", "partition", ps.id, "epoch", ps.epoch, "transactional_ids", len(txns))
			return
		}
		if ps.ctx.Err() != nil {
			return
		}
		c.log.Warn("loading __transaction_state partition failed; retrying", "partition", ps.id, "err", err)
		select {
		case <-ps.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// readPartition reads a partition from its log start to its end: the last
// value of each id wins, a tombstone removes it.
func (c *Coordinator) readPartition(ctx context.Context, p int32) (map[string]*metadata, error) {
	txns := make(map[string]*metadata)
	var off int64
	for {
		b, from, end, err := c.backend.Read(ctx, p, off, c.cfg.LoadBufferSize)
		if err != nil {
			return nil, err
		}
		off = max(off, from)
		if off >= end {
			return txns, nil
		}
		next := off
		err = record.ForEachBatch(b, func(h *record.BatchHeader, batch []byte) error {
			next = max(next, h.NextOffset())
			if h.Control() {
				return nil
			}
			return record.Records(batch, func(h *record.BatchHeader, r *record.Record) error {
				if h.BaseOffset+int64(r.OffsetDelta) < off {
					return nil
				}
				applyRecord(txns, r.Key, r.Value, c.log)
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("__transaction_state-%d at %d: %w", p, off, err)
		}
		if next <= off {
			return nil, fmt.Errorf("__transaction_state-%d: no batch at %d below the log end %d", p, off, end)
		}
		off = next
	}
}

// applyRecord folds one __transaction_state record into txns; a record
// that does not decode is logged and skipped.
func applyRecord(txns map[string]*metadata, key, value []byte, log *slog.Logger) {
	id, err := decodeKey(key)
	if err != nil {
		if !errors.Is(err, errUnknownVersion) {
			log.Warn("skipping a __transaction_state record", "err", err)
		}
		return
	}
	if value == nil {
		delete(txns, id)
		return
	}
	md, err := decodeValue(id, value)
	if err != nil {
		log.Warn("skipping a __transaction_state record", "err", err)
		return
	}
	txns[id] = md
}

// ---- shared request steps ----

// lookup finds the partition of id. Lock c.mu.
func (c *Coordinator) lookup(id string) (*partState, int16) {
	ps, ok := c.parts[PartitionFor(id, c.cfg.NumPartitions)]
	if !ok {
		return nil, kerr.NotCoordinator.Code
	}
	if !ps.loaded {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return ps, 0
}

// begin starts md's transition to n.state. Lock c.mu.
func begin(md, n *metadata) int16 {
	if md.pending != noState {
		return kerr.ConcurrentTransactions.Code
	}
	if !canTransit(md.state, n.state) {
		return kerr.InvalidTxnState.Code
	}
	md.pending = n.state
	return 0
}

// write appends n (md's pending transition) and installs it once
// committed; md.pending is cleared either way. Call without c.mu.
func (c *Coordinator) write(ctx context.Context, ps *partState, md, n *metadata) int16 {
	value := encodeValue(n)
	if n.state == Dead {
		value = nil
	}
	batch, err := record.BuildBatch(record.BatchOptions{
		PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: n.updateMs,
	}, []record.Record{{Key: encodeKey(n.id), Value: value}})
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
		err = c.backend.Append(wctx, ps.id, ps.epoch, batch)
		cancel()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	md.pending = noState
	if c.parts[ps.id] != ps {
		return kerr.NotCoordinator.Code
	}
	if err != nil {
		c.log.Warn("writing __transaction_state failed", "transactional_id", n.id, "state", n.state, "err", err)
		return appendErrorCode(err)
	}
	md.install(n)
	if n.state == Dead && ps.txns[n.id] == md {
		delete(ps.txns, n.id)
	}
	return 0
}

// appendErrorCode maps an append failure as Kafka's coordinator does.
func appendErrorCode(err error) int16 {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.NotCoordinator.Code
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError, kerr.NotCoordinator:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		return kerr.UnknownServerError.Code
	}
	return ke.Code
}

// ---- InitProducerId ----

// InitProducerID answers InitProducerId for a transactional id (the
// caller handles a null id): a new id gets a producer id at epoch 0; a
// known one is bumped (epoch+1) after its open transaction, if any, is
// aborted (the first call then answers CONCURRENT_TRANSACTIONS), which
// fences the previous producer. producerID and epoch are the KIP-360
// expectation (-1, -1: none).
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, producerID int64, epoch int16) (int64, int16, int16) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest.Code
	}
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	if (producerID == -1) != (epoch == -1) {
		return -1, -1, kerr.InvalidRequest.Code
	}
	var newPID int64 = -1
	for {
		c.mu.Lock()
		ps, code := c.lookup(id)
		if code != 0 {
			c.mu.Unlock()
			return -1, -1, code
		}
		md := ps.txns[id]
		needPID := md == nil || (epochExhausted(md.epoch) && md.pending == noState &&
			(md.state == Empty || md.state == CompleteCommit || md.state == CompleteAbort))
		if needPID && newPID < 0 {
			c.mu.Unlock()
			pid, err := c.backend.AllocateProducerID(ctx)
			if err != nil {
				c.log.Error("allocate producer id", "err", err)
				return -1, -1, kerr.CoordinatorNotAvailable.Code
			}
			newPID = pid
			continue
		}
		if md == nil {
			md = &metadata{id: id, producerID: newPID, lastProducerID: -1, epoch: -1, lastEpoch: -1,
				timeoutMs: timeoutMs, state: Empty, pending: noState,
				partitions: make(map[TopicPartition]struct{}), startMs: -1, updateMs: c.nowMs()}
			ps.txns[id] = md
			newPID = -1
		}
		n, code, abort := c.prepareInit(md, timeoutMs, producerID, epoch, newPID)
		if abort {
			c.fenceAndAbortLocked(ps, md, false)
		}
		if code != 0 || n == nil {
			c.mu.Unlock()
			return -1, -1, code
		}
		c.mu.Unlock()
		if code := c.write(ctx, ps, md, n); code != 0 {
			return -1, -1, code
		}
		c.log.Debug("InitProducerId", "transactional_id", id, "producer_id", n.producerID, "epoch", n.epoch, "expected_producer_id", producerID, "expected_epoch", epoch)
		return n.producerID, n.epoch, 0
	}
}

// prepareInit decides InitProducerId for md (TransactionCoordinator
// handleInitProducerId). It returns the transition to write, or an error
// code; abort says md's open transaction must be fenced and aborted first.
// Lock c.mu.
func (c *Coordinator) prepareInit(md *metadata, timeoutMs int32, expPID int64, expEpoch int16, newPID int64) (*metadata, int16, bool) {
	if expPID >= 0 && !(md.epoch == -1 || expPID == md.producerID || (expPID == md.lastProducerID && epochExhausted(md.epoch))) {
		return nil, kerr.ProducerFenced.Code, false
	}
	if md.pending != noState {
		return nil, kerr.ConcurrentTransactions.Code, false
	}
	switch md.state {
	case PrepareCommit, PrepareAbort:
		return nil, kerr.ConcurrentTransactions.Code, false
	case Ongoing:
		return nil, kerr.ConcurrentTransactions.Code, true
	case Empty, CompleteCommit, CompleteAbort:
	default:
		return nil, kerr.ConcurrentTransactions.Code, false
	}
	n := md.clone()
	n.state, n.timeoutMs, n.updateMs, n.startMs = Empty, timeoutMs, c.nowMs(), -1
	clear(n.partitions)
	switch {
	case epochExhausted(md.epoch) && newPID >= 0:
		// Rotate to a new producer id (epoch exhausted).
		n.lastProducerID, n.producerID, n.epoch = md.producerID, newPID, 0
		if expEpoch >= 0 {
			n.lastEpoch = md.epoch
		} else {
			n.lastEpoch = -1
		}
	case expEpoch < 0:
		n.epoch, n.lastEpoch = md.epoch+1, -1
	case md.epoch == -1 || expEpoch == md.epoch:
		n.epoch, n.lastEpoch = md.epoch+1, md.epoch
	case expEpoch == md.lastEpoch:
		// A retry of the InitProducerId that already bumped: answer the
		// current epoch again.
	default:
		return nil, kerr.ProducerFenced.Code, false
	}
	if code := begin(md, n); code != 0 {
		return nil, code, false
	}
	return n, 0, false
}

// fenceAndAbortLocked bumps md's epoch (the open transaction's producer is
// fenced: its requests get PRODUCER_FENCED) and aborts the transaction in
// the background. timedOut forgets the last epoch, as Kafka does for a
// transaction aborted by its timeout. Lock c.mu.
func (c *Coordinator) fenceAndAbortLocked(ps *partState, md *metadata, timedOut bool) {
	if md.pending != noState || md.state != Ongoing {
		return
	}
	if md.epoch < 0x7fff {
		md.epoch++
	}
	if timedOut {
		md.lastEpoch = -1
	}
	n := md.clone()
	n.state, n.updateMs = PrepareAbort, c.nowMs()
	if begin(md, n) != 0 {
		return
	}
	c.spawn(func() {
		if code := c.write(ps.ctx, ps, md, n); code != 0 {
			return // the timer or the next InitProducerId tries again
		}
		c.sendMarkers(ps, md, false)
	})
}

// ---- AddPartitionsToTxn, AddOffsetsToTxn ----

// AddPartitions adds partitions to id's transaction (starting one in Empty
// or Complete*). codes has the error of each partition: when one partition
// is refused the others get OPERATION_NOT_ATTEMPTED, as in Kafka.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, producerID int64, epoch int16, parts []TopicPartition) map[TopicPartition]int16 {
	codes := make(map[TopicPartition]int16, len(parts))
	all := func(code int16) map[TopicPartition]int16 {
		for _, tp := range parts {
			codes[tp] = code
		}
		return codes
	}
	var bad bool
	for _, tp := range parts {
		if !c.backend.PartitionExists(tp.Topic, tp.Partition) {
			codes[tp], bad = kerr.UnknownTopicOrPartition.Code, true
		}
	}
	if bad {
		for _, tp := range parts {
			if codes[tp] == 0 {
				codes[tp] = kerr.OperationNotAttempted.Code
			}
		}
		return codes
	}
	return all(c.addPartitions(ctx, id, producerID, epoch, parts))
}

// VerifyPartitions answers AddPartitionsToTxn v4+ VerifyOnly (KIP-890): NONE
// for each partition in the producer's Ongoing transaction,
// TRANSACTION_ABORTABLE for the others; coordinator, producer id and epoch
// errors on all.
func (c *Coordinator) VerifyPartitions(id string, producerID int64, epoch int16, parts []TopicPartition) map[TopicPartition]int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	codes := make(map[TopicPartition]int16, len(parts))
	ps, code := c.lookup(id)
	var md *metadata
	if code == 0 {
		md = ps.txns[id]
		switch {
		case md == nil || md.producerID != producerID:
			code = kerr.InvalidProducerIDMapping.Code
		case md.epoch != epoch:
			code = kerr.ProducerFenced.Code
		}
	}
	for _, tp := range parts {
		switch _, in := md.partitionsOf()[tp]; {
		case code != 0:
			codes[tp] = code
		case md.state == Ongoing && in:
			codes[tp] = 0
		default:
			codes[tp] = kerr.TransactionAbortable.Code
		}
	}
	return codes
}

// partitionsOf is md's partitions; nil for a nil md.
func (md *metadata) partitionsOf() map[TopicPartition]struct{} {
	if md == nil {
		return nil
	}
	return md.partitions
}

// AddOffsets adds the group's __consumer_offsets partition to id's
// transaction (AddOffsetsToTxn).
func (c *Coordinator) AddOffsets(ctx context.Context, id string, producerID int64, epoch int16, groupID string) int16 {
	tp := TopicPartition{"__consumer_offsets", group.PartitionFor(groupID, c.cfg.OffsetsPartitions)}
	return c.addPartitions(ctx, id, producerID, epoch, []TopicPartition{tp})
}

func (c *Coordinator) addPartitions(ctx context.Context, id string, producerID int64, epoch int16, parts []TopicPartition) int16 {
	c.mu.Lock()
	ps, code := c.lookup(id)
	if code != 0 {
		c.mu.Unlock()
		return code
	}
	md := ps.txns[id]
	switch {
	case md == nil || md.producerID != producerID:
		code = kerr.InvalidProducerIDMapping.Code
	case md.epoch != epoch:
		code = kerr.ProducerFenced.Code
	case md.pending != noState || md.state == PrepareCommit || md.state == PrepareAbort:
		code = kerr.ConcurrentTransactions.Code
	}
	if code != 0 {
		c.mu.Unlock()
		return code
	}
	if md.state == Ongoing {
		have := true
		for _, tp := range parts {
			if _, ok := md.partitions[tp]; !ok {
				have = false
				break
			}
		}
		if have {
			c.mu.Unlock()
			return 0
		}
	}
	n := md.clone()
	now := c.nowMs()
	if md.state != Ongoing {
		n.startMs = now
		clear(n.partitions)
	}
	n.state, n.updateMs = Ongoing, now
	for _, tp := range parts {
		n.partitions[tp] = struct{}{}
	}
	if code := begin(md, n); code != 0 {
		c.mu.Unlock()
		return code
	}
	c.mu.Unlock()
	return c.write(ctx, ps, md, n)
}

// ---- EndTxn ----

// EndTxn commits or aborts id's transaction: once PrepareCommit or
// PrepareAbort is written it answers NONE, and the markers go out in the
// background. A retry after the end answers NONE (same result) or
// CONCURRENT_TRANSACTIONS (still preparing); the other result, or no
// transaction, is INVALID_TXN_STATE.
func (c *Coordinator) EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit bool) int16 {
	c.mu.Lock()
	ps, code := c.lookup(id)
	if code != 0 {
		c.mu.Unlock()
		return code
	}
	md := ps.txns[id]
	switch {
	case md == nil || md.producerID != producerID:
		code = kerr.InvalidProducerIDMapping.Code
	case md.epoch != epoch:
		code = kerr.ProducerFenced.Code
	case md.pending != noState:
		code = kerr.ConcurrentTransactions.Code
	}
	if code != 0 {
		c.mu.Unlock()
		return code
	}
	var n *metadata
	switch md.state {
	case Ongoing:
		n = md.clone()
		n.state, n.updateMs = PrepareAbort, c.nowMs()
		if commit {
			n.state = PrepareCommit
		}
		code = begin(md, n)
	case CompleteCommit, CompleteAbort:
		if (md.state == CompleteCommit) != commit {
			code = kerr.InvalidTxnState.Code
		}
	case PrepareCommit, PrepareAbort:
		code = kerr.ConcurrentTransactions.Code
		if (md.state == PrepareCommit) != commit {
			code = kerr.InvalidTxnState.Code
		}
	default:
		code = kerr.InvalidTxnState.Code
	}
	state := md.state
	c.mu.Unlock()
	if code != 0 {
		c.log.Debug("EndTxn refused", "transactional_id", id, "state", state, "commit", commit, "code", code)
	}
	if n == nil || code != 0 {
		return code
	}
	if code := c.write(ctx, ps, md, n); code != 0 {
		return code
	}
	c.mu.Lock()
	c.spawn(func() { c.sendMarkers(ps, md, commit) })
	c.mu.Unlock()
	return 0
}

// sendMarkers writes md's markers to every partition of its transaction,
// retrying until each is written (or its partition is gone), then writes
// CompleteCommit or CompleteAbort. It stops when ps is resigned: the next
// coordinator resends them.
func (c *Coordinator) sendMarkers(ps *partState, md *metadata, commit bool) {
	c.mu.Lock()
	remaining := md.sortedPartitions()
	pid, epoch := md.producerID, md.epoch
	c.mu.Unlock()
	backoff := c.cfg.MarkerRetryBackoff
	for len(remaining) > 0 {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, ps.epoch
		for _, tp := range remaining {
			if n := len(m.Topics); n > 0 && m.Topics[n-1].Topic == tp.Topic {
				m.Topics[n-1].Partitions = append(m.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
			m.Topics = append(m.Topics, t)
		}
		codes := c.backend.WriteTxnMarkers(ps.ctx, m)
		if ps.ctx.Err() != nil {
			return
		}
		left := remaining[:0]
		for _, tp := range remaining {
			code, ok := codes[tp]
			switch {
			case ok && code == 0:
			case ok && (code == kerr.UnsupportedForMessageFormat.Code || code == kerr.UnsupportedVersion.Code):
				c.log.Warn("transaction marker not supported; skipping the partition", "transactional_id", md.id, "topic", tp.Topic, "partition", tp.Partition)
			case ok && (code == kerr.InvalidProducerEpoch.Code || code == kerr.TransactionCoordinatorFenced.Code):
				// A newer epoch or coordinator owns the producer now:
				// this coordinator's markers stop (Kafka's handling).
				c.log.Warn("transaction markers fenced", "transactional_id", md.id, "topic", tp.Topic, "partition", tp.Partition, "code", code)
				return
			case !c.backend.PartitionExists(tp.Topic, tp.Partition):
				// The topic was deleted: nothing to mark.
			default:
				left = append(left, tp)
			}
		}
		remaining = left
		if len(remaining) == 0 {
			break
		}
		select {
		case <-ps.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.cfg.MarkerRetryBackoffMx)
	}
	// Every marker is written: CompleteCommit or CompleteAbort.
	for {
		c.mu.Lock()
		if c.parts[ps.id] != ps || md.state != PrepareCommit && md.state != PrepareAbort {
			c.mu.Unlock()
			return
		}
		n := md.clone()
		n.state, n.updateMs = CompleteAbort, c.nowMs()
		if commit {
			n.state = CompleteCommit
		}
		clear(n.partitions)
		code := begin(md, n)
		c.mu.Unlock()
		if code == 0 {
			code = c.write(ps.ctx, ps, md, n)
		}
		if code == 0 {
			if commit {
				c.commits.Add(1)
			} else {
				c.aborts.Add(1)
			}
			return
		}
		if code == kerr.NotCoordinator.Code {
			return
		}
		select {
		case <-ps.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.cfg.MarkerRetryBackoffMx)
	}
}

// ---- timers ----

func (c *Coordinator) timers() {
	defer c.wg.Done()
	abort := time.NewTicker(c.cfg.AbortTimedOutEvery)
	defer abort.Stop()
	expire := time.NewTicker(c.cfg.RemoveExpiredEvery)
	defer expire.Stop()
	for {
		select {
		case <-c.bg.Done():
			return
		case <-abort.C:
			c.AbortTimedOut()
		case <-expire.C:
			c.ExpireIDs()
		}
	}
}

// AbortTimedOut fences and aborts every Ongoing transaction open longer
// than its timeout (run every
// transaction.abort.timed.out.transaction.cleanup.interval.ms).
func (c *Coordinator) AbortTimedOut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	for _, ps := range c.parts {
		if !ps.loaded {
			continue
		}
		for _, md := range ps.txns {
			if md.state == Ongoing && md.pending == noState && md.startMs+int64(md.timeoutMs) < now {
				c.log.Info("aborting a timed-out transaction", "transactional_id", md.id, "producer_id", md.producerID, "epoch", md.epoch)
				c.timedOut.Add(1)
				c.fenceAndAbortLocked(ps, md, true)
			}
		}
	}
}

// ExpireIDs removes transactional ids with no transaction that were not
// used for transactional.id.expiration.ms (a tombstone each).
func (c *Coordinator) ExpireIDs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	for _, ps := range c.parts {
		if !ps.loaded {
			continue
		}
		for _, md := range ps.txns {
			idle := md.state == Empty || md.state == CompleteCommit || md.state == CompleteAbort
			if !idle || md.pending != noState || md.updateMs+c.cfg.IDExpiration.Milliseconds() > now {
				continue
			}
			n := md.clone()
			n.state, n.updateMs = Dead, now
			if begin(md, n) != 0 {
				continue
			}
			ps, md := ps, md
			c.spawn(func() {
				if code := c.write(ps.ctx, ps, md, n); code == 0 {
					c.log.Info("transactional id expired", "transactional_id", md.id)
				}
			})
		}
	}
}
