package clustertest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web/webtest"
)

// The console's state shared through the cluster's own log
// (__sluice_console, see DESIGN.md "The console in a cluster"), on three
// real hosts: what one host's console changes, the others have; a host
// that was stopped catches up, one that lost its database rebuilds it; two
// admins editing the same rule on two hosts cannot overwrite each other;
// notifier secrets never reach the topic or the logs in clear.

// remoteApp lets webtest's client drive a console over HTTP.
type remoteApp struct {
	base string
	hc   *http.Client
}

func (r remoteApp) Test(req *http.Request, _ ...int) (*http.Response, error) {
	out, err := http.NewRequest(req.Method, r.base+req.URL.RequestURI(), req.Body)
	if err != nil {
		return nil, err
	}
	out.Header = req.Header.Clone()
	return r.hc.Do(out)
}

// consoleClient is a browser stand-in on host id's console.
func (c *testCluster) consoleClient(t *testing.T, id int32) *webtest.Client {
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return webtest.NewClient(t, remoteApp{base: "http://" + c.broker(id).console, hc: hc})
}

const rootPassword = "root-password-1"

var adminOnce sync.Once

// signedIn returns a client of host id signed in as name.
func (c *testCluster) signedIn(t *testing.T, id int32, name, password string) *webtest.Client {
	t.Helper()
	cl := c.consoleClient(t, id)
	cl.SignIn(name, password)
	return cl
}

// rootAdmin makes the cluster's first admin, root, with the command line
// on host 1 (a change queued there and published by host 1's console), and
// waits until every host's console signs root in.
func rootAdmin(t *testing.T, c *testCluster) {
	t.Helper()
	adminOnce.Do(func() {
		cmd := exec.Command(c.bin, "console", "user", "add", "--role", "admin", "--password-stdin",
			"--data-dir", filepath.Join(c.broker(1).dir, "console"), "root")
		cmd.Stdin = strings.NewReader(rootPassword + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sluice console user add: %v\n%s", err, out)
		}
	})
	waitConsoles(t, c)
	// Asked of each host's database, not by signing in: failed sign-ins
	// would start the sign-in backoff.
	for _, b := range c.brokers {
		testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			var n int
			if err := c.consoleDB(t, b.id).QueryRow(`SELECT count(*) FROM users WHERE name = 'root'`).Scan(&n); err != nil || n != 1 {
				return fmt.Errorf("root on host %d: %d %v", b.id, n, err)
			}
			return nil
		})
	}
}

// consoleDB opens host id's console database read-only (beside the running
// console), closed with the test.
func (c *testCluster) consoleDB(t *testing.T, id int32) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(c.broker(id).dir, "console", "console.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// waitConsoles waits until every running host's console answers.
func waitConsoles(t *testing.T, c *testCluster) {
	t.Helper()
	for _, b := range c.brokers {
		if !b.running() {
			continue
		}
		testutil.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
			resp, err := http.Get("http://" + b.console + "/healthz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("host %d's console: %s", b.id, resp.Status)
			}
			return nil
		})
	}
}

// pdReceiver is a local PagerDuty Events API v2 stand-in.
type pdReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []map[string]any
	at  []time.Time // when each of got arrived
}

func newPDReceiver(t *testing.T) *pdReceiver {
	r := &pdReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(req.Body).Decode(&m); err != nil || req.URL.Path != "/v2/enqueue" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, m)
		r.at = append(r.at, time.Now())
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"status":"success","message":"Event processed"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// events returns the events with this action (and dedup key, unless "").
func (r *pdReceiver) events(action, dedup string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, m := range r.got {
		if m["event_action"] == action && (dedup == "" || m["dedup_key"] == dedup) {
			out = append(out, m)
		}
	}
	return out
}

// actions lists the event actions received for dedup, in order, with the
// time each arrived.
func (r *pdReceiver) actions(dedup string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for i, m := range r.got {
		if m["dedup_key"] == dedup {
			out = append(out, fmt.Sprintf("%v@%s", m["event_action"], r.at[i].Format("15:04:05.000")))
		}
	}
	return out
}

var idInPath = regexp.MustCompile(`/(\d+)$`)

