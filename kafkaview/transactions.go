package kafkaview

import (
	"context"
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
	Err           string // the describe failed for this id
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
	return out, lerr
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
