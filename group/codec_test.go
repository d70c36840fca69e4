package group

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/record"
)

func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		group string
		hash  int32 // java.lang.String.hashCode
		want  int32 // partition of 50
	}{
		{"test", 3556498, 48},
		{"my-group", -1906497762, 12},
		{"console-consumer-12345", 158455506, 6},
		// hashCode is Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
		{"polygenelubricants", -2147483648, 0},
		{"", 0, 0},
		// A character outside the BMP counts as two UTF-16 code units.
		{"😀g", 54959972, 22},
	} {
		if h := javaStringHash(tc.group); h != tc.hash {
			t.Errorf("hash(%q) = %d, want %d", tc.group, h, tc.hash)
		}
		if p := PartitionFor(tc.group, 50); p != tc.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", tc.group, p, tc.want)
		}
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCodecGolden pins the bytes to Kafka's schemas, field by field, so the
// log is what a Kafka operator's tools (kafka-console-consumer with the
// offsets formatter) read.
func TestCodecGolden(t *testing.T) {
	// Offset commit key v1: version, group, topic, partition.
	key := encodeOffsetKey(nil, "g", "t", 3)
	if want := unhex(t, "0001 0001 67 0001 74 00000003"); !bytes.Equal(key, want) {
		t.Fatalf("offset key % x", key)
	}
	// Offset commit value v3: version, offset, leader epoch, metadata,
	// commit timestamp.
	val := encodeOffsetValue(nil, offsetCommit{offset: 42, leaderEpoch: 5, metadata: "m", commitTime: 1000, expireTime: -1})
	if want := unhex(t, "0003 000000000000002a 00000005 0001 6d 00000000000003e8"); !bytes.Equal(val, want) {
		t.Fatalf("offset value % x", val)
	}
	// With an explicit retention (OffsetCommit v2-v4), value v1: version,
	// offset, metadata, commit timestamp, expire timestamp.
	val1 := encodeOffsetValue(nil, offsetCommit{offset: 1, leaderEpoch: -1, metadata: "", commitTime: 2, expireTime: 3})
	if want := unhex(t, "0001 0000000000000001 0000 0000000000000002 0000000000000003"); !bytes.Equal(val1, want) {
		t.Fatalf("offset value v1 % x", val1)
	}
	// Group metadata key v2: version, group.
	gkey := encodeGroupKey(nil, "g")
	if want := unhex(t, "0002 0001 67"); !bytes.Equal(gkey, want) {
		t.Fatalf("group key % x", gkey)
	}
	// Group metadata value v3: version, protocol type, generation,
	// protocol, leader, current state timestamp, members [member id,
	// instance id, client id, client host, rebalance timeout, session
	// timeout, subscription, assignment].
	gval := encodeGroupValue(nil, &storedGroup{
		protocolType: "consumer", generation: 2, protocol: "range", leader: "m1", stateTimestamp: 7,
		members: []storedMember{{memberID: "m1", instanceID: "i", clientID: "c", clientHost: "/h",
			rebalanceTimeout: 300, sessionTimeout: 100, subscription: []byte{1}, assignment: []byte{2, 3}}},
	})
	want := unhex(t, `0003 0008 636f6e73756d6572 00000002 0005 72616e6765 0002 6d31 0000000000000007
		00000001 0002 6d31 0001 69 0001 63 0002 2f68 0000012c 00000064 00000001 01 00000002 0203`)
	if !bytes.Equal(gval, want) {
		t.Fatalf("group value\n got % x\nwant % x", gval, want)
	}
	// An Empty group: null protocol and leader, no members.
	empty := encodeGroupValue(nil, &storedGroup{protocolType: "consumer", generation: 4, stateTimestamp: 9})
	if want := unhex(t, "0003 0008 636f6e73756d6572 00000004 ffff ffff 0000000000000009 00000000"); !bytes.Equal(empty, want) {
		t.Fatalf("empty group value % x", empty)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	k, err := decodeKey(encodeOffsetKey(nil, "grp", "topic", 7))
	if err != nil || k != (decodedKey{kind: kindOffset, group: "grp", topic: "topic", partition: 7}) {
		t.Fatalf("offset key: %+v %v", k, err)
	}
	k, err = decodeKey(encodeGroupKey(nil, "grp"))
	if err != nil || k != (decodedKey{kind: kindGroup, group: "grp"}) {
		t.Fatalf("group key: %+v %v", k, err)
	}
	for _, c := range []offsetCommit{
		{offset: 5, leaderEpoch: 2, metadata: "x", commitTime: 9, expireTime: -1},
		{offset: 6, leaderEpoch: -1, metadata: "", commitTime: 9, expireTime: 99},
	} {
		got, err := decodeOffsetValue(encodeOffsetValue(nil, c))
		if err != nil || got != c {
			t.Fatalf("offset value: %+v %v, want %+v", got, err, c)
		}
	}
	sg := storedGroup{protocolType: "consumer", generation: 3, protocol: "sticky", leader: "a", stateTimestamp: 11,
		members: []storedMember{
			{memberID: "a", clientID: "ca", clientHost: "/1", rebalanceTimeout: 1, sessionTimeout: 2, subscription: []byte("s"), assignment: []byte("x")},
			{memberID: "b", instanceID: "ib", clientID: "cb", clientHost: "/2", rebalanceTimeout: 3, sessionTimeout: 4, subscription: []byte{}, assignment: []byte{}},
		}}
	got, err := decodeGroupValue(encodeGroupValue(nil, &sg))
	if err != nil || !reflect.DeepEqual(got, sg) {
		t.Fatalf("group value:\n got %+v\nwant %+v (%v)", got, sg, err)
	}
}

// TestDecodeOlderVersions reads values as older Kafka versions wrote them.
func TestDecodeOlderVersions(t *testing.T) {
	// Offset value v0: offset, metadata, timestamp.
	c, err := decodeOffsetValue(unhex(t, "0000 0000000000000009 0002 6869 0000000000000004"))
	if err != nil || c.offset != 9 || c.metadata != "hi" || c.commitTime != 4 || c.leaderEpoch != -1 || c.expireTime != -1 {
		t.Fatalf("v0: %+v %v", c, err)
	}
	// Group value v0: no state timestamp; members without rebalance
	// timeout (it is the session timeout) and without instance id.
	g, err := decodeGroupValue(unhex(t, `0000 0008 636f6e73756d6572 00000001 0005 72616e6765 0001 61
		00000001 0001 61 0001 63 0001 68 00000064 00000000 00000000`))
	if err != nil || g.generation != 1 || g.stateTimestamp != -1 || len(g.members) != 1 || g.members[0].rebalanceTimeout != 100 {
		t.Fatalf("group v0: %+v %v", g, err)
	}
	// A key of a version Sluice does not know is skipped, not an error.
	k, err := decodeKey(unhex(t, "0003 0001 67"))
	if err != nil || k.kind != kindUnknown {
		t.Fatalf("unknown key: %+v %v", k, err)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	for _, b := range [][]byte{nil, {0}, {0, 1}, {0, 1, 0, 5, 'a'}, {0, 2, 0xff, 0xff, 0xff}} {
		if _, err := decodeKey(b); err == nil {
			t.Errorf("key % x decoded", b)
		} else if !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("key % x: %v is not ErrCorruptRecord", b, err)
		}
	}
	for _, b := range [][]byte{nil, {0, 3, 0}, {0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := decodeOffsetValue(b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("offset value % x: %v", b, err)
		}
	}
	// A member count far beyond the bytes there are.
	if _, err := decodeGroupValue(unhex(t, "0003 0000 00000001 ffff ffff 0000000000000000 7fffffff")); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("group value with a huge member count: %v", err)
	}
}

// FuzzOffsetsRecord feeds arbitrary keys and values to the
// __consumer_offsets decoders (as a load reads them from a log that may
// have been written by anything): they must never panic, and what decodes
// must encode back to a value that decodes the same.
func FuzzOffsetsRecord(f *testing.F) {
	f.Add(encodeOffsetKey(nil, "g", "t", 1), encodeOffsetValue(nil, offsetCommit{offset: 1, leaderEpoch: 2, metadata: "m", commitTime: 3, expireTime: -1}))
	f.Add(encodeGroupKey(nil, "g"), encodeGroupValue(nil, &storedGroup{protocolType: "consumer", generation: 1, protocol: "range", leader: "a",
		members: []storedMember{{memberID: "a", instanceID: "i", subscription: []byte{1}, assignment: []byte{2}}}}))
	f.Add([]byte{0, 2, 0, 0}, []byte{0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1}, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		lr := newLoadResult()
		_ = lr.apply(key, value)
		if c, err := decodeOffsetValue(value); err == nil {
			again, err := decodeOffsetValue(encodeOffsetValue(nil, c))
			if err != nil {
				t.Fatalf("re-encoded offset value does not decode: %v", err)
			}
			if c.expireTime < 0 && again != c {
				t.Fatalf("offset value round trip: %+v -> %+v", c, again)
			}
		}
		if g, err := decodeGroupValue(value); err == nil {
			again, err := decodeGroupValue(encodeGroupValue(nil, &g))
			if err != nil {
				t.Fatalf("re-encoded group value does not decode: %v", err)
			}
			if again.generation != g.generation || len(again.members) != len(g.members) {
				t.Fatalf("group value round trip: %+v -> %+v", g, again)
			}
		}
	})
}

