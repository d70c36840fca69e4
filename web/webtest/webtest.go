// Package webtest is the console's test harness, shared by the tests of web
// and of its page groups (web/alerts, web/comparisons): a cookie-keeping
// client that drives the Fiber app in process (app.Test) and fills in the
// CSRF token of the page a form comes from, the assertions on its responses,
// the tests' logger and a private kfake cluster. It does not import web, so
// web's own in-package tests can use it. Only tests use it.
package webtest

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// RequestTimeout is how long one request through App.Test may take, in
// milliseconds (Fiber's unit).
const RequestTimeout = 30000

// App is what the client drives: a *fiber.App (web.Server.App()).
type App interface {
	Test(req *http.Request, msTimeout ...int) (*http.Response, error)
}

// Client is a browser stand-in: it keeps the cookies the console sets and
// sends Headers (and Accept, when set) with every request.
type Client struct {
	T       testing.TB
	App     App
	Cookies map[string]string
	Headers map[string]string
	Accept  string
}

// NewClient returns a client of app with no cookies.
func NewClient(t testing.TB, app App) *Client {
	return &Client{T: t, App: app, Cookies: map[string]string{}, Headers: map[string]string{}}
}

// Response is a response with its body read.
type Response struct {
	*http.Response
	Text string // the body
}

// Do sends one request; form, when not nil, is the url-encoded body. The
// test fails when the app does not answer within RequestTimeout.
func (c *Client) Do(method, path string, form url.Values) Response {
	c.T.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.Accept != "" {
		req.Header.Set("Accept", c.Accept)
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	var ck []string
	for k, v := range c.Cookies {
		ck = append(ck, k+"="+v)
	}
	if len(ck) > 0 {
		req.Header.Set("Cookie", strings.Join(ck, "; "))
	}
	resp, err := c.App.Test(req, RequestTimeout)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, sc := range resp.Cookies() {
		if sc.MaxAge < 0 || sc.Value == "" {
			delete(c.Cookies, sc.Name)
		} else {
			c.Cookies[sc.Name] = sc.Value
		}
	}
	return Response{resp, string(b)}
}

// Get sends a GET.
func (c *Client) Get(path string) Response {
	c.T.Helper()
	return c.Do(http.MethodGet, path, nil)
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// CSRF loads path and returns the CSRF token of its forms.
func (c *Client) CSRF(path string) string {
	c.T.Helper()
	r := c.Get(path)
	m := csrfRe.FindStringSubmatch(r.Text)
	if m == nil {
		c.T.Fatalf("no CSRF token on %s (status %d)", path, r.StatusCode)
	}
	return m[1]
}

// Post sends form to path with the CSRF token of the page at from, as a
// browser submitting that page's form does.
func (c *Client) Post(from, path string, form url.Values) Response {
	c.T.Helper()
	token := c.CSRF(from)
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", token)
	return c.Do(http.MethodPost, path, form)
}

// SignIn signs in through the form at /login; the test fails unless the
// console redirects (303) to the signed-in pages.
func (c *Client) SignIn(name, password string) {
	c.T.Helper()
	r := c.Post("/login", "/login", url.Values{"username": {name}, "password": {password}})
	if r.StatusCode != http.StatusSeeOther {
		c.T.Fatalf("sign in as %s: status %d: %s", name, r.StatusCode, Snippet(r.Text))
	}
}

// GetJSON fetches path with Accept: application/json and decodes a 200
// answer into v.
func (c *Client) GetJSON(path string, v any) Response {
	c.T.Helper()
	prev, had := c.Headers["Accept"]
	c.Headers["Accept"] = "application/json"
	defer func() {
		if had {
			c.Headers["Accept"] = prev
		} else {
			delete(c.Headers, "Accept")
		}
	}()
	r := c.Get(path)
	if v != nil && r.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(r.Text), v); err != nil {
			c.T.Fatalf("%s: %v: %s", path, err, Snippet(r.Text))
		}
	}
	return r
}

// Snippet shortens a body for a failure message.
func Snippet(s string) string {
	if len(s) > 800 {
		return s[:800] + "…"
	}
	return s
}

// MainOf is the page from its <main> element on (the whole body when it has
// none), for failure messages that should not start with the header.
func MainOf(s string) string {
	if i := strings.Index(s, `<main`); i >= 0 {
		return s[i:]
	}
	return s
}

// ExpectStatus fails the test unless r has status want.
func ExpectStatus(t testing.TB, r Response, want int) {
	t.Helper()
	if r.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body: %s", r.Request.Method, r.Request.URL, r.StatusCode, want, Snippet(MainOf(r.Text)))
	}
}

// ExpectContains fails the test unless r's body contains every one of subs.
func ExpectContains(t testing.TB, r Response, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.Text, s) {
			t.Fatalf("%s %s: body lacks %q; body: %s", r.Request.Method, r.Request.URL, s, Snippet(MainOf(r.Text)))
		}
	}
}

// ExpectLacks fails the test when r's body contains any of subs.
func ExpectLacks(t testing.TB, r Response, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(r.Text, s) {
			t.Fatalf("%s %s: body contains %q", r.Request.Method, r.Request.URL, s)
		}
	}
}

// Logger is the console's logger in tests: debug lines on stderr with -v,
// nothing otherwise.
func Logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// Kfake starts a private one-broker kfake cluster named clusterID, closed
// with the test, and returns its address.
func Kfake(t testing.TB, clusterID string, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.ClusterID(clusterID)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}
