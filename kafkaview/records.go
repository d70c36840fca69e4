package kafkaview

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a record read from (or written to) a partition.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	KeyNull   bool
	ValueNull bool
	Headers   []Header
	// Transaction marks, set only by a read_uncommitted Query: Control is
	// the marker a control record is ("COMMIT" or "ABORT"; its key and
	// value are not data), Txn what became of a transactional record
	// (TxnAborted, TxnOpen, TxnUnresolved; "" when committed or not
	// transactional).
	Control    string
	Txn        string
	ProducerID int64 // of a transactional or control record; -1 otherwise
}

// What became of a transactional record, for a read_uncommitted Query.
const (
	TxnAborted = "aborted"           // an ABORT marker of its producer ended its transaction
	TxnOpen    = "not yet committed" // its transaction is still open: no marker up to the high watermark
	// TxnUnresolved: the read stopped (scan or time limit) before the
	// marker that ends its transaction.
	TxnUnresolved = "unresolved"
)

// ControlType reads a control record's key: its ControlRecordType
// (bytes 2-3 after the int16 version), "ABORT" for 0, "COMMIT" for 1; ""
// for a key too short to be one.
func ControlType(key []byte) string {
	if len(key) < 4 {
		return ""
	}
	switch int16(key[2])<<8 | int16(key[3]) {
	case 0:
		return "ABORT"
	case 1:
		return "COMMIT"
	}
	return "UNKNOWN"
}

// From is where a read starts.
type From string

const (
	FromEarliest  From = "earliest"
	FromLatest    From = "latest"
	FromOffset    From = "offset"
	FromTimestamp From = "timestamp"
)

// Field is what a search looks at.
type Field string

const (
	FieldNone   Field = ""
	FieldKey    Field = "key"
	FieldValue  Field = "value"
	FieldHeader Field = "header"
)

// Filter selects records server side. The zero Filter matches everything.
type Filter struct {
	Field Field
	// Text is the needle: a substring of the key or value (or the whole
	// key or value with Exact), or of the value of header Header.
	Text string
	// Header is the header name for FieldHeader; with Text empty a record
	// matches when it has the header at all.
	Header string
	// Exact compares the whole key, value or header value instead of
	// looking for a substring.
	Exact bool
	// Decode, when set, turns a key or value into the text searched (the
	// console: a record in the Confluent wire format decoded to JSON); nil
	// from it searches the bytes as they are.
	Decode func(b []byte) []byte
}

// Active reports whether f filters anything.
func (f Filter) Active() bool { return f.Field != FieldNone }

// Match reports whether r passes f. It does not allocate (Decode aside).
func (f Filter) Match(r *kgo.Record) bool {
	switch f.Field {
	case FieldNone:
		return true
	case FieldKey:
		return f.matchBytes(f.decoded(r.Key))
	case FieldValue:
		return f.matchBytes(f.decoded(r.Value))
	case FieldHeader:
		for i := range r.Headers {
			if r.Headers[i].Key != f.Header {
				continue
			}
			if f.Text == "" || f.matchBytes(r.Headers[i].Value) {
				return true
			}
		}
	}
	return false
}

func (f Filter) decoded(b []byte) []byte {
	if f.Decode != nil {
		if d := f.Decode(b); d != nil {
			return d
		}
	}
	return b
}

func (f Filter) matchBytes(b []byte) bool {
	if f.Exact {
		return string(b) == f.Text // the conversion does not allocate in a comparison
	}
	return bytes.Contains(b, []byte(f.Text))
}

// Query describes a read of one topic: where to start, how many records to
// return, an optional server-side filter and the bounds of the scan.
type Query struct {
	Topic     string
	Partition int32 // -1 for every partition
	From      From
	Offset    int64     // FromOffset
	Time      time.Time // FromTimestamp
	// Cursor, when set, gives the start offset per partition and overrides
	// From (the "next page" and "continue search" links).
	Cursor map[int32]int64
	// Before, when set, reads the newest records below these offsets, one
	// per partition (exclusive; a partition not named reads below its end),
	// newest first: the "older records" page of the Latest view. It
	// overrides From and Cursor and is not used with a filter.
	Before map[int32]int64
	Limit  int // records to return (default 50, at most 1000)
	Filter Filter
	// MaxScan bounds the records a filtered read examines (default 1,000,000).
	MaxScan int64
	// Timeout bounds the whole read (default 10s); a search that runs out
	// of time returns what it found with Stopped set.
	Timeout time.Duration
	// Uncommitted reads read_uncommitted, up to the high watermark: the
	// records of aborted and open transactions too, and the control
	// records (commit and abort markers), each marked (Record.Control,
	// Record.Txn). The default reads read_committed, as a transactional
	// service's consumers do: up to the last stable offset, without
	// aborted records or markers.
	Uncommitted bool
}

