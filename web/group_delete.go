package web

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// POST /groups/:name/delete: delete a consumer group (DeleteGroups), and
// POST /groups/:name/offsets/delete: delete its committed offsets for one
// topic (OffsetDelete). The first POST previews the committed offsets that
// go; the preview posts again with apply=1. Kafka refuses the first while
// the group has members (NON_EMPTY_GROUP) and the second while a member
// consumes the topic (GROUP_SUBSCRIBED_TO_TOPIC); the page says so.

type groupDeleter interface {
	DeleteGroup(ctx context.Context, group string) error
	DeleteGroupOffsets(ctx context.Context, group, topic string, partitions []int32) error
}

type groupDelete struct {
	kc   groupDeleter
	show groupShow
}

func (h groupDelete) deleteGroup(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	v, err := h.preview(c, name, "")
	if err != nil {
		return err
	}
	if c.FormValue("apply") != "1" {
		return h.renderPreview(c, fiber.StatusOK, v)
	}
	err = h.kc.DeleteGroup(requestCtx(c), name)
	Audit(c, "group.delete", name, describeDrop(v), err)
	if err != nil {
		return h.refused(c, v, err)
	}
	Flash(c, "ok", "Consumer group "+name+" deleted, with its "+templates.Plural(len(v.Rows), "committed offset", "committed offsets")+".")
	return SeeOther(c, "/groups")
}

func (h groupDelete) deleteOffsets(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	topic := strings.TrimSpace(c.FormValue("topic"))
	if topic == "" {
		gv, err := h.show.view(c, name)
		if err != nil {
			return err
		}
		gv.OffsetsForm = templates.NewForm()
		gv.OffsetsForm.Fail("topic", "Choose the topic whose offsets go.")
		return h.show.render(c, fiber.StatusUnprocessableEntity, gv)
	}
	v, err := h.preview(c, name, topic)
	if err != nil {
		return err
	}
	if len(v.Rows) == 0 {
		gv, err := h.show.view(c, name)
		if err != nil {
			return err
		}
		gv.OffsetsForm = templates.NewForm("topic", topic)
		gv.OffsetsForm.Fail("topic", "The group has no committed offsets for "+topic+".")
		return h.show.render(c, fiber.StatusUnprocessableEntity, gv)
	}
	if c.FormValue("apply") != "1" {
		return h.renderPreview(c, fiber.StatusOK, v)
	}
	parts := make([]int32, 0, len(v.Rows))
	for _, r := range v.Rows {
		parts = append(parts, r.Partition)
	}
	err = h.kc.DeleteGroupOffsets(requestCtx(c), name, topic, parts)
	Audit(c, "group.delete-offsets", name, describeDrop(v), err)
	if err != nil {
		return h.refused(c, v, err)
	}
	Flash(c, "ok", "Deleted the "+templates.Plural(len(v.Rows), "committed offset", "committed offsets")+" of "+name+" for "+topic+".")
	return SeeOther(c, templates.GroupURL(name))
}

// preview lists what a deletion removes: every committed offset of the
// group, or those for topic.
func (h groupDelete) preview(c *fiber.Ctx, name, topic string) (templates.GroupDropView, error) {
	d, err := h.show.kc.Group(requestCtx(c), name)
	if err != nil {
		if errors.Is(err, kafkaview.ErrUnknownGroup) {
			return templates.GroupDropView{}, NotFound("consumer group "+name, "It may have been deleted already.")
		}
		return templates.GroupDropView{}, err
	}
	v := templates.GroupDropView{Group: name, Topic: topic, State: d.Lag.State, Members: len(d.Members)}
	for _, p := range d.Lag.Partitions {
		if p.Committed < 0 || (topic != "" && p.Topic != topic) {
			continue
		}
		v.Rows = append(v.Rows, templates.GroupDropRow{Topic: p.Topic, Partition: p.Partition, Committed: p.Committed, End: p.LogEnd, Lag: p.Lag})
	}
	seen := map[string]bool{}
	for _, m := range d.Members {
		consumes := topic == ""
		for _, t := range m.Topics {
			consumes = consumes || t == topic
		}
		for _, a := range m.Assigned {
			consumes = consumes || a.Topic == topic
		}
		who := m.ClientID + " (" + m.ID + ")"
		if consumes && !seen[who] {
			seen[who] = true
			v.Consumers = append(v.Consumers, who)
		}
	}
	sort.Strings(v.Consumers)
	return v, nil
}

func (h groupDelete) renderPreview(c *fiber.Ctx, status int, v templates.GroupDropView) error {
	if WantsJSON(c) {
		rows := make([]fiber.Map, 0, len(v.Rows))
		for _, r := range v.Rows {
			rows = append(rows, fiber.Map{"topic": r.Topic, "partition": r.Partition, "committed": r.Committed, "log_end": r.End, "lag": r.Lag})
		}
		return c.Status(status).JSON(fiber.Map{"group": v.Group, "topic": v.Topic, "state": v.State, "members": v.Members,
			"refused": v.Blocked(), "consumers": v.Consumers, "offsets": rows, "error": v.Err})
	}
	title := "Delete group " + v.Group
	if v.Topic != "" {
		title = "Delete offsets of " + v.Group + " for " + v.Topic
	}
	page := PageFor(c, title, templates.Crumb{Label: "Consumer groups", Href: "/groups"}, templates.Crumb{Label: v.Group, Href: templates.GroupURL(v.Group)})
	return Render(c, status, templates.GroupDropPreviewPage(page, v))
}

// refused shows the preview again with Kafka's refusal: 409 when members
// still consume, 404 when the group is gone.
func (h groupDelete) refused(c *fiber.Ctx, v templates.GroupDropView, err error) error {
	if errors.Is(err, kafkaview.ErrUnknownGroup) {
		return NotFound("consumer group "+v.Group, "It may have been deleted already.")
	}
	status := fiber.StatusUnprocessableEntity
	if errors.Is(err, kafkaview.ErrGroupHasMembers) {
		status = fiber.StatusConflict
	}
	if nv, perr := h.preview(c, v.Group, v.Topic); perr == nil {
		v = nv
	}
	v.Err = "Not deleted: " + err.Error()
	return h.renderPreview(c, status, v)
}

func describeDrop(v templates.GroupDropView) string {
	var b strings.Builder
	if v.Topic != "" {
		fmt.Fprintf(&b, "topic=%s", v.Topic)
	}
	fmt.Fprintf(&b, " state=%s members=%d offsets=%d", v.State, v.Members, len(v.Rows))
	for i, r := range v.Rows {
		if i == 20 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s/%d@%d", r.Topic, r.Partition, r.Committed)
	}
	return strings.TrimSpace(b.String())
}
