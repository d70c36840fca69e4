package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
)

// The page frame in Chromium: the theme switch and the menu at phone width.

const (
	lightBackground = "rgb(246, 247, 249)"
	darkBackground  = "rgb(15, 20, 25)"
)

// browserSignedIn opens Chromium on a started console and signs in as a new
// viewer, landing on next.
func browserSignedIn(t *testing.T, ts *testServer, next string) *browsertest.Browser {
	t.Helper()
	ts.user(t, "vera", RoleViewer)
	b := browsertest.New(t, ts.URL())
	b.Visit("/login?next=" + next)
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "vera"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	return b
}

// systemScheme makes the browser's system colour scheme dark or light.
func systemScheme(t *testing.T, b *browsertest.Browser, scheme string) {
	t.Helper()
	if _, err := chromedp.Call(b.Ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserThemeSwitch: the theme switch cycles Auto → Dark → Light →
// Auto; the choice applies to the page whatever the system's scheme, stays
// on the page the viewer was on, and persists across reloads and other
// pages; Auto follows the system again.
func TestBrowserThemeSwitch(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts := newTestServer(t)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	createTopic(t, ts, "orders", 1)
	b := browserSignedIn(t, ts, "%2Ftopics%2Forders")
	defer b.PublishScreenshots()
	b.WaitText("Partitions")

	// state reads the switch's label, the document's theme and the page's
	// background.
	state := func() (label, theme, bg string) {
		t.Helper()
		label = evalIn[string](t, b, `document.querySelector("form.theme button").textContent.trim()`)
		theme = evalIn[string](t, b, `document.documentElement.getAttribute("data-theme") || ""`)
		bg = evalIn[string](t, b, `getComputedStyle(document.body).backgroundColor`)
		return
	}
	expect := func(when, wantLabel, wantTheme, wantBG string) {
		t.Helper()
		label, theme, bg := state()
		if label != "◐ "+wantLabel && label != wantLabel {
			t.Fatalf("%s: switch shows %q, want %q", when, label, wantLabel)
		}
		if theme != wantTheme || bg != wantBG {
			t.Fatalf("%s: data-theme %q background %s, want %q %s", when, theme, bg, wantTheme, wantBG)
		}
		if loc := evalIn[string](t, b, `location.pathname`); loc != "/topics/orders" {
			t.Fatalf("%s: on %s, want /topics/orders", when, loc)
		}
	}
	click := func(want string) {
		t.Helper()
		b.Do("switch the theme", chromedp.Click(chromedp.CSS(`form.theme button`)))
		testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			if l := evalIn[string](t, b, `(document.querySelector("form.theme button")||{textContent:""}).textContent`); !strings.Contains(l, want) {
				return fmt.Errorf("switch shows %q, want %q", l, want)
			}
			return nil
		})
		b.CheckCSP("after the theme switch")
	}
	reload := func() {
		t.Helper()
		b.Do("reload", chromedp.Reload())
		b.WaitText("Partitions")
	}

	// Auto follows the system, both ways.
	systemScheme(t, b, "dark")
	expect("auto, system dark", "Auto", "", darkBackground)
	systemScheme(t, b, "light")
	expect("auto, system light", "Auto", "", lightBackground)

	// Dark applies on a light system, and persists.
	click("Dark")
	expect("dark", "Dark", "dark", darkBackground)
	reload()
	expect("dark after a reload", "Dark", "dark", darkBackground)
	b.Screenshot("theme-dark")
	b.Visit("/topics")
	if bg := evalIn[string](t, b, `getComputedStyle(document.body).backgroundColor`); bg != darkBackground {
		t.Fatalf("another page in the dark theme: background %s", bg)
	}
	b.Visit("/topics/orders")

	// Light applies on a dark system, and persists.
	systemScheme(t, b, "dark")
	click("Light")
	expect("light, system dark", "Light", "light", lightBackground)
	reload()
	expect("light after a reload", "Light", "light", lightBackground)
	b.Screenshot("theme-light-on-dark-system")

	// Back to Auto: the system's scheme again, after a reload too.
	click("Auto")
	expect("auto again, system dark", "Auto", "", darkBackground)
	reload()
	expect("auto after a reload", "Auto", "", darkBackground)
	if cs := evalIn[string](t, b, `document.querySelector('meta[name="color-scheme"]').content`); cs != "light dark" {
		t.Fatalf("color-scheme meta under Auto: %q", cs)
	}
}

