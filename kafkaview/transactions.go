package kafkaview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TransactionStates are Kafka's transaction states, in the order of a
// transaction's life (DescribeTransactions and ListTransactions name them
// so).
var TransactionStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Dead"}

// Transaction is one transactional id as its coordinator describes it.
type Transaction struct {
	ID            string
	State         string
	Coordinator   int32
	ProducerID    int64
	ProducerEpoch int16
	Timeout       time.Duration
	Started       time.Time // when the open transaction began (zero when none is open)
	Partitions    []TopicPartition
	// LSOLag, for an open transaction, is per partition its high
	// watermark minus its last stable offset: how many records
	// read_committed consumers of the partition are held back by (this or
	// an older open transaction); a partition missing could not be listed.
	LSOLag map[TopicPartition]int64
	Err    string // the describe failed for this id
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Open is whether the id has a transaction in progress: Ongoing or being
// committed or aborted.
func (t Transaction) Open() bool {
	switch t.State {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}

// Age is how long the open transaction has run at now (0 when none is
// open).
func (t Transaction) Age(now time.Time) time.Duration {
	if !t.Open() || t.Started.IsZero() {
		return 0
	}
	return max(0, now.Sub(t.Started))
}

// Hanging is whether the open transaction has run past its timeout: the
// coordinator aborts such a transaction, so one still open is stuck (its
// producer gone, or the coordinator unable to write the markers).
func (t Transaction) Hanging(now time.Time) bool {
	return t.Open() && t.Timeout > 0 && t.Age(now) > t.Timeout
}

// ValidTransactionState reports whether s is one of TransactionStates.
func ValidTransactionState(s string) bool {
	for _, x := range TransactionStates {
		if x == s {
			return true
		}
	}
	return false
}

// Transactions lists every transactional id the brokers' coordinators
// know (ListTransactions, in the given states, all when empty) and
// describes them (DescribeTransactions), sorted by id. Brokers that did
// not answer make an error beside the ids the others listed; ids whose
// describe failed carry Err.
func (c *Client) Transactions(ctx context.Context, states ...string) ([]Transaction, error) {
	listed, lerr := c.adm.ListTransactions(ctx, nil, states)
	if lerr != nil {
		lerr = fmt.Errorf("list transactions: %w", lerr)
	}
	if len(listed) == 0 {
		return nil, lerr
	}
	ids := make([]string, 0, len(listed))
	for id := range listed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	described, err := c.adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("describe transactions: %w", err)
	}
	out := make([]Transaction, 0, len(ids))
	for _, id := range ids {
		l := listed[id]
		t := Transaction{ID: id, State: l.State, Coordinator: l.Coordinator, ProducerID: l.ProducerID, ProducerEpoch: -1}
		d, ok := described[id]
		switch {
		case !ok:
			t.Err = "not described"
			if err != nil {
				t.Err = err.Error()
			}
		case d.Err != nil:
			t.Err = d.Err.Error()
		default:
			t.State, t.Coordinator, t.ProducerID, t.ProducerEpoch = d.State, d.Coordinator, d.ProducerID, d.ProducerEpoch
			t.Timeout = time.Duration(d.TimeoutMillis) * time.Millisecond
			if d.StartTimestamp > 0 {
				t.Started = time.UnixMilli(d.StartTimestamp)
			}
			for _, tp := range d.Topics.Sorted() {
				for _, p := range tp.Partitions {
					t.Partitions = append(t.Partitions, TopicPartition{tp.Topic, p})
				}
			}
			sort.Slice(t.Partitions, func(i, j int) bool {
				a, b := t.Partitions[i], t.Partitions[j]
				return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
			})
		}
		out = append(out, t)
	}
	c.fillLSOLags(ctx, out)
	return out, lerr
}

// fillLSOLags sets the LSO lag of the open transactions' partitions: one
// ListOffsets latest read_uncommitted and one read_committed for all
// their topics. Partitions that could not be listed are left out.
func (c *Client) fillLSOLags(ctx context.Context, txns []Transaction) {
	var topics []string
	seen := map[string]bool{}
	for _, t := range txns {
		if !t.Open() {
			continue
		}
		for _, p := range t.Partitions {
			if !seen[p.Topic] {
				seen[p.Topic] = true
				topics = append(topics, p.Topic)
			}
		}
	}
	if len(topics) == 0 {
		return
	}
	ends, _ := c.adm.ListEndOffsets(ctx, topics...)
	stable, _ := c.adm.ListCommittedOffsets(ctx, topics...)
	for i := range txns {
		t := &txns[i]
		if !t.Open() {
			continue
		}
		for _, p := range t.Partitions {
			e, ok1 := ends.Lookup(p.Topic, p.Partition)
			s, ok2 := stable.Lookup(p.Topic, p.Partition)
			if !ok1 || !ok2 || e.Err != nil || s.Err != nil {
				continue
			}
			if t.LSOLag == nil {
				t.LSOLag = make(map[TopicPartition]int64, len(t.Partitions))
			}
			t.LSOLag[p] = max(0, e.Offset-s.Offset)
		}
	}
}

// LastStableOffsets lists the last stable offset of the topic's partitions
// (kadm's ListCommittedOffsets: ListOffsets latest with isolation level
// read_committed, where a read_committed consumer stops, before the first
// record of the oldest open transaction). A partition whose leader
// answered an error is left out and named in the error.
func (c *Client) LastStableOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	listed, err := c.adm.ListCommittedOffsets(ctx, topic)
	if err != nil && len(listed) == 0 {
		return nil, fmt.Errorf("list last stable offsets of %s: %w", topic, err)
	}
	out := make(map[int32]int64)
	var errs []string
	listed.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic {
			return
		}
		if o.Err != nil {
			errs = append(errs, fmt.Sprintf("partition %d: %v", o.Partition, o.Err))
			return
		}
		out[o.Partition] = o.Offset
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return out, fmt.Errorf("list last stable offsets of %s: %s", topic, strings.Join(errs, "; "))
	}
	return out, nil
}