// TestLoadBatches: a load reads what Kafka may have written — compressed
// batches (offsets.topic.compression.codec) — and a read that starts
// inside a batch skips the records before the asked offset.
func TestLoadBatches(t *testing.T) {
	recs := []record.Record{
		{Key: encodeOffsetKey(nil, "g", "t", 0), Value: encodeOffsetValue(nil, offsetCommit{offset: 1, leaderEpoch: -1, expireTime: -1})},
		{Key: encodeOffsetKey(nil, "g", "t", 1), Value: encodeOffsetValue(nil, offsetCommit{offset: 2, leaderEpoch: -1, expireTime: -1})},
		{Key: encodeOffsetKey(nil, "g", "t", 0), Value: nil}, // tombstone
		{Key: encodeGroupKey(nil, "g"), Value: encodeGroupValue(nil, &storedGroup{protocolType: "consumer", generation: 9})},
	}
	gz, err := record.BuildBatch(record.BatchOptions{Compression: record.CompressionGzip, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	lr := newLoadResult()
	next, err := lr.applyBatches(gz, 0)
	if err != nil || next != 4 {
		t.Fatalf("apply: next %d, %v", next, err)
	}
	if _, ok := lr.offsets["g"][topicPartition{"t", 0}]; ok || lr.offsets["g"][topicPartition{"t", 1}].offset != 2 {
		t.Fatalf("offsets %+v", lr.offsets)
	}
	if lr.groups["g"] == nil || lr.groups["g"].generation != 9 {
		t.Fatalf("groups %+v", lr.groups)
	}
	// Starting at offset 2: the first two records are not applied.
	lr = newLoadResult()
	if _, err := lr.applyBatches(gz, 2); err != nil {
		t.Fatal(err)
	}
	if len(lr.offsets) != 0 || lr.records != 2 {
		t.Fatalf("from 2: offsets %+v, %d records", lr.offsets, lr.records)
	}
	// A corrupt record is skipped and counted; the rest still loads.
	bad, _ := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{
		{Key: []byte{0, 1, 0xff}, Value: []byte{1}},
		recs[1],
	})
	lr = newLoadResult()
	if _, err := lr.applyBatches(bad, 0); err != nil {
		t.Fatal(err)
	}
	if lr.corrupt != 1 || lr.offsets["g"][topicPartition{"t", 1}].offset != 2 {
		t.Fatalf("corrupt %d, offsets %+v", lr.corrupt, lr.offsets)
	}
}
