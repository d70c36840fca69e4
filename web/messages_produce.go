package web

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// POST /topics/:name/messages: produce one record from the form (key,
// value, headers, partition). On success the browser is sent to the record
// itself: the messages page opened at its partition and offset.

type recordProducer interface {
	Produce(ctx context.Context, r kafkaview.NewRecord) (kafkaview.Record, error)
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
	name, err := param(c, "name")
	if err != nil {
		return err
	}
	f := templates.NewForm()
	for _, k := range []string{"partition", "key", "value", "headers"} {
		f.Set(k, c.FormValue(k))
	}
	v, err := h.browse.view(c, name)
	if err != nil {
		return err
	}
	nr := kafkaview.NewRecord{Topic: name, Partition: -1}
	if p := strings.TrimSpace(f.Get("partition")); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || !partitionOK(v.Partitions, int32(n)) {
			f.Fail("partition", fmt.Sprintf("The topic has partitions 0 to %d.", len(v.Partitions)-1))
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
	hs, herr := parseHeaders(f.Get("headers"))
	if herr != nil {
		f.Fail("headers", herr.Error())
	}
	nr.Headers = hs
	if !f.OK() {
		v.ProduceForm, v.ShowProduce = f, true
		return h.browse.render(c, fiber.StatusUnprocessableEntity, v)
	}
	rec, err := h.kc.Produce(requestCtx(c), nr)
	detail := fmt.Sprintf("key=%q bytes=%d headers=%d", truncate(f.Get("key"), 100), len(nr.Value), len(hs))
	if err == nil {
		detail += fmt.Sprintf(" partition=%d offset=%d", rec.Partition, rec.Offset)
	}
	Audit(c, "message.produce", name, detail, err)
	if err != nil {
		f.Err = "Not written: " + err.Error()
		v.ProduceForm, v.ShowProduce = f, true
		return h.browse.render(c, fiber.StatusUnprocessableEntity, v)
	}
	if WantsJSON(c) {
		return c.Status(fiber.StatusCreated).JSON(fiber.Map{"partition": rec.Partition, "offset": rec.Offset, "timestamp": rec.Timestamp})
	}
	Flash(c, "ok", fmt.Sprintf("Written to partition %d at offset %d.", rec.Partition, rec.Offset))
	q := url.Values{}
	q.Set("partition", itoa32(rec.Partition))
	q.Set("from", "offset")
	q.Set("offset", strconv.FormatInt(rec.Offset, 10))
	q.Set("produce", "1")
	return SeeOther(c, templates.MessagesURL(name)+"?"+q.Encode()+"#produce")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
