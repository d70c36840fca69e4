package web

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
}

type messagesBrowse struct {
	kc  recordReader
	dec RecordDecoder // nil: no schema registry
}

func (h messagesBrowse) get(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	v, err := h.view(c, name)
	if err != nil {
		return err
	}
	if WantsJSON(c) {
		pd, _ := v.Decode.(*pageDecoder)
		if v.Err != "" {
			return &Error{Status: fiber.StatusBadRequest, Title: "Bad request", Text: v.Err}
		}
		r := v.Result
		m := fiber.Map{
			"records": exportRecords(r.Records, pd), "scanned": r.Scanned, "in_range": r.InRange,
			"stopped": r.Stopped, "more": r.More, "next_cursor": formatCursor(r.Next), "warnings": orEmpty(r.Warnings),
		}
		if r.Newest {
			m["older_cursor"], m["has_older"] = formatCursor(r.Older), r.HasOlder
		}
		return JSON(c, m)
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
	v := templates.MessagesView{Topic: name, ProduceForm: templates.NewForm("topic", name), ShowProduce: c.Query("produce") == "1",
		CanProduce: HasRole(c, RoleOperator), CanEncode: h.dec != nil}
	if v.CanProduce {
		v.TopicNames = h.topicNames(ctx)
	}
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
	pd := newPageDecoder(ctx, h.dec)
	q.Filter.Decode = pd.searchDecode()
	v.Decode = pd.rowDecoder()
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
	if res.Newest && res.HasOlder && len(res.Records) > 0 {
		older := queryValues(mq)
		older.Set("before", formatCursor(res.Older))
		v.OlderURL = base + "?" + older.Encode()
	}
	if q.Before != nil {
		v.LatestURL = base + "?" + queryValues(mq).Encode()
	}
	if cp := c.Query("copy"); cp != "" && v.CanProduce {
		h.copyRecord(c, &v, cp)
	}
	return v, nil
}

// copyRecord fills the produce form with the record at "p:offset" of the
// topic (the "Copy to produce" link), so it can be sent again, here or to
// another topic.
func (h messagesBrowse) copyRecord(c *fiber.Ctx, v *templates.MessagesView, at string) {
	m, err := parseCursor(at)
	if err != nil || len(m) != 1 {
		v.ProduceForm.Err = "copy must name one record as partition:offset"
		return
	}
	var q kafkaview.Query
	for p, o := range m {
		q = kafkaview.Query{Topic: v.Topic, Partition: p, From: kafkaview.FromOffset, Offset: o, Limit: 1}
	}
	res, err := h.kc.Read(requestCtx(c), q)
	if err != nil || len(res.Records) == 0 || res.Records[0].Offset != q.Offset {
		v.ProduceForm.Err = fmt.Sprintf("There is no record at partition %d offset %d to copy (it may have been deleted).", q.Partition, q.Offset)
		return
	}
	rec := res.Records[0]
	// A value in the wire format is copied decoded, with its schema, so
	// the form encodes it again.
	var dv *templates.Decoded
	if pd := newPageDecoder(requestCtx(c), h.dec); pd != nil {
		if dv = pd.DecodeValue(rec.Value); dv != nil && dv.Err == "" {
			rec.Value = dv.JSON
		}
	}
	if !utf8.Valid(rec.Key) || !utf8.Valid(rec.Value) {
		v.ProduceForm.Err = "This record's key or value is not text; the form sends text only. Replay it with a Kafka client."
		return
	}
	f := templates.NewForm("topic", v.Topic, "key", string(rec.Key), "value", string(rec.Value))
	if dv != nil && dv.Err == "" {
		f.Set("schema", dv.Subject)
		f.Set("schema_version", strconv.Itoa(dv.Version))
		f.Set("schema_message", dv.Message)
	}
	var hs []string
	for _, hd := range rec.Headers {
		if utf8.Valid(hd.Value) && !strings.ContainsAny(string(hd.Value), "\r\n") {
			hs = append(hs, hd.Key+": "+string(hd.Value))
		}
	}
	f.Set("headers", strings.Join(hs, "\n"))
	AuditAccess(c, "messages.copy", v.Topic, fmt.Sprintf("partition=%d offset=%d", rec.Partition, rec.Offset))
	v.ProduceForm, v.ShowProduce = f, true
	v.CopiedFrom = fmt.Sprintf("%s partition %d offset %d", v.Topic, rec.Partition, rec.Offset)
}

// topicNames lists the cluster's topics (internal ones left out), for the
// produce form's topic field.
func (h messagesBrowse) topicNames(ctx context.Context) []string {
	snap, err := h.kc.Metadata(ctx, 10*time.Second)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range snap.Topics {
		if !t.Internal {
			out = append(out, t.Name)
		}
	}
	return out
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
