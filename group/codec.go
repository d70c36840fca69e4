package group

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

// The records of __consumer_offsets, in Kafka's own schemas
// (GroupMetadataManager; the JSON specs OffsetCommitKey.json,
// OffsetCommitValue.json, GroupMetadataKey.json, GroupMetadataValue.json).
// Every key and value starts with an int16 version:
//
//	key v0, v1   offset commit   group, topic, partition
//	  value v0   offset, metadata, commit_timestamp
//	  value v1   offset, metadata, commit_timestamp, expire_timestamp
//	  value v2   offset, metadata, commit_timestamp
//	  value v3   offset, leader_epoch, metadata, commit_timestamp
//	  value v4   v3, flexible (tagged topic id)
//	key v2       group metadata  group
//	  value v0-4 protocol_type, generation, protocol, leader,
//	             [current_state_timestamp v2+], members (instance id v3+)
//
// Sluice writes what Kafka 2.1+ writes: offset key v1 with value v3 (value v1
// when the commit carried an explicit retention, OffsetCommit v2-v4), and
// group key v2 with value v3. A tombstone (null value) deletes the key. It
// reads every version above. Keys of other versions (for example Kafka 4's
// KIP-848 records) are skipped on load, as they belong to group types Sluice
// does not run.
const (
	offsetKeyVersion   int16 = 1
	offsetValueVersion int16 = 3
	expireValueVersion int16 = 1 // offset value with an explicit expire timestamp
	groupKeyVersion    int16 = 2
	groupValueVersion  int16 = 3
)

// OffsetsTopic is the compacted internal topic holding committed offsets and
// group metadata.
const OffsetsTopic = "__consumer_offsets"

// ErrCorruptRecord marks a __consumer_offsets key or value that does not
// decode. Test with errors.Is.
var ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")

// PartitionFor returns the __consumer_offsets partition that holds group:
// abs(javaStringHashCode(group)) % partitions, where abs maps MinInt32 to 0
// as Kafka's Utils.abs does, so the same group lives on the same partition
// number as in Kafka.
func PartitionFor(group string, partitions int32) int32 {
	if partitions <= 0 {
		return 0
	}
	h := javaStringHash(group)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// javaStringHash is java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over UTF-16 code units, with int32 overflow. Invalid UTF-8 bytes count as
// U+FFFD, as Java's decoder replaces them.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// recordKind tells what a __consumer_offsets key is.
type recordKind int8

const (
	kindUnknown recordKind = iota
	kindOffset
	kindGroup
)

// decodedKey is a decoded __consumer_offsets key.
type decodedKey struct {
	kind      recordKind
	group     string
	topic     string // kindOffset
	partition int32  // kindOffset
}

// decodeKey decodes a __consumer_offsets key. A key of a version Sluice does
// not know gives kindUnknown and no error.
func decodeKey(b []byte) (decodedKey, error) {
	if len(b) < 2 {
		return decodedKey{}, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(b))
	}
	version := int16(b[0])<<8 | int16(b[1])
	switch version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("%w: offset key: %v", ErrCorruptRecord, err)
		}
		return decodedKey{kind: kindOffset, group: k.Group, topic: k.Topic, partition: k.Partition}, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("%w: group key: %v", ErrCorruptRecord, err)
		}
		return decodedKey{kind: kindGroup, group: k.Group}, nil
	default:
		return decodedKey{kind: kindUnknown}, nil
	}
}

// offsetCommit is one committed offset as kept in memory and in the log.
type offsetCommit struct {
	offset      int64
	leaderEpoch int32 // -1 when unknown
	metadata    string
	commitTime  int64 // ms
	expireTime  int64 // ms; -1 when the retention applies (value v3)
}

func encodeOffsetKey(dst []byte, group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(dst)
}

func encodeOffsetValue(dst []byte, c offsetCommit) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	if c.expireTime >= 0 {
		v.Version = expireValueVersion
		v.ExpireTimestamp = c.expireTime
	}
	v.Offset = c.offset
	v.LeaderEpoch = c.leaderEpoch
	v.Metadata = c.metadata
	v.CommitTimestamp = c.commitTime
	return v.AppendTo(dst)
}

