package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacyMessage encodes one v0 or v1 message (with its offset and size
// prefix) as clients before Kafka 0.11 did.
func legacyMessage(magic, attrs int8, ts int64, key, value []byte, offset int64) []byte {
	body := []byte{0, 0, 0, 0, byte(magic), byte(attrs)}
	if magic == 1 {
		body = binary.BigEndian.AppendUint64(body, uint64(ts))
	}
	appendBytes := func(b []byte) {
		if b == nil {
			body = binary.BigEndian.AppendUint32(body, 0xffffffff)
			return
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
	}
	appendBytes(key)
	appendBytes(value)
	binary.BigEndian.PutUint32(body, crc32.ChecksumIEEE(body[4:]))
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...)
}

// TestProduceMessageSets: Produce v0-v2 carry message format v0/v1 (plain
// and gzip-wrapped); the broker converts them to record batch v2 and they
// read back with keys, values and (v1) timestamps.
func TestProduceMessageSets(t *testing.T) {
	n := startNode(t)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 1, 1, nil, "legacy"); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.Addr())
	send := func(version int16, set []byte) {
		t.Helper()
		req := produceReq("legacy", 0, 1, set)
		req.SetVersion(version)
		resp := c.recv(req, c.send(req)).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce v%d: %v", version, kerr.ErrorForCode(code))
		}
	}
	// v0: two plain v0 messages.
	send(0, append(legacyMessage(0, 0, 0, []byte("k0"), []byte("v0-a"), 0), legacyMessage(0, 0, 0, nil, []byte("v0-b"), 1)...))
	// v2: three v1 messages gzip-wrapped (inner offsets relative, wrapper
	// at the last inner offset).
	ts := time.Now().Add(-time.Minute).UnixMilli()
	var inner []byte
	for i := range 3 {
		inner = append(inner, legacyMessage(1, 0, ts+int64(i), []byte{'k', byte('0' + i)}, []byte{'g', byte('0' + i)}, int64(i))...)
	}
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write(inner)
	zw.Close()
	send(2, legacyMessage(1, 1, ts+2, nil, zbuf.Bytes(), 2))
	// v1: a plain v0 message.
	send(1, legacyMessage(0, 0, 0, []byte("k1"), []byte("v1-a"), 0))

	cl := n.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"legacy": {0: kgo.NewOffset().AtStart()}}))
	var got []*kgo.Record
	for len(got) < 6 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 6", len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	want := []struct{ key, value string }{{"k0", "v0-a"}, {"", "v0-b"}, {"k0", "g0"}, {"k1", "g1"}, {"k2", "g2"}, {"k1", "v1-a"}}
	for i, w := range want {
		r := got[i]
		if r.Offset != int64(i) || string(r.Key) != w.key || string(r.Value) != w.value {
			t.Fatalf("record %d: offset %d key %q value %q, want %q %q", i, r.Offset, r.Key, r.Value, w.key, w.value)
		}
		if i >= 2 && i <= 4 && r.Timestamp.UnixMilli() != ts+int64(i-2) {
			t.Fatalf("record %d: timestamp %d, want %d", i, r.Timestamp.UnixMilli(), ts+int64(i-2))
		}
	}
	if got[1].Key != nil {
		t.Fatalf("null key came back as %q", got[1].Key)
	}
	// A record batch in Produce v2 and a message set in v3 are refused.
	req := produceReq("legacy", 0, 1, batch(t, 1, -1, -1, -1, "x"))
	req.SetVersion(2)
	if code, _ := produceCode(t, c.recv(req, c.send(req))); code != kerr.InvalidRecord.Code {
		t.Fatalf("batch v2 in Produce v2: %d", code)
	}
	req = produceReq("legacy", 0, 1, legacyMessage(1, 0, ts, nil, []byte("x"), 0))
	req.SetVersion(3)
	if code, _ := produceCode(t, c.recv(req, c.send(req))); code != kerr.InvalidRecord.Code {
		t.Fatalf("message set in Produce v3: %d", code)
	}
}

