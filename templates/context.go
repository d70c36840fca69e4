// Package templates holds the console's pages and components, written in
// templ (https://templ.guide). Every page is composed from exported
// components, so page groups added later (alerts, comparisons) reuse the same
// layout, tables, forms and formatting:
//
//	templ AlertsPage(p templates.Page, v AlertsView) {
//		@templates.Layout(p) {
//			@templates.PageHead("Alerts", "", nil)
//			...
//		}
//	}
//
// Per-request facts a component needs (the viewer's time zone, the CSRF
// token, who is signed in) travel in the render context: the console's
// render helper puts them there with WithRequest, and components read them
// with RequestOf(ctx), so forms only need @templates.CSRFField().
//
// The generated *_templ.go files are committed; `make generate` refreshes them.
package templates

import (
	"context"
	"time"
)

// Request is what components know about the request being rendered.
type Request struct {
	Loc      *time.Location // the viewer's zone (from the tz cookie), UTC when unknown
	CSRF     string         // token for forms
	User     string         // signed-in user name, "" when signed out
	Role     string         // viewer, operator or admin
	Path     string         // request path, for the active nav entry
	ZoneName string         // e.g. "Europe/Paris" or "UTC"
	// Theme is the viewer's choice: "light", "dark", or "" to follow the
	// system (the theme cookie).
	Theme string
}

// NextTheme is what the theme button switches to: from following the
// system to dark, to light, and back.
func (r *Request) NextTheme() string {
	switch r.Theme {
	case "dark":
		return "light"
	case "light":
		return ""
	}
	return "dark"
}

// ThemeLabel names the viewer's theme for the theme button.
func (r *Request) ThemeLabel() string {
	switch r.Theme {
	case "dark":
		return "Dark"
	case "light":
		return "Light"
	}
	return "Auto"
}

type requestKey struct{}

// WithRequest returns ctx carrying r.
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestOf returns the request facts in ctx (zero values when none).
func RequestOf(ctx context.Context) *Request {
	if r, ok := ctx.Value(requestKey{}).(*Request); ok && r != nil {
		if r.Loc == nil {
			r.Loc = time.UTC
		}
		return r
	}
	return &Request{Loc: time.UTC, ZoneName: "UTC"}
}

// Can reports whether the signed-in user's role includes need.
func (r *Request) Can(need string) bool {
	return roleRank(r.Role) >= roleRank(need) && roleRank(need) > 0
}

func roleRank(r string) int {
	switch r {
	case "viewer":
		return 1
	case "operator":
		return 2
	case "admin":
		return 3
	}
	return 0
}