// created posts a create form and returns the new object's id from the
// redirect.
func created(t *testing.T, cl *webtest.Client, from, path string, form url.Values) int64 {
	t.Helper()
	r := cl.Post(from, path, form)
	webtest.ExpectStatus(t, r, http.StatusSeeOther)
	m := idInPath.FindStringSubmatch(r.Header.Get("Location"))
	if m == nil {
		t.Fatalf("POST %s: redirected to %q", path, r.Header.Get("Location"))
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	return id
}

// visibleWithin waits until ok holds on every other host's console and
// fails the test when that takes longer than within.
func visibleWithin(t *testing.T, within time.Duration, what string, hosts map[int32]*webtest.Client, ok func(*webtest.Client) bool) {
	t.Helper()
	start := time.Now()
	for id, cl := range hosts {
		testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if !ok(cl) {
				return fmt.Errorf("%s not on host %d yet", what, id)
			}
			return nil
		})
		if took := time.Since(start); took > within {
			t.Fatalf("%s reached host %d after %v, want within %v", what, id, took, within)
		}
	}
	t.Logf("%s on every host within %v", what, time.Since(start).Round(time.Millisecond))
}

// stableTables are the replicated tables no background work rewrites, so
// two hosts must have the same rows once caught up.
var stableTables = map[string]string{
	"users":                 "id",
	"alert_rules":           "id",
	"alert_notifiers":       "id",
	"alert_rule_notifiers":  "rule_id, notifier_id",
	"alert_silences":        "id",
	"migration_comparisons": "id",
}

// dumpConsole reads the stable tables of host id's console database
// (read-only, beside the running console).
func dumpConsole(t *testing.T, c *testCluster, id int32) map[string][]string {
	t.Helper()
	path := filepath.Join(c.broker(id).dir, "console", "console.db")
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][]string{}
	for table, order := range stableTables {
		rows, err := db.Query(`SELECT * FROM ` + table + ` ORDER BY ` + order)
		if err != nil {
			t.Fatalf("host %d: %s: %v", id, table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out[table] = append(out[table], fmt.Sprint(vals...))
		}
		rows.Close()
	}
	return out
}

func sameState(a, b map[string][]string) error {
	for table := range stableTables {
		if strings.Join(a[table], "\n") != strings.Join(b[table], "\n") {
			return fmt.Errorf("%s differs:\n%v\nvs\n%v", table, a[table], b[table])
		}
	}
	return nil
}

// statusOf reads host id's /console/status.
func statusOf(t *testing.T, cl *webtest.Client) struct {
	Topics []struct {
		Topic     string
		Applied   int64
		End       int64
		Lag       int64
		Reachable bool
		Origin    string
	}
} {
	t.Helper()
	var st struct {
		Topics []struct {
			Topic     string
			Applied   int64
			End       int64
			Lag       int64
			Reachable bool
			Origin    string
		}
	}
	cl.GetJSON("/console/status", &st)
	return st
}

