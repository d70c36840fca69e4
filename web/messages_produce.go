package web

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/schemareg/serde"
	"github.com/sluice-io/sluice/templates"
)

// POST /topics/:name/messages: produce one record from the form (topic,
// partition, key, value, headers). The topic field names where it goes:
// this topic, or another one (a record copied from a dead-letter topic goes
// back to its original topic). With htmx the answer is the form again
// (#produce), with what was typed kept and a note linking to the new
// record, ready for the next one; without, the browser is sent to the
// record itself.

type recordProducer interface {
	Produce(ctx context.Context, r kafkaview.NewRecord) (kafkaview.Record, error)
	TopicMetadata(ctx context.Context, topic string) (kafkaview.TopicMeta, error)
}

type messagesProduce struct {
	kc     recordProducer
	browse messagesBrowse
}

// maxProduceValue bounds a value typed into the form.
const maxProduceValue = 1 << 20

func parseHeaders(s string) ([]kafkaview.Header, error) {
	var out []kafkaview.Header
	for i, line := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d: want name: value", i+1)
		}
		out = append(out, kafkaview.Header{Key: k, Value: []byte(strings.TrimPrefix(v, " "))})
	}
	return out, nil
}

func (h messagesProduce) post(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	f := templates.NewForm()
	for _, k := range []string{"topic", "partition", "key", "value", "headers", "schema", "schema_version", "schema_message"} {
		f.Set(k, strings.Clone(c.FormValue(k)))
	}
	f.Set("topic", strings.TrimSpace(f.Get("topic")))
	dest := f.Get("topic")
	if dest == "" {
		dest = name
		f.Set("topic", name)
	}
	fragment := Fragment(c, "produce")
	var v templates.MessagesView
	if fragment {
		v = templates.MessagesView{Topic: name, CanProduce: true, CanEncode: h.browse.dec != nil, TopicNames: h.browse.topicNames(requestCtx(c))}
	} else if v, err = h.browse.view(c, name); err != nil {
		return err
	}
	answer := func(status int) error {
		v.ProduceForm, v.ShowProduce = f, true
		if fragment {
			return Render(c, status, templates.ProduceForm(v))
		}
		return h.browse.render(c, status, v)
	}
	var partitions []int32
	if err := kafkaview.ValidateTopicName(dest); err != nil {
		f.Fail("topic", err.Error())
	} else if tm, err := h.kc.TopicMetadata(requestCtx(c), dest); err != nil {
		if isUnknownTopic(err) {
			f.Fail("topic", "There is no topic "+dest+".")
		} else {
			f.Err = "The cluster did not answer: " + err.Error()
		}
	} else {
		for _, p := range tm.Partitions {
			partitions = append(partitions, p.Partition)
		}
	}
	nr := kafkaview.NewRecord{Topic: dest, Partition: -1}
	if p := strings.TrimSpace(f.Get("partition")); p != "" && len(partitions) > 0 {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || !partitionOK(partitions, int32(n)) {
			f.Fail("partition", fmt.Sprintf("The topic %s has partitions 0 to %d; leave empty for automatic.", dest, len(partitions)-1))
		} else {
			nr.Partition = int32(n)
		}
	}
	if k := f.Get("key"); k == "" {
		nr.KeyNull = true
	} else {
		nr.Key = []byte(k)
	}
	if len(f.Get("value")) > maxProduceValue {
		f.Fail("value", "The form takes values up to 1 MiB; use a Kafka client for larger records.")
	}
	nr.Value = []byte(strings.ReplaceAll(f.Get("value"), "\r\n", "\n"))
	encodedWith := ""
	if subject := strings.TrimSpace(f.Get("schema")); subject != "" && f.OK() {
		encodedWith, nr.Value = h.encode(c, &f, subject, nr.Value)
	}
	hs, herr := parseHeaders(f.Get("headers"))
	if herr != nil {
		f.Fail("headers", herr.Error())
	}
	nr.Headers = hs
	if !f.OK() {
		if WantsJSON(c) {
			return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"error": "invalid record", "fields": f.Errors, "detail": f.Err})
		}
		return answer(fiber.StatusUnprocessableEntity)
	}
	rec, err := h.kc.Produce(requestCtx(c), nr)
	detail := fmt.Sprintf("key=%q bytes=%d headers=%d", truncate(f.Get("key"), 100), len(nr.Value), len(hs))
	if encodedWith != "" {
		detail += " schema=" + strconv.Quote(encodedWith)
	}
	if dest != name {
		detail += " from=" + name
	}
	if err == nil {
		detail += fmt.Sprintf(" partition=%d offset=%d", rec.Partition, rec.Offset)
	}
	Audit(c, "message.produce", dest, detail, err)
	if err != nil {
		f.Err = "Not written: " + err.Error()
		return answer(fiber.StatusUnprocessableEntity)
	}
	if WantsJSON(c) {
		return c.Status(fiber.StatusCreated).JSON(fiber.Map{"topic": dest, "partition": rec.Partition, "offset": rec.Offset, "timestamp": rec.Timestamp})
	}
	if fragment {
		v.Produced, v.ProducedTopic = &rec, dest
		return answer(fiber.StatusOK)
	}
	Flash(c, "ok", fmt.Sprintf("Written to %s partition %d at offset %d.", dest, rec.Partition, rec.Offset))
	return SeeOther(c, templates.RecordURL(dest, rec.Partition, rec.Offset, templates.FormatText))
}

// encode encodes the form's value (a JSON document) with the subject and
// version the form names, into the Confluent wire format. A mistake is
// reported on the form's field; the schema used is returned as
// "subject version N (id I)".
func (h messagesProduce) encode(c *fiber.Ctx, f *templates.Form, subject string, value []byte) (string, []byte) {
	if h.browse.dec == nil {
		f.Fail("schema", "This console has no schema registry to encode with.")
		return "", value
	}
	version := -1
	if s := strings.TrimSpace(f.Get("schema_version")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			f.Fail("schema_version", "A version is a number from 1; leave empty for the latest.")
			return "", value
		}
		version = n
	}
	b, reg, err := h.browse.dec.Encode(requestCtx(c), subject, version, value, strings.TrimSpace(f.Get("schema_message")))
	switch {
	case errors.Is(err, serde.ErrNotFound):
		if version < 0 {
			f.Fail("schema", "There is no subject "+subject+" in the schema registry.")
		} else {
			f.Fail("schema_version", fmt.Sprintf("The subject %s has no version %d.", subject, version))
		}
		return "", value
	case err != nil:
		f.Fail("value", "Not encoded: "+err.Error())
		return "", value
	}
	return fmt.Sprintf("%s version %d (id %d)", reg.Subject, reg.Version, reg.ID), b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
