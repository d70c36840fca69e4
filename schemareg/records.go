package schemareg

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/sluice-io/sluice/schemareg/schema"
)

// The records of the _schemas topic, in the JSON Confluent's registry
// writes, so that a topic copied from a Confluent cluster reads as it is
// and the keys written here are byte-for-byte the keys Confluent writes
// (compaction keeps the last record per key bytes: a key spelled
// differently would let an old record outlive its tombstone). Keys:
//
//	{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}
//	{"keytype":"CONFIG","magic":0}                      global compatibility
//	{"keytype":"CONFIG","subject":"orders-value","magic":0}
//	{"keytype":"MODE","magic":0} / with "subject"
//	{"keytype":"DELETE_SUBJECT","subject":"orders-value","magic":0}
//	{"keytype":"CLEAR_SUBJECT","subject":"orders-value","magic":0}
//	{"keytype":"NOOP","magic":0}
//
// Values: a schema {"subject","version","id","schemaType" (absent for
// AVRO),"references","schema","deleted"}, a config {"compatibilityLevel"},
// a mode {"mode"}, a subject deletion {"subject","version"} (every version
// up to it is soft-deleted), a clear {"subject"}. A null value (tombstone)
// removes a schema version (hard delete), a subject's config or mode.
// Records of other key types (Confluent's ASSOC, CONTEXT) are skipped.

// KeyType is a _schemas record's "keytype".
type KeyType string

// The key types.
const (
	KeySchema        KeyType = "SCHEMA"
	KeyConfig        KeyType = "CONFIG"
	KeyMode          KeyType = "MODE"
	KeyNoop          KeyType = "NOOP"
	KeyDeleteSubject KeyType = "DELETE_SUBJECT"
	KeyClearSubject  KeyType = "CLEAR_SUBJECT"
)

// Key is a parsed _schemas key.
type Key struct {
	Type    KeyType
	Subject string // "" for the global CONFIG and MODE, and NOOP
	Version int    // SCHEMA only
}

// MarshalKey writes k as Confluent's registry does (Jackson with a fixed
// property order, empty subject left out).
func MarshalKey(k Key) []byte {
	b := []byte(`{"keytype":`)
	b = strconv.AppendQuote(b, string(k.Type))
	if k.Subject != "" {
		b = append(b, `,"subject":`...)
		sb, _ := json.Marshal(k.Subject) // JSON string escaping, as Jackson
		b = append(b, sb...)
	}
	magic := 0
	if k.Type == KeySchema {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, int64(k.Version), 10)
		magic = 1
	}
	b = append(b, `,"magic":`...)
	b = strconv.AppendInt(b, int64(magic), 10)
	return append(b, '}')
}

type rawKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject"`
	Version *int    `json:"version"`
	Magic   int     `json:"magic"`
}

// ParseKey reads a _schemas key. Unknown key types parse (the caller skips
// them); malformed JSON is an error.
func ParseKey(b []byte) (Key, error) {
	var r rawKey
	if err := json.Unmarshal(b, &r); err != nil {
		return Key{}, fmt.Errorf("_schemas key: %w", err)
	}
	k := Key{Type: KeyType(r.KeyType)}
	if r.Subject != nil {
		k.Subject = *r.Subject
	}
	if r.Version != nil {
		k.Version = *r.Version
	}
	if k.Type == KeySchema && (k.Subject == "" || k.Version <= 0) {
		return Key{}, fmt.Errorf("_schemas key %s: a SCHEMA key needs a subject and a version", b)
	}
	return k, nil
}

// SchemaValue is the value of a SCHEMA record.
type SchemaValue struct {
	Subject    string             `json:"subject"`
	Version    int                `json:"version"`
	ID         int                `json:"id"`
	SchemaType string             `json:"schemaType,omitempty"` // "" = AVRO
	References []schema.Reference `json:"references,omitempty"`
	Schema     string             `json:"schema"`
	Deleted    bool               `json:"deleted"`
}

// Type is the value's schema type.
func (v *SchemaValue) Type() schema.Type {
	t, err := schema.ParseType(v.SchemaType)
	if err != nil {
		return schema.Type(v.SchemaType)
	}
	return t
}

// ConfigValue is the value of a CONFIG record.
type ConfigValue struct {
	Subject            string `json:"subject,omitempty"`
	CompatibilityLevel string `json:"compatibilityLevel,omitempty"`
}

// ModeValue is the value of a MODE record.
type ModeValue struct {
	Subject string `json:"subject,omitempty"`
	Mode    string `json:"mode"`
}

// DeleteSubjectValue is the value of a DELETE_SUBJECT record.
type DeleteSubjectValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// ClearSubjectValue is the value of a CLEAR_SUBJECT record.
type ClearSubjectValue struct {
	Subject string `json:"subject"`
}

// Record is one _schemas record: a key and a value (nil = tombstone).
type Record struct {
	Key   []byte
	Value []byte
}

func schemaRecord(v SchemaValue) Record {
	b, _ := json.Marshal(v)
	return Record{Key: MarshalKey(Key{Type: KeySchema, Subject: v.Subject, Version: v.Version}), Value: b}
}

func configRecord(subject, level string) Record {
	r := Record{Key: MarshalKey(Key{Type: KeyConfig, Subject: subject})}
	if level != "" {
		r.Value, _ = json.Marshal(ConfigValue{Subject: subject, CompatibilityLevel: level})
	}
	return r
}

func modeRecord(subject, mode string) Record {
	r := Record{Key: MarshalKey(Key{Type: KeyMode, Subject: subject})}
	if mode != "" {
		r.Value, _ = json.Marshal(ModeValue{Subject: subject, Mode: mode})
	}
	return r
}

func deleteSubjectRecord(subject string, version int) Record {
	v, _ := json.Marshal(DeleteSubjectValue{Subject: subject, Version: version})
	return Record{Key: MarshalKey(Key{Type: KeyDeleteSubject, Subject: subject}), Value: v}
}

func noopRecord() Record { return Record{Key: MarshalKey(Key{Type: KeyNoop}), Value: nil} }