// TestBrowserPhoneMenu: at phone width the navigation is folded behind the
// Menu button; a tap opens it and another closes it; from the keyboard Tab
// reaches the button, Space opens the menu, Tab walks into its links and
// Enter follows one; the page never scrolls sideways.
func TestBrowserPhoneMenu(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts := newTestServer(t)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := browserSignedIn(t, ts, "%2Ftopics")
	defer b.PublishScreenshots()
	b.WaitText("Topics")
	if _, err := chromedp.Call(b.Ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	defer chromedp.Call(b.Ctx, emulation.ClearDeviceMetricsOverride, cdpEmpty)
	b.Visit("/topics")

	navShown := func() bool {
		return evalIn[bool](t, b, `getComputedStyle(document.getElementById("mainnav")).display !== "none"`)
	}
	noSideways := func(when string) {
		t.Helper()
		if evalIn[bool](t, b, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
			t.Fatalf("%s: the page scrolls sideways at phone width", when)
		}
	}
	if navShown() {
		t.Fatal("the navigation is unfolded at phone width before the menu is opened")
	}
	if !evalIn[bool](t, b, `getComputedStyle(document.querySelector("label.navbutton")).display !== "none"`) {
		t.Fatal("no Menu button at phone width")
	}
	noSideways("menu closed")

	// Tap to open, tap to close.
	b.Do("open the menu", chromedp.Click(chromedp.CSS(`label.navbutton`)))
	if !navShown() {
		t.Fatal("the menu did not open")
	}
	noSideways("menu open")
	b.Screenshot("phone-menu-open")
	if !evalIn[bool](t, b, `(function(){var a=document.querySelector('#mainnav a[href="/groups"]');var r=a.getBoundingClientRect();return r.width>0&&r.height>0&&r.right<=window.innerWidth})()`) {
		t.Fatal("the Groups entry is not on screen in the open menu")
	}
	b.Do("close the menu", chromedp.Click(chromedp.CSS(`label.navbutton`)))
	if navShown() {
		t.Fatal("the menu did not close")
	}

	// The keyboard: Tab to the menu's checkbox (bounded), Space opens.
	b.Visit("/topics")
	focused := func() string {
		return evalIn[string](t, b, `(function(){var e=document.activeElement;if(!e)return "";return e.id || e.getAttribute("href") || e.tagName})()`)
	}
	reached := false
	for i := 0; i < 8 && !reached; i++ {
		b.Do("tab", chromedp.KeyEvent(kb.Tab))
		reached = focused() == "navtoggle"
	}
	if !reached {
		t.Fatalf("Tab never reached the menu button (focus on %q)", focused())
	}
	if !evalIn[bool](t, b, `getComputedStyle(document.querySelector("label.navbutton")).outlineStyle !== "none"`) {
		t.Fatal("the focused menu button shows no focus ring")
	}
	b.Do("space opens", chromedp.KeyEvent(" "))
	if !navShown() {
		t.Fatal("Space on the menu button did not open the menu")
	}
	b.Do("tab into the menu", chromedp.KeyEvent(kb.Tab))
	if in := evalIn[bool](t, b, `document.getElementById("mainnav").contains(document.activeElement)`); !in {
		t.Fatalf("Tab after opening the menu went to %q, not into the menu", focused())
	}
	// Walk to the Groups entry and follow it.
	for i := 0; i < 10 && focused() != "/groups"; i++ {
		b.Do("tab", chromedp.KeyEvent(kb.Tab))
	}
	if focused() != "/groups" {
		t.Fatalf("Tab never reached the Groups entry (focus on %q)", focused())
	}
	b.Do("follow Groups", chromedp.KeyEvent(kb.Enter))
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if p := evalIn[string](t, b, `location.pathname`); p != "/groups" {
			return fmt.Errorf("on %s", p)
		}
		return nil
	})
	b.WaitText("Consumer groups")
	if navShown() {
		t.Fatal("the menu is still open on the next page")
	}
	// Shift+Tab back from the nav closes nothing by itself; Space toggles it
	// shut again.
	b.Do("focus the menu button", chromedp.Focus(chromedp.ID("navtoggle")))
	b.Do("space opens", chromedp.KeyEvent(" "))
	if !navShown() {
		t.Fatal("Space did not open the menu")
	}
	b.Do("space closes", chromedp.KeyEvent(" "))
	if navShown() {
		t.Fatal("Space did not close the menu")
	}
	noSideways("groups page")
}

