package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

// env is what a Log needs from its Manager.
type env struct {
	logger *slog.Logger
	now    func() time.Time
	// rolled is told about a log that rolled so its old segments are flushed
	// soon, off the append path (Kafka schedules the same flush).
	rolled func(*Log)
	// maxDecompressed bounds what a compressed producer batch may expand
	// to (ManagerConfig.MaxDecompressedBatchBytes).
	maxDecompressed int64
	// fs is the filesystem every file of the log goes through
	// (ManagerConfig.FS).
	fs vfs.FS
}

func (e *env) nowMs() int64 { return e.now().UnixMilli() }

// decompressLimit is maxDecompressed, or its default when unset.
func (e *env) decompressLimit() int64 {
	if e.maxDecompressed > 0 {
		return e.maxDecompressed
	}
	return record.DefaultMaxDecompressedBatchBytes
}

// Log is one partition's log. Safe for concurrent use: appends, truncation,
// roll and retention are serialised by mu (one writer); Read, offsets and
// lookups take no lock on the data path.
type Log struct {
	tp  TopicPartition
	dir string
	env *env

	mu      sync.Mutex // the writer lock
	cleanMu sync.Mutex // one cleaning at a time; taken before mu
	cfg     atomic.Pointer[logConfig]
	segs    atomic.Pointer[[]*segment] // ascending base offsets; copy on write under mu

	logStart atomic.Int64
	hw       atomic.Int64
	// firstUnstable is the first offset of the earliest open or
	// unreplicated transaction (math.MaxInt64: none), published by the
	// writer for LastStableOffset; unreplicated is how many ended
	// transactions wait for the high watermark (SetHighWatermark takes mu
	// only then). aborted counts the entries of every segment's
	// transaction index (0: fetches skip the lookup).
	firstUnstable atomic.Int64
	unreplicated  atomic.Int32
	aborted       atomic.Int64
	recoveryPoint atomic.Int64 // everything below is fsynced
	firstDirty    atomic.Int64 // cleaner checkpoint; -1 = log start
	lastUse       atomic.Int64 // unix nanos
	closed        atomic.Bool

	// group commit (syncTo): the fsync running now, if any, and how many
	// rounds ran
	syncMu     sync.Mutex
	syncing    *syncRound
	syncRounds atomic.Int64

	// writer state (mu)
	truncations int64 // truncations so far: a sync round spanning one does not move the recovery point
	unflushed   int64
	lastFlushMs int64
	producers   *producerStates
	pend        []pendingProducer
	scratch     []byte // recompression output
	deleted     bool

	epochs *leaderEpochCache

	// onRetention is called after retention moved the log start (nil:
	// nothing to tell).
	onRetention atomic.Pointer[func()]
}

// logConfig is a LogConfig with its parsed forms cached for the append path.
type logConfig struct {
	LogConfig
	codec         record.Compression
	keepCodec     bool
	logAppendTime bool
	compact       bool
	deletes       bool
	maxIdx        int
}

func newLogConfig(c LogConfig) (*logConfig, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	lc := &logConfig{LogConfig: c}
	lc.codec, lc.keepCodec, _ = record.ParseCompressionType(c.CompressionType)
	lc.logAppendTime = c.MessageTimestampType == "LogAppendTime"
	lc.compact, lc.deletes, _ = parseCleanupPolicy(c.Cleanup)
	lc.maxIdx = max(int(c.SegmentIndexBytes), minSegmentIndexBytes)
	return lc, nil
}

// AppendOrigin says who appends as leader, which decides what is checked
// (Kafka's AppendOrigin).
type AppendOrigin int8

const (
	// OriginClient: a producer. Sequences and duplicates are checked, and
	// control batches are refused.
	OriginClient AppendOrigin = iota
	// OriginCoordinator: the group coordinator (transactional offset
	// commits, whose batches all start at sequence 0) and end-transaction
	// markers. Only producer and coordinator epochs are checked.
	OriginCoordinator
)

// AppendOptions are a leader append's options.
type AppendOptions struct {
	Origin AppendOrigin
	// Admit (nil: none) is asked about every batch; see Admit.
	Admit Admit
}

// AppendInfo describes an append.
type AppendInfo struct {
	FirstOffset, LastOffset int64 // offsets assigned
	LogAppendTime           int64 // -1 unless LogAppendTime
	LogStartOffset          int64
	RecordCount             int32
	Size                    int
}

// TopicPartition names the log.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the topic configs in force.
func (l *Log) Config() LogConfig { return l.cfg.Load().LogConfig }

// SetConfig changes the topic configs. An invalid config is refused and
// logged; the previous one stays (SetConfigChecked returns the error).
func (l *Log) SetConfig(c LogConfig) {
	if err := l.SetConfigChecked(c); err != nil {
		l.env.logger.Error("refusing invalid log config", "partition", l.tp.String(), "err", err)
	}
}

// SetConfigChecked is SetConfig returning the validation error.
func (l *Log) SetConfigChecked(c LogConfig) error {
	lc, err := newLogConfig(c)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.cfg.Store(lc)
	l.mu.Unlock()
	return nil
}

func (l *Log) segments() []*segment { return *l.segs.Load() }
func (l *Log) active() *segment {
	s := l.segments()
	return s[len(s)-1]
}

// LogStartOffset is the first offset a reader may ask for.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 { return l.active().next.Load() }

