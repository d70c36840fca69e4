package web

import (
	"net/url"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/templates"
)

// Render writes comp as the HTML response with status. Components find the
// viewer's zone, the CSRF token and the user in their context
// (templates.RequestOf).
func Render(c *fiber.Ctx, status int, comp templ.Component) error {
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderVary, "Accept, HX-Request")
	ctx := templates.WithRequest(c.UserContext(), requestInfo(c))
	return comp.Render(ctx, c.Response().BodyWriter())
}

func requestInfo(c *fiber.Ctx) *templates.Request {
	r := &templates.Request{CSRF: CSRFToken(c), Path: string(c.Request().URI().RequestURI()), Loc: time.UTC, ZoneName: "UTC"}
	if loc, ok := c.Locals(localsLoc).(*time.Location); ok && loc != nil {
		r.Loc, r.ZoneName = loc, loc.String()
	}
	if u := CurrentUser(c); u != nil {
		r.User, r.Role = u.Name, string(u.Role)
	}
	switch t := c.Cookies(themeCookie); t {
	case "light", "dark":
		r.Theme = t
	}
	return r
}

// PageFor is the layout data of a page titled title: the nav entries the
// user's role may see, with the current one marked and their counts, and
// any flash note left by the previous request.
func PageFor(c *fiber.Ctx, title string, crumbs ...templates.Crumb) templates.Page {
	p := templates.Page{Title: title, Crumbs: crumbs, Nav: navFor(c, c.Path())}
	s := serverOf(c)
	if s != nil && s.cfg.ReplicaStatus != nil {
		p.Banner = s.staleBanner()
	}
	if f := c.Cookies(flashCookie); f != "" {
		if kind, text, ok := strings.Cut(f, ":"); ok {
			if t, err := url.QueryUnescape(text); err == nil {
				p.Flash = append(p.Flash, templates.Flash{Kind: kind, Text: t})
			}
		}
		if s != nil {
			s.setCookie(c, flashCookie, "", -1)
		}
	}
	return p
}

// navFor is the nav the signed-in user's role may see, the entry of path
// marked current, with the entries' counts.
func navFor(c *fiber.Ctx, path string) []templates.NavItem {
	s := serverOf(c)
	u := CurrentUser(c)
	if s == nil || u == nil {
		return nil
	}
	var out []templates.NavItem
	for _, n := range s.nav {
		if !u.Role.Allows(n.Role) {
			continue
		}
		active := path == n.Path || (n.Path != "/" && strings.HasPrefix(path, n.Path+"/"))
		item := templates.NavItem{Label: n.Label, Href: n.Path, Active: active, Admin: n.Role == RoleAdmin}
		if n.Badge != nil {
			item.HasBadge = true
			item.Badge, item.BadgeKind = n.Badge(c.UserContext())
		}
		out = append(out, item)
	}
	return out
}

// navBadgesOf is the badge refresh's answer (no flash note is consumed).
func navBadgesOf(c *fiber.Ctx) templ.Component {
	return templates.NavBadges(templates.Page{Nav: navFor(c, "")})
}

// Flash leaves a one-line note for the next page the browser loads (the
// page a POST redirects to). kind is ok, info, warn or bad.
func Flash(c *fiber.Ctx, kind, text string) {
	if s := serverOf(c); s != nil {
		if len(text) > 500 {
			text = text[:500] + "…"
		}
		s.setCookie(c, flashCookie, kind+":"+url.QueryEscape(text), time.Minute)
	}
}

// SeeOther redirects after a successful POST (post/redirect/get).
func SeeOther(c *fiber.Ctx, to string) error {
	return c.Redirect(to, fiber.StatusSeeOther)
}

// WantsJSON reports whether the client asked for JSON (Accept:
// application/json without text/html).
func WantsJSON(c *fiber.Ctx) bool {
	a := c.Get(fiber.HeaderAccept)
	return strings.Contains(a, "application/json") && !strings.Contains(a, "text/html")
}

// JSON writes v as the JSON response.
func JSON(c *fiber.Ctx, v any) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderVary, "Accept, HX-Request")
	return c.JSON(v)
}

// Fragment reports whether the request is an htmx request for the element
// with id target, which the handler answers with that component alone.
func Fragment(c *fiber.Ctx, target string) bool {
	return c.Get("HX-Request") == "true" && c.Get("HX-History-Restore-Request") != "true" && c.Get("HX-Target") == target
}
