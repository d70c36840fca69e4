package protocol

import (
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkHandlerCPU runs one Produce (one small batch, acks=1 or
// acks=all) or one Fetch (a few records) through decoding, its handler and
// the encoding of its answer, on one goroutine and with no socket: the CPU
// the protocol layer, the broker and storage spend on a request, without
// the network and the scheduler that BenchmarkProduce and BenchmarkFetch
// (server_bench_test.go) include. On a loaded machine its ns/op moves far
// less than theirs, so it is the one to compare builds with.
func BenchmarkHandlerCPU(b *testing.B) {
	n := newFuzzNode(b)
	defer n.close()
	batch := func() []byte {
		// One record, as a producer keeping up sends them (built by
		// kmsg, so this file compiles against any revision).
		now := time.Now().UnixMilli()
		rb := kmsg.RecordBatch{FirstOffset: 0, Magic: 2, LastOffsetDelta: 0, FirstTimestamp: now, MaxTimestamp: now,
			ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1}
		r := kmsg.Record{Value: []byte("a value of some twenty bytes")}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		rb.Records = r.AppendTo(nil)
		raw := rb.AppendTo(nil)
		rb.Length = int32(len(raw) - 12)
		raw = rb.AppendTo(nil)
		rb.CRC = int32(crcOf(raw[21:]))
		return rb.AppendTo(nil)
	}()
	produce := func(acks int16) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, acks, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "fuzz", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 1, Records: batch}}}}
		return frameOf(req, 1, "bench")
	}
	fetch := func() []byte {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.MinBytes = 12, -1, 1<<20, 1
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = 0, 0, 1<<20
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "fuzz", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
		return frameOf(req, 1, "bench")
	}
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"produce/acks=1", produce(1)},
		{"produce/acks=all", produce(-1)},
		{"fetch", fetch()},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				r, a, _, err := decodeFrame(c.frame)
				if err != nil {
					b.Fatal(err)
				}
				if out := n.run(a, r); len(out) == 0 {
					b.Fatal("no answer")
				}
			}
		})
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