// HighWatermark is the last value given to SetHighWatermark (clamped), or
// the checkpointed one after a restart.
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// RecoveryPoint is the offset below which everything is on disk.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// SetHighWatermark sets the high watermark, clamped to [LogStartOffset,
// LogEndOffset]. The caller (the broker) decides it. Ended transactions
// whose marker it passes stop holding the last stable offset.
func (l *Log) SetHighWatermark(hw int64) {
	l.hw.Store(min(max(hw, l.LogStartOffset()), l.LogEndOffset()))
	if l.unreplicated.Load() > 0 {
		l.mu.Lock()
		l.producers.replicated(l.hw.Load())
		l.publishUnstableLocked()
		l.mu.Unlock()
	}
}

// LastStableOffset is the offset up to which read_committed consumers may
// read (KIP-98): the first offset of the earliest transaction that is open,
// or ended but with its marker not yet below the high watermark; the high
// watermark when there is none (always, without transactions).
func (l *Log) LastStableOffset() int64 {
	hw := l.hw.Load()
	if fu := l.firstUnstable.Load(); fu < hw {
		return max(fu, l.logStart.Load())
	}
	return hw
}

// FirstUnstableOffset is the first offset of the earliest open or
// unreplicated transaction, -1 when there is none.
func (l *Log) FirstUnstableOffset() int64 {
	if fu := l.firstUnstable.Load(); fu != math.MaxInt64 {
		return fu
	}
	return -1
}

// publishUnstableLocked publishes what LastStableOffset and
// SetHighWatermark read of the producer state. Lock l.mu.
func (l *Log) publishUnstableLocked() {
	l.firstUnstable.Store(l.producers.firstUnstable())
	l.unreplicated.Store(int32(len(l.producers.unreplicated)))
}

// recountAbortedLocked recounts the transaction index entries (after
// segments were added, removed or rebuilt). Lock l.mu.
func (l *Log) recountAbortedLocked() {
	var n int64
	for _, s := range l.segments() {
		n += int64(len(s.txn.load()))
	}
	l.aborted.Store(n)
}

// AbortedTransactions returns the aborted transactions that overlap the
// offsets [from, upTo): those whose abort marker is at or after from and
// whose first batch is before upTo, from the transaction indexes of the
// segment holding from and the segments after it, stopping at the first
// entry whose last stable offset reached upTo (Kafka's
// LocalLog.collectAbortedTransactions). A fetch with read_committed answers
// with them. Nil when the log has none, without looking.
func (l *Log) AbortedTransactions(from, upTo int64) []AbortedTxn {
	if l.aborted.Load() == 0 {
		return nil
	}
	segs := l.segments()
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > from })-1, 0)
	var out []AbortedTxn
	for ; i < len(segs); i++ {
		var done bool
		if out, done = collectAborted(segs[i].txn.load(), from, upTo, out); done {
			break
		}
	}
	return out
}

// applyMarker applies an end-transaction marker (a control batch appended
// or replayed) to the producer state: the producer's transaction, if one is
// open, ends. For an abort it returns the transaction index entry, which
// the caller writes to the segment holding the marker. Lock l.mu.
func (l *Log) applyMarker(h *record.BatchHeader, batch []byte) (AbortedTxn, bool) {
	m, ok, err := record.ParseEndTxnMarker(h, batch)
	if err != nil {
		l.env.logger.Warn("unreadable control batch", "partition", l.tp.String(), "offset", h.BaseOffset, "err", err)
		return AbortedTxn{}, false
	}
	if !ok {
		return AbortedTxn{}, false
	}
	ct, ended := l.producers.endTxn(h, m)
	if !ended {
		return AbortedTxn{}, false
	}
	var a AbortedTxn
	if ct.abort {
		a = AbortedTxn{ProducerID: ct.pid, FirstOffset: ct.first, LastOffset: ct.last,
			LastStableOffset: l.producers.lastStableOffsetAt(ct)}
	}
	l.producers.finish(ct)
	return a, ct.abort
}

// Size is the total size of the segments in bytes.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.size.Load()
	}
	return n
}

// NumSegments is the number of segments.
func (l *Log) NumSegments() int { return len(l.segments()) }

func (l *Log) touch() { l.lastUse.Store(time.Now().UnixNano()) }

// errors that make no sense after close
func (l *Log) checkOpen() error {
	if l.closed.Load() {
		if l.deleted {
			return fmt.Errorf("%s: %w", l.tp, ErrLogDeleted)
		}
		return fmt.Errorf("%s: %w", l.tp, ErrLogClosed)
	}
	return nil
}

// AppendAsLeader validates each batch of records (one or more concatenated
// v2 batches), checks and records idempotent producer state, assigns offsets
// in place (rewrites the base offset and partition leader epoch of the
// caller's buffer), applies LogAppendTime and the topic compression.type,
// and appends to the active segment.
//
// A batch that repeats one of its producer's last 5 batches is not appended:
// the error is ErrDuplicateSequence and AppendInfo carries the offsets the
// batch got the first time.
//
// When flush.messages asks for it, the append returns once the batches are
// on disk: appends that arrive while an fsync runs share the next one (group
// commit), and no lock is held during the fsync.
func (l *Log) AppendAsLeader(records []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.AppendAsLeaderAdmit(records, leaderEpoch, nil)
}

