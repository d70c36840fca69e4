package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/record"
)

// ProduceRequest is a client's Produce as the broker serves it: package
// protocol folds the request's version into plain fields (MessageSets) and
// reads each partition's outcome back from Partitions.
type ProduceRequest struct {
	// Acks is -1 (every ISR member has the records: the high watermark
	// passed them), 0 (no answer) or 1 (the leader appended them); any
	// other value fails every partition with INVALID_REQUIRED_ACKS.
	Acks int16
	// Timeout bounds the acks=-1 wait for the high watermark.
	Timeout time.Duration
	// MessageSets says the records are message sets v0/v1 (Produce v0-v2),
	// converted to one record batch v2 per partition before the append, as
	// Kafka 3.x does; otherwise they must be record batches v2.
	MessageSets bool
	// Partitions are the partitions produced to, in the request's order,
	// each with its records and, once Produce returns, its outcome.
	Partitions []ProducePartition
	// ConsoleWriter says the request may write the console's internal
	// topics (IsConsoleTopic): the caller found that it comes from a
	// broker's host, where the console runs (package protocol's address
	// check, the place of an ACL on the console's principal once
	// principals exist). Other internal topics are refused whatever it
	// says.
	ConsoleWriter bool

	// The client's quota is the caller's (package protocol throttles
	// around Produce). Authorisation is the caller's, per partition
	// (ProducePartition.Refused); storage's producer state decides what a
	// transactional batch may do.
}

// ProducePartition is one partition of a ProduceRequest and its outcome.
type ProducePartition struct {
	Topic     string
	Partition int32
	// Records are the partition's batches as the client sent them. The
	// append rewrites the base offset and leader epoch of each batch in
	// place: the caller's buffer is changed, and need not outlive Produce.
	Records []byte
	// Refused, set by the caller before Produce, is the partition's outcome
	// without appending (TOPIC_AUTHORIZATION_FAILED for a topic the
	// principal may not write).
	Refused error

	// Err is the partition's outcome (nil: appended and, with acks=-1,
	// replicated); ErrorCode maps it to its Kafka code and message.
	Err error
	// BaseOffset is the offset of the first record appended (for a retried
	// duplicate of an idempotent producer's batch, the offset it got the
	// first time), LogAppendTime the time the broker stamped on the batch
	// (-1 unless the topic uses LogAppendTime), LogStartOffset the
	// partition's log start. All -1 when Err is set.
	BaseOffset, LogAppendTime, LogStartOffset int64

	p         *Partition // the partition appended to, while acks=-1 waits
	waitUntil int64      // acks=-1: the high watermark that acknowledges the records
}

// fail records err as the partition's outcome.
func (pp *ProducePartition) fail(err error) {
	pp.Err = err
	pp.BaseOffset, pp.LogAppendTime, pp.LogStartOffset = -1, -1, -1
	pp.p = nil
}

// A WaitHook is told that a data-plane operation is about to wait — an
// acks=-1 Produce for its ISR, a Fetch for min_bytes — once, on the
// operation's goroutine, just before it parks: its caller's cue to let go of
// what others need meanwhile. Package protocol's *Request lets the
// connection read its next request (Detach); broker does not know it.
//
// Produce and Fetch take it as an argument, not as a field of their
// request: a call through an interface lets the compiler assume the worst of
// whatever holds the interface, so as a field it would move the request's
// partition list to the heap — an allocation per produce.
type WaitHook interface {
	BeforeWait()
}