// TestBrowserAdminMenu: an admin's administration entries (users, audit
// log, console status) are folded under one Admin menu at desktop width, so
// the nav stays on one line; the menu opens on a click, its entries lead to
// their pages (where the menu is marked current), and it closes on Escape
// and on a click elsewhere.
func TestBrowserAdminMenu(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts := newTestServer(t)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.user(t, "ada", RoleAdmin)
	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()
	if _, err := chromedp.Call(b.Ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 1280, Height: 800, DeviceScaleFactor: 1}); err != nil {
		t.Fatal(err)
	}
	defer chromedp.Call(b.Ctx, emulation.ClearDeviceMetricsOverride, cdpEmpty)
	b.Visit("/login?next=%2Ftopics")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "ada"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("Topics")

	usersShown := func() bool {
		return evalIn[bool](t, b, `(function(){var a=document.querySelector('#mainnav a[href="/users"]');return !!a && a.checkVisibility()})()`)
	}
	if !evalIn[bool](t, b, `(function(){var s=document.querySelector("#mainnav li.navmore summary");var a=document.querySelector('#mainnav a[href="/topics"]');return !!s && Math.abs(s.getBoundingClientRect().top-a.getBoundingClientRect().top)<2})()`) {
		t.Fatal("the Admin menu is not on the nav's line")
	}
	if usersShown() {
		t.Fatal("the admin entries show before the menu is opened")
	}
	b.Do("open the Admin menu", chromedp.Click(chromedp.CSS(`#mainnav li.navmore summary`)))
	if !usersShown() {
		t.Fatal("the Admin menu did not open")
	}
	b.Do("Escape", chromedp.KeyEvent(kb.Escape))
	if usersShown() {
		t.Fatal("Escape left the Admin menu open")
	}
	b.Do("open the Admin menu", chromedp.Click(chromedp.CSS(`#mainnav li.navmore summary`)))
	b.Do("click elsewhere", chromedp.Click(chromedp.CSS(`main h1`)))
	if usersShown() {
		t.Fatal("a click elsewhere left the Admin menu open")
	}
	b.Do("open the Admin menu", chromedp.Click(chromedp.CSS(`#mainnav li.navmore summary`)))
	b.Do("follow Users", chromedp.Click(chromedp.CSS(`#mainnav a[href="/users"]`)))
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if p := evalIn[string](t, b, `location.pathname`); p != "/users" {
			return fmt.Errorf("on %s", p)
		}
		// The new document may still be parsing when its location changes.
		if !evalIn[bool](t, b, `document.readyState !== "loading" && !!document.querySelector("#mainnav li.navmore summary")`) {
			return fmt.Errorf("the users page is still loading")
		}
		return nil
	})
	if !evalIn[bool](t, b, `document.querySelector("#mainnav li.navmore summary").classList.contains("current")`) {
		t.Fatal("the Admin menu is not marked current on the users page")
	}
	b.Screenshot("admin-menu")
}
