package protocol_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/protocol"
)

// Tests of the connection's request path with a raw client: pipelined
// requests answered in order, a parked fetch not holding up the requests
// behind it, shutdown answering parked requests, and the request metrics.

func produceResp(t *testing.T, body []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	var r kmsg.ProduceResponse
	r.Version = 9
	if err := r.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	return r.Topics[0].Partitions[0]
}

func fetchResp(t *testing.T, body []byte) kmsg.FetchResponseTopicPartition {
	t.Helper()
	var r kmsg.FetchResponse
	r.Version = 12
	if err := r.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	return r.Topics[0].Partitions[0]
}

// TestPipelinedRequestsAnsweredInOrder sends produce, metadata and
// api-versions requests back to back without waiting: every answer comes
// in request order and the produces get consecutive offsets.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()
	pf := produceFrame(1, benchBatch(t, 3, 50))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mf := frame(md)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	af := frame(av)
	type sent struct {
		corr    int32
		produce bool
	}
	var reqs []sent
	for i := range 60 {
		switch {
		case i%7 == 3:
			reqs = append(reqs, sent{c.send(mf), false})
		case i%11 == 5:
			reqs = append(reqs, sent{c.send(af), false})
		default:
			reqs = append(reqs, sent{c.send(pf), true})
		}
	}
	want := int64(0)
	for _, r := range reqs {
		body := c.recv(r.corr) // fails on a correlation id out of order
		if !r.produce {
			continue
		}
		p := produceResp(t, body)
		if p.ErrorCode != 0 || p.BaseOffset != want {
			t.Fatalf("produce answered error %d base offset %d, want offset %d", p.ErrorCode, p.BaseOffset, want)
		}
		want += 3
	}
}

// TestParkedFetchDoesNotHoldUpTheConnection parks a fetch at the log end
// and sends a produce on the same connection: the produce is handled while
// the fetch waits, its append wakes the fetch, and the answers come in
// request order, long before the fetch's max wait.
func TestParkedFetchDoesNotHoldUpTheConnection(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()
	ff, setOffset := fetchFrameWithOffset(t, 20_000, 1<<20)
	setOffset(0)
	start := time.Now()
	fc := c.send(ff)
	time.Sleep(50 * time.Millisecond) // the fetch parks
	pc := c.send(produceFrame(1, benchBatch(t, 2, 100)))
	fp := fetchResp(t, c.recv(fc))
	if fp.ErrorCode != 0 || fp.HighWatermark != 2 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch answer: error %d, high watermark %d, %d record bytes", fp.ErrorCode, fp.HighWatermark, len(fp.RecordBatches))
	}
	if p := produceResp(t, c.recv(pc)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce answer: error %d, base offset %d", p.ErrorCode, p.BaseOffset)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("answers took %v: the parked fetch held up the produce", took)
	}
}

// TestFetchAnswersSmallAndLargeRegions checks fetch answers whose records
// are copied into the response (small) and sent by sendfile (large) carry
// exactly the batches produced.
func TestFetchAnswersSmallAndLargeRegions(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()
	small := benchBatch(t, 4, 100)
	large := benchBatch(t, 200, 1000) // ~200 KB: sent by sendfile
	var batches [][]byte
	for i, b := range [][]byte{small, large, small} {
		p := produceResp(t, c.recv(c.send(produceFrame(1, b))))
		if p.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d", i, p.ErrorCode)
		}
		batches = append(batches, b)
	}
	offsets := []int64{0, 4, 204}
	for i, b := range batches {
		ff, setOffset := fetchFrameWithOffset(t, 0, int32(len(b)))
		setOffset(offsets[i])
		fp := fetchResp(t, c.recv(c.send(ff)))
		if fp.ErrorCode != 0 || len(fp.RecordBatches) != len(b) {
			t.Fatalf("fetch %d: error %d, %d record bytes, want %d", i, fp.ErrorCode, len(fp.RecordBatches), len(b))
		}
		// The broker rewrote the base offset (and CRC-covered fields are
		// untouched): the rest of the batch is as sent.
		if string(fp.RecordBatches[8:]) != string(b[8:]) {
			t.Fatalf("fetch %d: batch bytes differ from those produced", i)
		}
	}
}