// kcatTopic reads every record of topic with kcat: key, value and headers.
func kcatTopic(t *testing.T, c *testCluster, topic string) string {
	t.Helper()
	args := append([]string{"-b", strings.Join(c.seeds(), ","), "-C", "-t", topic, "-e", "-q",
		"-f", "%k\t%s\t%h\n"}, c.kcatArgs()...)
	out, err := exec.Command("kcat", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	return string(out)
}

// TestConsoleStateSharedAcrossHosts: a user, a notifier, a lag rule and a
// comparison created on host 1's console are on hosts 2 and 3 within 2 s
// and usable there: the user signs in on host 3, the notifier sends from
// host 2 with the routing key only host 1 was given (decrypted with the
// cluster key), the comparison's numbers show on host 3. The notifier's
// secret is sealed in the topic (read with kcat) and in no broker's log.
func TestConsoleStateSharedAcrossHosts(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	rootAdmin(t, c)
	h1 := c.signedIn(t, 1, "root", rootPassword)
	others := map[int32]*webtest.Client{2: c.signedIn(t, 2, "root", rootPassword), 3: c.signedIn(t, 3, "root", rootPassword)}
	pd := newPDReceiver(t)
	const secret = "R0UT1NGK3YneverInClear5c1e7a9b3f" // a PagerDuty routing key: 32 letters and digits

	user := fmt.Sprintf("alice%d", time.Now().UnixNano()%1e6)
	webtest.ExpectStatus(t, h1.Post("/users", "/users", url.Values{"username": {user}, "role": {"operator"}, "password": {"alice-password-1"}}), http.StatusSeeOther)
	visibleWithin(t, 2*time.Second, "user "+user, others, func(cl *webtest.Client) bool {
		return strings.Contains(cl.Get("/users").Text, user)
	})

	nid := created(t, h1, "/alerts/notifiers", "/alerts/notifiers", url.Values{"name": {"pd-" + user}, "type": {"pagerduty"},
		"url": {pd.srv.URL + "/v2/enqueue"}, "secret": {secret}, "enabled": {"1"}, "send_resolved": {"1"}})
	visibleWithin(t, 2*time.Second, "notifier", others, func(cl *webtest.Client) bool {
		return cl.Get(fmt.Sprintf("/alerts/notifiers/%d", nid)).StatusCode == http.StatusOK
	})

	rid := created(t, h1, "/alerts/rules/new", "/alerts/rules", url.Values{"name": {"lag of " + user}, "kind": {"lag_records"},
		"severity": {"warning"}, "threshold": {"1000000"}, "for": {"0"}, "clear_for": {"0"}, "scope_pattern": {"no-such-group-" + user},
		"notifiers": {strconv.FormatInt(nid, 10)}, "enabled": {"1"}})
	visibleWithin(t, 2*time.Second, "lag rule", others, func(cl *webtest.Client) bool {
		r := cl.Get(fmt.Sprintf("/alerts/rules/%d", rid))
		return r.StatusCode == http.StatusOK && strings.Contains(r.Text, "lag of "+user)
	})

	// A silence made on host 1 holds on every host.
	webtest.ExpectStatus(t, h1.Post("/alerts/silences", "/alerts/silences", url.Values{"rule": {strconv.FormatInt(rid, 10)},
		"subject": {"group:no-such-group-" + user}, "for": {"1h"}, "comment": {"maintenance of " + user}}), http.StatusSeeOther)
	visibleWithin(t, 2*time.Second, "silence", others, func(cl *webtest.Client) bool {
		return strings.Contains(cl.Get("/alerts/silences").Text, "maintenance of "+user)
	})

	left, right := "cs-left-"+user, "cs-right-"+user
	createTopic(t, c, left, [][]int32{{2, 3}}, nil)
	createTopic(t, c, right, [][]int32{{3, 2}}, nil)
	// The console's view of the topics is refreshed within seconds.
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if page := h1.Get("/comparisons/new").Text; !strings.Contains(page, right) {
			return fmt.Errorf("host 1's console does not offer %s yet", right)
		}
		return nil
	})
	cid := created(t, h1, "/comparisons/new", "/comparisons", url.Values{"name": {"cmp " + user}, "left": {left}, "right": {right},
		"pairing": {"key"}, "values": {"bytes"}, "start": {"earliest"}, "window": {"1m"}, "mode": {"continuous"}})
	visibleWithin(t, 2*time.Second, "comparison", others, func(cl *webtest.Client) bool {
		return cl.Get(fmt.Sprintf("/comparisons/%d", cid)).StatusCode == http.StatusOK
	})

	// Usable there: the user signs in on host 3 ...
	c.signedIn(t, 3, user, "alice-password-1")
	// ... the notifier sends from host 2, with its secret ...
	r := others[2].Post(fmt.Sprintf("/alerts/notifiers/%d", nid), fmt.Sprintf("/alerts/notifiers/%d/test", nid), nil)
	if r.StatusCode >= 400 {
		t.Fatalf("send a test from host 2: %d %s", r.StatusCode, webtest.Snippet(webtest.MainOf(r.Text)))
	}
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		for _, ev := range pd.events("trigger", "") {
			if ev["routing_key"] == secret {
				return nil
			}
		}
		return fmt.Errorf("no test event with the routing key yet: %v", pd.events("trigger", ""))
	})
	// ... and the comparison, run by the leading console, shows its
	// numbers on host 3.
	cl := c.client(t)
	for i := 0; i < 20; i++ {
		for _, topic := range []string{left, right} {
			if err := cl.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: value(i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		var v struct {
			Comparison struct {
				State    string
				Snapshot struct{ Counters struct{ Matched int64 } }
			}
		}
		others[3].GetJSON(fmt.Sprintf("/comparisons/%d", cid), &v)
		if v.Comparison.Snapshot.Counters.Matched != 20 {
			return fmt.Errorf("comparison on host 3: %+v", v.Comparison)
		}
		return nil
	})

	// The secret: sealed in the topic, absent from every log.
	dump := kcatTopic(t, c, "__sluice_console")
	if !strings.Contains(dump, fmt.Sprintf(`["alert_notifiers",%d]`, nid)) || !strings.Contains(dump, `"b64"`) {
		t.Fatalf("the notifier's record is not in the topic:\n%.2000s", dump)
	}
	if strings.Contains(dump, secret) {
		t.Fatal("the notifier secret is in clear in __sluice_console")
	}
	for _, b := range c.brokers {
		if logs, _ := os.ReadFile(b.logPath()); strings.Contains(string(logs), secret) {
			t.Fatalf("the notifier secret is in broker %d's log", b.id)
		}
	}

	// Every host applied the topic to its end.
	for id, cl := range others {
		testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			st := statusOf(t, cl)
			if len(st.Topics) != 2 || !st.Topics[0].Reachable || st.Topics[0].Lag != 0 || st.Topics[0].Applied+1 != st.Topics[0].End {
				return fmt.Errorf("host %d: %+v", id, st)
			}
			return nil
		})
	}
}

