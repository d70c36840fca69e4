// Command capture records the record batches real Kafka clients send, for
// the record package's golden tests. It is run by hand (see ../README.md),
// never by the tests:
//
//	go run ./record/testdata/capture -out record/testdata
//
// Modern batches (v2): an in-process kfake broker whose Produce handler is
// intercepted (ControlKey) to save each partition's records bytes exactly
// as the client sent them; franz-go (kgo) and kcat produce to it with every
// codec. Old message sets (v0/v1): kcat is told the broker is Kafka 0.9 /
// 0.10.0 (no ApiVersions), and a minimal fake broker here answers its
// Metadata and Produce requests, saving the message set.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	out := flag.String("out", "record/testdata", "directory for the captured files")
	flag.Parse()
	codecs := []struct {
		name string
		kgo  kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		save(*out, "franz-go-"+c.name, captureKgo(c.kgo))
		save(*out, "kcat-"+c.name, captureKcat(c.name))
	}
	for _, v := range []struct{ name, fallback, codec string }{
		{"kcat-v0-none", "0.9.0", "none"},
		{"kcat-v0-gzip", "0.9.0", "gzip"},
		{"kcat-v1-none", "0.10.0", "none"},
		{"kcat-v1-snappy", "0.10.0", "snappy"},
	} {
		save(*out, v.name, captureLegacy(v.fallback, v.codec))
	}
}

func save(dir, name string, b []byte) {
	p := filepath.Join(dir, name+".bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("%s: %d bytes", p, len(b))
}

// The records every client sends: key-<i>, value-<i> repeated, and for
// franz-go one header.
const nRecords = 5

func value(i int) string { return strings.Repeat(fmt.Sprintf("value-%d ", i), 8) }

// newCapturingCluster starts kfake and returns it with a function giving
// the first Produce request's records bytes.
func newCapturingCluster() (*kfake.Cluster, func() []byte) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "capture"))
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var got []byte
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if got == nil {
					got = append([]byte(nil), p.Records...)
				}
			}
		}
		return nil, nil, false
	})
	return c, func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

func captureKgo(codec kgo.CompressionCodec) []byte {
	c, got := newCapturingCluster()
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(50*time.Millisecond), kgo.DefaultProduceTopic("capture"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < nRecords; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(value(i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		log.Fatal(err)
	}
	return got()
}

func kcatInput() string {
	var b strings.Builder
	for i := 0; i < nRecords; i++ {
		fmt.Fprintf(&b, "key-%d:%s\n", i, value(i))
	}
	return b.String()
}

// captureKcat uses the minimal broker, not kfake: librdkafka decides which
// codecs a broker supports from the low end of its advertised version
// ranges, and kfake starts Produce at v3, so librdkafka would refuse gzip,
// snappy and lz4 ("Broker does not support compression type").
func captureKcat(codec string) []byte {
	return captureLegacy("", codec)
}

func runKcat(addr string, args ...string) {
	all := append([]string{"-P", "-b", addr, "-t", "capture", "-p", "0", "-K", ":", "-X", "linger.ms=50"}, args...)
	cmd := exec.Command("kcat", all...)
	cmd.Stdin = strings.NewReader(kcatInput())
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("kcat %v: %v", all, err)
	}
}

// captureLegacy runs a minimal broker that answers ApiVersions, Metadata and
// Produce and returns the records of the first produce. fallback "0.9.0"
// disables ApiVersions (librdkafka then sends Produce v1 with magic 0),
// "0.10.0" advertises Produce v0-v2 (magic 1), "" advertises Produce v0-v7
// (record batch v2).
func captureLegacy(fallback, codec string) []byte {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	var mu sync.Mutex
	var got []byte
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serveLegacy(conn, port, fallback == "", func(b []byte) {
				mu.Lock()
				if got == nil {
					got = append([]byte(nil), b...)
				}
				mu.Unlock()
			})
		}
	}()
	args := []string{"-X", "compression.codec=" + codec}
	if fallback == "0.9.0" {
		// Kafka 0.9 had no ApiVersions: librdkafka sends Produce v1, magic 0.
		args = append(args, "-X", "api.version.request=false", "-X", "broker.version.fallback="+fallback)
	}
	runKcat(ln.Addr().String(), args...)
	mu.Lock()
	defer mu.Unlock()
	return got
}

func serveLegacy(conn net.Conn, port int32, modern bool, record func([]byte)) {
	defer conn.Close()
	for {
		var sz [4]byte
		if _, err := io.ReadFull(conn, sz[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(frame))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := frame[4:8]
		clen := int(int16(binary.BigEndian.Uint16(frame[8:])))
		body := frame[10+max(clen, 0):]
		var resp kmsg.Response
		switch key {
		case int16(kmsg.ApiVersions):
			// Advertise Produce v0-v2 only: librdkafka then writes magic 1.
			r := kmsg.NewApiVersionsResponse()
			r.SetVersion(min(version, 2))
			r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
				{ApiKey: int16(kmsg.Produce), MinVersion: 0, MaxVersion: 2},
				{ApiKey: int16(kmsg.Fetch), MinVersion: 0, MaxVersion: 2}, // librdkafka's MsgVer1 feature needs it
				{ApiKey: int16(kmsg.Metadata), MinVersion: 0, MaxVersion: 0},
				{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: 2},
			}
			if modern {
				r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
					{ApiKey: int16(kmsg.Produce), MinVersion: 0, MaxVersion: 7},
					{ApiKey: int16(kmsg.Fetch), MinVersion: 0, MaxVersion: 11},
					{ApiKey: int16(kmsg.Metadata), MinVersion: 0, MaxVersion: 4},
					{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: 2},
					// librdkafka infers LZ4 support from FindCoordinator (Kafka 0.8.2+).
					{ApiKey: int16(kmsg.FindCoordinator), MinVersion: 0, MaxVersion: 1},
				}
			}
			if version > 2 {
				r.ErrorCode = 35 // UNSUPPORTED_VERSION: the client retries with v0
			}
			resp = &r
		case int16(kmsg.Metadata):
			r := kmsg.NewMetadataResponse()
			r.SetVersion(version)
			r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "127.0.0.1", Port: port}}
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = kmsg.StringPtr("capture")
			t.Partitions = []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}}
			r.Topics = []kmsg.MetadataResponseTopic{t}
			resp = &r
		case int16(kmsg.Produce):
			req := kmsg.NewProduceRequest()
			req.SetVersion(version)
			if err := req.ReadFrom(body); err != nil {
				log.Printf("produce v%d: %v", version, err)
				return
			}
			r := kmsg.NewProduceResponse()
			r.SetVersion(version)
			for _, t := range req.Topics {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					record(p.Records)
					rt.Partitions = append(rt.Partitions, kmsg.ProduceResponseTopicPartition{Partition: p.Partition})
				}
				r.Topics = append(r.Topics, rt)
			}
			resp = &r
		default:
			log.Printf("unexpected request key %d v%d", key, version)
			return
		}
		b := resp.AppendTo(append(make([]byte, 4), corr...))
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		if _, err := conn.Write(b); err != nil {
			return
		}
	}
}