// Result is what a read found.
type Result struct {
	Records    []Record
	Partitions []int32 // partitions read
	Scanned    int64   // records examined
	InRange    int64   // records between the start positions and the end offsets: the M of "scanned N of M"
	Available  int64   // records the read partitions hold (end - log start), wherever the read started
	Next       map[int32]int64
	More       bool // records remain after Next (within the end offsets at query time)
	// Older, for a newest-first read (Latest, or Before), is where the page
	// of older records ends in each partition (pass it as Query.Before);
	// HasOlder says whether there are records before it.
	Older    map[int32]int64
	HasOlder bool
	Stopped  string // why a read ended before covering its range: "time limit", "scan limit", or ""
	Elapsed  time.Duration
	Newest   bool     // records are newest first (From latest without a filter)
	Warnings []string // partitions that could not be read completely, and why
}

func (r *Result) addWarning(w string) {
	for _, have := range r.Warnings {
		if have == w {
			return
		}
	}
	if len(r.Warnings) < 20 {
		r.Warnings = append(r.Warnings, w)
	}
}

// Limits of a read.
const (
	DefaultLimit   = 50
	MaxLimit       = 1000
	DefaultMaxScan = 1_000_000
	DefaultTimeout = 10 * time.Second
)

// ErrUnknownTopic is returned for reads of a topic that does not exist.
var ErrUnknownTopic = errors.New("no such topic")

// partState is one partition being read.
type partState struct {
	p      int32
	lo     int64 // log start offset at query time
	leader int32
	pos    int64 // next offset to fetch
	stop   int64 // end offset at query time: the read covers [pos, stop)
	got    []Record
	done   bool
	stuck  int // rounds without progress
	// txn (read_uncommitted only): per producer id, the indexes in got of
	// its transactional records since its last marker, whose fate the
	// next marker decides.
	txn map[int64][]int
}

// marker applies a control record: the producer's pending records are
// aborted by an ABORT marker, committed by a COMMIT marker.
func (ps *partState) marker(pid int64, kind string) {
	if kind == "ABORT" {
		for _, i := range ps.txn[pid] {
			ps.got[i].Txn = TxnAborted
		}
	}
	delete(ps.txn, pid)
}

// pending notes got's last record as pid's, awaiting its marker.
func (ps *partState) pending(pid int64) {
	if ps.txn == nil {
		ps.txn = make(map[int64][]int)
	}
	ps.txn[pid] = append(ps.txn[pid], len(ps.got)-1)
}