func decodeOffsetValue(b []byte) (offsetCommit, error) {
	if len(b) < 2 {
		return offsetCommit{}, fmt.Errorf("%w: offset value of %d bytes", ErrCorruptRecord, len(b))
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(b); err != nil {
		return offsetCommit{}, fmt.Errorf("%w: offset value: %v", ErrCorruptRecord, err)
	}
	if v.Version < 0 || v.Version > 4 {
		return offsetCommit{}, fmt.Errorf("%w: offset value version %d", ErrCorruptRecord, v.Version)
	}
	c := offsetCommit{
		offset:      v.Offset,
		leaderEpoch: -1,
		metadata:    v.Metadata,
		commitTime:  v.CommitTimestamp,
		expireTime:  -1,
	}
	if v.Version >= 3 {
		c.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 && v.ExpireTimestamp >= 0 {
		// A negative expire timestamp (Kafka writes -1) means none: the
		// offsets.retention.minutes rule applies, as for a v3 value.
		c.expireTime = v.ExpireTimestamp
	}
	return c, nil
}

func encodeGroupKey(dst []byte, group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(dst)
}

// storedGroup is the group metadata value: what survives a coordinator move.
type storedGroup struct {
	protocolType   string
	generation     int32
	protocol       string // "" when none
	leader         string // "" when none
	stateTimestamp int64  // ms; -1 when unknown
	members        []storedMember
}

type storedMember struct {
	memberID         string
	instanceID       string // "" for a dynamic member
	clientID         string
	clientHost       string
	rebalanceTimeout int32
	sessionTimeout   int32
	subscription     []byte // the metadata of the selected protocol
	assignment       []byte
}

func encodeGroupValue(dst []byte, g *storedGroup) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateTimestamp
	v.Members = make([]kmsg.GroupMetadataValueMember, len(g.members))
	for i, m := range g.members {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.memberID
		if m.instanceID != "" {
			vm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = m.rebalanceTimeout
		vm.SessionTimeoutMillis = m.sessionTimeout
		vm.Subscription = nonNil(m.subscription)
		vm.Assignment = nonNil(m.assignment)
		v.Members[i] = vm
	}
	return v.AppendTo(dst)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func decodeGroupValue(b []byte) (storedGroup, error) {
	if len(b) < 2 {
		return storedGroup{}, fmt.Errorf("%w: group value of %d bytes", ErrCorruptRecord, len(b))
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return storedGroup{}, fmt.Errorf("%w: group value: %v", ErrCorruptRecord, err)
	}
	if v.Version < 0 || v.Version > 4 {
		return storedGroup{}, fmt.Errorf("%w: group value version %d", ErrCorruptRecord, v.Version)
	}
	g := storedGroup{
		protocolType:   v.ProtocolType,
		generation:     v.Generation,
		stateTimestamp: -1,
		members:        make([]storedMember, 0, len(v.Members)),
	}
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	if v.Version >= 2 {
		g.stateTimestamp = v.CurrentStateTimestamp
	}
	for _, vm := range v.Members {
		m := storedMember{
			memberID:         vm.MemberID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			rebalanceTimeout: vm.RebalanceTimeoutMillis,
			sessionTimeout:   vm.SessionTimeoutMillis,
			// Copies: the value may alias a read buffer the caller reuses.
			subscription: bytes.Clone(vm.Subscription),
			assignment:   bytes.Clone(vm.Assignment),
		}
		if v.Version == 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		if vm.InstanceID != nil {
			m.instanceID = *vm.InstanceID
		}
		g.members = append(g.members, m)
	}
	return g, nil
}

// offsetsRecord is one __consumer_offsets record to append: a key and a
// value (nil value = tombstone).
type offsetsRecord struct {
	key, value []byte
}

// txnProducer is the transactional producer whose batch a
// TxnOffsetCommit writes.
type txnProducer struct {
	id    int64
	epoch int16
}

// buildBatch turns records into one uncompressed record batch v2 stamped
// with now: as Kafka's coordinator writes its own records (no
// producer), or as producer's transactional batch (TxnOffsetCommit). rs is
// scratch space, returned for reuse.
func buildBatch(rs []record.Record, records []offsetsRecord, nowMs int64, producer *txnProducer) ([]byte, []record.Record, error) {
	rs = rs[:0]
	for _, r := range records {
		rs = append(rs, record.Record{Key: r.key, Value: r.value})
	}
	opts := record.BatchOptions{
		PartitionLeaderEpoch: -1,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		BaseTimestamp:        nowMs,
	}
	if producer != nil {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = producer.id, producer.epoch, 0
		opts.Transactional = true
	}
	batch, err := record.BuildBatch(opts, rs)
	clear(rs)
	return batch, rs[:0], err
}