// Admit is a caller's say on each batch of a leader append, asked with the
// header the append parsed (the caller parses none itself), before anything
// else of the batch is checked; a compressed batch is asked about twice,
// before its records are decompressed outside the lock and again under it.
// An error refuses the whole append and is returned wrapped. The header
// comes by value: a callback's pointer argument would move the append's
// header to the heap.
type Admit func(h record.BatchHeader) error

// AppendAsLeaderAdmit is AppendAsLeader with admit (nil: none) asked about
// every batch.
func (l *Log) AppendAsLeaderAdmit(records []byte, leaderEpoch int32, admit Admit) (AppendInfo, error) {
	return l.AppendAsLeaderWith(records, leaderEpoch, AppendOptions{Admit: admit})
}

// AppendAsLeaderWith is AppendAsLeader with options: who appends (a
// client, or a coordinator whose batches are checked for epochs only) and
// the caller's admission of each batch.
func (l *Log) AppendAsLeaderWith(records []byte, leaderEpoch int32, opts AppendOptions) (AppendInfo, error) {
	// The records of compressed batches are checked before the writer
	// lock: the check needs only the bytes and the topic's config, and
	// decompressing a gzip batch takes milliseconds that other appends to
	// the partition need not wait for.
	cfg := l.cfg.Load()
	if err := checkCompressedBatches(records, cfg, l.env.decompressLimit(), opts.Admit); err != nil {
		return AppendInfo{LogAppendTime: -1, FirstOffset: -1, LastOffset: -1}, fmt.Errorf("%s: %w", l.tp, err)
	}
	l.mu.Lock()
	info, needSync, err := l.appendAsLeaderLocked(records, leaderEpoch, cfg, opts)
	l.mu.Unlock()
	if err == nil && needSync {
		err = l.syncTo(info.LastOffset + 1)
	}
	return info, err
}

// appendAsLeaderLocked is AppendAsLeaderAdmit once checkCompressedBatches
// passed with cfg. Lock l.mu.
func (l *Log) appendAsLeaderLocked(records []byte, leaderEpoch int32, cfg *logConfig, opts AppendOptions) (info AppendInfo, needSync bool, err error) {
	admit := opts.Admit
	if err := l.checkOpen(); err != nil {
		return AppendInfo{}, false, err
	}
	info = AppendInfo{LogAppendTime: -1, FirstOffset: -1, LastOffset: -1}
	if len(records) == 0 {
		return info, false, fmt.Errorf("%w: empty records", record.ErrCorruptBatch)
	}

	// Pass 1: validate every batch before touching anything.
	var h record.BatchHeader
	rewrite := false
	l.pend = l.pend[:0]
	for pos := 0; pos < len(records); pos += h.Size() {
		b := records[pos:]
		if err := record.ParseBatchHeaderInto(b, &h); err != nil {
			return info, false, fmt.Errorf("%s: batch at byte %d: %w", l.tp, pos, err)
		}
		if admit != nil {
			if err := admit(h); err != nil {
				return info, false, fmt.Errorf("%s: batch at byte %d: %w", l.tp, pos, err)
			}
		}
		if h.Size() > len(b) {
			return info, false, fmt.Errorf("%s: batch at byte %d: %w: needs %d bytes, %d left", l.tp, pos, record.ErrCorruptBatch, h.Size(), len(b))
		}
		b = b[:h.Size()]
		if h.Size() > int(cfg.MaxMessageBytes) {
			return info, false, fmt.Errorf("%s: %w: batch of %d bytes, max.message.bytes %d", l.tp, ErrBatchTooLarge, h.Size(), cfg.MaxMessageBytes)
		}
		if crc := record.BatchCRC(b); crc != h.CRC {
			return info, false, fmt.Errorf("%s: batch at byte %d: %w: crc %08x, computed %08x", l.tp, pos, record.ErrCorruptBatch, h.CRC, crc)
		}
		// Kafka's LogValidator: the header's offset range must match the
		// record count.
		if h.RecordCount <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.RecordCount) {
			return info, false, fmt.Errorf("%s: %w: record count %d with last offset delta %d", l.tp, record.ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
		}
		recompress := !cfg.keepCodec && h.Compression() != cfg.codec && !h.Control()
		rewrite = rewrite || recompress
		// The records of compressed batches were checked before the lock
		// (checkCompressedBatches).
		if h.Compression() == record.CompressionNone {
			if err := record.CheckUncompressedRecords(&h, b); err != nil {
				return info, false, fmt.Errorf("%s: %w", l.tp, err)
			}
			if cfg.compact && !h.Control() {
				hc := h // a copy: WalkRecords' callback makes its argument escape
				if err := checkProducerRecords(&hc, b, true); err != nil {
					return info, false, fmt.Errorf("%s: %w", l.tp, err)
				}
			}
		}
		if h.Control() && opts.Origin == OriginClient {
			return info, false, fmt.Errorf("%s: %w: clients are not allowed to write control records", l.tp, record.ErrInvalidRecord)
		}
		if h.ProducerID >= 0 {
			var marker *record.EndTxnMarker
			if h.Control() {
				m, ok, err := record.ParseEndTxnMarker(&h, b)
				if err != nil {
					return info, false, fmt.Errorf("%s: %w", l.tp, err)
				}
				if ok {
					marker = &m
				}
			}
			dup, err := l.producers.check(&h, marker, opts.Origin, &l.pend)
			if err != nil {
				return info, false, fmt.Errorf("%s: %w", l.tp, err)
			}
			if dup != nil {
				info.FirstOffset, info.LastOffset = dup.firstOffset, dup.lastOffset
				info.LogStartOffset = l.LogStartOffset()
				info.RecordCount = h.RecordCount
				return info, false, fmt.Errorf("%s: %w: producer %d sequence %d", l.tp, ErrDuplicateSequence, h.ProducerID, h.BaseSequence)
			}
		}
		info.RecordCount += h.RecordCount
	}

	// Pass 2: recompress when compression.type asks for another codec.
	buf := records
	if rewrite {
		out := l.scratch[:0]
		for pos := 0; pos < len(records); pos += h.Size() {
			record.DecodeHeader(records[pos:], &h)
			b := records[pos : pos+h.Size()]
			if !cfg.keepCodec && h.Compression() != cfg.codec && !h.Control() {
				var err error
				if out, err = record.Recompress(out, &h, b, cfg.codec); err != nil {
					return info, false, fmt.Errorf("%s: %w", l.tp, err)
				}
			} else {
				out = append(out, b...)
			}
		}
		l.scratch = out
		buf = out
	}
	if int64(len(buf)) > cfg.SegmentBytes {
		return info, false, fmt.Errorf("%s: %w: %d bytes do not fit in segment.bytes %d", l.tp, ErrBatchTooLarge, len(buf), cfg.SegmentBytes)
	}

	// Pass 3: offsets, epochs and timestamps, in place.
	now := l.env.nowMs()
	offset := l.LogEndOffset()
	info.FirstOffset = offset
	for pos := 0; pos < len(buf); pos += h.Size() {
		record.DecodeHeader(buf[pos:], &h)
		b := buf[pos : pos+h.Size()]
		record.SetBaseOffset(b, offset)
		record.SetLeaderEpoch(b, leaderEpoch)
		if cfg.logAppendTime {
			record.SetLogAppendTime(b, now)
			info.LogAppendTime = now
		}
		offset += int64(h.LastOffsetDelta) + 1
	}
	info.LastOffset = offset - 1
	info.Size = len(buf)
	if err := l.appendLocked(cfg, buf, info.FirstOffset, info.LastOffset, now); err != nil {
		return info, false, err
	}
	if leaderEpoch >= 0 {
		if latest, ok := l.epochs.latest(); !ok || leaderEpoch > latest {
			if _, err := l.epochs.assign(leaderEpoch, info.FirstOffset); err != nil {
				l.env.logger.Error("write leader epoch checkpoint", "partition", l.tp.String(), "err", err)
			}
		}
	}
	info.LogStartOffset = l.LogStartOffset()
	return info, l.countUnflushedLocked(cfg, int64(info.RecordCount), now), nil
}

