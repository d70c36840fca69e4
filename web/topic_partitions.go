package web

import (
	"context"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/templates"
)

// POST /topics/:name/partitions: grow a topic to a new partition count.

type partitionAdder interface {
	SetPartitionCount(ctx context.Context, name string, total int) error
}

type topicPartitions struct {
	kc   partitionAdder
	show topicShow
}

func (h topicPartitions) post(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	v, err := h.show.view(c, name)
	if err != nil {
		return err
	}
	cur := len(v.Detail.Partitions)
	raw := strings.TrimSpace(c.FormValue("count"))
	f := templates.NewForm("count", raw)
	n, perr := strconv.Atoi(raw)
	switch {
	case perr != nil:
		f.Fail("count", "Enter the new total number of partitions, a whole number.")
	case n <= cur:
		f.Fail("count", "The topic has "+strconv.Itoa(cur)+" partitions; enter a larger number (partitions cannot be removed).")
	case n > 10000:
		f.Fail("count", "At most 10000 partitions per topic.")
	}
	if !f.OK() {
		v.PartForm = f
		return h.show.render(c, fiber.StatusUnprocessableEntity, v)
	}
	err = h.kc.SetPartitionCount(requestCtx(c), name, n)
	Audit(c, "topic.add-partitions", name, strconv.Itoa(cur)+" -> "+strconv.Itoa(n), err)
	if err != nil {
		f.Err = err.Error()
		v.PartForm = f
		return h.show.render(c, fiber.StatusUnprocessableEntity, v)
	}
	Flash(c, "ok", "Topic "+name+" now has "+strconv.Itoa(n)+" partitions.")
	return SeeOther(c, templates.TopicURL(name)+"#partitions")
}
