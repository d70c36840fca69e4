package screenshots

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// demo is a Sluice broker with its console, filled the way a new operator
// would find a real one: ORDER and ORDERNEW order streams with planted
// differences, a compacted customers topic, a dead-letter topic with
// binary values, consumer groups that keep up and one that lags, a week of
// lag history, and a lag rule firing to a PagerDuty-compatible receiver.
type demo struct {
	t       testing.TB
	cluster *testcluster.Cluster
	console string // the console's URL
	dataDir string // console.data.dir
	pd      *receiver
	cl      *kgo.Client
	stop    func()
}

// receiver stands in for PagerDuty's Events API v2 (on 127.0.0.1, which the
// demo's alerting.allowed.targets lets notifications reach).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	events []map[string]any
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var ev map[string]any
		json.Unmarshal(b, &ev)
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"status":"success","message":"Event processed","dedup_key":"`+fmt.Sprint(ev["dedup_key"])+`"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// Events returns the events received with event_action action.
func (r *receiver) Events(action string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, e := range r.events {
		if e["event_action"] == action {
			out = append(out, e)
		}
	}
	return out
}

const (
	demoAdmin    = "admin"
	demoPassword = "correct horse battery"
	pdKey        = "R0123456789ABCDEF0123456789abcde"
)

// newDemo starts the broker and console and fills them. It stops at the
// test's end.
func newDemo(t testing.TB) *demo {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	consoleAddr := testutil.FreeAddr(t)
	c := testcluster.New(t, testcluster.Settings(
		"console.listen="+consoleAddr,
		"console.lag.sample.interval.ms=2000",
		"alerting.evaluation.interval.ms=1000",
		"alerting.allowed.targets=127.0.0.0/8",
		"num.partitions=3",
	))
	d := &demo{t: t, cluster: c, console: "http://" + consoleAddr, dataDir: filepath.Join(c.Node(0).Dir(), "console"), pd: newReceiver(t)}
	d.cl = c.Client(kgo.ProducerLinger(0))
	ctx := context.Background()

	db, store, err := consoledb.OpenConsole(ctx, d.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, u := range []struct {
		name string
		role consoledb.Role
	}{{demoAdmin, consoledb.RoleAdmin}, {"otto", consoledb.RoleOperator}, {"vera", consoledb.RoleViewer}} {
		if _, err := store.CreateUser(ctx, u.name, u.role, demoPassword); err != nil {
			t.Fatal(err)
		}
	}

	d.topics()
	d.orders()
	d.customers()
	d.deadLetters()
	d.transactions(ctx)
	d.groups(ctx)
	d.history(ctx, store)
	return d
}

func (d *demo) topics() {
	compact := "compact"
	retention := "259200000" // 3 days
	c := d.cluster
	c.CreateTopic("ORDER", 6, 1, map[string]*string{"retention.ms": &retention})
	c.CreateTopic("ORDERNEW", 6, 1, nil)
	c.CreateTopic("customers", 3, 1, map[string]*string{"cleanup.policy": &compact})
	c.CreateTopic("payments.dlq", 1, 1, nil)
	c.CreateTopic("audit.events", 2, 1, nil)
	c.CreateTopic("clicks", 4, 1, nil)
	c.CreateTopic("payments", 3, 1, nil)
}

// transactions: payments-writer-1 committed a transaction on payments;
// payments-writer-2 keeps one open on partition 0, holding its last stable
// offset back, until the demo ends.
func (d *demo) transactions(ctx context.Context) {
	d.t.Helper()
	for i, commit := range []bool{true, false} {
		cl := d.cluster.Client(kgo.TransactionalID(fmt.Sprintf("payments-writer-%d", i+1)), kgo.TransactionTimeout(15*time.Minute),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("payments"))
		d.t.Cleanup(cl.Close)
		if err := cl.BeginTransaction(); err != nil {
			d.t.Fatal(err)
		}
		for j := 0; j < 4; j++ {
			r := &kgo.Record{Partition: int32(j % 3 * i), Key: []byte(fmt.Sprintf("PAY-%06d", 990000+10*i+j)), Value: []byte(fmt.Sprintf(`{"payment":%d,"amount":%d.00}`, 990000+10*i+j, 20+j))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				d.t.Fatal(err)
			}
		}
		if commit {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				d.t.Fatal(err)
			}
		}
	}
}