// TestEveryAdvertisedVersion sends every advertised API at every advertised
// version (with a small valid body) and decodes the answer: each version
// the broker claims must really be served.
func TestEveryAdvertisedVersion(t *testing.T) {
	n := startNode(t)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 1, 1, nil, "v"); err != nil {
		t.Fatal(err)
	}
	if err := n.Client().ProduceSync(ctx, &kgo.Record{Topic: "v", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.Addr())
	av := kmsg.NewPtrApiVersionsRequest()
	avr := c.recv(av, c.send(av)).(*kmsg.ApiVersionsResponse)
	topicName := "v"
	// The broker's own APIs (the group APIs are tested by their package).
	own := map[int16]bool{0: true, 1: true, 2: true, 3: true, 18: true, 19: true, 20: true, 21: true, 22: true,
		23: true, 32: true, 33: true, 35: true, 37: true, 44: true, 60: true}
	seen := 0
	for _, k := range avr.ApiKeys {
		if !own[k.ApiKey] {
			continue
		}
		seen++
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			req := kmsg.RequestForKey(k.ApiKey)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.ApiVersionsRequest:
				r.ClientSoftwareName, r.ClientSoftwareVersion = "e2e", "1.0"
			case *kmsg.ProduceRequest:
				if v >= 3 {
					*r = *produceReq("v", 0, 1, batch(t, 1, -1, -1, -1, "p"))
				} else {
					*r = *produceReq("v", 0, 1, legacyMessage(1, 0, time.Now().UnixMilli(), nil, []byte("p"), 0))
				}
				r.SetVersion(v)
			case *kmsg.FetchRequest:
				*r = *fetchReq("v", 0, 0, 0, 0)
				r.SetVersion(v)
			case *kmsg.ListOffsetsRequest:
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = "v"
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Timestamp = -2
				lt.Partitions = append(lt.Partitions, lp)
				r.Topics = append(r.Topics, lt)
			case *kmsg.MetadataRequest:
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = &topicName
				r.Topics = append(r.Topics, mt)
			case *kmsg.DescribeConfigsRequest:
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = 2, "v"
				r.Resources = append(r.Resources, rr)
			case *kmsg.OffsetForLeaderEpochRequest:
				ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
				ot.Topic = "v"
				op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				ot.Partitions = append(ot.Partitions, op)
				r.Topics = append(r.Topics, ot)
			case *kmsg.DescribeLogDirsRequest:
				r.Topics = nil
			}
			resp := c.recv(req, c.send(req))
			if resp.GetVersion() != v {
				t.Fatalf("%s v%d answered at v%d", kmsg.NameForKey(k.ApiKey), v, resp.GetVersion())
			}
			checkVersionAnswer(t, k.ApiKey, v, resp)
		}
	}
	if seen != len(own) {
		t.Fatalf("ApiVersions lists %d of the broker's %d APIs: %+v", seen, len(own), avr.ApiKeys)
	}
	// Exactly the ranges the issues ask for (the transaction APIs: Kafka
	// 3.9's, issue 16).
	want := map[int16][2]int16{0: {0, 9}, 1: {4, 12}, 2: {0, 7}, 3: {0, 12}, 18: {0, 3}, 19: {0, 7}, 20: {0, 5},
		21: {0, 2}, 22: {0, 5}, 23: {0, 4}, 24: {0, 5}, 25: {0, 4}, 26: {0, 4}, 27: {0, 1}, 28: {0, 4},
		61: {0, 0}, 65: {0, 0}, 66: {0, 1}, 32: {0, 4}, 33: {0, 2}, 35: {0, 4}, 37: {0, 3}, 44: {0, 1}, 60: {0, 1}}
	for _, k := range avr.ApiKeys {
		if w, ok := want[k.ApiKey]; ok && (k.MinVersion != w[0] || k.MaxVersion != w[1]) {
			t.Errorf("%s advertised %d-%d, want %d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w[0], w[1])
		}
	}
}

// checkVersionAnswer checks the answers whose content the minimal requests
// above make predictable.
func checkVersionAnswer(t *testing.T, key, v int16, resp kmsg.Response) {
	t.Helper()
	fail := func(what any) { t.Fatalf("%s v%d: %+v", kmsg.NameForKey(key), v, what) }
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		if r.ErrorCode != 0 || len(r.ApiKeys) < 10 {
			fail(r)
		}
	case *kmsg.ProduceResponse:
		if r.Topics[0].Partitions[0].ErrorCode != 0 {
			fail(r.Topics[0].Partitions[0])
		}
	case *kmsg.FetchResponse:
		if p := r.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
			fail(p)
		}
	case *kmsg.ListOffsetsResponse:
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || v == 0 && (len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 0) || v > 0 && p.Offset != 0 {
			fail(p)
		}
	case *kmsg.MetadataResponse:
		if len(r.Brokers) != 1 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 1 {
			fail(r)
		}
	case *kmsg.DescribeConfigsResponse:
		if r.Resources[0].ErrorCode != 0 || len(r.Resources[0].Configs) < 10 {
			fail(r.Resources[0])
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		if p := r.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.EndOffset < 1 {
			fail(p)
		}
	case *kmsg.DescribeLogDirsResponse:
		if len(r.Dirs) != 1 || len(r.Dirs[0].Topics) == 0 {
			fail(r)
		}
	case *kmsg.DescribeClusterResponse:
		if r.ErrorCode != 0 || len(r.Brokers) != 1 || r.ClusterID == "" {
			fail(r)
		}
	case *kmsg.InitProducerIDResponse:
		if r.ErrorCode != 0 || r.ProducerID < 0 {
			fail(r)
		}
	}
}