// checkCompressedBatches checks the records of every compressed batch of an
// append (CheckCompressedRecords): as Kafka's LogValidator, every compressed
// batch is decompressed and its records checked, so a batch no consumer
// could read never enters the log. It stops without an error at the first
// batch whose header, size or CRC is wrong, which the locked pass refuses
// before anything is appended. admit (nil: none) is asked about each
// compressed batch before its records are checked, so a batch the caller
// refuses is refused for that, not for its records.
func checkCompressedBatches(records []byte, cfg *logConfig, limit int64, admit Admit) error {
	var h record.BatchHeader
	for pos := 0; pos < len(records); {
		b := records[pos:]
		if len(b) < record.BatchHeaderSize {
			return nil
		}
		size := record.BatchLengthOverhead + int(int32(binary.BigEndian.Uint32(b[record.OffBatchLength:])))
		if size < record.BatchHeaderSize || size > len(b) {
			return nil
		}
		pos += size
		// Uncompressed batches (the common case) are skipped on their
		// attributes alone.
		if binary.BigEndian.Uint16(b[record.OffAttributes:])&record.AttrCompressionMask == 0 {
			continue
		}
		b = b[:size]
		if record.ParseBatchHeaderInto(b, &h) != nil {
			return nil
		}
		if admit != nil {
			if err := admit(h); err != nil {
				return fmt.Errorf("batch at byte %d: %w", pos-size, err)
			}
		}
		if h.Size() > int(cfg.MaxMessageBytes) || record.BatchCRC(b) != h.CRC || h.RecordCount <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.RecordCount) {
			return nil
		}
		if err := record.CheckCompressedRecords(&h, b, cfg.compact && !h.Control(), limit); err != nil {
			return err
		}
	}
	return nil
}

// checkProducerRecords decompresses a batch and checks every record: offset
// deltas 0..n-1 as Kafka requires of a producer, and a key on every record of
// a compacted topic.
func checkProducerRecords(h *record.BatchHeader, b []byte, needKeys bool) error {
	var want int32
	return record.WalkRecords(h, b, func(_ *record.BatchHeader, r *record.Record) error {
		if r.OffsetDelta != want {
			return fmt.Errorf("%w: record %d has offset delta %d", record.ErrInvalidRecord, want, r.OffsetDelta)
		}
		want++
		if needKeys && r.Key == nil {
			return fmt.Errorf("%w: compacted topic cannot accept a record without a key", record.ErrInvalidRecord)
		}
		return nil
	})
}

// AppendAsFollower appends batches that already carry their offsets
// (replication). They must start at or after LogEndOffset; offsets may skip
// (the leader's log may be compacted). Producer state and leader epochs are
// updated from the batches without sequence checks, as Kafka does.
func (l *Log) AppendAsFollower(records []byte) (AppendInfo, error) {
	l.mu.Lock()
	info, needSync, err := l.appendAsFollowerLocked(records)
	l.mu.Unlock()
	if err == nil && needSync {
		err = l.syncTo(info.LastOffset + 1)
	}
	return info, err
}