func (d *demo) produce(recs ...*kgo.Record) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		d.t.Fatal(err)
	}
}

// order is one order as the old service writes it (members in the order a
// real producer uses, not sorted).
func order(i int, at time.Time) map[string]any {
	rnd := rand.New(rand.NewPCG(uint64(i), 7))
	skus := []string{"TEA-EARLGREY", "TEA-SENCHA", "CUP-STONEWARE", "POT-CAST-IRON", "FILTER-PAPER"}
	var items []map[string]any
	total := 0.0
	for k := 0; k < 1+rnd.IntN(3); k++ {
		qty := 1 + rnd.IntN(4)
		price := float64(3+rnd.IntN(40)) + 0.5
		items = append(items, map[string]any{"sku": skus[rnd.IntN(len(skus))], "qty": qty, "price": price})
		total += float64(qty) * price
	}
	countries := []string{"FR", "DE", "NL", "ES", "IT"}
	return map[string]any{
		"order_id":   fmt.Sprintf("ORD-%06d", 100000+i),
		"status":     []string{"PAID", "PAID", "PAID", "SHIPPED", "REFUNDED"}[rnd.IntN(5)],
		"customer":   map[string]any{"id": fmt.Sprintf("C-%04d", rnd.IntN(900)+100), "country": countries[rnd.IntN(len(countries))]},
		"items":      items,
		"total":      total,
		"currency":   "EUR",
		"created_at": at.UTC().Format(time.RFC3339Nano),
	}
}

