package web

import (
	"context"
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
)

// POST /brokers/:id/forget: stop listing a decommissioned broker as down.

type brokerForgetter interface {
	ForgetBroker(ctx context.Context, id int32) error
}

type brokerForget struct{ known brokerForgetter }

func (h brokerForget) post(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("id"), 10, 32)
	if err != nil {
		return BadRequest("broker id must be a number")
	}
	err = h.known.ForgetBroker(requestCtx(c), int32(id))
	if errors.Is(err, consoledb.ErrNotFound) {
		return NotFound("known broker "+strconv.Itoa(int(id)), "")
	}
	Audit(c, "broker.forget", strconv.Itoa(int(id)), "", err)
	if err != nil {
		return err
	}
	Flash(c, "ok", "Broker "+strconv.Itoa(int(id))+" is no longer listed. It reappears if it rejoins the cluster.")
	return SeeOther(c, "/brokers")
}
