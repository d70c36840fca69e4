// Package serde reads and writes records in the Confluent wire format
// (magic byte 0, the schema id as 4 big-endian bytes, for Protobuf the
// message-index array, then the Avro binary, Protobuf binary or JSON
// encoding) and turns them into JSON and back.
//
// The API, for the console's message browser, search, export and produce
// form, the comparisons (package migration) and the CLI:
//
//	src := registry                          // *schemareg.Registry in process, or
//	src := serde.NewHTTPSource(url, nil)     // any Confluent-compatible registry
//	dec := serde.NewDecoder(src)             // safe for concurrent use; caches schemas by id
//	if serde.IsWireFormat(value) {
//		d, err := dec.Decode(ctx, value)     // d.JSON, d.Subject, d.Version, d.ID, d.Type
//	}
//	b, reg, err := dec.Encode(ctx, "orders-value", -1, []byte(`{"id":1}`), "")
//
// Decoded JSON keeps the record's field order (the writer schema's order
// for Avro, declaration order for Protobuf, the document's for JSON).
// Avro values are written as plain JSON: a union's value without its
// branch name, bytes and fixed as strings of code points U+0000..U+00FF
// (Avro's JSON encoding), decimals as exact JSON numbers, other logical
// types as their underlying value. Protobuf uses protojson with the .proto
// field names.
//
// Decoding is bounded: a record whose bytes claim more than they hold, a
// schema that nests too deep, or output beyond Decoder.MaxOutput is an
// error, never a crash or an unbounded allocation (FuzzDecode).
package serde

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-io/sluice/schemareg/schema"
)

// Registered is a registered schema as a decoder needs it: its id, one
// subject and version it is registered under, and the parsed schema.
type Registered struct {
	ID      int
	Subject string
	Version int
	Schema  *schema.Schema
}

// Source finds registered schemas: the in-process registry or a registry
// over HTTP (HTTPSource).
type Source interface {
	// SchemaByID returns the schema registered under id (ErrNotFound
	// when there is none).
	SchemaByID(ctx context.Context, id int) (*Registered, error)
	// SchemaBySubject returns version v of subject (-1 = the latest).
	SchemaBySubject(ctx context.Context, subject string, version int) (*Registered, error)
}

// ErrNotFound is returned by a Source for an unknown id or subject version.
var ErrNotFound = errors.New("schema not found")

// ErrNotWireFormat: the bytes do not start with magic byte 0 and an id.
var ErrNotWireFormat = errors.New("not in the Confluent wire format")

// IsWireFormat reports whether b starts like a Confluent wire-format record
// (magic byte 0 and a 4-byte schema id). JSON text, Avro without a header
// and most strings never start with byte 0.
func IsWireFormat(b []byte) bool { return len(b) >= 5 && b[0] == 0 }

// Decoded is a decoded record.
type Decoded struct {
	ID      int
	Subject string
	Version int
	Type    schema.Type
	Message string // Protobuf: the full name of the message decoded
	JSON    []byte
}

// DefaultMaxOutput bounds the JSON a decoded record may produce.
const DefaultMaxOutput = 32 << 20

// Decoder decodes and encodes records with schemas from a Source, caching
// them by id (up to 1024 schemas; the cache is emptied when full).
type Decoder struct {
	src Source
	// MaxOutput bounds a decoded record's JSON; default DefaultMaxOutput.
	MaxOutput int

	mu    sync.Mutex
	cache map[int]*Registered // Lock mu.
}

// NewDecoder returns a decoder over src.
func NewDecoder(src Source) *Decoder {
	return &Decoder{src: src, MaxOutput: DefaultMaxOutput, cache: map[int]*Registered{}}
}

// Lookup returns the schema for id, from the cache or the source.
func (d *Decoder) Lookup(ctx context.Context, id int) (*Registered, error) {
	d.mu.Lock()
	r, ok := d.cache[id]
	d.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := d.src.SchemaByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w", id, err)
	}
	d.mu.Lock()
	if len(d.cache) >= 1024 {
		clear(d.cache)
	}
	d.cache[id] = r
	d.mu.Unlock()
	return r, nil
}

// Header splits a wire-format record into its schema id and payload.
func Header(b []byte) (id int, payload []byte, err error) {
	if !IsWireFormat(b) {
		return 0, nil, ErrNotWireFormat
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:], nil
}

// Decode decodes a wire-format record to JSON.
func (d *Decoder) Decode(ctx context.Context, b []byte) (*Decoded, error) {
	id, payload, err := Header(b)
	if err != nil {
		return nil, err
	}
	reg, err := d.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	return d.DecodeWith(reg, payload)
}

// DecodeWith decodes a payload (the bytes after the 5-byte header) with a
// known schema.
func (d *Decoder) DecodeWith(reg *Registered, payload []byte) (*Decoded, error) {
	out := &Decoded{ID: reg.ID, Subject: reg.Subject, Version: reg.Version, Type: reg.Schema.Type}
	limit := d.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	var err error
	switch reg.Schema.Type {
	case schema.Avro:
		out.JSON, err = avroToJSON(reg.Schema.Avro(), payload, limit)
	case schema.Protobuf:
		out.JSON, out.Message, err = protoToJSON(reg.Schema, payload, limit)
	case schema.JSON:
		out.JSON, err = jsonPayload(payload, limit)
	default:
		err = fmt.Errorf("unknown schema type %q", reg.Schema.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("decode with schema id %d (%s version %d): %w", reg.ID, reg.Subject, reg.Version, err)
	}
	return out, nil
}

// Encode encodes a JSON document with version v (-1 = latest) of subject
// and returns the wire-format record. message picks the Protobuf message
// (full or short name; "" = the schema's first message).
func (d *Decoder) Encode(ctx context.Context, subject string, v int, doc []byte, message string) ([]byte, *Registered, error) {
	reg, err := d.src.SchemaBySubject(ctx, subject, v)
	if err != nil {
		return nil, nil, fmt.Errorf("subject %s version %d: %w", subject, v, err)
	}
	b, err := EncodeWith(reg, doc, message)
	return b, reg, err
}

// EncodeWith encodes a JSON document with a known schema.
func EncodeWith(reg *Registered, doc []byte, message string) ([]byte, error) {
	out := make([]byte, 5, 5+len(doc))
	binary.BigEndian.PutUint32(out[1:], uint32(reg.ID))
	var err error
	switch reg.Schema.Type {
	case schema.Avro:
		out, err = jsonToAvro(out, reg.Schema.Avro(), doc)
	case schema.Protobuf:
		out, err = jsonToProto(out, reg.Schema, doc, message)
	case schema.JSON:
		out, err = jsonToJSON(out, reg.Schema, doc)
	default:
		err = fmt.Errorf("unknown schema type %q", reg.Schema.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("encode with %s version %d (id %d): %w", reg.Subject, reg.Version, reg.ID, err)
	}
	return out, nil
}
