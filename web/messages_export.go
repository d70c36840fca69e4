package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

type messagesExport struct {
	kc  recordExporter
	dec RecordDecoder // nil: no schema registry
}

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
	// KeySchema and ValueSchema name the schema a key or value in the
	// Confluent wire format was decoded with (Key and Value are then the
	// decoded JSON); the *_decode_error fields say why one did not decode
	// (it is then as it is, base64).
	KeySchema        *exportSchema `json:"key_schema,omitempty"`
	KeyDecodeError   string        `json:"key_decode_error,omitempty"`
	ValueSchema      *exportSchema `json:"value_schema,omitempty"`
	ValueDecodeError string        `json:"value_decode_error,omitempty"`
	// Control and Transaction, read_uncommitted only: the marker a control
	// record is (COMMIT or ABORT; key and value null), and what became of
	// a transactional record (aborted, not yet committed, unresolved).
	Control     string `json:"control,omitempty"`
	Transaction string `json:"transaction,omitempty"`
}

// exportSchema names a writer schema, as `sluice consume --decode` does.
type exportSchema struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Type    string `json:"type"`
}

// String is the schema for a CSV cell: "orders-value version 2 (id 7, AVRO)".
func (s *exportSchema) String() string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%s version %d (id %d, %s)", s.Subject, s.Version, s.ID, s.Type)
}

// decodeExport sets the text and schema of a key or value that decodes.
func decodeExport(pd *pageDecoder, b []byte, null bool, text **string, enc *string, sch **exportSchema, errText *string) {
	if pd == nil || null {
		return
	}
	d := pd.DecodeValue(b)
	if d == nil {
		return
	}
	if d.Err != "" {
		*errText = d.Err
		return
	}
	s := string(d.JSON)
	*text, *enc = &s, ""
	*sch = &exportSchema{Subject: d.Subject, Version: d.Version, ID: d.ID, Type: d.Type}
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
	name, err := PathParam(c, "name")
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
	pd := newPageDecoder(requestCtx(c), h.dec)
	q.Filter.Decode = pd.searchDecode()
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
	recs := exportRecords(res.Records, pd)
	stamp := time.Now().UTC().Format("20060102-150405")
	c.Set(fiber.HeaderCacheControl, "no-store")
	switch as {
	case "csv":
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+name+"-"+stamp+`.csv"`)
		w := safecsv.NewWriter(c.Response().BodyWriter())
		w.Write([]string{"topic", "partition", "offset", "timestamp", "key", "key_encoding", "value", "value_encoding", "headers", "key_schema", "value_schema"})
		for _, e := range recs {
			hj, _ := json.Marshal(e.Headers)
			w.Write([]string{e.Topic, strconv.Itoa(int(e.Partition)), strconv.FormatInt(e.Offset, 10), e.Timestamp.Format(time.RFC3339Nano),
				deref(e.Key), e.KeyEncoding, deref(e.Value), e.ValueEncoding, string(hj), e.KeySchema.String(), e.ValueSchema.String()})
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

// exportRecords converts records for JSON and CSV: decoded JSON when in
// the Confluent wire format and pd decodes them, else text when UTF-8,
// base64 otherwise.
func exportRecords(in []kafkaview.Record, pd *pageDecoder) []exportRecord {
	recs := make([]exportRecord, len(in))
	for i, r := range in {
		e := exportRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(), Headers: []exportHeader{},
			Control: r.Control, Transaction: r.Txn}
		e.Key, e.KeyEncoding = encodeBytes(r.Key, r.KeyNull)
		e.Value, e.ValueEncoding = encodeBytes(r.Value, r.ValueNull)
		decodeExport(pd, r.Key, r.KeyNull, &e.Key, &e.KeyEncoding, &e.KeySchema, &e.KeyDecodeError)
		decodeExport(pd, r.Value, r.ValueNull, &e.Value, &e.ValueEncoding, &e.ValueSchema, &e.ValueDecodeError)
		for _, hd := range r.Headers {
			v, enc := encodeBytes(hd.Value, false)
			e.Headers = append(e.Headers, exportHeader{Key: hd.Key, Value: *v, Encoding: enc})
		}
		recs[i] = e
	}
	return recs
}
