package web

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// POST /topics/:name/purge: delete a topic's oldest records (DeleteRecords)
// before an offset, before the first record at or after a time, or all of
// them (up to the high watermark), in one partition or every one. The first
// POST only previews (per partition: records deleted, new log start
// offset); the preview posts again with apply=1, the previewed offsets
// ("to:<partition>") and the topic's name typed in "confirm".

type topicPurger interface {
	PlanPurge(ctx context.Context, spec kafkaview.PurgeSpec) ([]kafkaview.PurgeRow, error)
	Purge(ctx context.Context, topic string, rows []kafkaview.PurgeRow) (map[int32]int64, error)
}

type topicPurge struct {
	kc   topicPurger
	show topicShow
}

var purgeFields = []string{"partition", "mode", "offset", "ts"}

func (h topicPurge) post(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	f := templates.NewForm()
	for _, k := range purgeFields {
		f.Set(k, strings.TrimSpace(c.FormValue(k)))
	}
	spec := kafkaview.PurgeSpec{Topic: name, Partition: -1, Mode: kafkaview.PurgeMode(f.Get("mode"))}
	if p := f.Get("partition"); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			f.Fail("partition", "Enter a partition number, or leave empty for all.")
		} else {
			spec.Partition = int32(n)
		}
	}
	switch spec.Mode {
	case kafkaview.PurgeAll:
	case kafkaview.PurgeTimestamp:
		t, err := parseWhen(f.Get("ts"), Location(c))
		if err != nil {
			f.Fail("ts", "Enter the time: records older than it are deleted.")
		}
		spec.Time = t
	case kafkaview.PurgeOffset:
		o, err := strconv.ParseInt(f.Get("offset"), 10, 64)
		if err != nil || o < 0 {
			f.Fail("offset", "Enter an offset of 0 or more.")
		}
		spec.Offset = o
	default:
		f.Fail("mode", "Choose which records to delete.")
	}
	if !f.OK() {
		return h.formError(c, name, f)
	}
	v := templates.PurgePreviewView{Topic: name, Spec: spec, Form: f, Confirm: templates.NewForm()}
	page := PageFor(c, "Purge records of "+name, templates.Crumb{Label: "Topics", Href: "/topics"}, templates.Crumb{Label: name, Href: templates.TopicURL(name)})
	ctx := requestCtx(c)
	if c.FormValue("apply") == "1" {
		rows, err := purgeRows(c)
		if err != nil {
			return err
		}
		if c.FormValue("confirm") != name {
			v.Rows, err = h.kc.PlanPurge(ctx, spec)
			if err != nil {
				return h.planError(c, name, err)
			}
			v.Confirm = templates.NewForm("confirm", c.FormValue("confirm"))
			v.Confirm.Fail("confirm", "Type the topic name exactly ("+name+") to confirm.")
			return Render(c, fiber.StatusUnprocessableEntity, templates.PurgePreviewPage(page, v))
		}
		starts, err := h.kc.Purge(ctx, name, rows)
		Audit(c, "topic.purge", name, describePurge(spec, rows, starts), err)
		if err != nil {
			if isUnknownTopic(err) && len(starts) == 0 {
				return NotFound("topic "+name, "It may have been deleted.")
			}
			v.Err = "Not purged: " + err.Error()
			v.Rows, _ = h.kc.PlanPurge(ctx, spec)
			return Render(c, fiber.StatusUnprocessableEntity, templates.PurgePreviewPage(page, v))
		}
		Flash(c, "ok", "Purged "+templates.Plural(len(starts), "partition", "partitions")+" of "+name+": new log start offsets "+startsText(starts)+".")
		return SeeOther(c, templates.TopicURL(name))
	}
	v.Rows, err = h.kc.PlanPurge(ctx, spec)
	if err != nil {
		return h.planError(c, name, err)
	}
	if WantsJSON(c) {
		rows := make([]fiber.Map, 0, len(v.Rows))
		for _, r := range v.Rows {
			rows = append(rows, fiber.Map{"partition": r.Partition, "log_start": r.Start, "high_watermark": r.End,
				"deleted": r.Deleted(), "new_log_start": r.To})
		}
		return JSON(c, fiber.Map{"topic": name, "deleted": v.Deleted(), "rows": rows})
	}
	return Render(c, fiber.StatusOK, templates.PurgePreviewPage(page, v))
}

// planError reports a failed preview on the topic page, beside the form.
func (h topicPurge) planError(c *fiber.Ctx, name string, err error) error {
	if isUnknownTopic(err) {
		return NotFound("topic "+name, "It may have been deleted.")
	}
	f := templates.NewForm()
	for _, k := range purgeFields {
		f.Set(k, strings.TrimSpace(c.FormValue(k)))
	}
	f.Err = err.Error()
	return h.formError(c, name, f)
}

// formError shows the topic page again with the purge form's errors.
func (h topicPurge) formError(c *fiber.Ctx, name string, f templates.Form) error {
	v, err := h.show.view(c, name)
	if err != nil {
		return err
	}
	v.PurgeForm = f
	return h.show.render(c, fiber.StatusUnprocessableEntity, v)
}

// purgeRows reads the to:<partition>=<offset> fields.
func purgeRows(c *fiber.Ctx) ([]kafkaview.PurgeRow, error) {
	var rows []kafkaview.PurgeRow
	var bad error
	c.Request().PostArgs().VisitAll(func(k, v []byte) {
		key := string(k)
		rest, ok := strings.CutPrefix(key, "to:")
		if !ok || bad != nil {
			return
		}
		p, err1 := strconv.ParseInt(rest, 10, 32)
		o, err2 := strconv.ParseInt(string(v), 10, 64)
		if err1 != nil || err2 != nil || p < 0 || o < 0 {
			bad = BadRequest("malformed offset field " + key)
			return
		}
		rows = append(rows, kafkaview.PurgeRow{Partition: int32(p), To: o})
	})
	if bad != nil {
		return nil, bad
	}
	if len(rows) == 0 {
		return nil, BadRequest("no offsets to purge to: preview the purge first")
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Partition < rows[j].Partition })
	return rows, nil
}

func describePurge(spec kafkaview.PurgeSpec, rows []kafkaview.PurgeRow, starts map[int32]int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode=%s", spec.Mode)
	switch spec.Mode {
	case kafkaview.PurgeOffset:
		fmt.Fprintf(&b, " offset=%d", spec.Offset)
	case kafkaview.PurgeTimestamp:
		fmt.Fprintf(&b, " before=%d", spec.Time.UnixMilli())
	}
	for i, r := range rows {
		if i == 20 {
			fmt.Fprintf(&b, " … (%s)", templates.Plural(len(rows), "partition", "partitions"))
			break
		}
		fmt.Fprintf(&b, " %d->%d", r.Partition, r.To)
		if s, ok := starts[r.Partition]; ok && s != r.To {
			fmt.Fprintf(&b, "(start %d)", s)
		}
	}
	return b.String()
}

// startsText is "0: 40, 1: 12" for the partitions' new log start offsets.
func startsText(starts map[int32]int64) string {
	ps := make([]int32, 0, len(starts))
	for p := range starts {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var b strings.Builder
	for i, p := range ps {
		if i == 10 {
			b.WriteString(", …")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: %d", p, starts[p])
	}
	return b.String()
}
