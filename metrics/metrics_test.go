package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// scrape fetches h like Prometheus does (text format) and parses the body
// with the reference parser, failing on anything that is not valid
// exposition format.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels include
// want, or fails.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := testutil.MetricSum(fams, name, want)
	if !ok {
		t.Fatalf("no series %s%v", name, want)
	}
	return v
}

func TestCatalogueMovesAndParses(t *testing.T) {
	r := New()
	b := r.Broker(1)
	if r.Broker(1) != b {
		t.Fatal("Broker(1) twice returned two handles")
	}
	produce := b.API(kmsg.Produce.Int16())
	fetch := b.API(kmsg.Fetch.Int16())
	orders := b.Topic("orders")

	before := scrape(t, r.Handler())
	// Resolved series start at zero (so rate() sees their first increment);
	// APIs never resolved export nothing.
	if v, ok := testutil.MetricSum(before, "sluice_broker_requests_total", map[string]string{"api": "Produce"}); !ok || v != 0 {
		t.Fatalf("resolved Produce series = %v, %v; want 0, true", v, ok)
	}
	if _, ok := testutil.MetricSum(before, "sluice_broker_requests_total", map[string]string{"api": "JoinGroup"}); ok {
		t.Fatal("series of an unused API exported")
	}
	for _, f := range []string{"sluice_build_info", "go_goroutines", "process_cpu_seconds_total"} {
		if before[f] == nil {
			t.Errorf("missing %s", f)
		}
	}

	for i := 0; i < 5; i++ {
		produce.Observe(3*time.Millisecond, 0)
		orders.In(1000, 10)
	}
	produce.Observe(time.Millisecond, kerr.NotLeaderForPartition.Code)
	produce.Failed(kerr.MessageTooLarge.Code, 2)
	fetch.Observe(200*time.Millisecond, 0)
	orders.Out(4000, 40)
	b.API(999).Observe(time.Millisecond, kerr.UnsupportedVersion.Code)
	b.ReplicationIn(10)
	b.ReplicationOut(20)
	b.ISRShrink()
	b.ISRExpand()
	b.ISRExpand()
	pl := b.Listener("PLAINTEXT")
	pl.Opened()
	pl.Opened()
	pl.Closed()
	remove := b.OnCollect(func(s *BrokerSnapshot) {
		s.Partition(PartitionStats{Topic: "orders", Partition: 0, Leader: true, LogSizeBytes: 5000, LogEndOffset: 50, Segments: 1})
		s.Partition(PartitionStats{Topic: "orders", Partition: 1, Leader: true, UnderReplicated: true, UnderMinISR: true, LogSizeBytes: 7, Segments: 2})
		s.Partition(PartitionStats{Topic: "orders", Partition: 2, LogSizeBytes: 1})
		s.Controller(true, 3)
		s.Purgatory("produce", 4)
		s.Purgatory("fetch", 9)
	})
	r.Lag().Update([]GroupLag{{Group: "billing", Members: 2, Partitions: []PartitionLag{
		{Topic: "orders", Partition: 0, Lag: 12, LagTime: 1500 * time.Millisecond},
		{Topic: "orders", Partition: 0, Lag: 13, LagTime: 2 * time.Second}, // duplicate: last wins
	}}}, time.Unix(1700000000, 0))
	r.Console().ObserveHTTP("GET", "/groups/:group", 200, 5*time.Millisecond)
	r.Console().ObserveHTTP("GET", "", 404, time.Millisecond)
	r.Alerting().NotificationAttempt("pagerduty")
	r.Alerting().NotificationDone("pagerduty", true)
	r.Alerting().SetAlerts(1, 2)
	r.Alerting().Evaluated(time.Millisecond, "lag")

	fams := scrape(t, r.Handler())
	br := map[string]string{"broker": "1"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"broker": "1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sluice_broker_requests_total", with("api", "Produce"), 6},
		{"sluice_broker_request_duration_seconds", with("api", "Produce"), 6},
		{"sluice_broker_requests_total", with("api", "Fetch"), 1},
		{"sluice_broker_requests_total", with("api", "Unknown"), 1},
		{"sluice_broker_request_errors_total", with("api", "Produce", "error", "NOT_LEADER_FOR_PARTITION"), 1},
		{"sluice_broker_request_errors_total", with("api", "Produce", "error", "MESSAGE_TOO_LARGE"), 2},
		{"sluice_broker_request_errors_total", with("api", "Unknown", "error", "UNSUPPORTED_VERSION"), 1},
		{"sluice_broker_topic_bytes_in_total", with("topic", "orders"), 5000},
		{"sluice_broker_topic_messages_in_total", with("topic", "orders"), 50},
		{"sluice_broker_topic_bytes_out_total", with("topic", "orders"), 4000},
		{"sluice_broker_topic_messages_out_total", with("topic", "orders"), 40},
		{"sluice_broker_replication_bytes_in_total", br, 10},
		{"sluice_broker_replication_bytes_out_total", br, 20},
		{"sluice_broker_isr_shrinks_total", br, 1},
		{"sluice_broker_isr_expands_total", br, 2},
		{"sluice_broker_connections", with("listener", "PLAINTEXT"), 1},
		{"sluice_broker_connections_accepted_total", with("listener", "PLAINTEXT"), 2},
		{"sluice_broker_partitions", br, 3},
		{"sluice_broker_leader_partitions", br, 2},
		{"sluice_broker_under_replicated_partitions", br, 1},
		{"sluice_broker_under_min_isr_partitions", br, 1},
		{"sluice_controller_active", br, 1},
		{"sluice_controller_offline_partitions", br, 3},
		{"sluice_broker_purgatory_size", with("operation", "fetch"), 9},
		{"sluice_log_size_bytes", with("topic", "orders", "partition", "0"), 5000},
		{"sluice_log_end_offset", with("topic", "orders", "partition", "0"), 50},
		{"sluice_log_segments", with("topic", "orders", "partition", "1"), 2},
		{"sluice_consumergroup_lag_records", map[string]string{"group": "billing", "topic": "orders", "partition": "0"}, 13},
		{"sluice_consumergroup_lag_seconds", map[string]string{"group": "billing", "topic": "orders", "partition": "0"}, 2},
		{"sluice_consumergroup_members", map[string]string{"group": "billing"}, 2},
		{"sluice_consumergroup_lag_updated_timestamp_seconds", nil, 1700000000},
		{"sluice_console_http_requests_total", map[string]string{"method": "GET", "route": "/groups/:group", "code": "200"}, 1},
		{"sluice_console_http_requests_total", map[string]string{"route": "unmatched", "code": "404"}, 1},
		{"sluice_console_http_request_duration_seconds", map[string]string{"route": "/groups/:group"}, 1},
		{"sluice_alerting_notification_attempts_total", map[string]string{"notifier_type": "pagerduty"}, 1},
		{"sluice_alerting_notifications_total", map[string]string{"notifier_type": "pagerduty", "result": "delivered"}, 1},
		{"sluice_alerting_alerts", map[string]string{"state": "firing"}, 2},
		{"sluice_alerting_evaluations_total", nil, 1},
		{"sluice_alerting_source_errors_total", map[string]string{"source": "lag"}, 1},
	}
	for _, c := range checks {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if fams["sluice_broker_request_duration_seconds"].GetType() != dto.MetricType_HISTOGRAM {
		t.Error("request duration is not a histogram")
	}
	// Every Sluice family follows the naming rules.
	for name, f := range fams {
		if !strings.HasPrefix(name, "sluice_") {
			continue
		}
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "client_id", "member_id", "host", "client_host":
					t.Errorf("%s has unbounded label %s", name, l.GetName())
				}
			}
		}
	}

	// Counters keep moving; state gauges follow the callback; removing the
	// callback and the topic drops their series.
	produce.Observe(time.Millisecond, 0)
	remove()
	b.RemoveTopic("orders")
	after := scrape(t, r.Handler())
	if got := value(t, after, "sluice_broker_requests_total", with("api", "Produce")); got != 7 {
		t.Errorf("produce requests after one more = %v, want 7", got)
	}
	if _, ok := testutil.MetricSum(after, "sluice_log_size_bytes", nil); ok {
		t.Error("log sizes exported after the callback was removed")
	}
	if _, ok := testutil.MetricSum(after, "sluice_broker_topic_bytes_in_total", with("topic", "orders")); ok {
		t.Error("topic series exported after RemoveTopic")
	}
}