func (l *Log) appendAsFollowerLocked(records []byte) (info AppendInfo, needSync bool, err error) {
	if err := l.checkOpen(); err != nil {
		return AppendInfo{}, false, err
	}
	cfg := l.cfg.Load()
	info = AppendInfo{LogAppendTime: -1, FirstOffset: -1, LastOffset: -1}
	leo := l.LogEndOffset()
	prev := leo
	var maxEpoch int32 = -1
	err = record.ForEachBatch(records, func(h *record.BatchHeader, _ []byte) error {
		if h.BaseOffset < prev {
			return fmt.Errorf("%w: batch at offset %d, expected at least %d", ErrOffsetOutOfRange, h.BaseOffset, prev)
		}
		if info.FirstOffset < 0 {
			info.FirstOffset = h.BaseOffset
		}
		prev = h.NextOffset()
		info.LastOffset = h.LastOffset()
		info.RecordCount += h.RecordCount
		if h.PartitionLeaderEpoch > maxEpoch {
			maxEpoch = h.PartitionLeaderEpoch
		}
		return nil
	})
	if err != nil {
		return info, false, fmt.Errorf("%s: %w", l.tp, err)
	}
	if len(records) == 0 {
		return info, false, nil
	}
	if int64(len(records)) > cfg.SegmentBytes {
		return info, false, fmt.Errorf("%s: %w: %d bytes do not fit in segment.bytes %d", l.tp, ErrBatchTooLarge, len(records), cfg.SegmentBytes)
	}
	now := l.env.nowMs()
	if err := l.appendLocked(cfg, records, info.FirstOffset, info.LastOffset, now); err != nil {
		return info, false, err
	}
	// Epoch boundaries inside the appended batches.
	var latest int32 = -1
	if e, ok := l.epochs.latest(); ok {
		latest = e
	}
	if maxEpoch > latest {
		record.ForEachBatch(records, func(h *record.BatchHeader, _ []byte) error {
			if h.PartitionLeaderEpoch > latest {
				l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
				latest = h.PartitionLeaderEpoch
			}
			return nil
		})
	}
	info.Size = len(records)
	info.LogStartOffset = l.LogStartOffset()
	return info, l.countUnflushedLocked(cfg, int64(info.RecordCount), now), nil
}

// appendLocked rolls if needed and writes buf (batches with offsets
// [first, last]) to the active segment, then records producer state.
func (l *Log) appendLocked(cfg *logConfig, buf []byte, first, last int64, now int64) error {
	seg := l.active()
	if l.shouldRoll(cfg, seg, len(buf), first, last, now) {
		var err error
		if seg, err = l.rollLocked(cfg, first, now); err != nil {
			return err
		}
	}
	if err := seg.appendBatches(buf, int64(cfg.IndexIntervalBytes)); err != nil {
		return fmt.Errorf("%s: %w", l.tp, err)
	}
	var h record.BatchHeader
	txns := false
	for pos := 0; pos < len(buf); pos += h.Size() {
		record.DecodeHeader(buf[pos:], &h)
		if h.ProducerID < 0 {
			continue
		}
		if !h.Control() {
			l.producers.update(&h)
			txns = txns || h.Transactional()
			continue
		}
		txns = true
		if a, abort := l.applyMarker(&h, buf[pos:pos+h.Size()]); abort {
			// Into the segment holding the marker; a failed write
			// leaves the entry in memory and the file gone, rebuilt at
			// the next start.
			if err := seg.txn.append(a); err != nil {
				l.env.logger.Error("transaction index", "partition", l.tp.String(), "err", err)
			}
			l.aborted.Add(1)
		}
	}
	if txns {
		l.publishUnstableLocked()
	}
	l.touch()
	return nil
}

// shouldRoll is Kafka's LogSegment.shouldRoll: the segment is full, too old
// (segment.ms since its first batch's timestamp), its index is full, or the
// new offsets would not fit its 32-bit relative offsets.
func (l *Log) shouldRoll(cfg *logConfig, s *segment, n int, first, last, now int64) bool {
	size := s.size.Load()
	if last-s.base > math.MaxInt32 || first < s.base {
		return true
	}
	if size == 0 {
		return false
	}
	return size+int64(n) > cfg.SegmentBytes ||
		size+int64(n) > math.MaxInt32 ||
		now-s.rollTS > cfg.SegmentMs ||
		s.indexFull()
}

