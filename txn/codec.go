package txn

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/group"
)

// PartitionFor is the __transaction_state partition of a transactional
// id: abs(javaStringHashCode(id)) % partitions, Kafka's function (the same
// as for groups).
func PartitionFor(id string, partitions int32) int32 { return group.PartitionFor(id, partitions) }

// errUnknownVersion: a record of a key version this coordinator does not
// know (skipped when loading, as Kafka ignores them).
var errUnknownVersion = errors.New("txn: unknown record version")

// encodeKey is Kafka's TransactionLogKey v0: version 0 and the id.
func encodeKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	return k.AppendTo(nil)
}

// decodeKey returns the transactional id of a __transaction_state key.
func decodeKey(b []byte) (string, error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(b); err != nil {
		return "", fmt.Errorf("txn: key: %w", err)
	}
	if k.Version != 0 {
		return "", fmt.Errorf("%w: key version %d", errUnknownVersion, k.Version)
	}
	return k.TransactionalID, nil
}

// encodeValue is Kafka's TransactionLogValue v0 of md: the partitions are
// null in Empty, as Kafka writes them.
func encodeValue(md *metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = md.producerID, md.epoch, md.timeoutMs
	v.State = kmsg.TransactionState(md.state)
	v.LastUpdateTimestamp, v.StartTimestamp = md.updateMs, md.startMs
	if md.state != Empty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range md.sortedPartitions() {
			if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
				v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
			v.Topics = append(v.Topics, t)
		}
	}
	return v.AppendTo(nil)
}

// decodeValue reads a TransactionLogValue (v0, or v1 written by a Kafka
// with transaction.version > 0) into the metadata of id.
func decodeValue(id string, b []byte) (*metadata, error) {
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("txn: value of %q: %w", id, err)
	}
	if v.Version < 0 || v.Version > 1 {
		return nil, fmt.Errorf("%w: value version %d", errUnknownVersion, v.Version)
	}
	st := State(v.State)
	if st < Empty || st > PrepareEpochFence || st == PrepareEpochFence {
		return nil, fmt.Errorf("txn: value of %q: state %d", id, v.State)
	}
	if v.ProducerID < 0 || v.TimeoutMillis < 0 {
		return nil, fmt.Errorf("txn: value of %q: producer %d, timeout %d", id, v.ProducerID, v.TimeoutMillis)
	}
	md := &metadata{
		id: id, producerID: v.ProducerID, lastProducerID: -1, epoch: v.ProducerEpoch, lastEpoch: -1,
		timeoutMs: v.TimeoutMillis, state: st, pending: noState,
		partitions: make(map[TopicPartition]struct{}), startMs: v.StartTimestamp, updateMs: v.LastUpdateTimestamp,
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			md.partitions[TopicPartition{t.Topic, p}] = struct{}{}
		}
	}
	return md, nil
}
