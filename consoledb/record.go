package consoledb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// A record of the console topic is one row of one replicated table:
//
//	key:     ["<table>", pk1, pk2, ...]       the primary key values in key order
//	value:   {"col": value, ...}              the whole row; absent (a tombstone) when deleted
//	headers: sluice.v=1, sluice.by=<who>, sluice.host=<broker id>
//
// INTEGER and REAL columns are JSON numbers, TEXT strings, BLOB
// {"b64": "..."} and NULL null. Keys are encoded by encodeKey only, so one
// row always has the same key bytes and compaction keeps its latest image.

// Record is a record of a console topic as a Log carries it.
type Record struct {
	Offset  int64 // set by the log
	Key     []byte
	Value   []byte // nil: a tombstone
	Headers map[string]string
	Time    time.Time // set by the log (the record's timestamp)
}

// Record headers.
const (
	HeaderVersion = "sluice.v"
	HeaderBy      = "sluice.by"
	HeaderHost    = "sluice.host"

	recordFormat = "1"
	metaTable    = "_meta"
)

// ErrMalformedRecord marks a record of the console topic that cannot be
// decoded; the replica skips it and logs it.
var ErrMalformedRecord = errors.New("malformed console record")

func encodeKey(table string, pk []any) []byte {
	b, err := json.Marshal(append([]any{table}, pk...))
	if err != nil { // pk values are int64, float64 or string
		panic("consoledb: encode key: " + err.Error())
	}
	return b
}

// decodeKey returns the table and the primary key values (json.Number for
// numbers) of a record key.
func decodeKey(b []byte) (string, []any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var parts []any
	if err := d.Decode(&parts); err != nil || len(parts) < 2 {
		return "", nil, fmt.Errorf("%w: key %.80q", ErrMalformedRecord, b)
	}
	t, ok := parts[0].(string)
	if !ok {
		return "", nil, fmt.Errorf("%w: key %.80q", ErrMalformedRecord, b)
	}
	return t, parts[1:], nil
}

// keyValues converts decoded key values to the types of the key columns.
func (ti *tableInfo) keyValues(raw []any) ([]any, error) {
	if len(raw) != len(ti.pk) {
		return nil, fmt.Errorf("%w: %s key has %d values, the table's primary key %d", ErrMalformedRecord, ti.Name, len(raw), len(ti.pk))
	}
	out := make([]any, len(raw))
	for i, v := range raw {
		c, err := columnValue(ti.aff[ti.pk[i]], v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s key: %v", ErrMalformedRecord, ti.Name, err)
		}
		out[i] = c
	}
	return out, nil
}

// pkJSON is the key's text in replica_keys.
func pkJSON(pk []any) string {
	b, _ := json.Marshal(pk)
	return string(b)
}

// encodeImage encodes a row read from SQLite.
func encodeImage(row map[string]any) ([]byte, error) {
	out := make(map[string]any, len(row))
	for k, v := range row {
		switch x := v.(type) {
		case []byte:
			out[k] = map[string]string{"b64": base64.StdEncoding.EncodeToString(x)}
		case time.Time:
			out[k] = x.UTC().Format(time.RFC3339Nano)
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("column %s holds %v, which JSON cannot carry", k, x)
			}
			out[k] = x
		default:
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// decodeImage decodes a row image into column values typed for ti; columns
// the table does not have are dropped (a newer Sluice's).
func (ti *tableInfo) decodeImage(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%w: %s row is not a JSON object", ErrMalformedRecord, ti.Name)
	}
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		aff, ok := ti.aff[k]
		if !ok {
			continue
		}
		c, err := columnValue(aff, v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.%s: %v", ErrMalformedRecord, ti.Name, k, err)
		}
		out[k] = c
	}
	for _, k := range ti.pk {
		if out[k] == nil {
			return nil, fmt.Errorf("%w: %s row without its key column %s", ErrMalformedRecord, ti.Name, k)
		}
	}
	return out, nil
}

// columnValue converts one decoded JSON value for a column of affinity aff.
func columnValue(aff int, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return x, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case json.Number:
		if aff == affReal {
			return x.Float64()
		}
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return x.Float64()
	case map[string]any:
		s, ok := x["b64"].(string)
		if !ok || len(x) != 1 {
			return nil, errors.New("an object that is not a blob")
		}
		return base64.StdEncoding.DecodeString(s)
	}
	return nil, fmt.Errorf("unexpected %T", v)
}

// readImage reads the row of ti with primary key pk, or nil when there is
// none.
func (ti *tableInfo) readImage(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, pk []any) (map[string]any, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+ti.colList()+` FROM `+quoteIdent(ti.Name)+` WHERE `+ti.where, pk...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]any, len(ti.cols))
	ptrs := make([]any, len(ti.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	img := make(map[string]any, len(ti.cols))
	for i, c := range ti.cols {
		img[c] = vals[i]
	}
	return img, rows.Err()
}

// keyOf returns the primary key values of a row image.
func (ti *tableInfo) keyOf(img map[string]any) []any {
	pk := make([]any, len(ti.pk))
	for i, c := range ti.pk {
		pk[i] = img[c]
	}
	return pk
}

// hostHeader formats a broker id for HeaderHost.
func hostHeader(id int32) string { return strconv.Itoa(int(id)) }
