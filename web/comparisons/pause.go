package comparisons

import (
	"context"

	"github.com/gofiber/fiber/v2"
)

// POST /comparisons/:id/pause: stop a running comparison after it saves
// its checkpoint; Resume continues from there.

type pauser interface {
	getter
	Pause(ctx context.Context, id, base int64) error
}

type pauseHandler struct{ eng pauser }

func (h pauseHandler) post(c *fiber.Ctx) error {
	return act(c, h.eng, "pause", "paused", h.eng.Pause)
}