// Two brokers sharing an id in one registry (two test clusters in one
// process) must not make the scrape fail with duplicate series.
func TestDuplicateReportsStillScrape(t *testing.T) {
	r := New()
	for i := 0; i < 2; i++ {
		r.Broker(0).OnCollect(func(s *BrokerSnapshot) {
			s.Partition(PartitionStats{Topic: "t", Partition: 0, Leader: true, LogSizeBytes: 10, LogEndOffset: int64(5 * (i + 1))})
		})
	}
	fams := scrape(t, r.Handler())
	if got := value(t, fams, "sluice_log_size_bytes", map[string]string{"topic": "t"}); got != 20 {
		t.Errorf("summed size = %v, want 20", got)
	}
	if got := value(t, fams, "sluice_log_end_offset", map[string]string{"topic": "t"}); got != 10 {
		t.Errorf("end offset = %v, want the larger, 10", got)
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	r := New()
	b := r.Broker(2)
	api := b.API(kmsg.Fetch.Int16())
	api.Observe(time.Millisecond, kerr.OffsetOutOfRange.Code) // resolve the error series once
	topic := b.Topic("events")
	l := b.Listener("PLAINTEXT")
	for name, fn := range map[string]func(){
		"API lookup":     func() { _ = b.API(kmsg.Fetch.Int16()) },
		"Observe ok":     func() { api.Observe(time.Millisecond, 0) },
		"Observe error":  func() { api.Observe(time.Millisecond, kerr.OffsetOutOfRange.Code) },
		"Topic.In":       func() { topic.In(1024, 8) },
		"Topic.Out":      func() { topic.Out(1024, 8) },
		"Listener":       func() { l.Opened(); l.Closed() },
		"Replication":    func() { b.ReplicationOut(512) },
		"ISR shrink":     func() { b.ISRShrink() },
		"Failed partial": func() { api.Failed(kerr.OffsetOutOfRange.Code, 3) },
	} {
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
}

func TestErrorNames(t *testing.T) {
	for code, want := range map[int16]string{
		-1: "UNKNOWN_SERVER_ERROR",
		3:  "UNKNOWN_TOPIC_OR_PARTITION",
		6:  "NOT_LEADER_FOR_PARTITION",
		-7: "CODE_-7",
	} {
		if got := errorName(code); got != want {
			t.Errorf("errorName(%d) = %q, want %q", code, got, want)
		}
	}
	// A code outside the fast slots still gets its own series.
	r := New()
	a := r.Broker(0).API(0)
	a.Observe(0, 500)
	a.Observe(0, 500)
	fams := scrape(t, r.Handler())
	if got := value(t, fams, "sluice_broker_request_errors_total", map[string]string{"error": "CODE_500"}); got != 2 {
		t.Errorf("code 500 count = %v", got)
	}
}

func TestStandaloneListener(t *testing.T) {
	r := New()
	r.Broker(3).API(kmsg.Metadata.Int16()).Observe(time.Millisecond, 0)
	if _, err := Listen(ServerConfig{Listen: "127.0.0.1:0", Path: "metrics"}, r.Handler(), nil); err == nil {
		t.Fatal("path without a leading slash accepted")
	}
	if _, err := Listen(ServerConfig{Listen: "nonsense"}, r.Handler(), nil); err == nil {
		t.Fatal("listen address without a port accepted")
	}
	s, err := Listen(ServerConfig{Listen: "127.0.0.1:0", Path: "/prom"}, r.Handler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://%s", s.Addr())
	resp, err := http.Get(base + "/prom")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `sluice_broker_requests_total{api="Metadata",broker="3"} 1`) {
		t.Fatalf("GET /prom: %s\n%.400s", resp.Status, body)
	}
	resp, err = http.Get(base + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /other: %s, want 404", resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/prom"); err == nil {
		t.Error("listener still answers after Close")
	}
}

func BenchmarkAPIObserve(b *testing.B) {
	api := New().Broker(0).API(kmsg.Produce.Int16())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			api.Observe(time.Millisecond, 0)
		}
	})
}

func BenchmarkTopicIn(b *testing.B) {
	topic := New().Broker(0).Topic("bench")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			topic.In(16384, 100)
		}
	})
}

// TestClientThrottleCardinality: beyond MaxThrottleSeries user/client-id
// pairs, new pairs are counted under user="other", client_id="other".
func TestClientThrottleCardinality(t *testing.T) {
	r := New()
	ct := r.ClientThrottle(1)
	for i := 0; i < MaxThrottleSeries+500; i++ {
		ct.Add("produce", "u", fmt.Sprintf("client-%d", i), time.Second)
	}
	ct.Add("fetch", "u", "client-0", time.Second) // a known pair, another type
	fams, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series, other := 0, 0.0
	for _, f := range fams {
		if f.GetName() != "sluice_broker_client_throttle_seconds_total" {
			continue
		}
		for _, m := range f.Metric {
			series++
			for _, l := range m.Label {
				if l.GetName() == "client_id" && l.GetValue() == "other" {
					other = m.GetCounter().GetValue()
				}
			}
		}
	}
	if series != MaxThrottleSeries+2 || other != 500 {
		t.Fatalf("%d series, other=%v; want %d and 500", series, other, MaxThrottleSeries+2)
	}
}
