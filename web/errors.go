package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// Error is an error a handler returns to answer with a status and a page
// that says what happened and what to do.
type Error struct {
	Status int
	Title  string
	Text   string
	Hint   string
	Err    error // the cause, logged for 5xx
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Title + ": " + e.Err.Error()
	}
	return e.Title + ": " + e.Text
}

func (e *Error) Unwrap() error { return e.Err }

// NotFound is a 404 error for a missing thing ("topic orders").
func NotFound(what, hint string) *Error {
	return &Error{Status: http.StatusNotFound, Title: "Not found", Text: "There is no " + what + ".", Hint: hint}
}

// BadRequest is a 400 error.
func BadRequest(text string) *Error {
	return &Error{Status: http.StatusBadRequest, Title: "Bad request", Text: text}
}

// Unavailable is a 503 error for a cluster that does not answer.
func Unavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Title: "The cluster did not answer",
		Text: err.Error(), Hint: "Check that the brokers are running and reachable from the console, then reload.", Err: err}
}

// ConsoleStateError is the page for a change the console's replicated
// state refused, or nil when err is not one: 409 for an edit of a version
// changed meanwhile (consoledb.StaleError, "changed by alice on host 2 at
// 10:31 UTC; reload"), 503 while the state topic is unreachable or the
// write lock stays taken. Page groups map their store errors with it.
func ConsoleStateError(err error) *Error {
	var se *consoledb.StaleError
	switch {
	case errors.As(err, &se):
		return &Error{Status: http.StatusConflict, Title: "Changed meanwhile", Text: "Not saved: this was " + se.Error() + ".",
			Hint: "Reload the page to see the current version, then make your change again.", Err: err}
	case errors.Is(err, consoledb.ErrUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Title: "Changes are refused",
			Text: "This console cannot reach its state topic (__sluice_console), so a change made now would be lost; it was not made.",
			Hint: "Check the brokers; make the change again once the banner at the top of the page is gone.", Err: err}
	case errors.Is(err, consoledb.ErrBusy):
		return &Error{Status: http.StatusServiceUnavailable, Title: "Busy", Text: err.Error() + ".", Hint: "Try again in a moment.", Err: err}
	}
	return nil
}

// handleError renders every error a handler returns: as JSON when asked,
// as a note for htmx fragments, and as a full error page otherwise.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	var e *Error
	var fe *fiber.Error
	switch {
	case errors.As(err, &e):
	case errors.As(err, &fe):
		e = &Error{Status: fe.Code, Title: http.StatusText(fe.Code), Text: fe.Message}
		if fe.Code == http.StatusNotFound {
			e.Title, e.Text, e.Hint = "Page not found", "There is no page at "+c.Path()+".", "Use the navigation above."
		}
		if fe.Code == http.StatusRequestEntityTooLarge {
			e.Text = "The form is larger than the console accepts (4 MiB)."
		}
	case ConsoleStateError(err) != nil:
		e = ConsoleStateError(err)
	default:
		e = &Error{Status: http.StatusInternalServerError, Title: "Something went wrong",
			Text: "The console could not complete the request: " + err.Error(), Hint: "The console log has the details.", Err: err}
	}
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	if e.Status >= 500 {
		s.log.Error("request failed", "method", c.Method(), "path", c.Path(), "status", e.Status, "err", err)
	} else {
		s.log.Debug("request refused", "method", c.Method(), "path", c.Path(), "status", e.Status, "err", err)
	}
	// The request's context ended with the middleware that made it; the
	// error page only renders.
	c.SetUserContext(context.Background())
	if WantsJSON(c) {
		return c.Status(e.Status).JSON(fiber.Map{"error": e.Title, "detail": e.Text, "hint": e.Hint})
	}
	if c.Get("HX-Request") != "" {
		return Render(c, e.Status, templates.Note("bad", e.Title+": "+e.Text))
	}
	var page templ.Component
	if CurrentUser(c) != nil {
		page = templates.ErrorPage(PageFor(c, e.Title), e.Status, e.Title, e.Text, e.Hint)
	} else {
		page = templates.AuthError(e.Status, e.Title, e.Text+" "+e.Hint)
	}
	return Render(c, e.Status, page)
}
