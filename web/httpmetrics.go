package web

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"
)

// observeHTTP reports every request to Config.ObserveHTTP with its route
// pattern, so the label set stays bounded whatever paths clients ask for.
func (s *Server) observeHTTP(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		// The error handler has not run yet: take the status it will send.
		status = fiber.StatusInternalServerError
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		}
	}
	route := ""
	if r := c.Route(); r != nil && status != fiber.StatusNotFound {
		route = r.Path
	}
	// Fiber reuses the method string's buffer after the handler returns:
	// copy it before it is used as a label.
	method := string(append([]byte(nil), c.Method()...))
	s.cfg.ObserveHTTP(method, route, status, time.Since(start))
	return err
}
