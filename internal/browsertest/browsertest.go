// Package browsertest drives Debian's Chromium (/usr/bin/chromium, found on
// PATH), headless, for the console's browser tests: one browser per test with
// a fresh user-data-dir, the project's flags, a viewer in Europe/Paris, every
// Content-Security-Policy violation recorded, and full-page screenshots saved
// in the test's temporary directory and, with SLUICE_SCREENSHOTS=1, copied to
// docs/screenshots/ of the repository. Every wait is bounded. Only tests use
// it.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sluice-io/sluice/internal/testutil"
)

// ScreenshotsEnv set to "1" copies every screenshot to docs/screenshots/.
const ScreenshotsEnv = "SLUICE_SCREENSHOTS"

// Timezone is the viewer's time zone the browser emulates; pages that show
// times must show them in it.
const Timezone = "Europe/Paris"

// ActionTimeout bounds one Do, Text, Screenshot or WaitText call.
const ActionTimeout = 20 * time.Second

// cspRecorder runs before every page's own scripts and keeps the
// Content-Security-Policy violations the page causes in window.__csp.
const cspRecorder = `window.__csp = []; document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`

// Browser is one headless Chromium showing the console at Base.
type Browser struct {
	T     testing.TB
	Ctx   context.Context // the browser tab; cancelled at the test's cleanup
	Base  string          // the console's URL, e.g. http://127.0.0.1:41234
	Shots string          // where Screenshot writes, inside the test's temporary directory
}

// New starts Chromium for t, showing the console at base. The browser is
// stopped and its profile removed when the test ends. It belongs to the
// heavy tier (testutil.Heavy: skipped under -short). A missing chromium
// fails the test (see testutil.RequireBinary).
func New(t testing.TB, base string) *Browser {
	t.Helper()
	testutil.Heavy(t, "Chromium")
	chromium := testutil.RequireBinary(t, "chromium")
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.NoFirstRun,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &Browser{T: t, Ctx: ctx, Base: base, Shots: filepath.Join(t.TempDir(), "screenshots")}
	if err := os.MkdirAll(b.Shots, 0o755); err != nil {
		t.Fatal(err)
	}
	// The first action starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: Timezone}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatal(err)
	}
	return b
}

// Do runs actions within ActionTimeout; on failure the test fails with what
// and the start of the page's text.
func (b *Browser) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.T.Helper()
	// A page still loading (after a click that navigated) can replace the
	// nodes an action queries: wait for the load first, briefly; an action
	// that must wait longer fails on its own.
	for start := time.Now(); !b.loaded() && time.Since(start) < 5*time.Second; {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(b.Ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.T.Fatalf("%s: %v (page text: %.600s)", what, err, b.PageText())
	}
}

// PageText is the page's visible text ("" when it cannot be read within 5 s).
func (b *Browser) PageText() string {
	ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return s
}

// Text is the text of the first element matching the CSS selector sel,
// waiting (bounded) for the page to have loaded and the element to show.
// It asks the page itself rather than going through chromedp's node ids,
// which a navigation just before can leave stale ("No node with given id
// found").
func (b *Browser) Text(sel string) string {
	b.T.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		b.T.Fatal(err)
	}
	expr := `(function(){var e=document.querySelector(` + string(q) + `);return document.readyState==="complete"&&e&&e.checkVisibility()?[e.innerText]:[]})()`
	deadline := time.Now().Add(ActionTimeout)
	for {
		ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
		cancel()
		if err == nil && len(v) == 1 {
			return v[0]
		}
		if time.Now().After(deadline) {
			b.T.Fatalf("text of %s: no such element within %v (%v) (page text: %.600s)", sel, ActionTimeout, err, b.PageText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitText polls until the page's text contains want, for ActionTimeout.
func (b *Browser) WaitText(want string) {
	b.T.Helper()
	b.WaitTextWithin(want, ActionTimeout)
}

// WaitTextWithin polls every 100 ms until the page's text contains want; the
// test fails, showing the page's text, when within passes first.
func (b *Browser) WaitTextWithin(want string, within time.Duration) {
	b.T.Helper()
	deadline := time.Now().Add(within)
	for {
		s := b.PageText()
		// The text of a page that a form's submit or a link opened can
		// show before the page has loaded, and an action on it then may
		// find the nodes it queried replaced ("No node with given id"):
		// wait for the load too.
		if strings.Contains(s, want) && b.loaded() {
			return
		}
		if time.Now().After(deadline) {
			b.T.Fatalf("page never showed %q within %v; it shows: %.1000s", want, within, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// loaded reports whether the page's document has finished loading.
func (b *Browser) loaded() bool {
	ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`))
	return err == nil && s == "complete"
}

// Visit opens path on the console and fails the test when the page caused
// a Content-Security-Policy violation.
func (b *Browser) Visit(path string) {
	b.T.Helper()
	b.Do("open "+path, chromedp.Navigate(b.Base+path))
	b.CheckCSP(path)
}

// CheckCSP fails the test when the current page has caused a
// Content-Security-Policy violation; where names the page in the message.
func (b *Browser) CheckCSP(where string) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__csp || []`))
	if err != nil {
		b.T.Fatalf("read CSP violations on %s: %v", where, err)
	}
	if len(v) > 0 {
		b.T.Fatalf("%s caused Content-Security-Policy violations: %v", where, v)
	}
}

// Screenshot saves the whole page, from the top (so the sticky header is
// where a reader expects it), as Shots/name.png.
func (b *Browser) Screenshot(name string) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)); err != nil {
		b.T.Fatal(err)
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.T.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.Shots, name+".png"), buf, 0o644); err != nil {
		b.T.Fatal(err)
	}
}

// PublishScreenshots logs where the screenshots are and, when
// SLUICE_SCREENSHOTS=1, copies them to docs/screenshots/ of the repository
// (found from the test's working directory). Call it deferred, so that the
// screenshots of a failing test are kept too.
func (b *Browser) PublishScreenshots() {
	b.T.Helper()
	b.T.Logf("screenshots in %s", b.Shots)
	if os.Getenv(ScreenshotsEnv) != "1" {
		return
	}
	root, err := repoRoot()
	if err != nil {
		b.T.Fatal(err)
	}
	dst := filepath.Join(root, "docs", "screenshots")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		b.T.Fatal(err)
	}
	entries, err := os.ReadDir(b.Shots)
	if err != nil {
		b.T.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(b.Shots, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644)
		}
		if err != nil {
			b.T.Fatal(err)
		}
	}
	b.T.Logf("copied %d screenshots to %s", len(entries), dst)
}

// repoRoot is the nearest directory above the working directory (a test's
// package directory) that holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
