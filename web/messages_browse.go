package web

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /topics/:name/messages: browse a topic or a partition from earliest,
// latest, an offset or a time, or search it on the server (bounded by a
// record count and a time, reporting "scanned N of M"; at most
// MaxScansPerUser at once per user). See messages_query.go for the
// parameters. Each read is an "access.messages.browse" audit entry.

type recordReader interface {
	TopicMetadata(ctx context.Context, topic string) (kafkaview.TopicMeta, error)
	Read(ctx context.Context, q kafkaview.Query) (*kafkaview.Result, error)
}

type messagesBrowse struct{ kc recordReader }

func (h messagesBrowse) get(c *fiber.Ctx) error {
	name, err := param(c, "name")
	if err != nil {
		return err
	}
	v, err := h.view(c, name)
	if err != nil {
		return err
	}
	if WantsJSON(c) {
		if v.Err != "" {
			return &Error{Status: fiber.StatusBadRequest, Title: "Bad request", Text: v.Err}
		}
		r := v.Result
		return JSON(c, fiber.Map{
			"records": exportRecords(r.Records), "scanned": r.Scanned, "in_range": r.InRange,
			"stopped": r.Stopped, "more": r.More, "next_cursor": formatCursor(r.Next), "warnings": r.Warnings,
		})
	}
	return h.render(c, fiber.StatusOK, v)
}

// view builds the page: the topic's partitions and, when the query is
// valid, the records it reads. A bad query is shown on the page, not as an
// error page, so the form can be corrected.
func (h messagesBrowse) view(c *fiber.Ctx, name string) (templates.MessagesView, error) {
	ctx := requestCtx(c)
	tm, err := h.kc.TopicMetadata(ctx, name)
	if err != nil {
		if isUnknownTopic(err) {
			return templates.MessagesView{}, NotFound("topic "+name, "The Topics page lists the ones that exist.")
		}
		return templates.MessagesView{}, Unavailable(err)
	}
	v := templates.MessagesView{Topic: name, ProduceForm: templates.NewForm(), ShowProduce: c.Query("produce") == "1"}
	for _, p := range tm.Partitions {
		v.Partitions = append(v.Partitions, p.Partition)
	}
	mq, q, err := parseMessageQuery(c, name)
	v.Q = mq
	var e *Error
	if errors.As(err, &e) {
		v.Err = e.Text
		return v, nil
	} else if err != nil {
		return v, err
	}
	base := templates.MessagesURL(name)
	vals := queryValues(mq)
	v.TailURL = base + "/tail?" + vals.Encode()
	done, err := startScan(c)
	if err != nil {
		return v, err
	}
	res, err := h.kc.Read(ctx, q)
	done()
	if err == nil {
		AuditAccess(c, "messages.browse", name, describeRead(mq, "", len(res.Records)))
	}
	if err != nil {
		if errors.Is(err, kafkaview.ErrUnknownTopic) {
			return v, NotFound("topic "+name, "")
		}
		v.Err = "Could not read the topic: " + err.Error()
		return v, nil
	}
	v.Result = res
	v.TotalRecords = res.Available
	if q.Cursor != nil {
		vals.Set("cursor", formatCursor(q.Cursor))
	}
	v.ExportJSON = base + "/export?" + withFormat(vals, "json")
	v.ExportCSV = base + "/export?" + withFormat(vals, "csv")
	if res.More && !res.Newest {
		next := queryValues(mq)
		next.Set("cursor", formatCursor(res.Next))
		v.NextURL = base + "?" + next.Encode()
	}
	return v, nil
}

func withFormat(vals map[string][]string, f string) string {
	cp := make(map[string][]string, len(vals)+1)
	for k, v := range vals {
		cp[k] = v
	}
	cp["as"] = []string{f}
	return url.Values(cp).Encode()
}

func (h messagesBrowse) render(c *fiber.Ctx, status int, v templates.MessagesView) error {
	p := PageFor(c, "Messages of "+v.Topic, templates.Crumb{Label: "Topics", Href: "/topics"}, templates.Crumb{Label: v.Topic, Href: templates.TopicURL(v.Topic)})
	p.Wide = true
	return Render(c, status, templates.MessagesPage(p, v))
}

// partitionOK reports whether p is one of the topic's partitions.
func partitionOK(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func itoa32(p int32) string { return strconv.Itoa(int(p)) }
