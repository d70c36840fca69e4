package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/static"
	"github.com/sluice-io/sluice/templates"
)

func TestStaticAssetsAreCachedByChecksum(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client(t)
	path := static.Path("app.css")
	r := c.Get(path)
	expectStatus(t, r, http.StatusOK)
	etag := r.Header.Get("ETag")
	if etag == "" || !strings.Contains(r.Header.Get("Cache-Control"), "immutable") || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("headers: %v", r.Header)
	}
	c.Headers["If-None-Match"] = etag
	expectStatus(t, c.Get(path), http.StatusNotModified)
	delete(c.Headers, "If-None-Match")
	// An unversioned URL is cached briefly only.
	r = c.Get("/static/app.css")
	if !strings.Contains(r.Header.Get("Cache-Control"), "max-age=300") {
		t.Fatalf("unversioned cache-control: %s", r.Header.Get("Cache-Control"))
	}
	// Compressed for clients that accept it.
	c.Headers["Accept-Encoding"] = "gzip"
	r = c.Get(static.Path("htmx.min.js"))
	if r.Header.Get("Content-Encoding") != "gzip" {
		t.Fatal("htmx.min.js not served compressed")
	}
	zr, err := gzip.NewReader(strings.NewReader(r.Text))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.HasPrefix(plain, []byte("var htmx=")) {
		t.Fatal("gzip body is not htmx")
	}
	expectStatus(t, c.Get("/static/nope.js"), http.StatusNotFound)
	// Every page links assets that exist (Path panics otherwise) and the
	// layout works with scripts off: the page is complete HTML.
	v := ts.signedIn(t, "v", RoleViewer)
	r = v.Get("/")
	for _, name := range []string{"app.css", "app.js", "htmx.min.js", "favicon.svg"} {
		if !strings.Contains(r.Text, static.Path(name)) {
			t.Fatalf("layout does not link %s", name)
		}
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("CSP: %q", csp)
	}
	if strings.Contains(r.Text, " style=") || strings.Contains(r.Text, "<script>") {
		t.Fatal("inline styles or scripts would be blocked by the CSP")
	}
}