// TestConsoleStaleEditAcrossHosts: two admins edit the same rule on two
// hosts from the same version: the first save wins, the second is refused
// with who changed it where and when, and nothing typed or stored is lost.
func TestConsoleStaleEditAcrossHosts(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	rootAdmin(t, c)
	root := c.signedIn(t, 1, "root", rootPassword)
	other := fmt.Sprintf("bob%d", time.Now().UnixNano()%1e6)
	webtest.ExpectStatus(t, root.Post("/users", "/users", url.Values{"username": {other}, "role": {"admin"}, "password": {"bob-password-1"}}), http.StatusSeeOther)
	rid := created(t, root, "/alerts/rules/new", "/alerts/rules", url.Values{"name": {"shared " + other}, "kind": {"lag_records"},
		"severity": {"warning"}, "threshold": {"100"}, "for": {"0"}, "clear_for": {"0"}, "scope_pattern": {"nobody-" + other}, "enabled": {"1"}})
	path := fmt.Sprintf("/alerts/rules/%d", rid)
	var bob *webtest.Client
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		cl := c.consoleClient(t, 2)
		r := cl.Post("/login", "/login", url.Values{"username": {other}, "password": {"bob-password-1"}})
		if r.StatusCode != http.StatusSeeOther {
			return fmt.Errorf("%s signs in on host 2: %d", other, r.StatusCode)
		}
		if cl.Get(path).StatusCode != http.StatusOK {
			return fmt.Errorf("the rule is not on host 2 yet")
		}
		bob = cl
		return nil
	})
	version := regexp.MustCompile(`name="version" value="(\d+)"`)
	formOf := func(cl *webtest.Client, threshold string) url.Values {
		page := cl.Get(path)
		m := version.FindStringSubmatch(page.Text)
		if m == nil {
			t.Fatalf("no version on the edit page: %s", webtest.Snippet(webtest.MainOf(page.Text)))
		}
		return url.Values{"name": {"shared " + other}, "kind": {"lag_records"}, "severity": {"warning"}, "threshold": {threshold},
			"for": {"0"}, "clear_for": {"0"}, "scope_pattern": {"nobody-" + other}, "enabled": {"1"}, "version": {m[1]}}
	}
	// Both open the edit page.
	rootForm, bobForm := formOf(root, "111"), formOf(bob, "222")
	if rootForm.Get("version") != bobForm.Get("version") {
		t.Fatalf("the hosts show versions %s and %s", rootForm.Get("version"), bobForm.Get("version"))
	}
	webtest.ExpectStatus(t, root.Post(path, path, rootForm), http.StatusSeeOther)
	r := bob.Post(path, path, bobForm)
	webtest.ExpectStatus(t, r, http.StatusConflict)
	webtest.ExpectContains(t, r, "changed by root on host 1 at", "reload", `value="222"`)
	for _, id := range []int32{1, 2, 3} {
		cl := c.signedIn(t, id, "root", rootPassword)
		testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			var v struct{ Rule struct{ Threshold float64 } }
			cl.GetJSON(path, &v)
			if v.Rule.Threshold != 111 {
				return fmt.Errorf("host %d: threshold %v", id, v.Rule.Threshold)
			}
			return nil
		})
	}
	// Reloaded, bob's edit goes through.
	webtest.ExpectStatus(t, bob.Post(path, path, formOf(bob, "222")), http.StatusSeeOther)
}

