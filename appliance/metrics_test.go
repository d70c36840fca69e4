package appliance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// produceConsume produces n records to topic with franz-go (acks=all,
// idempotent: the client's defaults) and consumes them back with cl, which
// must already be consuming the topic.
func produceConsume(t *testing.T, prod, cons *kgo.Client, topic string, n, from int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", from+i), Value: fmt.Appendf(nil, "value %d of the metered run", from+i)}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	if got != n {
		t.Fatalf("consumed %d records, produced %d", got, n)
	}
}

// TestMetricsDuringProduceConsume is issue 8's check: /metrics, scraped
// twice during a real produce/consume run with franz-go, parses as
// Prometheus text and shows the topic's byte and message counters and the
// request counters moving between the scrapes, by exactly what was produced
// and consumed. It also shows that two appliances in one process keep their
// counters apart: one serves /metrics on its console, the other on
// metrics.listen, and neither counts the other's traffic.
func TestMetricsDuringProduceConsume(t *testing.T) {
	consoleAddr, metricsAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	app := startAppliance(t, "console.listen="+consoleAddr, "metrics.listen=")
	other := startAppliance(t, "console.listen=", "metrics.listen="+metricsAddr)
	url, otherURL := "http://"+consoleAddr+"/metrics", "http://"+metricsAddr+"/metrics"
	const topic = "metered"

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	produceConsume(t, prod, cons, topic, 200, 0)
	first := scrape(t, url)
	produceConsume(t, prod, cons, topic, 300, 200)
	second := scrape(t, url)

	tl := map[string]string{"topic": topic}
	delta := func(name string, labels map[string]string) float64 {
		t.Helper()
		a, ok1 := testutil.MetricSum(first, name, labels)
		b, ok2 := testutil.MetricSum(second, name, labels)
		if !ok1 || !ok2 {
			t.Fatalf("%s%v missing from a scrape (first %v, second %v)", name, labels, ok1, ok2)
		}
		return b - a
	}
	if d := delta("sluice_broker_topic_messages_in_total", tl); d != 300 {
		t.Errorf("messages in moved by %v between the scrapes, 300 records were produced", d)
	}
	if d := delta("sluice_broker_topic_messages_out_total", tl); d != 300 {
		t.Errorf("messages out moved by %v between the scrapes, 300 records were consumed", d)
	}
	in, out := delta("sluice_broker_topic_bytes_in_total", tl), delta("sluice_broker_topic_bytes_out_total", tl)
	if in <= 0 || out != in { // franz-go compresses (snappy): no fixed size per record
		t.Errorf("bytes in moved by %v and bytes out by %v; every batch produced was consumed once", in, out)
	}
	for _, api := range []string{"Produce", "Fetch"} {
		if d := delta("sluice_broker_requests_total", map[string]string{"api": api}); d < 1 {
			t.Errorf("%s requests moved by %v", api, d)
		}
		if d := delta("sluice_broker_request_duration_seconds", map[string]string{"api": api}); d < 1 {
			t.Errorf("%s latency observations moved by %v", api, d)
		}
	}
	if v, _ := testutil.MetricSum(second, "sluice_log_end_offset", tl); v != 500 {
		t.Errorf("log end offsets of %s sum to %v, want 500", topic, v)
	}
	if v, _ := testutil.MetricSum(second, "sluice_broker_leader_partitions", nil); v < 2 {
		t.Errorf("leader partitions %v", v)
	}
	if v, _ := testutil.MetricSum(second, "sluice_controller_active", nil); v != 1 {
		t.Errorf("a single node is not reported as the active controller: %v", v)
	}
	if _, ok := testutil.MetricSum(second, "sluice_console_http_requests_total", nil); !ok {
		t.Error("the console's own metrics are not on the same registry")
	}

	// The other appliance counted none of it.
	fams := scrape(t, otherURL)
	if fams["sluice_build_info"] == nil {
		t.Fatal("no sluice_build_info on the other appliance's metrics listener")
	}
	if v, ok := testutil.MetricSum(fams, "sluice_broker_topic_messages_in_total", tl); ok {
		t.Errorf("the other appliance reports %v messages in for %s", v, topic)
	}
	if v, _ := testutil.MetricSum(fams, "sluice_broker_requests_total", map[string]string{"api": "Produce"}); v != 0 {
		t.Errorf("the other appliance counted %v Produce requests", v)
	}
	if v, _ := testutil.MetricSum(fams, "sluice_broker_connections", nil); v != 0 {
		t.Errorf("the other appliance reports %v open connections", v)
	}
	if _, ok := testutil.MetricSum(fams, "sluice_broker_partitions", map[string]string{"broker": fmt.Sprint(other.BrokerID())}); !ok {
		t.Error("the other appliance reports no broker state")
	}
}