func TestOverviewBrokersJSONAndFragments(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "a", 3)
	createTopic(t, ts, "b", 1)
	v := ts.signedIn(t, "v", RoleViewer)
	r := v.Get("/")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Cluster sluice-test", "Brokers up", "Partitions", ">4 <", "No consumer groups", `hx-trigger="every 10s"`)
	v.Headers["HX-Request"], v.Headers["HX-Target"] = "true", "overview"
	r = v.Get("/")
	if strings.Contains(r.Text, "<html") || !strings.Contains(r.Text, "Brokers up") {
		t.Fatalf("overview fragment: %s", snippet(r.Text))
	}
	delete(v.Headers, "HX-Request")
	delete(v.Headers, "HX-Target")
	r = v.Get("/brokers")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "controller", "up", "APIs · Produce ≤v")
	v.Accept = "application/json"
	r = v.Get("/")
	var ov struct {
		Topics     int `json:"topics"`
		Partitions int `json:"partitions"`
		BrokersUp  int `json:"brokers_up"`
	}
	if err := json.Unmarshal([]byte(r.Text), &ov); err != nil || ov.Topics != 2 || ov.Partitions != 4 || ov.BrokersUp != 1 {
		t.Fatalf("overview json: %v %+v", err, ov)
	}
	r = v.Get("/brokers")
	var bv struct {
		Brokers []struct {
			ID      int32 `json:"id"`
			Leaders int   `json:"leaders"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(r.Text), &bv); err != nil || len(bv.Brokers) != 1 || bv.Brokers[0].Leaders != 4 {
		t.Fatalf("brokers json: %v %s", err, snippet(r.Text))
	}
	expectContains(t, r, `"cluster_id":`, `"log_bytes":`) // snake_case, as every JSON answer
	// A broker seen before and missing now is shown as down; an admin can
	// forget it.
	ts.store.SeeBrokers(context.Background(), nil)
	if err := ts.store.SeeBrokers(context.Background(), []consoledbKnownBroker{{ID: 77, Host: "gone.example", Port: 9092}}); err != nil {
		t.Fatal(err)
	}
	v.Accept = ""
	expectContains(t, v.Get("/"), "Brokers down", "gone.example")
	admin := ts.signedIn(t, "ada", RoleAdmin)
	expectContains(t, admin.Get("/brokers"), "gone.example", "Forget")
	expectStatus(t, admin.Post("/brokers", "/brokers/77/forget", nil), http.StatusSeeOther)
	if strings.Contains(admin.Get("/brokers").Text, "gone.example") {
		t.Fatal("forgotten broker still listed")
	}
	expectStatus(t, admin.Post("/brokers", "/brokers/77/forget", nil), http.StatusNotFound)
}

func TestErrorPagesSayWhatToDo(t *testing.T) {
	ts := newTestServer(t)
	v := ts.signedIn(t, "v", RoleViewer)
	r := v.Get("/no/such/page")
	expectStatus(t, r, http.StatusNotFound)
	expectContains(t, r, "Page not found", "Back to the overview")
	r = v.Get("/topics/missing")
	expectStatus(t, r, http.StatusNotFound)
	expectContains(t, r, "There is no topic missing", "The Topics page lists the ones that exist")
	v.Accept = "application/json"
	r = v.Get("/topics/missing")
	expectContains(t, r, `"error":"Not found"`)
	// A console whose cluster is down still serves pages that say so.
	down := newTestServer(t, func(c *Config) { c.Brokers = []string{deadAddr(t)} })
	dc := down.signedIn(t, "v", RoleViewer)
	r = dc.Get("/topics")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "The cluster did not answer")
	expectStatus(t, dc.Get("/healthz"), http.StatusOK)
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestHealthAndMetricsWithoutSignIn(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, "sluice_up 1\n")
	})
	ts := newTestServer(t, func(c *Config) { c.Metrics = metrics; c.MetricsPath = "/metrics" })
	c := ts.client(t)
	r := c.Get("/healthz")
	expectStatus(t, r, http.StatusOK)
	r = c.Get("/metrics")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "sluice_up 1")
}

// A page group added by another package gets a nav entry, role checks,
// CSRF checks, the layout and the audit helper.
func TestPageGroupExtension(t *testing.T) {
	var ran sync.WaitGroup
	ran.Add(1)
	stopped := make(chan struct{})
	group := PageGroup{
		Name: "alerts",
		Nav:  []NavItem{{Label: "Alerts", Path: "/alerts", Role: RoleViewer, Order: 45}, {Label: "Rules", Path: "/rules", Role: RoleOperator}},
		Mount: func(r *Router) error {
			r.Get("/alerts", RoleViewer, func(c *fiber.Ctx) error {
				return Render(c, http.StatusOK, templates.Layout(PageFor(c, "Alerts")))
			})
			r.Post("/alerts", RoleOperator, func(c *fiber.Ctx) error {
				Audit(c, "alert.create", c.FormValue("name"), "", nil)
				Flash(c, "ok", "Rule saved.")
				return SeeOther(c, "/alerts")
			})
			return nil
		},
		Run: func(ctx context.Context, s *Server) error {
			ran.Done()
			<-ctx.Done()
			close(stopped)
			return ctx.Err()
		},
	}
	ts := newTestServer(t, func(c *Config) { c.Extra = []PageGroup{group} })
	v := ts.signedIn(t, "v", RoleViewer)
	r := v.Get("/alerts")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `<a href="/alerts" aria-current="page">Alerts`)
	if strings.Contains(r.Text, `href="/rules"`) {
		t.Fatal("nav shows an operator entry to a viewer")
	}
	if strings.Index(r.Text, ">Consumer groups<") > strings.Index(r.Text, ">Alerts<") {
		t.Fatal("nav order: Alerts (45) should follow Consumer groups (40)")
	}
	expectStatus(t, v.Post("/alerts", "/alerts", url.Values{"name": {"x"}}), http.StatusForbidden)
	op := ts.signedIn(t, "op", RoleOperator)
	expectStatus(t, op.Do(http.MethodPost, "/alerts", url.Values{"name": {"x"}}), http.StatusForbidden) // no CSRF token
	expectStatus(t, op.Post("/alerts", "/alerts", url.Values{"name": {"lag-high"}}), http.StatusSeeOther)
	expectContains(t, op.Get("/alerts"), "Rule saved.", `href="/rules"`)
	entries, _, _ := ts.store.Audit(context.Background(), consoledbFilter("alert.create"))
	if len(entries) != 1 || entries[0].User != "op" || entries[0].Target != "lag-high" {
		t.Fatalf("audit from a page group: %+v", entries)
	}
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ran.Wait()
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Close returned before the page group's Run did")
	}
	// A bad nav entry is refused at New.
	bad := PageGroup{Name: "x", Nav: []NavItem{{Label: "Topics again", Path: "/topics"}}}
	if _, err := New(Config{DataDir: t.TempDir(), Brokers: []string{"127.0.0.1:1"}, Extra: []PageGroup{bad}}); err == nil {
		t.Fatal("a nav path taken twice was accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{Brokers: []string{"x:1"}}, // no data dir
		{DataDir: t.TempDir()},     // no brokers
		{DataDir: t.TempDir(), Brokers: []string{"x:1"}, TLSCert: "a"}, // cert without key
		{DataDir: t.TempDir(), Brokers: []string{"x:1"}, Listen: "8080"},
		{DataDir: t.TempDir(), Brokers: []string{"x:1"}, BaseURL: "ftp://x"},
		{DataDir: t.TempDir(), Brokers: []string{"x:1"}, TLSCert: "/nope.pem", TLSKey: "/nope.key"},
	} {
		if s, err := New(cfg); err == nil {
			s.Close()
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// Start listens and logs the setup link; HTTPS with console.tls.*; Close
// waits and the database survives a restart.
func TestStartTLSSetupLinkAndRestart(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	var logs testutil.LockedBuffer
	brokers := testBrokers(t)
	cfg := Config{Listen: "127.0.0.1:0", DataDir: dir, Brokers: brokers, TLSCert: cert, TLSKey: key,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s", s.URL())
	}
	link := s.URL() + "/setup?token=" + s.SetupToken()
	if !strings.Contains(logs.String(), link) {
		t.Fatalf("setup link not logged: %s", logs.String())
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("setup page over TLS: %d", resp.StatusCode)
	}
	var pre string
	for _, ck := range resp.Cookies() {
		if ck.Name == anonCookie {
			pre = ck.Value
			if !ck.Secure || !ck.HttpOnly {
				t.Fatalf("cookie over TLS not Secure/HttpOnly: %+v", ck)
			}
		}
	}
	form := url.Values{"token": {s.SetupToken()}, "username": {"root"}, "password": {"secret-pw-1"}, "confirm": {"secret-pw-1"},
		"_csrf": {s.csrfToken("a:" + pre)}}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/setup", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", anonCookie+"="+pre)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("setup over TLS: %d", resp.StatusCode)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Get(s.URL() + "/healthz"); err == nil {
		t.Fatal("still serving after Close")
	}
	// Restart on the same data dir: the admin is there, no setup link.
	logs.Reset()
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s2.SetupToken() != "" || strings.Contains(logs.String(), "/setup?token=") {
		t.Fatal("setup offered again after restart")
	}
	if n, _ := s2.store.AdminCount(context.Background()); n != 1 {
		t.Fatalf("admins after restart: %d", n)
	}
	if err := s2.Start(context.Background()); err == nil {
		t.Fatal("started twice")
	}
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}
