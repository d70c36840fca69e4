// Package schema parses the three schema types a Confluent-compatible
// registry holds — AVRO (github.com/hamba/avro/v2), PROTOBUF
// (github.com/bufbuild/protocompile, google.golang.org/protobuf) and JSON
// Schema (github.com/santhosh-tekuri/jsonschema/v6) — resolves their
// references, and checks the compatibility of two schemas of the same type
// in one direction (compat.go, one file per type). It knows nothing of
// subjects, versions or storage: the registry (package schemareg) and the
// record decoder (package schemareg/serde) build on it.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Type is a schema type as the registry's API names it.
type Type string

// The schema types. An empty schemaType in a request or a stored record
// means AVRO, as in Confluent's registry.
const (
	Avro     Type = "AVRO"
	Protobuf Type = "PROTOBUF"
	JSON     Type = "JSON"
)

// Types lists the supported types, as GET /schemas/types answers.
var Types = []Type{JSON, Protobuf, Avro}

// ParseType returns the type named s ("" = AVRO), case-insensitively.
func ParseType(s string) (Type, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "AVRO":
		return Avro, nil
	case "PROTOBUF":
		return Protobuf, nil
	case "JSON":
		return JSON, nil
	}
	return "", fmt.Errorf("unknown schema type %q (want AVRO, PROTOBUF or JSON)", s)
}

// Limits on what is parsed, so that a hostile schema cannot exhaust the
// process: its text, the depth and count of references.
const (
	MaxSchemaBytes   = 8 << 20
	MaxReferences    = 1000 // references of one schema, counted transitively
	MaxReferenceDeep = 32
)

// Reference is a schema's reference to another registered schema: Name is
// how the referring schema names it (an Avro full name, a .proto import
// path, a JSON Schema $ref URL), Subject and Version where it is
// registered.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// Source is a schema's text with its type and its resolved references
// (each with its own references), as Parse takes it.
type Source struct {
	Type       Type
	Text       string
	References []Resolved
}

// Resolved is a reference with the referenced schema's source.
type Resolved struct {
	Reference
	Source
}

// Schema is a parsed schema. Exactly one of the per-type fields is set.
type Schema struct {
	Type  Type
	Text  string // the text as stored (canonical for AVRO and JSON: compact JSON)
	avro  *avroSchema
	proto *protoSchema
	json  *jsonSchema
}

// ErrInvalid marks a schema that does not parse (the registry answers it
// with error code 42201).
var ErrInvalid = errors.New("invalid schema")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Parse parses src. The error wraps ErrInvalid when the schema itself is at
// fault.
func Parse(src Source) (*Schema, error) {
	if len(src.Text) > MaxSchemaBytes {
		return nil, invalid("schema of %d bytes: at most %d", len(src.Text), MaxSchemaBytes)
	}
	if n := countRefs(src.References, 0); n < 0 {
		return nil, invalid("references nest deeper than %d", MaxReferenceDeep)
	} else if n > MaxReferences {
		return nil, invalid("%d references: at most %d", n, MaxReferences)
	}
	switch src.Type {
	case "", Avro:
		return parseAvro(src)
	case Protobuf:
		return parseProto(src)
	case JSON:
		return parseJSONSchema(src)
	}
	return nil, invalid("unknown schema type %q", src.Type)
}

func countRefs(refs []Resolved, depth int) int {
	if depth > MaxReferenceDeep {
		return -1
	}
	n := len(refs)
	for _, r := range refs {
		m := countRefs(r.References, depth+1)
		if m < 0 {
			return -1
		}
		n += m
		if n > MaxReferences {
			return n
		}
	}
	return n
}

// Canonical returns the form of text under which two registrations count as
// the same schema: compact JSON for AVRO and JSON (whitespace does not
// matter), the text with surrounding space trimmed for PROTOBUF.
func Canonical(t Type, text string) string {
	switch t {
	case Protobuf:
		return strings.TrimSpace(text)
	default:
		var b bytes.Buffer
		if json.Compact(&b, []byte(text)) == nil {
			return b.String()
		}
		return strings.TrimSpace(text)
	}
}

// Direction of a compatibility check.
type Direction int

const (
	// Backward: a reader using the new schema reads data written with the old.
	Backward Direction = iota
	// Forward: a reader using the old schema reads data written with the new.
	Forward
)

// Compatible reports why data written with writer cannot be read with
// reader (nil when it can): the messages, one per problem. Backward checks
// new against old; forward swaps them.
func Compatible(newer, older *Schema, d Direction) []string {
	if newer.Type != older.Type {
		return []string{fmt.Sprintf("schema type %s differs from the previous version's %s", newer.Type, older.Type)}
	}
	reader, writer := newer, older
	if d == Forward {
		reader, writer = older, newer
	}
	switch newer.Type {
	case Avro:
		return avroCompatible(reader, writer)
	case Protobuf:
		return protoCompatible(reader, writer)
	case JSON:
		return jsonCompatible(reader, writer)
	}
	return []string{"unknown schema type"}
}
