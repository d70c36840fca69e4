package protocol_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/quota"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/security"
	"github.com/sluice-io/sluice/storage"
)

// The request path measured with a raw client that reuses its buffers, so
// allocs/op is the broker's (the protocol layer, the broker and storage) and
// ns/op is the round trip over loopback. Run with
//
//	go test ./protocol -run '^$' -bench . -benchtime 20000x -count 6 | tee new.txt
//	benchstat old.txt new.txt
//
// Figures are in BENCHMARKS.md.

// benchNode is a single-node broker assembled as the appliance does it.
type benchNode struct {
	addr  string
	coord *cluster.Standalone
	logs  *storage.Manager
	brk   *broker.Broker
	srv   *protocol.Server
	stop  context.CancelFunc
	done  chan struct{}
}

// startBenchNode starts a node with the topic "bench" (one partition, the
// given configs); opts adjust the protocol server's config.
func startBenchNode(tb testing.TB, topicCfg map[string]*string, opts ...func(*protocol.Config)) *benchNode {
	tb.Helper()
	return startNodeWith(tb, topicCfg, nil, opts...)
}

// startNodeWith is startBenchNode with bopt adjusting the broker's config.
func startNodeWith(tb testing.TB, topicCfg map[string]*string, bopt func(*broker.Config), opts ...func(*protocol.Config)) *benchNode {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := tb.TempDir()
	log := slog.New(slog.DiscardHandler)
	n := &benchNode{addr: testutil.FreeAddr(tb)}
	var err error
	if n.coord, err = cluster.OpenStandalone(dir); err != nil {
		tb.Fatal(err)
	}
	coord := n.coord
	n.logs, err = storage.OpenManager(storage.ManagerConfig{
		Dirs:   []string{filepath.Join(dir, "kafka")},
		Logger: log,
		DefaultConfig: func(topic string) storage.LogConfig {
			overrides, _ := coord.TopicConfig(ctx, topic)
			return broker.TopicLogConfig(nil, overrides)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	pcfg := protocol.Config{Listeners: []protocol.Listener{{Name: "PLAINTEXT", Addr: n.addr}}, Logger: log}
	for _, o := range opts {
		o(&pcfg)
	}
	bound, err := protocol.Bind(pcfg)
	if err != nil {
		tb.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(n.addr)
	port, _ := strconv.Atoi(portStr)
	bcfg := broker.Config{
		BrokerID:          1,
		Endpoints:         []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: int32(port)}},
		Logs:              n.logs,
		Coordinator:       n.coord,
		Logger:            log,
		AutoCreateTopics:  false,
		DeleteTopicEnable: true,
		AdoptStrayLogs:    true,
		Metrics:           pcfg.Metrics, // one registry for the request and traffic metrics
	}
	if bopt != nil {
		bopt(&bcfg)
	}
	n.brk, err = broker.New(bcfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := n.brk.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: n.coord, BrokerID: 1, Logger: log})
	bound.SetController(ctl)
	ctlCtx, ctlStop := context.WithCancel(context.Background())
	n.stop, n.done = ctlStop, make(chan struct{})
	go func() {
		defer close(n.done)
		ctl.Run(ctlCtx)
	}()
	if n.srv, err = bound.Serve(n.brk); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		n.srv.Close()
		n.stop()
		<-n.done
		n.brk.Close()
		n.logs.Close()
		n.coord.Close()
	})

	// The topic, through the protocol, and wait for its leader.
	c := dialRaw(tb, n.addr)
	defer c.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 4
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = "bench", 1, 1
	for k, v := range topicCfg {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, v
		t.Configs = append(t.Configs, cfg)
	}
	ct.Topics = append(ct.Topics, t)
	ct.TimeoutMillis = 10000
	var ctr kmsg.CreateTopicsResponse
	ctr.Version = ct.Version
	if err := c.roundTrip(ct, &ctr); err != nil {
		tb.Fatal(err)
	}
	if ec := ctr.Topics[0].ErrorCode; ec != 0 {
		tb.Fatalf("create topic: error %d", ec)
	}
	testutil.CheckFor(tb, 10*time.Second, 20*time.Millisecond, func() error {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		mt := kmsg.NewMetadataRequestTopic()
		name := "bench"
		mt.Topic = &name
		md.Topics = append(md.Topics, mt)
		var mr kmsg.MetadataResponse
		mr.Version = md.Version
		if err := c.roundTrip(md, &mr); err != nil {
			return err
		}
		if len(mr.Topics) != 1 || len(mr.Topics[0].Partitions) != 1 || mr.Topics[0].Partitions[0].Leader != 1 {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	return n
}

// rawConn is a Kafka connection that sends pre-encoded frames and reads
// responses into a reused buffer.
type rawConn struct {
	tb   testing.TB
	nc   net.Conn
	br   *bufio.Reader
	resp []byte
	corr int32
}

func dialRaw(tb testing.TB, addr string) *rawConn {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	return &rawConn{tb: tb, nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *rawConn) Close() error { return c.nc.Close() }

// frame encodes req with a size prefix; the correlation id is at bytes 8-11.
func frame(req kmsg.Request) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, 5)
	b = append(b, "bench"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// send writes a pre-encoded frame with the next correlation id.
func (c *rawConn) send(f []byte) int32 {
	c.corr++
	binary.BigEndian.PutUint32(f[8:], uint32(c.corr))
	if _, err := c.nc.Write(f); err != nil {
		c.tb.Fatal(err)
	}
	return c.corr
}

// recv reads one response and returns its body after the correlation id
// (flexible responses keep their header tag byte at the front).
func (c *rawConn) recv(corr int32) []byte {
	var sz [4]byte
	if _, err := io.ReadFull(c.br, sz[:]); err != nil {
		c.tb.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(sz[:]))
	if cap(c.resp) < n {
		c.resp = make([]byte, n)
	}
	c.resp = c.resp[:n]
	if _, err := io.ReadFull(c.br, c.resp); err != nil {
		c.tb.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(c.resp)); got != corr {
		c.tb.Fatalf("correlation id %d, want %d", got, corr)
	}
	return c.resp[4:]
}

func (c *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	body := c.recv(c.send(frame(req)))
	if resp.IsFlexible() {
		body = body[1:]
	}
	return resp.ReadFrom(body)
}

func benchBatch(tb testing.TB, records, size int) []byte {
	recs := make([]record.Record, records)
	for i := range recs {
		recs[i].Value = make([]byte, size)
		rand.Read(recs[i].Value)
	}
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func produceFrame(acks int16, batch []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, acks, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = batch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return frame(req)
}

// fetchOffsetMark is the fetch offset fetchFrame encodes, found again by
// setFetchOffset.
const fetchOffsetMark = 0x0123456789abcdef

func fetchFrame(maxWaitMs int32, maxBytes int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, maxWaitMs, 1, maxBytes
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "bench"
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LastFetchedEpoch, p.LogStartOffset = maxBytes, -1, -1, -1
	p.FetchOffset = fetchOffsetMark
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return frame(req)
}

// fetchFrameWithOffset returns a fetchFrame and a function patching its
// fetch offset in place.
func fetchFrameWithOffset(tb testing.TB, maxWaitMs, maxBytes int32) ([]byte, func(int64)) {
	f := fetchFrame(maxWaitMs, maxBytes)
	i := bytes.Index(f, binary.BigEndian.AppendUint64(nil, fetchOffsetMark))
	if i < 0 {
		tb.Fatal("fetch offset not found in the frame")
	}
	return f, func(o int64) { binary.BigEndian.PutUint64(f[i:], uint64(o)) }
}

// produceErr is the first partition error code of a Produce v9 response
// body (after the header tag byte): 0 unless something failed.
func produceErr(body []byte) int16 {
	var r kmsg.ProduceResponse
	r.Version = 9
	if err := r.ReadFrom(body[1:]); err != nil {
		return -1
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// BenchmarkProduce: one Produce request per op (one batch, acks=1), sent
// sequentially (each waits for its answer: latency) or with a window of 8
// requests in flight (pipelining: throughput).
func BenchmarkProduce(b *testing.B) {
	for _, c := range []struct {
		name          string
		acks          int16
		records, size int
		window        int
	}{
		{"batch=1x100B/seq", 1, 1, 100, 1},
		{"batch=1x100B/window=8", 1, 1, 100, 8},
		{"batch=1000x100B/window=8", 1, 1000, 100, 8},
		{"batch=256x1KiB/window=8", 1, 256, 1024, 8},
		{"acks=all/batch=1x100B/seq", -1, 1, 100, 1},
		{"acks=all/batch=1000x100B/window=8", -1, 1000, 100, 8},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := startBenchNode(b, nil)
			conn := dialRaw(b, n.addr)
			defer conn.Close()
			f := produceFrame(c.acks, benchBatch(b, c.records, c.size))
			if ec := produceErr(conn.recv(conn.send(f))); ec != 0 {
				b.Fatalf("produce error %d", ec)
			}
			b.SetBytes(int64(c.records * c.size))
			b.ReportAllocs()
			b.ResetTimer()
			sent, recvd := 0, 0
			for recvd < b.N {
				for sent < b.N && sent-recvd < c.window {
					conn.send(f)
					sent++
				}
				conn.recv(int32(recvd + 2))
				recvd++
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*c.records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkProduceFsync: producers sharing one partition whose topic has
// flush.messages=1 (fsync before the answer), each sending its next
// request when the last was answered. Group commit lets concurrent appends
// share an fsync.
func BenchmarkProduceFsync(b *testing.B) {
	for _, producers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			one := "1"
			n := startBenchNode(b, map[string]*string{"flush.messages": &one})
			f := produceFrame(1, benchBatch(b, 10, 100))
			conns := make([]*rawConn, producers)
			for i := range conns {
				conns[i] = dialRaw(b, n.addr)
				defer conns[i].Close()
				if ec := produceErr(conns[i].recv(conns[i].send(slices.Clone(f)))); ec != 0 {
					b.Fatalf("produce error %d", ec)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			errs := make(chan error, producers)
			per := b.N / producers
			for i, c := range conns {
				count := per
				if i == 0 {
					count += b.N % producers
				}
				go func(c *rawConn, f []byte) {
					for range count {
						if ec := produceErr(c.recv(c.send(f))); ec != 0 {
							errs <- fmt.Errorf("produce error %d", ec)
							return
						}
					}
					errs <- nil
				}(c, slices.Clone(f))
			}
			for range conns {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// BenchmarkFetch: one Fetch per op of a partition holding data, from
// offset 0: a small answer (one batch of 10 x 100 B, what a consumer
// keeping up gets) or 1 MiB (a consumer catching up).
func BenchmarkFetch(b *testing.B) {
	for _, c := range []struct {
		name          string
		records, size int
		batches       int
		maxBytes      int32
	}{
		{"small=1KiB", 10, 100, 1, 1 << 20},
		{"large=1MiB", 256, 1024, 8, 1 << 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := startBenchNode(b, nil)
			conn := dialRaw(b, n.addr)
			defer conn.Close()
			f := produceFrame(1, benchBatch(b, c.records, c.size))
			for range c.batches {
				if ec := produceErr(conn.recv(conn.send(f))); ec != 0 {
					b.Fatalf("produce error %d", ec)
				}
			}
			ff, setOffset := fetchFrameWithOffset(b, 0, c.maxBytes)
			setOffset(0)
			var fr kmsg.FetchResponse
			fr.Version = 12
			if err := fr.ReadFrom(conn.recv(conn.send(ff))[1:]); err != nil {
				b.Fatal(err)
			}
			got := len(fr.Topics[0].Partitions[0].RecordBatches)
			if fr.Topics[0].Partitions[0].ErrorCode != 0 || got < min(c.records*c.size*c.batches, int(c.maxBytes))/2 {
				b.Fatalf("fetch: error %d, %d bytes of records", fr.Topics[0].Partitions[0].ErrorCode, got)
			}
			b.SetBytes(int64(got))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				conn.recv(conn.send(ff))
			}
		})
	}
}

// BenchmarkProduceToFetch is the end-to-end path: a consumer's Fetch is
// parked at the log end (max wait 5 s), a producer sends one record
// (acks=1), and the op ends when both the produce answer and the fetch
// answer carrying the record have arrived. It reports the latency
// percentiles of the fetch answer after the produce was sent.
func BenchmarkProduceToFetch(b *testing.B) {
	n := startBenchNode(b, nil)
	prod := dialRaw(b, n.addr)
	defer prod.Close()
	cons := dialRaw(b, n.addr)
	defer cons.Close()
	pf := produceFrame(1, benchBatch(b, 1, 100))
	ff, setOffset := fetchFrameWithOffset(b, 5000, 1<<20)
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		setOffset(int64(i))
		fc := cons.send(ff)
		// Let the fetch park, as a consumer at the log end is (it would
		// answer at once otherwise: still correct, but not the path
		// measured). The sleep is in ns/op; the percentiles are not.
		time.Sleep(50 * time.Microsecond)
		start := time.Now()
		pc := prod.send(pf)
		cons.recv(fc)
		lat[i] = time.Since(start)
		prod.recv(pc)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkAuthorized is the request path of a produce (1 record of 100 B,
// acks=1, one at a time) and a small fetch with and without an authorizer
// (authorizer.class.name): with it, User:ANONYMOUS holds All on the topic
// among a hundred other ACLs (literal and prefixed, other principals),
// and every request is checked. allocs/op must not change.
func BenchmarkAuthorized(b *testing.B) {
	for _, on := range []bool{false, true} {
		bopt := func(*broker.Config) {}
		if on {
			az := security.NewAuthorizer(security.AuthorizerConfig{}, nil)
			acls := []security.ACL{{
				Resource: security.Resource{Type: security.ResourceTopic, Name: "bench", Pattern: security.PatternLiteral},
				Entry:    security.Entry{Principal: security.Anonymous.String(), Host: "*", Operation: security.OpAll, Permission: security.Allow},
			}}
			for i := range 100 {
				pattern := security.PatternLiteral
				if i%2 == 0 {
					pattern = security.PatternPrefixed
				}
				acls = append(acls, security.ACL{
					Resource: security.Resource{Type: security.ResourceTopic, Name: fmt.Sprintf("team%d-", i), Pattern: pattern},
					Entry:    security.Entry{Principal: fmt.Sprintf("User:u%d", i), Host: "*", Operation: security.OpRead, Permission: security.Allow},
				})
			}
			az.SetACLs(acls)
			bopt = func(c *broker.Config) { c.Authorizer = az }
		}
		name := "authz=off"
		if on {
			name = "authz=on"
		}
		b.Run(name+"/produce=1x100B/seq", func(b *testing.B) {
			n := startNodeWith(b, nil, bopt)
			conn := dialRaw(b, n.addr)
			defer conn.Close()
			f := produceFrame(1, benchBatch(b, 1, 100))
			if ec := produceErr(conn.recv(conn.send(f))); ec != 0 {
				b.Fatalf("produce error %d", ec)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				conn.recv(conn.send(f))
			}
		})
		b.Run(name+"/fetch=1KiB", func(b *testing.B) {
			n := startNodeWith(b, nil, bopt)
			conn := dialRaw(b, n.addr)
			defer conn.Close()
			if ec := produceErr(conn.recv(conn.send(produceFrame(1, benchBatch(b, 10, 100))))); ec != 0 {
				b.Fatalf("produce error %d", ec)
			}
			ff, setOffset := fetchFrameWithOffset(b, 0, 1<<20)
			setOffset(0)
			var fr kmsg.FetchResponse
			fr.Version = 12
			if err := fr.ReadFrom(conn.recv(conn.send(ff))[1:]); err != nil {
				b.Fatal(err)
			}
			if p := fr.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				b.Fatalf("fetch: error %d, %d bytes of records", p.ErrorCode, len(p.RecordBatches))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				conn.recv(conn.send(ff))
			}
		})
	}
}

// BenchmarkProduceQuota: the sequential 100-byte produce of
// BenchmarkProduce with client quotas: no quota manager, a manager with
// no quota, a quota of another client id only (this one is checked and
// not recorded), and a quota that applies (recorded, never reached).
func BenchmarkProduceQuota(b *testing.B) {
	for _, c := range []struct {
		name   string
		quotas map[cluster.QuotaEntity]map[string]float64
		off    bool
	}{
		{"no-manager", nil, true},
		{"no-quota", nil, false},
		{"other-client-quota", map[cluster.QuotaEntity]map[string]float64{{ClientID: "someone-else"}: {cluster.QuotaProducerByteRate: 1e12}}, false},
		{"quota-applies", map[cluster.QuotaEntity]map[string]float64{{ClientID: cluster.DefaultQuotaName}: {cluster.QuotaProducerByteRate: 1e12}}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			var opts []func(*protocol.Config)
			if !c.off {
				m := quota.New(quota.Config{})
				m.Set(c.quotas)
				opts = append(opts, func(cfg *protocol.Config) { cfg.Quotas = m })
			}
			n := startBenchNode(b, nil, opts...)
			conn := dialRaw(b, n.addr)
			defer conn.Close()
			f := produceFrame(1, benchBatch(b, 1, 100))
			if ec := produceErr(conn.recv(conn.send(f))); ec != 0 {
				b.Fatalf("produce error %d", ec)
			}
			b.SetBytes(100)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				conn.recv(conn.send(f))
			}
		})
	}
}
