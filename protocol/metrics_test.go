package protocol

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/metrics"
)

// TestErrorCodesAtEveryLevel: the error codes of a response count at the
// top level and inside its arrays (Metadata: topics and their partitions),
// the first with the request and the others as failures.
func TestErrorCodesAtEveryLevel(t *testing.T) {
	reg := metrics.New()
	mx := reg.Broker(1).API(3)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	for _, codes := range [][]int16{{kerr.UnknownTopicOrPartition.Code}, {0, kerr.LeaderNotAvailable.Code, kerr.LeaderNotAvailable.Code}} {
		mt := kmsg.NewMetadataResponseTopic()
		mt.ErrorCode = codes[0]
		for _, c := range codes[1:] {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.ErrorCode = c
			mt.Partitions = append(mt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	mx.Observe(time.Millisecond, tallyResponse(lookup(3), resp, mx))

	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sluice_broker_request_errors_total{api="Metadata",broker="1",error="UNKNOWN_TOPIC_OR_PARTITION"} 1`,
		`sluice_broker_request_errors_total{api="Metadata",broker="1",error="LEADER_NOT_AVAILABLE"} 2`,
		`sluice_broker_requests_total{api="Metadata",broker="1"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// TestObserveDoesNotAllocate: counting a request with its error codes, for
// a kmsg response and for a fetch response, allocates nothing.
func TestObserveDoesNotAllocate(t *testing.T) {
	reg := metrics.New()
	b := reg.Broker(1)
	produce, fetch := b.API(0), b.API(1)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	rt := kmsg.NewProduceResponseTopic()
	rt.Partitions = []kmsg.ProduceResponseTopicPartition{
		kmsg.NewProduceResponseTopicPartition(),
		kmsg.NewProduceResponseTopicPartition(),
		kmsg.NewProduceResponseTopicPartition(),
	}
	rt.Partitions[1].ErrorCode = kerr.NotLeaderForPartition.Code
	rt.Partitions[2].ErrorCode = kerr.MessageTooLarge.Code
	resp.Topics = append(resp.Topics, rt)
	fr := &fetchResponse{version: 12}
	p1 := testFetchPartition(1)
	p1.Fail(&broker.Error{Code: kerr.OffsetOutOfRange})
	fr.addTopic("t", testFetchPartition(0), p1)
	a := lookup(0)
	start := time.Now()
	// Resolve the error series once, as the first failure of a kind does.
	var stream streamResponse = fr // called through the interface, as the connection does
	for range 2 {
		tallyResponse(a, resp, produce)
		stream.errorCodes(fetch)
	}
	if n := testing.AllocsPerRun(200, func() {
		produce.Observe(time.Since(start), tallyResponse(a, resp, produce))
		fetch.Observe(time.Since(start), stream.errorCodes(fetch))
	}); n != 0 {
		t.Fatalf("observing a request allocates %v times", n)
	}
}

func TestFramePool(t *testing.T) {
	for _, c := range []struct{ n, cap int }{
		{10, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 8 << 10}, {1000100, 1 << 20}, {1<<20 + 1, 2 << 20}, {32 << 20, 32 << 20},
	} {
		p := getFrame(c.n)
		if cap(*p) != c.cap || len(*p) < c.n {
			t.Errorf("getFrame(%d): len %d cap %d, want cap %d", c.n, len(*p), cap(*p), c.cap)
		}
		putFrame(p)
	}
	putFrame(nil)
	odd := make([]byte, 5000)
	putFrame(&odd) // not a class size: dropped, not pooled
	if p := getFrame(5000); cap(*p) != 8<<10 {
		t.Errorf("getFrame(5000) after putting an odd buffer: cap %d", cap(*p))
	}
}
