package web

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// POST /groups/:name/reset: reset a group's committed offsets to the
// earliest or latest offset, the first offset at or after a time, or an
// exact offset. The first POST only previews (the offsets each partition
// would get); the preview page posts again with apply=1 and the previewed
// offsets ("off:<topic>:<partition>"), which are committed only if the group
// is still empty.

type offsetResetter interface {
	PlanReset(ctx context.Context, spec kafkaview.ResetSpec) ([]kafkaview.ResetRow, string, error)
	ApplyReset(ctx context.Context, group string, rows []kafkaview.ResetRow) error
}

type groupReset struct {
	kc   offsetResetter
	show groupShow
}

var resetFields = []string{"topic", "partition", "mode", "ts", "offset"}

func (h groupReset) post(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	f := templates.NewForm()
	for _, k := range resetFields {
		f.Set(k, strings.TrimSpace(c.FormValue(k)))
	}
	spec := kafkaview.ResetSpec{Group: name, Topic: f.Get("topic"), Partition: -1, Mode: kafkaview.ResetMode(f.Get("mode"))}
	if p := f.Get("partition"); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			f.Fail("partition", "Enter a partition number, or leave empty for all.")
		} else if spec.Topic == "" {
			f.Fail("partition", "Choose a topic to reset one partition.")
		} else {
			spec.Partition = int32(n)
		}
	}
	switch spec.Mode {
	case kafkaview.ResetEarliest, kafkaview.ResetLatest:
	case kafkaview.ResetTimestamp:
		t, err := parseWhen(f.Get("ts"), Location(c))
		if err != nil {
			f.Fail("ts", "Enter the time to reset to.")
		}
		spec.Time = t
	case kafkaview.ResetOffset:
		o, err := strconv.ParseInt(f.Get("offset"), 10, 64)
		if err != nil || o < 0 {
			f.Fail("offset", "Enter an offset of 0 or more.")
		}
		spec.Offset = o
	default:
		f.Fail("mode", "Choose where to move the offsets.")
	}
	v := templates.ResetPreviewView{Group: name, Spec: spec, Form: f}
	page := PageFor(c, "Reset offsets of "+name, templates.Crumb{Label: "Consumer groups", Href: "/groups"}, templates.Crumb{Label: name, Href: templates.GroupURL(name)})
	if !f.OK() {
		return h.formError(c, f)
	}
	ctx := requestCtx(c)
	if c.FormValue("apply") == "1" {
		rows, err := previewedRows(c)
		if err != nil {
			return err
		}
		err = h.kc.ApplyReset(ctx, name, rows)
		Audit(c, "group.reset-offsets", name, describeReset(spec, rows), err)
		if err != nil {
			v.Err = "Not applied: " + err.Error()
			v.Rows, v.State, _ = h.kc.PlanReset(ctx, spec)
			status := fiber.StatusUnprocessableEntity
			if errors.Is(err, kafkaview.ErrGroupNotEmpty) {
				status = fiber.StatusConflict
			}
			return Render(c, status, templates.ResetPreviewPage(page, v))
		}
		Flash(c, "ok", "Committed new offsets for "+templates.Plural(len(rows), "partition", "partitions")+" of "+name+".")
		return SeeOther(c, templates.GroupURL(name))
	}
	rows, state, err := h.kc.PlanReset(ctx, spec)
	if err != nil {
		f.Err = err.Error()
		return h.formError(c, f)
	}
	v.Rows, v.State = rows, state
	if WantsJSON(c) {
		return JSON(c, fiber.Map{"state": state, "rows": rows})
	}
	return Render(c, fiber.StatusOK, templates.ResetPreviewPage(page, v))
}

// formError shows the group page again with the reset form's errors.
func (h groupReset) formError(c *fiber.Ctx, f templates.Form) error {
	name, _ := PathParam(c, "name")
	gv, err := h.show.view(c, name)
	if err != nil {
		return err
	}
	gv.ResetForm = f
	return h.show.render(c, fiber.StatusUnprocessableEntity, gv)
}

// previewedRows reads the off:<topic>:<partition>=<offset> fields.
func previewedRows(c *fiber.Ctx) ([]kafkaview.ResetRow, error) {
	var rows []kafkaview.ResetRow
	var bad error
	c.Request().PostArgs().VisitAll(func(k, v []byte) {
		key := string(k)
		rest, ok := strings.CutPrefix(key, "off:")
		if !ok || bad != nil {
			return
		}
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 {
			bad = BadRequest("malformed offset field " + key)
			return
		}
		p, err1 := strconv.ParseInt(rest[i+1:], 10, 32)
		o, err2 := strconv.ParseInt(string(v), 10, 64)
		if err1 != nil || err2 != nil || p < 0 || o < 0 {
			bad = BadRequest("malformed offset field " + key)
			return
		}
		rows = append(rows, kafkaview.ResetRow{Topic: rest[:i], Partition: int32(p), New: o})
	})
	if bad != nil {
		return nil, bad
	}
	if len(rows) == 0 {
		return nil, BadRequest("no offsets to apply: preview the reset first")
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
	return rows, nil
}

func describeReset(spec kafkaview.ResetSpec, rows []kafkaview.ResetRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode=%s", spec.Mode)
	if spec.Topic != "" {
		fmt.Fprintf(&b, " topic=%s", spec.Topic)
	}
	for i, r := range rows {
		if i == 20 {
			fmt.Fprintf(&b, " … (%s)", templates.Plural(len(rows), "partition", "partitions"))
			break
		}
		fmt.Fprintf(&b, " %s/%d->%d", r.Topic, r.Partition, r.New)
	}
	return b.String()
}
