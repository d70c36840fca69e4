package web

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
)

// Cookie names.
const (
	sessionCookie = "sluice_session"
	anonCookie    = "sluice_pre" // binds the CSRF token of signed-out forms (sign-in, setup)
	flashCookie   = "sluice_flash"
	tzCookie      = "tz"
)

// Locals keys.
const (
	localsSession  = "sluice.session"
	localsToken    = "sluice.token"
	localsCSRF     = "sluice.csrf"
	localsServer   = "sluice.server"
	localsLoc      = "sluice.loc"
	localsClientIP = "sluice.client"
)

// CurrentUser is the signed-in user of the request, or nil.
func CurrentUser(c *fiber.Ctx) *consoledb.User {
	if s, ok := c.Locals(localsSession).(*consoledb.Session); ok && s != nil {
		return &s.User
	}
	return nil
}

// HasRole reports whether the signed-in user's role includes need.
func HasRole(c *fiber.Ctx, need Role) bool {
	u := CurrentUser(c)
	return u != nil && u.Role.Allows(need)
}

// serverRef holds the server in the request's locals. Not *Server itself:
// fasthttp closes every user value that is an io.Closer when the request
// ends, and *Server has a Close method.
type serverRef struct{ s *Server }

func serverOf(c *fiber.Ctx) *Server {
	if r, ok := c.Locals(localsServer).(serverRef); ok {
		return r.s
	}
	return nil
}

// secureCookies is true when the console is reached over HTTPS.
func (s *Server) secureCookies() bool {
	return s.tls != nil || strings.HasPrefix(s.cfg.BaseURL, "https://")
}

func (s *Server) setCookie(c *fiber.Ctx, name, value string, maxAge time.Duration) {
	ck := &fiber.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		HTTPOnly: true,
		Secure:   s.secureCookies(),
		SameSite: fiber.CookieSameSiteLaxMode,
	}
	if maxAge > 0 {
		ck.MaxAge = int(maxAge / time.Second)
	} else if maxAge < 0 {
		ck.MaxAge = -1
		ck.Expires = time.Unix(1, 0)
	}
	c.Cookie(ck)
}

// requestCtx is the context Kafka and database calls of a request use: it
// ends when the server closes or after 30 s.
func requestCtx(c *fiber.Ctx) context.Context { return c.UserContext() }

// session loads the session from its cookie, sets up the request context,
// and derives the CSRF token of the request. It runs before every route.
func (s *Server) session(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	c.SetUserContext(ctx)
	c.Locals(localsServer, serverRef{s})
	c.Locals(localsLoc, viewerLocation(c))
	c.Locals(localsClientIP, s.proxies.clientAddr(c))

	if tok := c.Cookies(sessionCookie); tok != "" {
		sess, err := s.store.SessionByToken(ctx, tok, time.Minute, s.cfg.SessionIdle, s.cfg.SessionMaxAge)
		switch {
		case err == nil:
			c.Locals(localsSession, &sess)
			c.Locals(localsToken, strings.Clone(tok))
			// Changes made by this request are the user's in the
			// replicated state (who changed it, for stale-edit messages).
			c.SetUserContext(consoledb.WithActor(ctx, strings.Clone(sess.User.Name)))
		case errors.Is(err, consoledb.ErrNotFound):
			s.setCookie(c, sessionCookie, "", -1)
		default:
			return err
		}
	}
	bind := ""
	if sess, ok := c.Locals(localsSession).(*consoledb.Session); ok {
		bind = "s:" + sess.ID
	} else {
		pre := c.Cookies(anonCookie)
		if len(pre) < 20 {
			pre = consoledb.NewToken()
			s.setCookie(c, anonCookie, pre, 0)
		}
		bind = "a:" + pre
	}
	c.Locals(localsCSRF, s.csrfToken(bind))
	return c.Next()
}

// requireRole lets the request through when the signed-in user's role
// includes need. Signed-out page views are sent to the sign-in page and
// come back after it; other requests get 401.
func (s *Server) requireRole(need Role) fiber.Handler {
	return func(c *fiber.Ctx) error {
		u := CurrentUser(c)
		if u == nil {
			if (c.Method() == fiber.MethodGet || c.Method() == fiber.MethodHead) && !WantsJSON(c) && c.Get("HX-Request") == "" {
				return c.Redirect("/login?next="+url.QueryEscape(string(c.Request().RequestURI())), fiber.StatusSeeOther)
			}
			return &Error{Status: fiber.StatusUnauthorized, Title: "Sign in first", Text: "This needs a signed-in user.", Hint: "Sign in at /login, then try again."}
		}
		if !u.Role.Allows(need) {
			Audit(c, "auth.role-refused", c.Method()+" "+c.Path(), "role "+string(u.Role)+", needs "+string(need), errRoleRefused)
			return &Error{Status: fiber.StatusForbidden, Title: "Not allowed for your role",
				Text: "Your role is " + string(u.Role) + "; this needs " + string(need) + ".",
				Hint: "An admin can change your role on the Users page."}
		}
		return c.Next()
	}
}

var errRoleRefused = errors.New("refused: the role does not allow it")

// maxNext bounds the post-sign-in address.
const maxNext = 2048

// safeNext keeps a post-sign-in redirect on this site: next must be a path
// of this console, and stay one the way a browser reads it. Browsers follow
// the WHATWG URL rules, which drop tabs and newlines anywhere in a URL and
// treat a backslash like a slash, so "/\t/evil.example/" and "/\\evil.example"
// both mean "//evil.example", another host. So: printable ASCII only (no
// control characters, no spaces, no backslash), one leading slash and not
// two, no scheme or host when parsed, and the same after percent-decoding
// the path (a proxy or framework that decodes %2F must not make it "//").
// Anything else sends the user to the overview.
func safeNext(next string) string {
	if next == "" || len(next) > maxNext || next[0] != '/' || strings.HasPrefix(next, "//") || !plainPath(next) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.ContainsFunc(u.Path, unsafeInPath) {
		return "/"
	}
	for _, p := range []string{"/login", "/logout", "/setup"} {
		if strings.HasPrefix(u.Path, p) {
			return "/"
		}
	}
	return next
}

// plainPath reports whether s is printable ASCII without spaces or
// backslashes: what a percent-encoded path is made of.
func plainPath(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b >= 0x7f || b == '\\' {
			return false
		}
	}
	return true
}

// unsafeInPath is true for what a browser would drop or read as a slash in
// a decoded path: control characters and the backslash. (Decoded group
// names may hold spaces and any other character.)
func unsafeInPath(r rune) bool { return r < ' ' || r == 0x7f || r == '\\' }

// signIn starts a session for u and sets its cookie.
func (s *Server) signIn(c *fiber.Ctx, u consoledb.User) error {
	tok, err := s.store.CreateSession(requestCtx(c), u.ID, s.cfg.SessionIdle, ClientIP(c), string(c.Request().Header.UserAgent()))
	if err != nil {
		return err
	}
	s.setCookie(c, sessionCookie, tok, s.cfg.SessionMaxAge)
	return nil
}