// TestShutdownAnswersParkedFetch: Shutdown wakes a fetch parked for 30 s,
// which answers (empty), and closes the connection, promptly.
func TestShutdownAnswersParkedFetch(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()
	ff, setOffset := fetchFrameWithOffset(t, 30_000, 1<<20)
	setOffset(0)
	fc := c.send(ff)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- n.srv.Shutdown(ctx)
	}()
	fp := fetchResp(t, c.recv(fc))
	if fp.ErrorCode != 0 || len(fp.RecordBatches) != 0 {
		t.Fatalf("fetch answer at shutdown: error %d, %d record bytes", fp.ErrorCode, len(fp.RecordBatches))
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v with a parked fetch", took)
	}
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("connection after shutdown: %v, want EOF", err)
	}
}

// scrape returns the value of the sample of family name whose labels
// include every one of labels (name="value" pairs), or -1.
func scrape(t *testing.T, reg *metrics.Registry, name string, labels ...string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return -1
}

// TestRequestMetrics: requests count per API with their latency, failed
// partitions count under their Kafka error name, and connections are
// counted open and accepted, in the registry given in the config.
func TestRequestMetrics(t *testing.T) {
	reg := metrics.New()
	n := startBenchNode(t, nil, func(c *protocol.Config) { c.Metrics = reg })
	c := dialRaw(t, n.addr)
	pf := produceFrame(1, benchBatch(t, 1, 10))
	for range 3 {
		if p := produceResp(t, c.recv(c.send(pf))); p.ErrorCode != 0 {
			t.Fatalf("produce: error %d", p.ErrorCode)
		}
	}
	// Two partitions of which one exists: one failed partition.
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "bench"
	for _, p := range []int32{0, 7} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, benchBatch(t, 1, 10)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	var resp kmsg.ProduceResponse
	resp.Version = 9
	if err := c.roundTrip(req, &resp); err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[1].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to partition 7: error %d", got)
	}
	ff, setOffset := fetchFrameWithOffset(t, 0, 1<<20)
	setOffset(100) // past the end: OFFSET_OUT_OF_RANGE
	if fp := fetchResp(t, c.recv(c.send(ff))); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the end: error %d", fp.ErrorCode)
	}
	c2 := dialRaw(t, n.addr)
	defer c2.Close()

	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_broker_requests_total", []string{`api="Produce"`, `broker="1"`}, 4},
		{"sluice_broker_request_duration_seconds_count", []string{`api="Produce"`}, 4},
		{"sluice_broker_requests_total", []string{`api="Fetch"`}, 1},
		{"sluice_broker_request_errors_total", []string{`api="Produce"`, `error="UNKNOWN_TOPIC_OR_PARTITION"`}, 1},
		{"sluice_broker_request_errors_total", []string{`api="Fetch"`, `error="OFFSET_OUT_OF_RANGE"`}, 1},
		{"sluice_broker_requests_total", []string{`api="CreateTopics"`}, 1},
		{"sluice_broker_connections_accepted_total", []string{`listener="PLAINTEXT"`}, 3}, // with startBenchNode's own
		{"sluice_broker_connections", []string{`listener="PLAINTEXT"`}, 2},
	}
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		for _, ch := range checks {
			if got := scrape(t, reg, ch.name, ch.labels...); got != ch.want {
				return fmt.Errorf("%s%v = %v, want %v", ch.name, ch.labels, got, ch.want)
			}
		}
		return nil
	})
	c.Close()
	c2.Close()
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if got := scrape(t, reg, "sluice_broker_connections", `listener="PLAINTEXT"`); got != 0 {
			return fmt.Errorf("open connections %v after closing them all", got)
		}
		return nil
	})
}
