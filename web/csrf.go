package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// CSRF protection: every form carries a token (templates.CSRFField) that
// is an HMAC of the session id, or for signed-out forms of a random cookie,
// under a secret kept in the console database. A POST without the token of
// its own session is refused. Cookies are also SameSite=Lax, and a request
// whose Origin names another site is refused before the token is checked.

func (s *Server) csrfToken(bind string) string {
	m := hmac.New(sha256.New, s.csrfSecret)
	m.Write([]byte("csrf\x00" + bind))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CSRFToken is the token forms of this request must carry in the _csrf
// field (or the X-CSRF-Token header).
func CSRFToken(c *fiber.Ctx) string {
	t, _ := c.Locals(localsCSRF).(string)
	return t
}

// errCSRF is the answer to a forged or stale form.
var errCSRF = &Error{
	Status: fiber.StatusForbidden,
	Title:  "The form has expired",
	Text:   "This form was not sent from a page of this console session (its security token is missing or stale).",
	Hint:   "Go back, reload the page, and send the form again. Cookies must be enabled for this site.",
}

// checkCSRF refuses unsafe requests without the request's token.
func (s *Server) checkCSRF(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		return c.Next()
	}
	if origin := c.Get(fiber.HeaderOrigin); origin != "" && origin != "null" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, c.Hostname()) {
			return refuseCSRF(c, "sent from another site (Origin "+origin+")")
		}
	}
	want := CSRFToken(c)
	got := c.FormValue("_csrf")
	if got == "" {
		got = c.Get("X-CSRF-Token")
	}
	switch {
	case got == "":
		return refuseCSRF(c, "no security token")
	case want == "" || !hmac.Equal([]byte(got), []byte(want)):
		return refuseCSRF(c, "security token of another session, or stale")
	}
	return c.Next()
}

// refuseCSRF audits a refused unsafe request (a forged form, or one left
// open across a sign-out) and answers it.
func refuseCSRF(c *fiber.Ctx, why string) error {
	if CurrentUser(c) != nil {
		Audit(c, "auth.csrf-refused", c.Method()+" "+c.Path(), why, errors.New("refused: "+why))
	} else {
		auditNoise(c, requestUser(c), "auth.csrf-refused", c.Method()+" "+c.Path(), why, errors.New("refused: "+why))
	}
	return errCSRF
}
