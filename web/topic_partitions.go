package web

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// POST /topics/:name/partitions: grow a topic to a new partition count.
// The first POST only previews (the count now and after, validated by the
// controller with CreatePartitions' validate_only, and the key-ordering
// warning); the preview posts again with apply=1 and the count it was
// previewed from ("from"), and a topic that changed since is previewed
// again instead of grown.

type partitionAdder interface {
	ValidatePartitionCount(ctx context.Context, name string, total int) error
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
	pv := templates.PartitionsPreviewView{Topic: name, From: cur, To: n, Replication: v.Detail.Meta.Replication}
	page := PageFor(c, "Add partitions to "+name, templates.Crumb{Label: "Topics", Href: "/topics"}, templates.Crumb{Label: name, Href: templates.TopicURL(name)})
	ctx := requestCtx(c)
	if c.FormValue("apply") == "1" {
		if from := c.FormValue("from"); from != strconv.Itoa(cur) {
			// The topic grew (or shrank: recreated) since the preview.
			pv.Err = "Not applied: the topic has " + strconv.Itoa(cur) + " partitions now, not " + from + " as previewed. Check the preview below and apply again."
			if err := h.kc.ValidatePartitionCount(ctx, name, n); err != nil {
				pv.Refused = kafkaMessage(err)
			}
			return Render(c, fiber.StatusConflict, templates.PartitionsPreviewPage(page, pv))
		}
		err = h.kc.SetPartitionCount(ctx, name, n)
		Audit(c, "topic.add-partitions", name, strconv.Itoa(cur)+" -> "+strconv.Itoa(n), err)
		if err != nil {
			f.Err = err.Error()
			v.PartForm = f
			return h.show.render(c, fiber.StatusUnprocessableEntity, v)
		}
		Flash(c, "ok", "Topic "+name+" now has "+strconv.Itoa(n)+" partitions.")
		return SeeOther(c, templates.TopicURL(name)+"#partitions")
	}
	status := fiber.StatusOK
	if err := h.kc.ValidatePartitionCount(ctx, name, n); err != nil {
		var ke *kafkaview.KafkaError
		if !errors.As(err, &ke) {
			f.Err = err.Error()
			v.PartForm = f
			return h.show.render(c, fiber.StatusUnprocessableEntity, v)
		}
		pv.Refused, status = kafkaMessage(err), fiber.StatusUnprocessableEntity
	}
	if WantsJSON(c) {
		return c.Status(status).JSON(fiber.Map{"topic": name, "partitions": cur, "new_partitions": n,
			"replication": pv.Replication, "refused": pv.Refused})
	}
	return Render(c, status, templates.PartitionsPreviewPage(page, pv))
}

// kafkaMessage is a broker's refusal in its own words (its error message,
// else the error code).
func kafkaMessage(err error) string {
	var ke *kafkaview.KafkaError
	if errors.As(err, &ke) {
		if ke.Message != "" {
			return ke.Message + " (" + ke.Err.Error() + ")"
		}
		return ke.Err.Error()
	}
	return err.Error()
}
