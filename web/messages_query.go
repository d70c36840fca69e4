package web

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// The messages page, its export and its live tail read the same query
// parameters, so each view has a URL, "Export" exports exactly what is
// shown, and the tail applies the same search:
//
//	partition  partition number, empty for all
//	from       earliest | latest | offset | timestamp (default latest; earliest with a search)
//	offset     start offset for from=offset
//	ts         start time for from=timestamp: datetime-local in the viewer's zone, RFC 3339, or Unix ms
//	limit      records to show (default 50, at most 1000)
//	format     text | json | hex
//	field      key | value | header: search on the server; empty: no search
//	q          the text to find; header: the header name
//	exact      1: the whole key/value/header value must equal q
//	scan       records a search examines at most (default 1,000,000)
//	timeout    seconds a search runs at most (default 10; fractions allowed, at least 0.1)
//	cursor     p:offset,p:offset — where the next page or the continued search starts
//	before     p:offset,p:offset — the older page of a newest-first read: the newest records below these offsets
//	isolation  read_committed (default) | read_uncommitted: also the records of aborted and open transactions and the markers, each marked

const datetimeLocal = "2006-01-02T15:04:05"

func parseMessageQuery(c *fiber.Ctx, topic string) (templates.MessageQuery, kafkaview.Query, error) {
	mq := templates.MessageQuery{
		Partition: c.Query("partition"),
		From:      c.Query("from"),
		Offset:    c.Query("offset"),
		Timestamp: c.Query("ts"),
		Limit:     c.Query("limit", "50"),
		Format:    templates.ParseFormat(c.Query("format")),
		Field:     c.Query("field"),
		Text:      c.Query("q"),
		Header:    c.Query("header"),
		Exact:     c.Query("exact") == "1" || c.Query("exact") == "on",
		MaxScan:   c.Query("scan", "1000000"),
		Timeout:   c.Query("timeout", "10"),
		Isolation: c.Query("isolation", "read_committed"),
	}
	mq = cloneQuery(mq)
	q := kafkaview.Query{Topic: topic, Partition: -1}
	switch mq.Isolation {
	case "read_committed":
	case "read_uncommitted":
		q.Uncommitted = true
	default:
		return mq, q, BadRequest("isolation must be read_committed or read_uncommitted")
	}
	if mq.Partition != "" {
		p, err := strconv.ParseInt(mq.Partition, 10, 32)
		if err != nil || p < 0 {
			return mq, q, BadRequest("partition must be a partition number")
		}
		q.Partition = int32(p)
	}
	switch mq.Field {
	case "":
	case "key":
		q.Filter = kafkaview.Filter{Field: kafkaview.FieldKey, Text: mq.Text, Exact: mq.Exact}
	case "value":
		q.Filter = kafkaview.Filter{Field: kafkaview.FieldValue, Text: mq.Text, Exact: mq.Exact}
	case "header":
		if mq.Header == "" {
			return mq, q, BadRequest("a header search needs the header name")
		}
		q.Filter = kafkaview.Filter{Field: kafkaview.FieldHeader, Header: mq.Header, Text: mq.Text, Exact: mq.Exact}
	default:
		return mq, q, BadRequest("field must be key, value or header")
	}
	if mq.From == "" {
		mq.From = "latest"
		if q.Filter.Active() {
			mq.From = "earliest"
		}
	}
	switch mq.From {
	case "earliest":
		q.From = kafkaview.FromEarliest
	case "latest":
		q.From = kafkaview.FromLatest
	case "offset":
		q.From = kafkaview.FromOffset
		o, err := strconv.ParseInt(mq.Offset, 10, 64)
		if err != nil || o < 0 {
			return mq, q, BadRequest("offset must be a number of 0 or more")
		}
		q.Offset = o
	case "timestamp":
		q.From = kafkaview.FromTimestamp
		t, err := parseWhen(mq.Timestamp, Location(c))
		if err != nil {
			return mq, q, BadRequest(err.Error())
		}
		q.Time = t
	default:
		return mq, q, BadRequest("from must be earliest, latest, offset or timestamp")
	}
	limit, err := strconv.Atoi(mq.Limit)
	if err != nil || limit < 1 || limit > kafkaview.MaxLimit {
		return mq, q, BadRequest("limit must be from 1 to 1000")
	}
	q.Limit = limit
	scan, err := strconv.ParseInt(mq.MaxScan, 10, 64)
	if err != nil || scan < 1 || scan > 100_000_000 {
		return mq, q, BadRequest("scan must be from 1 to 100000000 records")
	}
	q.MaxScan = scan
	secs, err := strconv.ParseFloat(mq.Timeout, 64)
	if err != nil || secs < 0.1 || secs > 120 {
		return mq, q, BadRequest("timeout must be from 0.1 to 120 seconds")
	}
	q.Timeout = time.Duration(secs * float64(time.Second))
	if cur := c.Query("cursor"); cur != "" {
		m, err := parseCursor(cur)
		if err != nil {
			return mq, q, BadRequest(err.Error())
		}
		q.Cursor = m
	}
	if b := c.Query("before"); b != "" && !q.Filter.Active() {
		m, err := parseCursor(b)
		if err != nil {
			return mq, q, BadRequest(strings.Replace(err.Error(), "cursor", "before", 1))
		}
		q.Before = m
	}
	return mq, q, nil
}