// Read runs q: a page of records, or a bounded search.
func (c *Client) Read(ctx context.Context, q Query) (*Result, error) {
	start := time.Now()
	if q.Limit <= 0 {
		q.Limit = DefaultLimit
	}
	q.Limit = min(q.Limit, MaxLimit)
	if q.MaxScan <= 0 {
		q.MaxScan = DefaultMaxScan
	}
	if q.Timeout <= 0 {
		q.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()

	tm, parts, err := c.plan(ctx, q)
	if err != nil {
		return nil, err
	}
	newest := !q.Filter.Active() && (q.Before != nil || q.From == FromLatest && q.Cursor == nil)
	res := &Result{Next: make(map[int32]int64, len(parts)), Newest: newest}
	for _, ps := range parts {
		res.Partitions = append(res.Partitions, ps.p)
		if ps.stop > ps.pos {
			res.InRange += ps.stop - ps.pos
		}
		if ps.stop > ps.lo {
			res.Available += ps.stop - ps.lo
		}
	}
	matched := 0
	timedOut := false
	perPartitionCap := q.Limit // without a filter each partition contributes at most Limit records
	for {
		active := activeParts(parts)
		if len(active) == 0 {
			break
		}
		if q.Filter.Active() && (matched >= q.Limit || res.Scanned >= q.MaxScan) {
			if res.Scanned >= q.MaxScan && matched < q.Limit {
				res.Stopped = "scan limit"
			}
			break
		}
		if ctx.Err() != nil {
			res.Stopped = "time limit"
			break
		}
		errs := c.fetchRound(ctx, tm, active, q.Filter.Active(), q.Uncommitted, func(ps *partState, r *kgo.Record) verdict {
			// A fetch round decodes megabytes; look at the clock inside it
			// too, so a search answers close to its time bound.
			if timedOut || res.Scanned&1023 == 0 && ctx.Err() != nil {
				timedOut = true
				return leave
			}
			res.Scanned++
			if r.Attrs.IsControl() { // read_uncommitted only
				kind := ControlType(r.Key)
				ps.marker(r.ProducerID, kind)
				if q.Filter.Active() {
					return take
				}
				cr := copyRecord(r)
				cr.Control, cr.Key, cr.Value, cr.Headers = kind, nil, nil, nil
				cr.KeyNull, cr.ValueNull = true, true
				ps.got = append(ps.got, cr)
				matched++
				if len(ps.got) < perPartitionCap {
					return take
				}
				return takeStop
			}
			if !q.Filter.Match(r) {
				if q.Filter.Active() && res.Scanned >= q.MaxScan {
					return takeStop
				}
				return take
			}
			ps.got = append(ps.got, copyRecord(r))
			if q.Uncommitted && r.Attrs.IsTransactional() {
				ps.pending(r.ProducerID)
			}
			matched++
			if q.Filter.Active() {
				if matched < q.Limit && res.Scanned < q.MaxScan {
					return take
				}
				return takeStop
			}
			if len(ps.got) < perPartitionCap {
				return take
			}
			return takeStop
		})
		if timedOut {
			res.Stopped = "time limit"
			break
		}
		if len(errs) > 0 {
			if ctx.Err() != nil {
				res.Stopped = "time limit"
				break
			}
			for _, err := range errs {
				res.addWarning(err.Error())
			}
			// Back off briefly before retrying partitions that failed; a
			// partition that keeps failing is given up after a few rounds.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !q.Filter.Active() {
			for _, ps := range parts {
				if len(ps.got) >= perPartitionCap {
					ps.done = true
				}
			}
		}
	}

	if q.Uncommitted {
		c.resolveTxns(ctx, tm, parts, q.MaxScan-res.Scanned)
	}

	// Merge by time (newest first for "latest"), keeping each partition's
	// records in offset order: a producer's timestamps need not rise, and
	// one partition read on its own is shown exactly as its log holds it.
	perPart := make([][]Record, 0, len(parts))
	for _, ps := range parts {
		perPart = append(perPart, ps.got)
	}
	all := mergeByTime(perPart)
	if res.Newest {
		if len(all) > q.Limit {
			all = all[len(all)-q.Limit:]
		}
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
	} else if len(all) > q.Limit {
		all = all[:q.Limit]
	}
	res.Records = all
	if res.Newest {
		// Older records end, in each partition, at its oldest shown record;
		// a partition whose records were all cut ends where it was read to.
		res.Older = make(map[int32]int64, len(parts))
		oldest := make(map[int32]int64, len(parts))
		for _, r := range all {
			if o, ok := oldest[r.Partition]; !ok || r.Offset < o {
				oldest[r.Partition] = r.Offset
			}
		}
		for _, ps := range parts {
			end, ok := oldest[ps.p]
			if !ok {
				end = ps.stop
			}
			res.Older[ps.p] = end
			if end > ps.lo {
				res.HasOlder = true
			}
		}
	}

	// Next page: after the last shown record of each partition; where the
	// read stopped for partitions that showed nothing; with a filter, where
	// the scan stopped.
	lastShown := make(map[int32]int64)
	for _, r := range all {
		if o, ok := lastShown[r.Partition]; !ok || r.Offset > o {
			lastShown[r.Partition] = r.Offset
		}
	}
	for _, ps := range parts {
		next := ps.pos
		if !q.Filter.Active() {
			if o, ok := lastShown[ps.p]; ok {
				next = o + 1
			} else if len(ps.got) > 0 {
				// Read but merged away: start again at its first record.
				next = ps.got[0].Offset
			}
		} else if o, ok := lastShown[ps.p]; ok && len(ps.got) > 0 && ps.got[len(ps.got)-1].Offset > o {
			next = o + 1
		}
		res.Next[ps.p] = next
		if next < ps.stop {
			res.More = true
		}
	}
	if res.Stopped == "" && q.Filter.Active() && res.More && matched < q.Limit {
		res.Stopped = "scan limit"
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

func activeParts(parts []*partState) []*partState {
	var out []*partState
	for _, ps := range parts {
		if !ps.done && ps.pos < ps.stop {
			out = append(out, ps)
		}
	}
	return out
}

func copyRecord(r *kgo.Record) Record {
	out := Record{
		Topic:      r.Topic,
		Partition:  r.Partition,
		Offset:     r.Offset,
		Timestamp:  r.Timestamp,
		KeyNull:    r.Key == nil,
		ValueNull:  r.Value == nil,
		ProducerID: -1,
	}
	if r.Attrs.IsTransactional() || r.Attrs.IsControl() {
		out.ProducerID = r.ProducerID
	}
	// Copy so a kept record does not pin the whole fetch response.
	if r.Key != nil {
		out.Key = bytes.Clone(r.Key)
	}
	if r.Value != nil {
		out.Value = bytes.Clone(r.Value)
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, Header{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	return out
}

// plan resolves the topic, the partitions to read and their [pos, stop).
func (c *Client) plan(ctx context.Context, q Query) (TopicMeta, []*partState, error) {
	tm, err := c.TopicMetadata(ctx, q.Topic)
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return tm, nil, fmt.Errorf("%w: %s", ErrUnknownTopic, q.Topic)
		}
		return tm, nil, err
	}
	var parts []*partState
	for _, p := range tm.Partitions {
		if q.Partition >= 0 && p.Partition != q.Partition {
			continue
		}
		parts = append(parts, &partState{p: p.Partition, leader: p.Leader})
	}
	if len(parts) == 0 {
		return tm, nil, fmt.Errorf("topic %s has no partition %d", q.Topic, q.Partition)
	}
	starts, err := c.adm.ListStartOffsets(ctx, q.Topic)
	if err != nil && len(starts) == 0 {
		return tm, nil, fmt.Errorf("list start offsets of %s: %w", q.Topic, err)
	}
	// read_committed ends at the last stable offset: a consumer reads no
	// further while a transaction is open below the high watermark.
	listEnds, what := c.adm.ListCommittedOffsets, "last stable offsets"
	if q.Uncommitted {
		listEnds, what = c.adm.ListEndOffsets, "end offsets"
	}
	ends, err := listEnds(ctx, q.Topic)
	if err != nil && len(ends) == 0 {
		return tm, nil, fmt.Errorf("list %s of %s: %w", what, q.Topic, err)
	}
	var atTime map[int32]int64
	if q.From == FromTimestamp && q.Cursor == nil {
		lo, err := c.adm.ListOffsetsAfterMilli(ctx, q.Time.UnixMilli(), q.Topic)
		if err != nil && len(lo) == 0 {
			return tm, nil, fmt.Errorf("list offsets of %s after %s: %w", q.Topic, q.Time.Format(time.RFC3339), err)
		}
		atTime = make(map[int32]int64)
		for p, o := range lo[q.Topic] {
			if o.Err == nil {
				atTime[p] = o.Offset
			}
		}
	}
	n := int64(len(parts))
	for _, ps := range parts {
		so, ok1 := starts.Lookup(q.Topic, ps.p)
		eo, ok2 := ends.Lookup(q.Topic, ps.p)
		if !ok1 || !ok2 || so.Err != nil || eo.Err != nil {
			ps.done = true // leaderless or failing partition: skipped, shown by the topic page
			continue
		}
		lo, hi := so.Offset, eo.Offset
		ps.lo, ps.stop = lo, hi
		clamp := func(o int64) int64 { return max(lo, min(o, hi)) }
		switch {
		case q.Before != nil && !q.Filter.Active():
			stop := hi
			if o, ok := q.Before[ps.p]; ok {
				stop = max(lo, min(o, hi))
			}
			ps.stop = stop
			ps.pos = max(lo, stop-int64(min(q.Limit, MaxLimit)))
		case q.Cursor != nil:
			o, ok := q.Cursor[ps.p]
			if !ok {
				o = hi
			}
			ps.pos = clamp(o)
		case q.From == FromLatest && q.Filter.Active():
			ps.pos = clamp(hi - max(1, q.MaxScan/n))
		case q.From == FromLatest:
			ps.pos = clamp(hi - int64(min(q.Limit, MaxLimit)))
		case q.From == FromOffset:
			ps.pos = clamp(q.Offset)
		case q.From == FromTimestamp:
			o, ok := atTime[ps.p]
			if !ok || o < 0 {
				o = hi
			}
			ps.pos = clamp(o)
		default:
			ps.pos = lo
		}
	}
	return tm, parts, nil
}

// verdict is what a record handler tells fetchRound.
type verdict int8

const (
	take     verdict = iota // handled; go on
	takeStop                // handled; stop this partition for the round
	leave                   // not handled; stop, and keep the position at this record
)

// fetchRound sends one Fetch per leader for the active partitions, in
// parallel, and hands every record at or after each partition's position and
// before its stop to fn, in offset order per partition, from one goroutine.
// Positions advance past the records fn handled; partitions that reach their
// stop are done.
func (c *Client) fetchRound(ctx context.Context, tm TopicMeta, active []*partState, search, uncommitted bool, fn func(*partState, *kgo.Record) verdict) []error {
	partBytes, reqBytes := int32(512<<10), int32(4<<20)
	if search {
		// Big enough to keep the broker busy, small enough that one round
		// (decoded whole before the handler sees a record) stays well under
		// a search's time bound.
		partBytes, reqBytes = 1<<20, 8<<20
	}
	byLeader := make(map[int32][]*partState)
	for _, ps := range active {
		byLeader[ps.leader] = append(byLeader[ps.leader], ps)
	}
	type answer struct {
		resp *kmsg.FetchResponse
		ps   []*partState
		err  error
	}
	answers := make([]answer, 0, len(byLeader))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for leader, pss := range byLeader {
		if leader < 0 {
			for _, ps := range pss {
				ps.stuck++
			}
			continue
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = reqBytes
		req.SessionID = 0
		req.SessionEpoch = -1
		req.IsolationLevel = 1 // read_committed: up to the last stable offset, with the aborted transactions
		if uncommitted {
			req.IsolationLevel = 0
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tm.Name
		rt.TopicID = tm.ID
		for _, ps := range pss {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = ps.p
			rp.FetchOffset = ps.pos
			rp.PartitionMaxBytes = partBytes
			if ps.stuck > 0 {
				// Kafka returns at least one whole batch only for the first
				// partition of a request; a partition whose next batch is
				// larger than its share gets a bigger share.
				rp.PartitionMaxBytes = reqBytes
			}
			rp.CurrentLeaderEpoch = -1
			rp.LogStartOffset = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		wg.Add(1)
		go func(leader int32, pss []*partState) {
			defer wg.Done()
			resp, err := req.RequestWith(ctx, c.cl.Broker(int(leader)))
			mu.Lock()
			answers = append(answers, answer{resp, pss, err})
			mu.Unlock()
		}(leader, pss)
	}
	wg.Wait()
	var errs []error
	needMeta := false
	for _, a := range answers {
		if a.err == nil {
			a.err = kerr.ErrorForCode(a.resp.ErrorCode)
		}
		if a.err != nil {
			errs = append(errs, a.err)
			needMeta = true
			for _, ps := range a.ps {
				ps.stuck++
			}
			continue
		}
		byP := make(map[int32]*partState, len(a.ps))
		for _, ps := range a.ps {
			byP[ps.p] = ps
		}
		seen := make(map[int32]bool, len(a.ps))
		for ti := range a.resp.Topics {
			rt := &a.resp.Topics[ti]
			for pi := range rt.Partitions {
				rp := &rt.Partitions[pi]
				ps, ok := byP[rp.Partition]
				if !ok {
					continue
				}
				seen[ps.p] = true
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					switch {
					case errors.Is(err, kerr.OffsetOutOfRange):
						// Retention removed what we were about to read: jump
						// to the new log start.
						if rp.LogStartOffset > ps.pos {
							ps.pos = rp.LogStartOffset
						} else {
							ps.done = true
						}
					case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.UnknownLeaderEpoch),
						errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.LeaderNotAvailable),
						errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
						needMeta = true
						ps.stuck++
					default:
						errs = append(errs, fmt.Errorf("partition %d: %w", ps.p, err))
						ps.done = true
					}
					continue
				}
				before := ps.pos
				iso := kgo.ReadCommitted()
				if uncommitted {
					iso = kgo.ReadUncommitted()
				}
				fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
					KeepControlRecords: true,
					Offset:             ps.pos,
					IsolationLevel:     iso,
					Topic:              tm.Name,
					Partition:          ps.p,
				}, rp, c.dec, nil)
				if fp.Err != nil {
					errs = append(errs, fmt.Errorf("partition %d: %w", ps.p, fp.Err))
					ps.done = true
					continue
				}
				for _, r := range fp.Records {
					if r.Offset < ps.pos {
						continue
					}
					if r.Offset >= ps.stop {
						ps.pos = ps.stop
						break
					}
					if r.Attrs.IsControl() && !uncommitted {
						ps.pos = r.Offset + 1
						continue
					}
					v := fn(ps, r)
					if v == leave {
						ps.pos = r.Offset
						break
					}
					ps.pos = r.Offset + 1
					if v == takeStop {
						break
					}
				}
				if len(fp.Records) == 0 && after > ps.pos {
					// Only aborted batches (read_committed drops them):
					// move past them.
					ps.pos = min(after, ps.stop)
				}
				if ps.pos >= ps.stop {
					ps.done = true
				}
				if ps.pos == before && !ps.done {
					// No records came back although the partition has more
					// below its stop: a compacted or aborted range the batch
					// headers skip over, or a batch too large for our share.
					// Move past skipped ranges using the high watermark.
					if len(fp.Records) == 0 && rp.HighWatermark <= ps.pos {
						ps.done = true
					}
					ps.stuck++
				} else {
					ps.stuck = 0
				}
			}
		}
		for _, ps := range a.ps {
			if !seen[ps.p] {
				ps.stuck++
			}
		}
	}
	for _, ps := range active {
		if ps.stuck > 3 {
			// Give up on a partition that made no progress for several
			// rounds rather than spin until the deadline.
			ps.done = true
			errs = append(errs, fmt.Errorf("partition %d made no progress at offset %d", ps.p, ps.pos))
		}
	}
	if needMeta {
		if tm2, err := c.TopicMetadata(ctx, tm.Name); err == nil {
			leaders := make(map[int32]int32, len(tm2.Partitions))
			for _, p := range tm2.Partitions {
				leaders[p.Partition] = p.Leader
			}
			for _, ps := range active {
				ps.leader = leaders[ps.p]
			}
		}
	}
	return errs
}

// resolveTxns decides what became of the transactional records a
// read_uncommitted read kept whose marker it has not seen: it reads on
// from where each such partition stopped, looking only at markers, until
// every kept record's producer has its marker, the partition's high
// watermark (at query time) is reached, or budget records were examined.
// Records whose producer has no marker up to the high watermark are in a
// transaction still open; those the budget or the time bound left
// undecided are unresolved.
func (c *Client) resolveTxns(ctx context.Context, tm TopicMeta, parts []*partState, budget int64) {
	var pend []*partState
	for _, ps := range parts {
		if len(ps.txn) > 0 {
			ps.done, ps.stuck = false, 0
			pend = append(pend, ps)
		}
	}
	budget = max(budget, 10_000) // a search that used its scan still resolves its page's records
	for budget > 0 && ctx.Err() == nil {
		var active []*partState
		for _, ps := range pend {
			if len(ps.txn) > 0 && !ps.done && ps.pos < ps.stop {
				active = append(active, ps)
			}
		}
		if len(active) == 0 {
			break
		}
		c.fetchRound(ctx, tm, active, true, true, func(ps *partState, r *kgo.Record) verdict {
			budget--
			if r.Attrs.IsControl() {
				ps.marker(r.ProducerID, ControlType(r.Key))
			}
			if len(ps.txn) == 0 || budget <= 0 {
				return takeStop
			}
			return take
		})
		for _, ps := range active {
			if len(ps.txn) == 0 {
				ps.done = true
			}
		}
	}
	for _, ps := range pend {
		mark := TxnUnresolved
		if ps.pos >= ps.stop {
			mark = TxnOpen
		}
		for _, idx := range ps.txn {
			for _, i := range idx {
				ps.got[i].Txn = mark
			}
		}
	}
}

// mergeByTime merges per-partition lists (each in offset order) into one
// ordered by timestamp, oldest first, ties by partition; each partition's
// records keep their offset order even where its timestamps go back. A
// heap of the partitions' heads keeps it O(n log k) for k partitions.
func mergeByTime(parts [][]Record) []Record {
	n := 0
	h := make(mergeHeap, 0, len(parts))
	for _, p := range parts {
		n += len(p)
		if len(p) > 0 {
			h = append(h, p)
		}
	}
	heap.Init(&h)
	out := make([]Record, 0, n)
	for h.Len() > 0 {
		p := h[0]
		out = append(out, p[0])
		if len(p) == 1 {
			heap.Pop(&h)
			continue
		}
		h[0] = p[1:]
		heap.Fix(&h, 0)
	}
	return out
}

// mergeHeap holds the rest of each partition's list, ordered by its first
// record's timestamp, then partition.
type mergeHeap [][]Record

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	a, b := &h[i][0], &h[j][0]
	if !a.Timestamp.Equal(b.Timestamp) {
		return a.Timestamp.Before(b.Timestamp)
	}
	return a.Partition < b.Partition
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.([]Record)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
