package browsertest

import (
	"context"
	"encoding/json"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// What the console's operation tests do over and over: sign in and out
// through the forms, ask the page something, and forge a form post from
// the signed-in session.

// SignIn signs in through the form at /login and waits for the overview.
func (b *Browser) SignIn(user, password string) {
	b.T.Helper()
	b.Visit("/login")
	b.Do("sign in as "+user,
		chromedp.SendKeys(chromedp.ID("f-username"), user),
		chromedp.SendKeys(chromedp.ID("f-password"), password),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("Brokers up")
}

// SignOut signs out with the header's button and waits for the sign-in
// page.
func (b *Browser) SignOut() {
	b.T.Helper()
	b.Do("sign out", chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)))
	b.WaitText("Sign in")
}

// Eval evaluates a JavaScript expression on the page, within
// ActionTimeout.
func Eval[T any](b *Browser, expr string) T {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, ActionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.T.Fatalf("%s: %v", expr, err)
	}
	return v
}

// Count is how many elements of the current page match the CSS selector
// sel (none is an answer: it does not wait).
func (b *Browser) Count(sel string) int {
	b.T.Helper()
	q, _ := json.Marshal(sel)
	return Eval[int](b, `document.querySelectorAll(`+string(q)+`).length`)
}

// ForgedPost posts fields to path from the current page, as a script (or
// a hand-made form) of the signed-in user would: with the session's cookie
// and the CSRF token of the page's forms, so that only the role check can
// refuse it. It returns the response's status; a redirect is not followed
// (status 0).
func (b *Browser) ForgedPost(path string, fields map[string]string) int {
	b.T.Helper()
	p, _ := json.Marshal(path)
	f, _ := json.Marshal(fields)
	ctx, cancel := context.WithTimeout(b.Ctx, ActionTimeout)
	defer cancel()
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => {
		const token = document.querySelector('input[name="_csrf"]');
		if (!token) { return -1; }
		const body = new URLSearchParams(`+string(f)+`);
		body.set("_csrf", token.value);
		return fetch(`+string(p)+`, {method: "POST", body, redirect: "manual", credentials: "same-origin"}).then(r => r.status);
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.T.Fatalf("post %s: %v", path, err)
	}
	if status == -1 {
		b.T.Fatalf("post %s: the page has no CSRF token (page text: %.300s)", path, b.PageText())
	}
	return status
}

// Confirm runs trigger, which must open a JavaScript confirm dialog (a
// form with data-confirm-click), accepts the dialog as a user clicking OK
// does, and returns the dialog's message. The test fails when no dialog
// opens within ActionTimeout.
func (b *Browser) Confirm(what string, trigger chromedp.Action[chromedp.Void]) string {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, ActionTimeout)
	defer cancel()
	events := chromedp.Events(ctx, page.JavascriptDialogOpening)
	type answer struct {
		msg string
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		for e, err := range events {
			if err == nil {
				_, err = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}
			answered <- answer{e.Message, err}
			return
		}
		answered <- answer{err: ctx.Err()}
	}()
	if err := chromedp.Do(ctx, trigger); err != nil {
		cancel()
		<-answered
		b.T.Fatalf("%s: %v (page text: %.600s)", what, err, b.PageText())
	}
	a := <-answered
	if a.err != nil {
		b.T.Fatalf("%s: no confirm dialog accepted: %v", what, a.err)
	}
	return a.msg
}

// DuplicateIDs is the ids that more than one element of the current page
// carries (a label's for, an aria reference or a test's selector then
// finds the wrong one).
func (b *Browser) DuplicateIDs() []string {
	b.T.Helper()
	return Eval[[]string](b, `(() => {
		const seen = new Map();
		for (const e of document.querySelectorAll("[id]")) seen.set(e.id, (seen.get(e.id) || 0) + 1);
		return [...seen].filter(([, n]) => n > 1).map(([id]) => id);
	})()`)
}
