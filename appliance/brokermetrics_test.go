package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// hookReceiver stands in for a webhook consumer (Alertmanager's payload).
type hookReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []map[string]any
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, m)
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// withStatus returns the messages whose status is s ("firing", "resolved").
func (r *hookReceiver) withStatus(s string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, m := range r.got {
		if m["status"] == s {
			out = append(out, m)
		}
	}
	return out
}

// A burst of failed SASL logins against a real broker with SASL enabled
// fires the "authentication failures" rule, read from the broker's own
// metrics (a single node gathers its registry in process), and the webhook
// gets it; when the logins stop, it resolves.
func TestAuthFailureBurstAlerts(t *testing.T) {
	internal, sasl := testutil.FreeAddr(t), testutil.FreeAddr(t)
	app := startAppliance(t, "console.listen="+testutil.FreeAddr(t),
		fmt.Sprintf("listeners=INTERNAL://%s,SASL_PLAINTEXT://%s", internal, sasl),
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"inter.broker.listener.name=INTERNAL",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"connection.failed.authentication.delay.ms=0",
		"alerting.evaluation.interval.ms=200",
		"alerting.allowed.targets=127.0.0.0/8")
	c := consoleOf(t, app)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	hook := newHookReceiver(t)
	n, err := c.alerts.CreateNotifier(ctx, alerting.NotifierInput{Name: "hook", Type: alerting.NotifierWebhook,
		URL: hook.srv.URL + "/alerts", Enabled: true, SendResolved: true})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := c.alerts.CreateRule(ctx, alerting.Rule{Name: "login burst", Kind: alerting.KindAuthFailures, Severity: alerting.SeverityCritical,
		Threshold: 20, Scope: alerting.Scope{Listener: "sasl_plaintext"}, Enabled: true, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	subject := "broker:" + strconv.Itoa(int(app.BrokerID()))
	// The evaluator has read the broker's metrics once: the rule has a
	// rate, and it is quiet.
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		pv, err := c.alerts.PreviewRule(ctx, rule)
		if err != nil {
			return err
		}
		if len(pv.Subjects) != 1 || pv.Subjects[0].Subject != subject || pv.Subjects[0].Value == "not measured yet" || pv.Holding != 0 {
			return fmt.Errorf("preview %+v", pv)
		}
		return nil
	})

	// The burst: logins of an unknown user and a wrong password, each
	// refused.
	for i := range 12 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sasl), kgo.SASL(scram.Auth{User: "mallory", Pass: fmt.Sprint("guess-", i)}.AsSha512Mechanism()),
			kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		if err := cl.Ping(pctx); err == nil {
			t.Fatal("a wrong password was accepted")
		}
		pcancel()
		cl.Close()
	}
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if n := len(hook.withStatus("firing")); n != 1 {
			return fmt.Errorf("%d firing messages", n)
		}
		return nil
	})
	msg := hook.withStatus("firing")[0]
	alert := msg["alerts"].([]any)[0].(map[string]any)
	labels := alert["labels"].(map[string]any)
	if labels["alertname"] != "login burst" || labels["broker"] != strconv.Itoa(int(app.BrokerID())) || labels["listener"] != "SASL_PLAINTEXT" ||
		labels["kind"] != string(alerting.KindAuthFailures) {
		t.Errorf("firing labels %v", labels)
	}
	// The burst is over: the rate falls and the alert resolves.
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if n := len(hook.withStatus("resolved")); n != 1 {
			return fmt.Errorf("%d resolved messages", n)
		}
		return nil
	})
	if n := len(hook.withStatus("firing")); n != 1 {
		t.Errorf("%d firing messages for one burst", n)
	}
}

// In a cluster every host advertises where it serves its metrics (here one
// host with a console, one with only metrics.listen), and the console that
// evaluates reads both; a host that stops is left out with a reason, not
// taken as quiet.
func TestBrokerMetricsAcrossHosts(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	srv := zktest.Start(t, zktest.Options{})
	connect := srv.Addr() + "/sluice"
	app1 := startAppliance(t, "zookeeper.connect="+connect, "broker.id=1", "console.listen="+testutil.FreeAddr(t),
		"alerting.evaluation.interval.ms=200", "offsets.topic.num.partitions=1", "console.topic.replication.factor=1")
	app2 := startAppliance(t, "zookeeper.connect="+connect, "broker.id=2", "console.listen=", "metrics.listen="+testutil.FreeAddr(t),
		"offsets.topic.num.partitions=1")
	c := consoleOf(t, app1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rule := alerting.Rule{Name: "logins", Kind: alerting.KindAuthFailures, Threshold: 10}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		pv, err := c.alerts.PreviewRule(ctx, rule)
		if err != nil {
			return err
		}
		if pv.SourceError != "" || len(pv.Subjects) != 2 || pv.Subjects[0].Subject != "broker:1" || pv.Subjects[1].Subject != "broker:2" {
			return fmt.Errorf("preview %+v", pv)
		}
		return nil
	})
	if err := app2.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		pv, err := c.alerts.PreviewRule(ctx, rule)
		if err != nil {
			return err
		}
		if len(pv.Subjects) != 1 || pv.Subjects[0].Subject != "broker:1" || !strings.Contains(pv.Note, "Broker 2 is left out") {
			return fmt.Errorf("preview %+v", pv)
		}
		return nil
	})
}