// rollLocked closes the active segment for appends and starts a new one at
// base (the next offset). The old segment's indexes are trimmed; its data is
// flushed soon by the manager, off the append path.
func (l *Log) rollLocked(cfg *logConfig, base int64, now int64) (*segment, error) {
	old := l.active()
	if old.size.Load() == 0 && old.base <= base && base-old.base <= math.MaxInt32 {
		return old, nil
	}
	base = max(base, old.next.Load())
	if old.size.Load() == 0 {
		// An empty active segment whose offsets cannot reach base:
		// replace it.
		if err := old.remove(); err != nil {
			return nil, err
		}
		s, err := createSegment(l.env.fs, l.dir, base, &cfg.LogConfig, now)
		if err != nil {
			return nil, fmt.Errorf("%s: roll: %w: %w", l.tp, ErrStorage, err)
		}
		segs := l.segments()
		ns := append(append([]*segment(nil), segs[:len(segs)-1]...), s)
		l.segs.Store(&ns)
		return s, nil
	}
	if err := old.deactivate(); err != nil {
		return nil, fmt.Errorf("%s: roll: trim indexes of %d: %w: %w", l.tp, old.base, ErrStorage, err)
	}
	if err := l.producers.writeSnapshot(base); err != nil {
		l.env.logger.Warn("producer state snapshot", "partition", l.tp.String(), "err", err)
	}
	s, err := createSegment(l.env.fs, l.dir, base, &cfg.LogConfig, now)
	if err != nil {
		return nil, fmt.Errorf("%s: roll: %w: %w", l.tp, ErrStorage, err)
	}
	segs := l.segments()
	ns := make([]*segment, len(segs), len(segs)+1)
	copy(ns, segs)
	ns = append(ns, s)
	l.segs.Store(&ns)
	if l.env.rolled != nil {
		l.env.rolled(l)
	}
	return s, nil
}

// Roll starts a new segment now (tests and operators).
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkOpen(); err != nil {
		return err
	}
	_, err := l.rollLocked(l.cfg.Load(), l.LogEndOffset(), l.env.nowMs())
	return err
}

// countUnflushedLocked counts msgs appended and reports whether
// flush.messages asks for an fsync now (the caller syncs after unlocking).
func (l *Log) countUnflushedLocked(cfg *logConfig, msgs, now int64) bool {
	l.unflushed += msgs
	if l.unflushed >= cfg.FlushMessages {
		l.unflushed = 0
		l.lastFlushMs = now
		return true
	}
	return false
}

// syncHook, when set (tests only), runs at the start of every group-commit
// fsync, to make one last long enough to be shared.
var syncHook func()

// syncRound is one group-commit fsync: every append that finished before it
// started (offsets below upTo) is on disk when done is closed, unless err.
type syncRound struct {
	upTo int64
	err  error
	done chan struct{}
}

// syncTo returns once every offset below target is on disk (the recovery
// point reached it). Callers arriving while an fsync runs wait for it and
// then share the next one: with flush.messages=1, concurrent producers to a
// partition need about one fsync per round instead of one each. No lock is
// held during the fsync; appends go on meanwhile.
func (l *Log) syncTo(target int64) error {
	l.syncMu.Lock()
	for {
		if l.recoveryPoint.Load() >= target {
			l.syncMu.Unlock()
			return nil
		}
		if r := l.syncing; r != nil {
			l.syncMu.Unlock()
			<-r.done
			if r.err != nil && target <= r.upTo {
				return r.err
			}
			l.syncMu.Lock()
			continue
		}
		r := &syncRound{done: make(chan struct{})}
		l.syncing = r
		l.syncMu.Unlock()
		r.upTo, r.err = l.runSyncRound()
		l.syncMu.Lock()
		l.syncing = nil
		close(r.done)
		if r.err != nil {
			l.syncMu.Unlock()
			return r.err
		}
	}
}

// runSyncRound fsyncs the segments from the recovery point to the log end as
// it is now, then advances the recovery point, unless the log was truncated
// meanwhile (the offsets synced may then hold other data).
func (l *Log) runSyncRound() (int64, error) {
	l.mu.Lock()
	if err := l.checkOpen(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	upTo, from, epoch := l.LogEndOffset(), l.recoveryPoint.Load(), l.truncations
	l.mu.Unlock()
	if upTo <= from {
		return upTo, nil
	}
	l.syncRounds.Add(1)
	if syncHook != nil {
		syncHook()
	}
	if err := l.flushSegments(from, upTo); err != nil {
		return upTo, err
	}
	if err := l.syncEpochs(); err != nil {
		return upTo, err
	}
	l.mu.Lock()
	if l.truncations == epoch && upTo > l.recoveryPoint.Load() && upTo <= l.LogEndOffset() {
		l.recoveryPoint.Store(upTo)
	}
	l.mu.Unlock()
	return upTo, nil
}

// flushSegments fsyncs the segments holding offsets in [from, to).
func (l *Log) flushSegments(from, to int64) error {
	segs := l.segments()
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base <= from {
			continue
		}
		if s.base >= to && i > 0 {
			break
		}
		if err := s.flush(); err != nil {
			return fmt.Errorf("%s: %w: %w", l.tp, ErrStorage, err)
		}
	}
	return nil
}

// syncEpochs makes the leader-epoch checkpoint hold every epoch assigned so
// far. Every path that moves the recovery point calls it after fsyncing the
// segments and before moving it: an epoch whose start the recovery point
// has passed is then in the file, and recovery, which reads the log only
// from the recovery point on, need not find it in the batches. The epochs
// assigned after it (a new leader's, a follower's first batch of an epoch)
// wait for the next flush instead of an fsync each (see leaderEpochCache).
func (l *Log) syncEpochs() error {
	if err := l.epochs.flush(); err != nil {
		return fmt.Errorf("%s: %w: leader epoch checkpoint: %w", l.tp, ErrStorage, err)
	}
	return nil
}

// Flush writes everything appended so far to disk.
func (l *Log) Flush() error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return nil
	}
	l.unflushed = 0
	l.lastFlushMs = l.env.nowMs()
	leo := l.LogEndOffset()
	l.mu.Unlock()
	return l.syncTo(leo)
}

