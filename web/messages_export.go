package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/internal/safecsv"
	"github.com/sluice-io/sluice/kafkaview"
)

// GET /topics/:name/messages/export?as=json|csv&…: the records the same
// query shows on the page, as a download. Keys, values and header values
// are UTF-8 text when they are valid UTF-8, base64 otherwise (the
// *_encoding fields say which). CSV cells are written safe to open in a
// spreadsheet (package safecsv). Each export is an "access.messages.export" audit
// entry.

type recordExporter interface {
	Read(ctx context.Context, q kafkaview.Query) (*kafkaview.Result, error)
}

type messagesExport struct{ kc recordExporter }

type exportRecord struct {
	Topic         string         `json:"topic"`
	Partition     int32          `json:"partition"`
	Offset        int64          `json:"offset"`
	Timestamp     time.Time      `json:"timestamp"`
	Key           *string        `json:"key"`
	KeyEncoding   string         `json:"key_encoding,omitempty"`
	Value         *string        `json:"value"`
	ValueEncoding string         `json:"value_encoding,omitempty"`
	Headers       []exportHeader `json:"headers"`
}

type exportHeader struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Encoding string `json:"encoding,omitempty"`
}

func encodeBytes(b []byte, null bool) (*string, string) {
	if null {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, "base64"
}

func (h messagesExport) get(c *fiber.Ctx) error {
	name, err := param(c, "name")
	if err != nil {
		return err
	}
	mq, q, err := parseMessageQuery(c, name)
	if err != nil {
		return err
	}
	as := c.Query("as", "json")
	if as != "json" && as != "csv" {
		return BadRequest("as must be json or csv")
	}
	done, err := startScan(c)
	if err != nil {
		return err
	}
	res, err := h.kc.Read(requestCtx(c), q)
	done()
	if err != nil {
		if errors.Is(err, kafkaview.ErrUnknownTopic) {
			return NotFound("topic "+name, "")
		}
		return Unavailable(err)
	}
	AuditAccess(c, "messages.export", name, describeRead(mq, "as="+as, len(res.Records)))
	recs := exportRecords(res.Records)
	stamp := time.Now().UTC().Format("20060102-150405")
	c.Set(fiber.HeaderCacheControl, "no-store")
	switch as {
	case "csv":
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+name+"-"+stamp+`.csv"`)
		w := safecsv.NewWriter(c.Response().BodyWriter())
		w.Write([]string{"topic", "partition", "offset", "timestamp", "key", "key_encoding", "value", "value_encoding", "headers"})
		for _, e := range recs {
			hj, _ := json.Marshal(e.Headers)
			w.Write([]string{e.Topic, strconv.Itoa(int(e.Partition)), strconv.FormatInt(e.Offset, 10), e.Timestamp.Format(time.RFC3339Nano),
				deref(e.Key), e.KeyEncoding, deref(e.Value), e.ValueEncoding, string(hj)})
		}
		return w.Flush()
	case "json":
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+name+"-"+stamp+`.json"`)
		enc := json.NewEncoder(c.Response().BodyWriter())
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	}
	return BadRequest("as must be json or csv")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// exportRecords converts records for JSON and CSV: text when UTF-8, base64
// otherwise.
func exportRecords(in []kafkaview.Record) []exportRecord {
	recs := make([]exportRecord, len(in))
	for i, r := range in {
		e := exportRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(), Headers: []exportHeader{}}
		e.Key, e.KeyEncoding = encodeBytes(r.Key, r.KeyNull)
		e.Value, e.ValueEncoding = encodeBytes(r.Value, r.ValueNull)
		for _, hd := range r.Headers {
			v, enc := encodeBytes(hd.Value, false)
			e.Headers = append(e.Headers, exportHeader{Key: hd.Key, Value: *v, Encoding: enc})
		}
		recs[i] = e
	}
	return recs
}