func cloneQuery(mq templates.MessageQuery) templates.MessageQuery {
	mq.Partition, mq.From, mq.Offset = strings.Clone(mq.Partition), strings.Clone(mq.From), strings.Clone(mq.Offset)
	mq.Timestamp, mq.Limit, mq.Field = strings.Clone(mq.Timestamp), strings.Clone(mq.Limit), strings.Clone(mq.Field)
	mq.Text, mq.Header, mq.MaxScan, mq.Timeout = strings.Clone(mq.Text), strings.Clone(mq.Header), strings.Clone(mq.MaxScan), strings.Clone(mq.Timeout)
	mq.Isolation = strings.Clone(mq.Isolation)
	return mq
}

// parseWhen reads a time: datetime-local (in loc), RFC 3339, or Unix ms.
func parseWhen(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errNoTime
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	for _, layout := range []string{datetimeLocal, "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, errBadTime
}

var (
	errNoTime  = &Error{Status: fiber.StatusBadRequest, Title: "Bad request", Text: "Enter a time to start from."}
	errBadTime = &Error{Status: fiber.StatusBadRequest, Title: "Bad request", Text: "The time is not understood: use the date picker, RFC 3339 (2025-01-31T12:00:00Z) or Unix milliseconds."}
)

func parseCursor(s string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, part := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(part, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, BadRequest("cursor must look like 0:123,1:456")
		}
		out[int32(p)] = o
	}
	return out, nil
}

func formatCursor(m map[int32]int64) string {
	ps := make([]int32, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(int(p)) + ":" + strconv.FormatInt(m[p], 10)
	}
	return strings.Join(parts, ",")
}

// queryValues is the messages query as URL parameters (for next-page,
// export and tail links).
func queryValues(mq templates.MessageQuery) url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("partition", mq.Partition)
	set("from", mq.From)
	if mq.From == "offset" {
		set("offset", mq.Offset)
	}
	if mq.From == "timestamp" {
		set("ts", mq.Timestamp)
	}
	set("limit", mq.Limit)
	if mq.Isolation == "read_uncommitted" {
		v.Set("isolation", mq.Isolation)
	}
	if mq.Format != templates.FormatText {
		set("format", string(mq.Format))
	}
	if mq.Field != "" {
		set("field", mq.Field)
		set("q", mq.Text)
		set("header", mq.Header)
		if mq.Exact {
			v.Set("exact", "1")
		}
		set("scan", mq.MaxScan)
		set("timeout", mq.Timeout)
	}
	return v
}

// describeRead is the detail of an access audit entry: the query that read
// the records (partition, start, search) and how many it returned (n < 0:
// a live tail).
func describeRead(mq templates.MessageQuery, extra string, n int) string {
	vals := queryValues(mq)
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys)+2)
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.Quote(vals.Get(k)))
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	if n >= 0 {
		parts = append(parts, "records="+strconv.Itoa(n))
	}
	return strings.Join(parts, " ")
}
