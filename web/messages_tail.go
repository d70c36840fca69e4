package web

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /topics/:name/messages/tail: a server-sent-events stream of the
// topic's new records, rendered as table rows (event "records"), with the
// messages page's search applied. At most 50 records a second are sent; the
// others are counted (event "dropped"). The stream ends when the browser
// goes away, or the console closes (event "end"). A user has at most
// MaxTailsPerUser tails open; each is an "access.messages.tail" audit entry.

type recordTailer interface {
	Tail(ctx context.Context, topic string, partition int32, filter kafkaview.Filter, maxPerSecond int, fn func([]kafkaview.Record, int64) error) error
}

type messagesTail struct {
	kc   recordTailer
	base context.Context // the server's lifetime
	dec  RecordDecoder   // nil: no schema registry
}

const tailRate = 50

func (h messagesTail) get(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	mq, q, err := parseMessageQuery(c, name)
	if err != nil {
		return err
	}
	done, err := startTail(c)
	if err != nil {
		return err
	}
	AuditAccess(c, "messages.tail", name, describeRead(mq, "", -1))
	info := requestInfo(c) // the handler's locals are gone once streaming starts
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	base := h.base
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer done()
		ctx, cancel := context.WithCancel(base)
		defer cancel()
		rctx := templates.WithRequest(context.Background(), info)
		opts := templates.RowOptions{Topic: name, Format: mq.Format, Fresh: true, Field: mq.Field, Header: mq.Header, Needle: mq.Text,
			CanProduce: templates.RequestOf(rctx).Can("operator")}
		lastWrite := time.Now()
		send := func(event, data string) error {
			writeEvent(w, event, data)
			lastWrite = time.Now()
			return w.Flush()
		}
		if err := send("note", "Live · waiting for new records of "+name); err != nil {
			return
		}
		var buf bytes.Buffer
		filter := q.Filter
		filter.Decode = newPageDecoder(ctx, h.dec).searchDecode()
		err := h.kc.Tail(ctx, name, q.Partition, filter, tailRate, func(recs []kafkaview.Record, dropped int64) error {
			if len(recs) > 0 {
				opts.Decode = newPageDecoder(ctx, h.dec).rowDecoder() // each batch has its own budget
				// Newest first, as the page prepends.
				for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
					recs[i], recs[j] = recs[j], recs[i]
				}
				buf.Reset()
				if err := templates.MessageRows(opts, recs).Render(rctx, &buf); err != nil {
					return err
				}
				if err := send("records", htmlLineBreaks.Replace(buf.String())); err != nil {
					return err
				}
			}
			if dropped > 0 {
				if err := send("dropped", fmt.Sprint(dropped)); err != nil {
					return err
				}
			}
			if time.Since(lastWrite) > 15*time.Second {
				// A comment keeps proxies from closing an idle stream and
				// tells us when the browser has gone.
				w.WriteString(": keep-alive\n\n")
				lastWrite = time.Now()
				return w.Flush()
			}
			return nil
		})
		switch {
		case errors.Is(err, kafkaview.ErrTooManyTails):
			send("end", err.Error())
		case err != nil && ctx.Err() == nil:
			send("end", "The tail stopped: "+err.Error())
		case base.Err() != nil:
			send("end", "The console is shutting down.")
		}
	})
	return nil
}

// htmlLineBreaks writes the line breaks of rendered rows as character
// references, which mean the same in HTML text and attribute values (the
// only places a record's bytes appear; templ writes no line break inside a
// tag), so the rows travel as one "data:" line and keep a record's line
// breaks exactly.
var htmlLineBreaks = strings.NewReplacer("\r", "&#13;", "\n", "&#10;")

// sseLines splits event data where the event-stream format ends a line:
// at CR LF, at LF and at a lone CR.
var sseLines = strings.NewReplacer("\r\n", "\n", "\r", "\n")

// writeEvent writes one server-sent event. Every line of data, however it
// ends, gets its own "data:" field, so a record holding a carriage return
// or a newline cannot end the field early and inject an event or a field
// of its own into the viewers' streams; the browser joins the lines back
// with "\n". The event name is the handler's own.
func writeEvent(w *bufio.Writer, event, data string) {
	w.WriteString("event: ")
	w.WriteString(event)
	w.WriteByte('\n')
	for _, line := range strings.Split(sseLines.Replace(data), "\n") {
		w.WriteString("data: ")
		w.WriteString(line)
		w.WriteByte('\n')
	}
	w.WriteByte('\n')
}
