package alerting

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// TestInternalTargetsRefused: without alerting.allowed.targets, a notifier
// pointing at the console's own host — by address or by a name that
// resolves there — gets nothing; the delivery fails at once (not retried)
// and says which key allows it. Listing the address, a prefix, or the
// host:port by name lets it through.
func TestInternalTargetsRefused(t *testing.T) {
	recv := newReceiver(t, 202)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(recv.srv.URL, "http://"))
	ctx := context.Background()
	for _, url := range []string{recv.srv.URL + "/hook", "http://localhost:" + port + "/hook", "http://[::ffff:127.0.0.1]:" + port + "/hook"} {
		env := newTestService(t, func(c *Config) { c.AllowedTargets = nil })
		n, err := env.svc.CreateNotifier(ctx, NotifierInput{Name: "internal", Type: NotifierWebhook, URL: url, Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		d, err := env.svc.SendTest(ctx, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != DeliveryFailed || d.Attempts != 1 || !strings.Contains(d.Error, "loopback") || !strings.Contains(d.Error, "alerting.allowed.targets") {
			t.Errorf("%s: delivery %+v", url, d)
		}
	}
	if n := len(recv.requests()); n != 0 {
		t.Fatalf("the internal receiver got %d requests", n)
	}

	for _, allow := range [][]string{{"127.0.0.1"}, {"127.0.0.0/8"}, {"localhost:" + port}, {"127.0.0.1:" + port}} {
		env := newTestService(t, func(c *Config) { c.AllowedTargets = allow })
		url := recv.srv.URL + "/hook"
		if strings.HasPrefix(allow[0], "localhost") {
			url = "http://localhost:" + port + "/hook"
		}
		n, err := env.svc.CreateNotifier(ctx, NotifierInput{Name: "allowed", Type: NotifierWebhook, URL: url, Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		if d, err := env.svc.SendTest(ctx, n.ID); err != nil || d.Status != DeliveryDelivered {
			t.Errorf("allowed by %v: %+v %v", allow, d, err)
		}
	}
	// A host:port entry allows that port only.
	env := newTestService(t, func(c *Config) { c.AllowedTargets = []string{"localhost:1"} })
	n, _ := env.svc.CreateNotifier(ctx, NotifierInput{Name: "other-port", Type: NotifierWebhook, URL: "http://localhost:" + port + "/hook", Enabled: true})
	if d, _ := env.svc.SendTest(ctx, n.ID); d.Status != DeliveryFailed {
		t.Errorf("another port of an allowed host: %+v", d)
	}
}

// TestDialCheckSeesResolvedAddress: the check runs on the address being
// connected, whatever name led there, so a name that resolves to an
// internal address at send time (DNS rebinding) is refused.
func TestDialCheckSeesResolvedAddress(t *testing.T) {
	var tg *Targets
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "169.254.169.254:80", "10.1.2.3:8080", "[fd00::1]:80", "100.64.0.1:80", "0.0.0.0:80", "[::]:80",
		"224.0.0.1:80", "[ff02::1]:80", "255.255.255.255:80", "[::ffff:192.168.1.1]:80", "[64:ff9b::a9fe:a9fe]:80", "[fe80::1]:80"} {
		if err := tg.checkDial(addr); !errors.Is(err, ErrTargetRefused) {
			t.Errorf("%s: %v, want refused", addr, err)
		}
	}
	for _, addr := range []string{"8.8.8.8:443", "[2001:4860:4860::8888]:443", "[64:ff9b::808:808]:443"} {
		if err := tg.checkDial(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	// The hook itself: a dial to a name resolving to loopback fails in
	// Control, before connecting.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if _, err := tg.dialContext(context.Background(), "tcp", "localhost:"+port); !errors.Is(err, ErrTargetRefused) {
		t.Fatalf("dial localhost: %v", err)
	}
	if accepted.Load() != 0 {
		t.Fatal("the refused dial connected")
	}
}

// TestRedirectNotFollowed: a receiver answering 302 to an internal URL
// does not get the notification forwarded; the delivery fails, once.
func TestRedirectNotFollowed(t *testing.T) {
	inner := newReceiver(t, 202)
	var hits atomic.Int32
	outer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, inner.srv.URL+"/latest/meta-data", http.StatusFound)
	}))
	defer outer.Close()
	env := newTestService(t, nil)
	n, err := env.svc.CreateNotifier(context.Background(), NotifierInput{Name: "bouncer", Type: NotifierWebhook, URL: outer.URL + "/hook", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := env.svc.SendTest(context.Background(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DeliveryFailed || d.HTTPStatus != http.StatusFound || d.Attempts != 1 || !strings.Contains(d.Error, "redirects are not followed") {
		t.Errorf("delivery %+v", d)
	}
	if hits.Load() != 1 || len(inner.requests()) != 0 {
		t.Errorf("outer hit %d times, redirect target %d times", hits.Load(), len(inner.requests()))
	}
}

func TestParseTargets(t *testing.T) {
	tg, err := ParseTargets([]string{" 10.0.0.0/8", "192.168.1.7", "alertmanager.internal:9093", "[::1]:9000", "relay.example.:https", ""})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{"10.9.9.9:1": true, "192.168.1.7:80": true, "192.168.1.8:80": false, "[::1]:9000": true, "[::1]:9001": false} {
		if got := tg.allowsAddr(netip.MustParseAddrPort(addr)); got != want {
			t.Errorf("allowsAddr(%s) = %v", addr, got)
		}
	}
	if !tg.allowsHost("AlertManager.internal", "9093") || tg.allowsHost("alertmanager.internal", "9094") || !tg.allowsHost("relay.example", "443") {
		t.Error("host:port entries")
	}
	for _, bad := range []string{"10.0.0.0/33", "host", "host:", ":80", "host:99999", "a b:80"} {
		if _, err := ParseTargets([]string{bad}); err == nil || !strings.Contains(err.Error(), "alerting.allowed.targets") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestMaskURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXabcd": "https://hooks.slack.com/••••abcd",
		"https://recv.example/hook?token=0123456789abcdefwxyz":        "https://recv.example/••••wxyz",
		"https://recv.example/short":                                  "https://recv.example/••••",
		"https://user:pass@recv.example/":                             "https://••••@recv.example/",
		"https://recv.example":                                        "https://recv.example",
		DefaultPagerDutyURL:                                           DefaultPagerDutyURL,
		"not a url":                                                   "••••",
	} {
		if got := MaskURL(in); got != want {
			t.Errorf("MaskURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDeliveryErrorMasksURL: a network error names the URL; a token in it
// stays out of the delivery log and the service log.
func TestDeliveryErrorMasksURL(t *testing.T) {
	const token = "s3cr3t-path-token-0123456789"
	gone := newReceiver(t, 202)
	gone.srv.Close()
	env := newTestService(t, func(c *Config) { c.Retry.MaxAttempts = 1 })
	n, err := env.svc.CreateNotifier(context.Background(), NotifierInput{Name: "gone", Type: NotifierWebhook, URL: gone.srv.URL + "/" + token, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := env.svc.SendTest(context.Background(), n.ID)
	if d.Status != DeliveryFailed || d.Error == "" {
		t.Fatalf("delivery %+v", d)
	}
	if strings.Contains(d.Error, token) || !strings.Contains(d.Error, "••••") {
		t.Errorf("delivery error shows the URL: %s", d.Error)
	}
	if strings.Contains(env.logs.String(), token) {
		t.Error("the URL's token is in the log")
	}
}

// TestRetargetNeedsSecret: a notifier's URL or type cannot change while
// keeping its stored secret unless the caller may (admins), so "Send test"
// cannot deliver the kept key to an endpoint chosen by someone who does not
// know it.
func TestRetargetNeedsSecret(t *testing.T) {
	const key = "abcdef0123456789abcdef0123456789"
	ctx := context.Background()
	env := newTestService(t, nil)
	good := newReceiver(t, 202)
	evil := newReceiver(t, 202)
	n := env.pagerDuty(t, good, key)

	_, err := env.svc.UpdateNotifier(ctx, n.ID, NotifierInput{Name: n.Name, Type: NotifierPagerDuty, URL: evil.srv.URL + "/v2/enqueue", Enabled: true})
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Fields["secret"], "enter the key again") {
		t.Fatalf("URL changed keeping the key: %v", err)
	}
	hook, err := env.svc.CreateNotifier(ctx, NotifierInput{Name: "hook", Type: NotifierWebhook, URL: good.srv.URL + "/hook", Secret: "bearer-token-0123456789", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.svc.UpdateNotifier(ctx, hook.ID, NotifierInput{Name: "hook", Type: NotifierPagerDuty, URL: good.srv.URL + "/hook", Enabled: true}); !errors.As(err, &ve) || ve.Fields["secret"] == "" {
		t.Fatalf("type changed keeping the token: %v", err)
	}
	if _, err := env.svc.SendTest(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
	if len(evil.requests()) != 0 {
		t.Fatal("the kept key went to the new URL")
	}
	if got := good.accepted("event_action", "trigger"); len(got) != 1 || got[0].Decoded["routing_key"] != key {
		t.Fatalf("the stored endpoint got %d triggers", len(got))
	}

	// Other edits keep the key; so does a retarget with the key entered
	// again, or by a caller allowed to keep it.
	if _, err := env.svc.UpdateNotifier(ctx, n.ID, NotifierInput{Name: "renamed", Type: NotifierPagerDuty, URL: n.URL, Enabled: false}); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if _, err := env.svc.UpdateNotifier(ctx, hook.ID, NotifierInput{Name: "hook", Type: NotifierWebhook, URL: evil.srv.URL + "/hook", ClearSecret: true, Enabled: true}); err != nil {
		t.Fatalf("webhook moved with its token removed: %v", err)
	}
	const newKey = "ffffff0123456789abcdef0123456789"
	if _, err := env.svc.UpdateNotifier(ctx, n.ID, NotifierInput{Name: "renamed", Type: NotifierPagerDuty, URL: evil.srv.URL + "/v2/enqueue", Secret: newKey, Enabled: true}); err != nil {
		t.Fatalf("URL changed with a new key: %v", err)
	}
	if _, err := env.svc.UpdateNotifier(ctx, n.ID, NotifierInput{Name: "renamed", Type: NotifierPagerDuty, URL: good.srv.URL + "/v2/enqueue", KeepSecretOnRetarget: true, Enabled: true}); err != nil {
		t.Fatalf("admin retarget: %v", err)
	}
	if _, secret, _ := env.svc.notifierWithSecret(ctx, n.ID); secret != newKey {
		t.Error("the key was not kept")
	}
}

// TestProxyChecksTarget: with alerting.proxy set, notifications go through
// the proxy (an operator's host reaches PagerDuty only that way), and a
// target on an internal address is refused before anything is handed to the
// proxy, unless allowed.
func TestProxyChecksTarget(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A forward proxy sees the absolute URL of the target.
		if r.URL.Host == "" {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		proxied.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer proxy.Close()
	pu, err := ParseProxy(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	post := func(c *http.Client, target string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return errors.New(resp.Status)
		}
		return nil
	}

	// Internal target, not allowed: refused, the proxy never asked.
	c := NewHTTPClient(nil, pu)
	err = post(c, "http://127.0.0.1:9/hook")
	if !errors.Is(err, ErrTargetRefused) {
		t.Fatalf("internal target through the proxy: %v, want ErrTargetRefused", err)
	}
	if proxied.Load() != 0 {
		t.Fatal("the refused request reached the proxy")
	}
	// Allowed by prefix: sent through the proxy (which is itself on
	// loopback: the operator's proxy is dialled unchecked).
	allowed, err := ParseTargets([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	if err := post(NewHTTPClient(allowed, pu), "http://127.0.0.1:9/hook"); err != nil {
		t.Fatalf("allowed target through the proxy: %v", err)
	}
	if proxied.Load() != 1 {
		t.Fatalf("proxy saw %d requests, want 1", proxied.Load())
	}

	for _, bad := range []string{"ftp://proxy:21", "proxy:3128", "http://"} {
		if _, err := ParseProxy(bad); err == nil {
			t.Errorf("ParseProxy(%q) accepted", bad)
		}
	}
}
