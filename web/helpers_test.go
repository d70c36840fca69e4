package web

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag/sampler"
	"github.com/sluice-io/sluice/web/webtest"
)

// The handler tests run against a fresh kfake cluster each (they count
// topics and records exactly). The end-to-end tests — the browser test and
// the two performance checks — run against the cluster named by
// SLUICE_TEST_BROKERS (comma-separated host:port, e.g. a Sluice broker) when
// it is set, with a unique prefix on every topic and group they create, and
// against kfake otherwise.
const brokersEnv = "SLUICE_TEST_BROKERS"

// e2eCluster returns the bootstrap brokers for an end-to-end test and the
// prefix its names must carry ("" on a private kfake cluster).
func e2eCluster(t testing.TB) ([]string, string) {
	t.Helper()
	if env := os.Getenv(brokersEnv); env != "" {
		return strings.Split(env, ","), fmt.Sprintf("e2e-%d-", time.Now().UnixNano()%1e9)
	}
	return testBrokers(t), ""
}

func testBrokers(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	return webtest.Kfake(t, "sluice-test", opts...)
}

type testServer struct {
	*Server
	t       testing.TB
	brokers []string
	sampler *sampler.Sampler
}

// newTestServer builds a console on a test cluster the way the appliance
// does: with its own Kafka client and a lag sampler (over a second handle
// on its database) that Start runs.
func newTestServer(t testing.TB, mod ...func(*Config)) *testServer {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	cfg := Config{
		Listen:            "127.0.0.1:0",
		DataDir:           t.TempDir(),
		Logger:            webtest.Logger(),
		LagSampleInterval: time.Second,
	}
	for _, m := range mod {
		m(&cfg)
	}
	if len(cfg.Brokers) == 0 {
		cfg.Brokers = testBrokers(t)
	}
	brokers := cfg.Brokers
	db, store, err := consoledb.OpenConsole(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	kc, err := kafkaview.New(brokers, cfg.Logger, kafkaview.Options{Extra: cfg.KafkaOptions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	cfg.Kafka = kc
	smp := sampler.New(sampler.Config{Source: kc, Store: store, Logger: cfg.Logger, Interval: cfg.LagSampleInterval, Leader: cfg.Leader})
	cfg.Samples = smp
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &testServer{Server: s, t: t, brokers: brokers, sampler: smp}
}

// Start starts the console and its sampler; the sampler stops at cleanup,
// before the console closes.
func (ts *testServer) Start(ctx context.Context) error {
	if err := ts.Server.Start(ctx); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ts.sampler.Run(sctx)
	}()
	ts.t.Cleanup(func() {
		cancel()
		<-done
	})
	return nil
}

// openTail opens the live tail at path as the signed-in client c (a stream
// of server-sent events needs the real listener: Start first); the stream
// ends with ctx, and its body is closed at cleanup.
func (ts *testServer) openTail(t testing.TB, ctx context.Context, c *client, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", sessionCookie+"="+c.Cookies[sessionCookie])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// user creates a user with password "password-1".
func (ts *testServer) user(t testing.TB, name string, role Role) {
	t.Helper()
	if _, err := ts.store.CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
}

// client drives the app in process (fiber's app.Test), keeping cookies;
// see webtest.Client.
type (
	client   = webtest.Client
	response = webtest.Response
)

var (
	snippet        = webtest.Snippet
	expectStatus   = webtest.ExpectStatus
	expectContains = webtest.ExpectContains
)

func (ts *testServer) client(t testing.TB) *client { return webtest.NewClient(t, ts.app) }

// signedIn returns a client signed in as a new user with role.
func (ts *testServer) signedIn(t testing.TB, name string, role Role) *client {
	t.Helper()
	ts.user(t, name, role)
	c := ts.client(t)
	c.SignIn(name, "password-1")
	return c
}

// kgoClient is a plain client to the test cluster, closed at cleanup.
func kgoClient(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, ts *testServer, name string, partitions int32) {
	t.Helper()
	if err := ts.kc.CreateTopic(context.Background(), kafkaview.NewTopic{Name: name, Partitions: partitions, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
}

func consoledbFilter(action string) consoledb.AuditFilter {
	return consoledb.AuditFilter{Action: action}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

type consoledbKnownBroker = consoledb.KnownBroker