// orderedJSON writes m with its members in a fixed, non-alphabetical order
// (a producer's own order), the way the order service serialises.
func orderedJSON(m map[string]any, keys ...string) []byte {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(v)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

var orderKeys = []string{"order_id", "status", "customer", "items", "total", "currency", "created_at", "processed_at"}

// orders writes 1,200 orders to ORDER and the same to ORDERNEW, which adds
// a processed_at field to every order (a legitimate difference to ignore),
// rounds three totals differently, misses one order and has one extra.
func (d *demo) orders() {
	start := time.Now().Add(-90 * time.Minute)
	var left, right []*kgo.Record
	for i := 0; i < 1200; i++ {
		at := start.Add(time.Duration(i) * 4 * time.Second)
		o := order(i, at)
		key := []byte(o["order_id"].(string))
		hdrs := []kgo.RecordHeader{{Key: "trace-id", Value: []byte(fmt.Sprintf("%016x", rand.Uint64()))}, {Key: "source", Value: []byte("orders-v1")}}
		left = append(left, &kgo.Record{Topic: "ORDER", Key: key, Value: orderedJSON(o, orderKeys...), Timestamp: at, Headers: hdrs})
		if i == 740 {
			continue // never written by the new service
		}
		n := order(i, at)
		n["processed_at"] = at.Add(180 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		if i == 57 || i == 431 || i == 1090 {
			n["total"] = n["total"].(float64) + 0.01
		}
		right = append(right, &kgo.Record{Topic: "ORDERNEW", Key: key, Value: orderedJSON(n, orderKeys...), Timestamp: at.Add(180 * time.Millisecond),
			Headers: []kgo.RecordHeader{{Key: "trace-id", Value: hdrs[0].Value}, {Key: "source", Value: []byte("orders-v2")}}})
	}
	extra := order(5000, start.Add(40*time.Minute))
	right = append(right, &kgo.Record{Topic: "ORDERNEW", Key: []byte(extra["order_id"].(string)), Value: orderedJSON(extra, orderKeys...), Timestamp: start.Add(40 * time.Minute)})
	d.produce(left...)
	d.produce(right...)
}

// customers is a compacted topic: several versions of each customer, and
// a tombstone.
func (d *demo) customers() {
	var recs []*kgo.Record
	names := []string{"Ada Lovelace", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson", "Margaret Hamilton"}
	for v := 1; v <= 4; v++ {
		for i, n := range names {
			val := orderedJSON(map[string]any{"id": fmt.Sprintf("C-%04d", 100+i), "name": n, "tier": []string{"basic", "silver", "gold", "gold"}[v-1], "version": v},
				"id", "name", "tier", "version")
			recs = append(recs, &kgo.Record{Topic: "customers", Key: []byte(fmt.Sprintf("C-%04d", 100+i)), Value: val})
		}
	}
	recs = append(recs, &kgo.Record{Topic: "customers", Key: []byte("C-0104"), Value: nil}) // deleted customer
	d.produce(recs...)
}

// deadLetters are payments a consumer could not process: binary
// (protobuf) values, with the error in a header.
func (d *demo) deadLetters() {
	var recs []*kgo.Record
	for i := 0; i < 12; i++ {
		v := []byte{0x08, byte(i + 1), 0x12, 0x0a}
		v = append(v, []byte(fmt.Sprintf("PAY-%06d", 880000+i))...)
		v = append(v, 0x1a, 0x03, 'E', 'U', 'R', 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x8f, 0x40, 0xff, 0xfe)
		recs = append(recs, &kgo.Record{Topic: "payments.dlq", Key: []byte(fmt.Sprintf("PAY-%06d", 880000+i)), Value: v,
			Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("deserialize: unknown field 7 in PaymentV3")}, {Key: "original-topic", Value: []byte("payments")}}})
	}
	d.produce(recs...)
	var audit []*kgo.Record
	for i := 0; i < 300; i++ {
		audit = append(audit, &kgo.Record{Topic: "audit.events", Value: []byte(fmt.Sprintf(`{"event":"login","user":"u%d","ok":%t}`, i%40, i%7 != 0))})
	}
	d.produce(audit...)
}

// groups: billing read ORDER part way and stopped (it lags and its alert
// fires), shipping keeps up with a live member, analytics is empty and far
// behind on clicks.
func (d *demo) groups(ctx context.Context) {
	commit := func(group, topic string, upTo int64) {
		cl := d.cluster.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var seen int64
		deadline := time.Now().Add(30 * time.Second)
		for seen < upTo && time.Now().Before(deadline) {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollRecords(pctx, int(upTo-seen))
			cancel()
			fs.EachRecord(func(*kgo.Record) { seen++ })
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				d.t.Fatal(err)
			}
		}
		cl.Close()
	}
	commit("billing", "ORDER", 450)
	var clicks []*kgo.Record
	from := time.Now().Add(-2 * time.Hour)
	for i := 0; i < 4000; i++ {
		clicks = append(clicks, &kgo.Record{Topic: "clicks", Key: []byte(fmt.Sprintf("s-%d", i%300)), Timestamp: from.Add(time.Duration(i) * 1800 * time.Millisecond),
			Value: []byte(fmt.Sprintf(`{"page":"/p/%d","ms":%d}`, i%50, 20+i%300))})
	}
	d.produce(clicks...)
	commit("analytics", "clicks", 1500)

	// shipping keeps up: a member consumes audit.events and commits.
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ship, err := kgo.NewClient(kgo.SeedBrokers(d.cluster.Addrs()...), kgo.ConsumerGroup("shipping"), kgo.ConsumeTopics("audit.events", "ORDERNEW"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("shipping-7d9f"), kgo.AutoCommitInterval(time.Second))
	if err != nil {
		d.t.Fatal(err)
	}
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			ship.PollFetches(sctx)
		}
	}()
	// Live traffic: new orders every 250 ms, and invoicing, a slow
	// consumer of ORDER that is catching up (about 12 records a second).
	traffic := make(chan struct{})
	go func() {
		defer close(traffic)
		i := 2000
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			o := order(i, time.Now())
			d.cl.Produce(sctx, &kgo.Record{Topic: "ORDER", Key: []byte(o["order_id"].(string)), Value: orderedJSON(o, orderKeys...)}, nil)
			i++
		}
	}()
	inv, err := kgo.NewClient(kgo.SeedBrokers(d.cluster.Addrs()...), kgo.ConsumerGroup("invoicing"), kgo.ConsumeTopics("ORDER"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("invoicing-2"), kgo.AutoCommitInterval(time.Second), kgo.MaxConcurrentFetches(1))
	if err != nil {
		d.t.Fatal(err)
	}
	invDone := make(chan struct{})
	go func() {
		defer close(invDone)
		for sctx.Err() == nil {
			fs := inv.PollRecords(sctx, 3)
			if fs.NumRecords() > 0 {
				select {
				case <-sctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		}
	}()
	d.stop = func() {
		cancel()
		<-done
		<-traffic
		<-invDone
		ship.Close()
		inv.Close()
	}
	d.t.Cleanup(d.stop)
}

// history backfills a week of lag samples (what the console would have
// stored had it run all week), so the charts show a realistic shape.
func (d *demo) history(ctx context.Context, store *consoledb.Console) {
	now := time.Now()
	step := 5 * time.Minute
	for at := now.Add(-7 * 24 * time.Hour); at.Before(now.Add(-2 * time.Minute)); at = at.Add(step) {
		h := float64(at.Sub(now.Add(-7*24*time.Hour))) / float64(time.Hour)
		wave := 1 + 0.6*sinApprox(h/24*2*3.14159)
		billing := int64(40 * wave)
		if at.After(now.Add(-3 * time.Hour)) {
			billing += int64(float64(at.Sub(now.Add(-3*time.Hour))) / float64(time.Hour) * 260)
		}
		samples := []consoledb.LagSample{
			{Group: "billing", Topic: "ORDER", Lag: billing, LagTime: time.Duration(billing) * 4 * time.Second},
			{Group: "shipping", Topic: "audit.events", Lag: int64(3 * wave), LagTime: 800 * time.Millisecond},
			{Group: "analytics", Topic: "clicks", Lag: int64(2000 + 400*wave), LagTime: 20 * time.Minute},
		}
		if err := store.InsertLagSamples(ctx, at, samples); err != nil {
			d.t.Fatal(err)
		}
	}
}

func sinApprox(x float64) float64 {
	// A few terms are plenty for a demo curve.
	for x > 3.14159 {
		x -= 2 * 3.14159
	}
	return x - x*x*x/6 + x*x*x*x*x/120 - x*x*x*x*x*x*x/5040
}

// ---- the console over HTTP, as a signed-in user ----

// session is an HTTP client signed in to the demo's console.
type session struct {
	t    testing.TB
	base string
	hc   *http.Client
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func (d *demo) session(user string) *session {
	d.t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &session{t: d.t, base: d.console, hc: &http.Client{Jar: jar, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	s.post("/login", "/login", url.Values{"username": {user}, "password": {demoPassword}})
	return s
}

func (s *session) get(path string) string {
	s.t.Helper()
	resp, err := s.hc.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// post sends form to path with the CSRF token of page, and returns the
// redirect target or the body.
func (s *session) post(page, path string, form url.Values) (int, string) {
	s.t.Helper()
	m := csrfField.FindStringSubmatch(s.get(page))
	if m == nil {
		s.t.Fatalf("no CSRF token on %s", page)
	}
	form.Set("_csrf", m[1])
	resp, err := s.hc.PostForm(s.base+path, form)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "" {
		return resp.StatusCode, loc
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