// Produce appends each partition's records as its leader and, with
// acks=-1, waits until the high watermark passes them (every ISR member has
// them) or req.Timeout ends. Each partition's outcome is written beside its
// records (ProducePartition.Err, BaseOffset, ...).
//
// The steps for each partition, any of which fails that partition alone:
// acks must be -1, 0 or 1; internal topics are refused
// (INVALID_TOPIC_EXCEPTION: only the group coordinator writes
// __consumer_offsets, and only a ConsoleWriter the console's topics); this
// broker must lead the partition; message sets are converted to record
// batch v2, and v2 batches must not be message sets; then storage validates the batches (CRC, sizes,
// max.message.bytes, records, compressed records within
// message.decompressed.max.bytes), transactional batches open or continue
// their producer's transaction, idempotent sequences are checked (a retried duplicate succeeds with
// its original offsets), offsets are assigned in place and the batches are
// appended. acks=-1 also needs min.insync.replicas members in the ISR
// (NOT_ENOUGH_REPLICAS) before the append.
//
// acks=-1 then waits, on the caller's goroutine, for every appended
// partition's high watermark. When it has passed them all already (a
// single node; followers that are caught up) Produce returns at once; only
// a request that must wait calls waiting.BeforeWait (when waiting is not
// nil) and counts in the produce purgatory while it waits. A partition whose high watermark did not
// arrive in time fails with REQUEST_TIMED_OUT (its records stay appended,
// as in Kafka), one whose leadership moved with NOT_LEADER_OR_FOLLOWER, and
// one whose ISR shrank below min.insync.replicas meanwhile with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND. ctx ends the wait early (the connection
// closed, the server stopping).
func (b *Broker) Produce(ctx context.Context, req *ProduceRequest, waiting WaitHook) {
	waits := false
	for i := range req.Partitions {
		pp := &req.Partitions[i]
		if pp.Refused != nil {
			pp.fail(pp.Refused)
			continue
		}
		if err := b.produceTo(pp, req); err != nil {
			pp.fail(err)
			continue
		}
		waits = waits || pp.p != nil
	}
	if !waits {
		return
	}
	defer func() {
		for i := range req.Partitions {
			req.Partitions[i].p = nil
		}
	}()
	// acks=-1: the high watermark has usually passed the records already;
	// then answer now, without parking.
	mustWait := false
	for i := range req.Partitions {
		if pp := &req.Partitions[i]; pp.p != nil && pp.p.HighWatermark() < pp.waitUntil {
			mustWait = true
			break
		}
	}
	if !mustWait {
		for i := range req.Partitions {
			// Passed, but the ISR may have shrunk below
			// min.insync.replicas since the append.
			if pp := &req.Partitions[i]; pp.p != nil {
				if err := pp.p.WaitForHighWatermark(ctx, pp.waitUntil); err != nil {
					pp.fail(err)
				}
			}
		}
		return
	}
	if waiting != nil {
		waiting.BeforeWait()
	}
	b.enterPurgatory(delayedProduce)
	defer b.leavePurgatory(delayedProduce)
	wctx, cancel := context.WithTimeout(ctx, max(req.Timeout, 0))
	defer cancel()
	for i := range req.Partitions {
		if pp := &req.Partitions[i]; pp.p != nil {
			if err := pp.p.WaitForHighWatermark(wctx, pp.waitUntil); err != nil {
				pp.fail(err)
			}
		}
	}
}

// produceTo appends one partition's records; with acks=-1 it leaves pp.p
// and pp.waitUntil set for the wait.
func (b *Broker) produceTo(pp *ProducePartition, req *ProduceRequest) error {
	if req.Acks != -1 && req.Acks != 0 && req.Acks != 1 {
		return errorf(kerr.InvalidRequiredAcks, "acks must be -1, 0 or 1")
	}
	if err := checkClientAppend(pp.Topic, req.ConsoleWriter); err != nil {
		return err
	}
	p, err := b.LeaderPartition(pp.Topic, pp.Partition)
	if err != nil {
		return err
	}
	records, err := produceRecords(req.MessageSets, pp.Records)
	if err != nil {
		return err
	}
	info, err := p.appendRecords(records, req.Acks, nil)
	if err != nil {
		return err
	}
	pp.BaseOffset, pp.LogAppendTime, pp.LogStartOffset = info.FirstOffset, info.LogAppendTime, info.LogStartOffset
	if req.Acks == -1 {
		pp.p, pp.waitUntil = p, info.LastOffset+1
	}
	return nil
}

// produceRecords checks a partition's records for the request's format and
// converts v0/v1 message sets to record batch v2.
func produceRecords(messageSets bool, records []byte) ([]byte, error) {
	if len(records) == 0 {
		return nil, errorf(kerr.CorruptMessage, "no records")
	}
	if messageSets {
		if record.IsMessageSetV2(records) {
			return nil, errorf(kerr.InvalidRecord, "produce v0-v2 must carry message format v0 or v1")
		}
		out, err := record.ConvertMessageSet(records)
		if err != nil {
			return nil, &Error{Code: kerr.CorruptMessage, Msg: err.Error()}
		}
		return out, nil
	}
	if !record.IsMessageSetV2(records) {
		return nil, errorf(kerr.InvalidRecord, "produce v3+ must carry record batch v2")
	}
	return records, nil
}