// flushRolled fsyncs the segments below the active one (after a roll) and
// advances the recovery point to the active segment's base, without holding
// mu during the fsync.
func (l *Log) flushRolled() error {
	l.mu.Lock()
	segs := l.segments()
	upTo := segs[len(segs)-1].base
	from := l.recoveryPoint.Load()
	l.mu.Unlock()
	if upTo <= from {
		return nil
	}
	if err := l.flushSegments(from, upTo); err != nil {
		return err
	}
	if err := l.syncEpochs(); err != nil {
		return err
	}
	l.mu.Lock()
	if upTo > l.recoveryPoint.Load() && upTo <= l.LogEndOffset() {
		l.recoveryPoint.Store(upTo)
	}
	l.mu.Unlock()
	return nil
}

// maybeFlushByTime is the flush scheduler's check of flush.ms.
func (l *Log) maybeFlushByTime(now int64) error {
	l.mu.Lock()
	cfg := l.cfg.Load()
	if l.closed.Load() || l.unflushed == 0 || cfg.FlushMs == math.MaxInt64 || now-l.lastFlushMs < cfg.FlushMs {
		l.mu.Unlock()
		return nil
	}
	l.unflushed = 0
	l.lastFlushMs = now
	leo := l.LogEndOffset()
	l.mu.Unlock()
	return l.syncTo(leo)
}

// ReadInfo is the result of a Read.
type ReadInfo struct {
	Region      FileRegion // Len 0 when nothing to read
	FirstOffset int64      // base offset of the first batch returned
	// NextOffset is the offset after the region's last batch (FirstOffset
	// when the region is empty): NextOffset-FirstOffset is the region's
	// offset span, its record count in a log without gaps (compaction
	// leaves gaps, so there it is an upper bound).
	NextOffset                                  int64
	HighWatermark, LogStartOffset, LogEndOffset int64
	seg                                         *segment
}

// Release gives back the region's file reference; call it exactly once after
// the region was sent or dropped (extra calls do nothing).
func (r *ReadInfo) Release() {
	if r.seg != nil {
		r.seg.release()
		r.seg = nil
	}
}

// mapCopyMax is the largest region AppendTo copies from the segment's
// mapping; a larger one is read with one pread. A few KiB at the tail lie
// in pages the mapping has touched already (the consumer that keeps up),
// and a memcpy beats a system call. A larger region is mostly pages this
// process has not mapped yet, and a page fault for each costs more than
// the pread that copies them all: a consumer of 1,000 partitions reading
// ~23 KiB from each cost the broker 210-220 ms of CPU copying through the
// mapping and 110-130 ms with pread (BENCHMARKS.md, "Consuming from 1,000
// partitions").
const mapCopyMax = 8 << 10

// AppendTo appends the region's bytes to dst: copied from the segment's
// read-only mapping when it covers them and the region is small
// (mapCopyMax), else read with pread. For regions that go in the response
// buffer, where a system call of their own costs more than the copy;
// large ones go by Region.WriteTo (sendfile). Call it before Release. A
// region the log no longer holds whole (truncated since the read) is
// io.ErrUnexpectedEOF, with dst returned unchanged.
func (r *ReadInfo) AppendTo(dst []byte) ([]byte, error) {
	reg := r.Region
	if reg.Len <= 0 {
		return dst, nil
	}
	n := len(dst)
	if s := r.seg; s != nil && reg.Pos+reg.Len > s.size.Load() {
		// Truncated since the read (a preallocated file still holds
		// bytes there, but not these).
		return dst, io.ErrUnexpectedEOF
	}
	dst = slices.Grow(dst, int(reg.Len))[:n+int(reg.Len)]
	if s := r.seg; s != nil && reg.Len <= mapCopyMax {
		copied := false
		err := s.withMaps(func(_, _ *index, data []byte) {
			end := reg.Pos + reg.Len
			if end <= int64(len(data)) && end <= s.size.Load() {
				copy(dst[n:], data[reg.Pos:end])
				copied = true
			}
		})
		if err == nil && copied {
			s.noteMapRead(reg.Pos)
			return dst, nil
		}
	}
	if m, err := reg.File.ReadAt(dst[n:], reg.Pos); err != nil || int64(m) != reg.Len {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return dst[:n], err
	}
	return dst, nil
}

// Read returns whole batches from offset: at most maxBytes (but at least one
// batch when minOneBatch), never a batch whose last offset is >= maxOffset
// (pass the high watermark for consumers, LogEndOffset for followers).
// ErrOffsetOutOfRange when offset < LogStartOffset or > LogEndOffset. The
// region always lies within one segment file.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (ReadInfo, error) {
	if err := l.checkOpen(); err != nil {
		return ReadInfo{}, err
	}
	l.touch()
	var hb [record.BatchHeaderSize]byte
	for attempt := 0; ; attempt++ {
		segs := l.segments()
		info := ReadInfo{
			FirstOffset:    offset,
			NextOffset:     offset,
			HighWatermark:  l.hw.Load(),
			LogStartOffset: l.logStart.Load(),
			LogEndOffset:   segs[len(segs)-1].next.Load(),
		}
		if offset < info.LogStartOffset || offset > info.LogEndOffset {
			return info, fmt.Errorf("%s: %w: offset %d, log start %d, log end %d", l.tp, ErrOffsetOutOfRange, offset, info.LogStartOffset, info.LogEndOffset)
		}
		if offset == info.LogEndOffset || offset >= maxOffset || maxBytes < 0 {
			return info, nil
		}
		i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
		retry := false
		for i = max(i, 0); i < len(segs); i++ {
			s := segs[i]
			f, err := s.acquire()
			if errors.Is(err, errSegmentGone) {
				retry = true
				break
			}
			if err != nil {
				return info, fmt.Errorf("%s: %w", l.tp, err)
			}
			pos, n, first, next, found, err := s.read(f, max(offset, s.base), int64(maxBytes), maxOffset, minOneBatch, hb[:])
			if err != nil {
				s.release()
				if errors.Is(err, errSegmentGone) {
					retry = true
					break
				}
				return info, fmt.Errorf("%s: read segment %d: %w", l.tp, s.base, err)
			}
			if !found {
				s.release()
				continue
			}
			if n == 0 {
				s.release()
				return info, nil
			}
			info.Region = FileRegion{File: f, Pos: pos, Len: n}
			info.FirstOffset = first
			info.NextOffset = next
			info.seg = s
			return info, nil
		}
		if !retry {
			return info, nil
		}
		if err := l.checkOpen(); err != nil || attempt > 8 {
			return info, err
		}
	}
}