// AbortMarker is an ABORT marker for a producer's open transaction on one
// partition, as WriteTxnMarkers carries it.
type AbortMarker struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32 // the producer state's (DescribeProducers), -1 when it never had one
}

// ErrMarkerUnanswered is WriteAbortMarker's error when the partition's
// leader left the partition out of its answer.
var ErrMarkerUnanswered = errors.New("the partition's leader did not answer for it")

// WriteAbortMarker ends the producer's open transaction on the partition:
// it writes an ABORT marker there (WriteTxnMarkers to the partition's
// leader, as kafka-transactions.sh abort does; the principal needs
// ClusterAction on the cluster). The transaction's records on that
// partition become invisible to read_committed consumers for good, and the
// partition's last stable offset moves past them. It returns the broker
// that wrote the marker. A request that failed is returned as it is (for
// the caller to name); a partition the leader refused comes back as its
// Kafka error.
func WriteAbortMarker(ctx context.Context, adm *kadm.Client, m AbortMarker) (int32, error) {
	resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		CoordinatorEpoch: m.CoordinatorEpoch, Topics: kadm.TopicsSet{m.Topic: {m.Partition: {}}}})
	if err != nil {
		return -1, err
	}
	pr, ok := resp[m.ProducerID].Topics[m.Topic].Partitions[m.Partition]
	if !ok {
		return -1, ErrMarkerUnanswered
	}
	return pr.NodeID, pr.Err
}

// Aborted is one partition of an AbortTransaction.
type Aborted struct {
	TopicPartition
	Broker int32  // that wrote the marker (-1 when none was written)
	Skip   string // why no marker was needed or written
	Err    error
}

// AbortTransaction aborts the open transaction of t's producer on each of
// t's partitions where that producer (at t's epoch) still has one
// (DescribeProducers), by WriteAbortMarker with the producer state's
// coordinator epoch: what `sluice transactions abort` does for a hanging
// transaction, for all its partitions at once. Partitions where the
// producer has no open transaction are left alone (Skip says so). The
// error is for a describe that failed altogether; a partition's failure is
// in its Err.
func (c *Client) AbortTransaction(ctx context.Context, t Transaction) ([]Aborted, error) {
	if len(t.Partitions) == 0 {
		return nil, fmt.Errorf("transaction %s has no partitions to abort", t.ID)
	}
	set := kadm.TopicsSet{}
	for _, p := range t.Partitions {
		set.Add(p.Topic, p.Partition)
	}
	described, err := c.adm.DescribeProducers(ctx, set)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("describe producers: %w", err)
	}
	out := make([]Aborted, 0, len(t.Partitions))
	for _, tp := range t.Partitions {
		a := Aborted{TopicPartition: tp, Broker: -1}
		dp, ok := described[tp.Topic].Partitions[tp.Partition]
		switch {
		case !ok:
			a.Err = errors.New("its leader did not describe its producers")
		case dp.Err != nil:
			a.Err = fmt.Errorf("describe producers: %w", dp.Err)
		}
		if a.Err != nil {
			out = append(out, a)
			continue
		}
		var m *AbortMarker
		for _, p := range dp.ActiveProducers.Sorted() {
			if p.ProducerID == t.ProducerID && p.CurrentTxnStartOffset >= 0 {
				m = &AbortMarker{Topic: tp.Topic, Partition: tp.Partition, ProducerID: p.ProducerID,
					ProducerEpoch: p.ProducerEpoch, CoordinatorEpoch: p.CoordinatorEpoch}
			}
		}
		if m == nil {
			a.Skip = "the producer has no open transaction here"
			out = append(out, a)
			continue
		}
		a.Broker, a.Err = WriteAbortMarker(ctx, c.adm, *m)
		out = append(out, a)
	}
	return out, nil
}