// TestConsoleCatchUpAndRebuild: host 2, stopped while host 1's console
// changes users and rules, has them all once it starts again; host 3,
// whose console database is deleted, rebuilds it completely from the
// topic.
func TestConsoleCatchUpAndRebuild(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	rootAdmin(t, c)
	root := c.signedIn(t, 1, "root", rootPassword)
	tag := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)

	c.broker(2).term()
	for i := 0; i < 5; i++ {
		webtest.ExpectStatus(t, root.Post("/users", "/users", url.Values{"username": {fmt.Sprintf("u%s-%d", tag, i)}, "role": {"viewer"},
			"password": {"viewer-password-1"}}), http.StatusSeeOther)
	}
	created(t, root, "/alerts/rules/new", "/alerts/rules", url.Values{"name": {"while 2 was away " + tag}, "kind": {"broker_down"},
		"severity": {"warning"}, "for": {"0"}, "clear_for": {"0"}, "enabled": {"1"}})
	if err := c.broker(2).start(); err != nil {
		t.Fatal(err)
	}
	waitConsoles(t, c)
	testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		return sameState(dumpConsole(t, c, 1), dumpConsole(t, c, 2))
	})
	c.signedIn(t, 2, fmt.Sprintf("u%s-4", tag), "viewer-password-1")

	// A group with lag, so there is lag history to rebuild.
	group, topic := "rb-"+tag, "rb-topic-"+tag
	createTopic(t, c, topic, [][]int32{{1, 2, 3}}, nil)
	offs := kadm.Offsets{}
	offs.AddOffset(topic, 0, 0, -1)
	if _, err := c.admin(t).CommitOffsets(ctxFor(t, 30*time.Second), group, offs); err != nil {
		t.Fatal(err)
	}
	lagHistory := func(id int32) (oldest, n int64) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(c.broker(id).dir, "console", "console.db")+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.QueryRowContext(context.Background(), `SELECT coalesce(min(at), 0), count(*) FROM lag_samples`).Scan(&oldest, &n)
		return oldest, n
	}
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if _, n := lagHistory(1); n < 3 {
			return fmt.Errorf("%d lag samples on host 1", n)
		}
		return nil
	})
	oldest1, n1 := lagHistory(1)

	c.broker(3).term()
	for _, f := range []string{"console.db", "console.db-wal", "console.db-shm"} {
		os.Remove(filepath.Join(c.broker(3).dir, "console", f))
	}
	if err := c.broker(3).start(); err != nil {
		t.Fatal(err)
	}
	waitConsoles(t, c)
	testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		if _, err := os.Stat(filepath.Join(c.broker(3).dir, "console", "console.db")); err != nil {
			return err
		}
		return sameState(dumpConsole(t, c, 1), dumpConsole(t, c, 3))
	})
	h3 := c.signedIn(t, 3, "root", rootPassword)
	if st := statusOf(t, h3); len(st.Topics) == 0 || st.Topics[0].Origin != "replay" {
		t.Fatalf("host 3's status after the rebuild: %+v", st)
	}
	// Its lag history came back from the lag history topic too.
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		oldest3, n3 := lagHistory(3)
		if oldest3 != oldest1 || n3 < n1 {
			return fmt.Errorf("host 3's lag history: oldest %d, %d samples; host 1 had %d, %d", oldest3, n3, oldest1, n1)
		}
		return nil
	})
}

// TestConsoleWritesRideOutRollingRestart: in a rolling restart, a change
// saved on a host's console while the broker leading __sluice_console
// shuts down (its leaderships move) and while it is away is taken, not
// refused with 503: the console's writes ride out the leadership moves.
func TestConsoleWritesRideOutRollingRestart(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes, stopped and started")
	c := healthy(t)
	restoreAfter(t, c)
	rootAdmin(t, c)
	tag := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	n := 0
	for round := range 3 {
		ctx := ctxFor(t, 10*time.Second)
		parts, err := partitionsFrom(ctx, c.broker(1), "__sluice_console")
		if err != nil {
			t.Fatal(err)
		}
		leader := parts[0].Leader
		if leader < 1 {
			t.Fatalf("__sluice_console has no leader: %+v", parts[0])
		}
		host := leader%3 + 1
		cl := c.signedIn(t, host, "root", rootPassword)
		save := func(when string) {
			t.Helper()
			n++
			start := time.Now()
			r := cl.Post("/users", "/users", url.Values{"username": {fmt.Sprintf("r%s-%d", tag, n)}, "role": {"viewer"},
				"password": {"viewer-password-1"}})
			if r.StatusCode != http.StatusSeeOther {
				t.Fatalf("round %d: change %d on host %d %s (after %v): %d %s", round, n, host, when, time.Since(start).Round(time.Millisecond),
					r.StatusCode, webtest.Snippet(webtest.MainOf(r.Text)))
			}
		}
		stopped := make(chan struct{})
		go func() { c.broker(leader).term(); close(stopped) }()
		for stopping := true; stopping; {
			select {
			case <-stopped:
				stopping = false
			default:
			}
			save(fmt.Sprintf("while broker %d stops", leader))
		}
		for range 3 {
			save(fmt.Sprintf("with broker %d away", leader))
		}
		if err := c.broker(leader).start(); err != nil {
			t.Fatal(err)
		}
		waitLive(t, c, 3, 60*time.Second)
		waitConsoles(t, c)
		waitISR(t, c, "__sluice_console", func(_ int32, pi partitionInfo) error {
			if len(pi.ISR) != 3 {
				return fmt.Errorf("ISR %v", pi.ISR)
			}
			return nil
		})
	}
}