// MaxTimestampAndOffset returns the largest timestamp in the log and the
// offset of the batch that carries it ((-1, -1) for an empty log).
func (l *Log) MaxTimestampAndOffset() (ts, offset int64) {
	ts, offset = -1, -1
	for _, s := range l.segments() {
		if t, o := s.maxTimestamp(); t > ts {
			ts, offset = t, o
		}
	}
	return ts, offset
}

// ProducerState returns what the log knows about a producer id.
func (l *Log) ProducerState(producerID int64) (ProducerEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.producers.producers[producerID]
	if !ok {
		return ProducerEntry{}, false
	}
	return st.entry(), true
}

// Producers lists every producer the log knows, by id.
func (l *Log) Producers() []ProducerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.entries()
}

// AssignEpochStartOffset records that leader epoch starts at startOffset (a
// new leader calls it with its log end offset). It does not wait for the
// disk: the leader-epoch checkpoint is written by the next flush (see
// syncEpochs), unless the epoch is below one already cached.
func (l *Log) AssignEpochStartOffset(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("%s: invalid epoch %d start offset %d", l.tp, epoch, startOffset)
	}
	_, err := l.epochs.assign(epoch, startOffset)
	return err
}

// LatestEpoch returns the newest leader epoch in the cache.
func (l *Log) LatestEpoch() (int32, bool) { return l.epochs.latest() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101): for the latest
// epoch the log end offset; otherwise the start offset of the next higher
// epoch, with the largest epoch at or below the requested one. (-1, -1)
// when the epoch is unknown and above every cached epoch.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	return l.epochs.endOffsetFor(epoch, l.LogEndOffset())
}

// LeaderEpochs returns the cache as (epoch, start offset) pairs.
func (l *Log) LeaderEpochs() [][2]int64 {
	var out [][2]int64
	for _, e := range l.epochs.snapshot() {
		out = append(out, [2]int64{int64(e.epoch), e.start})
	}
	return out
}

// closeLocked closes every segment (trimming the active segment's indexes),
// writes a producer snapshot at the log end unless the snapshots already
// hold the state there (nothing appended since the last one, or an empty
// log). Does not flush.
func (l *Log) closeLocked() error {
	if l.closed.Swap(true) {
		return nil
	}
	var errs []error
	if leo := l.LogEndOffset(); !l.deleted && l.producers.needSnapshot(leo) {
		if err := l.producers.writeSnapshot(leo); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range l.segments() {
		if err := s.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close flushes and closes the log: the active segment's final time
// index entry is written first, then every file written since its last
// sync is fsynced (none, for a log not written since its last flush),
// then the segments are closed. The manager writes the clean-shutdown
// marker only after every log's close succeeded.
func (l *Log) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil
	}
	act := l.active()
	act.mu.Lock()
	if act.active && act.ti.writable && act.ti.data != nil {
		act.appendFinalTimeEntry()
	}
	act.mu.Unlock()
	err := l.flushAllLocked(l.env.nowMs())
	return errors.Join(err, l.closeLocked())
}

// flushAllLocked fsyncs every file of every segment written since its last
// sync, whatever the recovery point says, and moves the recovery point to
// the log end.
func (l *Log) flushAllLocked(now int64) error {
	for _, s := range l.segments() {
		if err := s.flush(); err != nil {
			return fmt.Errorf("%s: %w: %w", l.tp, ErrStorage, err)
		}
	}
	if err := l.syncEpochs(); err != nil {
		return err
	}
	l.recoveryPoint.Store(l.LogEndOffset())
	l.unflushed = 0
	l.lastFlushMs = now
	return nil
}

// closeIdle closes the files of inactive segments unused since before cutoff
// (unix nanos), or of every segment, the active one too, when all is set.
// Returns how many closed.
func (l *Log) closeIdle(cutoff int64, all bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0
	}
	n := 0
	segs := l.segments()
	for i, s := range segs {
		if !all && i == len(segs)-1 {
			continue // the active segment of a live log stays open
		}
		if (all || s.lastUse.Load() < cutoff) && s.hasOpenResources() && s.closeIdle() {
			n++
		}
	}
	return n
}

func (s *segment) hasOpenResources() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.file != nil || s.oi.mapped || s.ti.mapped
}

func fileExists(fsys vfs.FS, p string) bool { return vfs.Exists(fsys, p) }
