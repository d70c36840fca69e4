package comparisons

import (
	"context"

	"github.com/gofiber/fiber/v2"
)

// POST /comparisons/:id/resume: continue a paused (or failed) comparison
// from its last checkpoint, counting nothing twice.

type resumer interface {
	getter
	Resume(ctx context.Context, id, base int64) error
}

type resumeHandler struct{ eng resumer }

func (h resumeHandler) post(c *fiber.Ctx) error {
	return act(c, h.eng, "resume", "resumed", h.eng.Resume)
}
