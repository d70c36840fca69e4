package schemareg

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/schemareg/schema"
)

// compatCase is one rule: an old and a new schema, and whether the new one
// is backward compatible (reads the old one's data) and forward compatible
// (its data is read by the old one).
type compatCase struct {
	typ      schema.Type
	name     string
	old, new string
	backward bool
	forward  bool
}

func avroRec(fields string) string {
	return `{"type":"record","name":"Order","namespace":"shop","fields":[` + fields + `]}`
}

func protoMsg(body string) string {
	return `syntax = "proto3"; package shop; message Order { ` + body + ` }`
}

var compatCases = []compatCase{
	// Avro (reader/writer resolution: github.com/hamba/avro/v2)
	{schema.Avro, "field added with default", avroRec(`{"name":"id","type":"string"}`), avroRec(`{"name":"id","type":"string"},{"name":"note","type":["null","string"],"default":null}`), true, true},
	{schema.Avro, "field added without default", avroRec(`{"name":"id","type":"string"}`), avroRec(`{"name":"id","type":"string"},{"name":"qty","type":"int"}`), false, true},
	{schema.Avro, "field removed (it had no default)", avroRec(`{"name":"id","type":"string"},{"name":"qty","type":"int"}`), avroRec(`{"name":"id","type":"string"}`), true, false},
	{schema.Avro, "field removed (it had a default)", avroRec(`{"name":"id","type":"string"},{"name":"qty","type":"int","default":0}`), avroRec(`{"name":"id","type":"string"}`), true, true},
	{schema.Avro, "type promoted int to long", avroRec(`{"name":"qty","type":"int"}`), avroRec(`{"name":"qty","type":"long"}`), true, false},
	{schema.Avro, "type promoted float to double", avroRec(`{"name":"amount","type":"float"}`), avroRec(`{"name":"amount","type":"double"}`), true, false},
	{schema.Avro, "type changed string to int", avroRec(`{"name":"qty","type":"string"}`), avroRec(`{"name":"qty","type":"int"}`), false, false},
	{schema.Avro, "enum symbol added", avroRec(`{"name":"st","type":{"type":"enum","name":"St","symbols":["NEW","PAID"]}}`), avroRec(`{"name":"st","type":{"type":"enum","name":"St","symbols":["NEW","PAID","SHIPPED"]}}`), true, false},
	{schema.Avro, "enum symbol removed", avroRec(`{"name":"st","type":{"type":"enum","name":"St","symbols":["NEW","PAID"]}}`), avroRec(`{"name":"st","type":{"type":"enum","name":"St","symbols":["NEW"]}}`), false, true},
	{schema.Avro, "union widened", avroRec(`{"name":"v","type":["null","string"]}`), avroRec(`{"name":"v","type":["null","string","int"]}`), true, false},
	{schema.Avro, "record renamed", avroRec(`{"name":"id","type":"string"}`), `{"type":"record","name":"Purchase","namespace":"shop","fields":[{"name":"id","type":"string"}]}`, false, false},

	// Protobuf (Confluent's rules, fields by number)
	{schema.Protobuf, "field added", protoMsg(`string id = 1;`), protoMsg(`string id = 1; string note = 2;`), true, true},
	{schema.Protobuf, "field removed", protoMsg(`string id = 1; string note = 2;`), protoMsg(`string id = 1;`), true, true},
	{schema.Protobuf, "field renumbered onto a fresh number", protoMsg(`string id = 1; int64 amount = 2;`), protoMsg(`string id = 1; int64 amount = 3;`), true, true},
	{schema.Protobuf, "fields renumbered onto each other's numbers", protoMsg(`string id = 1; int64 amount = 2;`), protoMsg(`int64 amount = 1; string id = 2;`), false, false},
	{schema.Protobuf, "type changed int64 to string", protoMsg(`int64 amount = 1;`), protoMsg(`string amount = 1;`), false, false},
	{schema.Protobuf, "type changed int32 to int64 (one wire group)", protoMsg(`int32 amount = 1;`), protoMsg(`int64 amount = 1;`), true, true},
	{schema.Protobuf, "type changed string to bytes", protoMsg(`string id = 1;`), protoMsg(`bytes id = 1;`), true, true},
	{schema.Protobuf, "scalar changed to a message", protoMsg(`string id = 1;`), protoMsg(`Inner id = 1; message Inner { string v = 1; }`), false, false},
	{schema.Protobuf, "message removed", `syntax = "proto3"; package shop; message Order { string id = 1; } message Line { string sku = 1; }`, protoMsg(`string id = 1;`), false, true},
	{schema.Protobuf, "package changed", protoMsg(`string id = 1;`), `syntax = "proto3"; package shop.v2; message Order { string id = 1; }`, false, false},
	{schema.Protobuf, "field renamed", protoMsg(`string id = 1;`), protoMsg(`string order_id = 1;`), true, true},
	{schema.Protobuf, "repeated numeric made singular", protoMsg(`repeated int64 qty = 1;`), protoMsg(`int64 qty = 1;`), false, false},
	{schema.Protobuf, "required field added (proto2)", `syntax = "proto2"; package shop; message Order { optional string id = 1; }`, `syntax = "proto2"; package shop; message Order { optional string id = 1; required int32 qty = 2; }`, false, false},

	// JSON Schema (a subset of Confluent's rules)
	{schema.JSON, "optional property added to a closed model", `{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`, `{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"}},"additionalProperties":false}`, true, false},
	{schema.JSON, "property added to an open model", `{"type":"object","properties":{"id":{"type":"string"}}}`, `{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"}}}`, false, true},
	{schema.JSON, "type narrowed number to integer", `{"type":"object","properties":{"n":{"type":"number"}}}`, `{"type":"object","properties":{"n":{"type":"integer"}}}`, false, true},
	{schema.JSON, "type changed string to number", `{"type":"object","properties":{"n":{"type":"string"}}}`, `{"type":"object","properties":{"n":{"type":"number"}}}`, false, false},
	{schema.JSON, "property made required", `{"type":"object","properties":{"id":{"type":"string"}}}`, `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`, false, true},
	{schema.JSON, "content model closed", `{"type":"object","properties":{"id":{"type":"string"}}}`, `{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`, false, true},
	{schema.JSON, "enum narrowed", `{"type":"string","enum":["A","B"]}`, `{"type":"string","enum":["A"]}`, false, true},
	{schema.JSON, "property with an empty schema added to an open model", `{"type":"object","properties":{"id":{"type":"string"}}}`, `{"type":"object","properties":{"id":{"type":"string"},"extra":{}}}`, true, true},
	{schema.JSON, "description changed", `{"type":"object","description":"a"}`, `{"type":"object","description":"b"}`, true, true},
	{schema.JSON, "maxLength lowered", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true},
}

var allLevels = []string{"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}

func expected(level string, backward, forward bool) bool {
	switch level {
	case "NONE":
		return true
	case "BACKWARD", "BACKWARD_TRANSITIVE":
		return backward
	case "FORWARD", "FORWARD_TRANSITIVE":
		return forward
	}
	return backward && forward
}

// Every rule under every level: registration is accepted exactly when the
// rule says so (so each level has, for each type, cases that pass and cases
// that are refused).
func TestCompatibilityMatrix(t *testing.T) {
	ctx := context.Background()
	r := New(Config{Log: NewMemLog()})
	r.Start(ctx)
	defer r.Close()
	passed, refused := map[string]int{}, map[string]int{}
	for i, c := range compatCases {
		for _, level := range allLevels {
			subject := fmt.Sprintf("c%d-%s", i, level)
			if _, err := r.Register(ctx, subject, SchemaRequest{Schema: c.old, SchemaType: string(c.typ)}); err != nil {
				t.Fatalf("%s %s: register old: %v", c.typ, c.name, err)
			}
			if err := r.SetConfig(ctx, subject, level); err != nil {
				t.Fatal(err)
			}
			want := expected(level, c.backward, c.forward)
			msgs, err := r.CheckCompatibility(subject, 0, SchemaRequest{Schema: c.new, SchemaType: string(c.typ)})
			if err != nil {
				t.Fatalf("%s %s: %v", c.typ, c.name, err)
			}
			if got := len(msgs) == 0; got != want {
				t.Errorf("%s %q under %s: compatible=%v, want %v (%v)", c.typ, c.name, level, got, want, msgs)
			}
			_, err = r.Register(ctx, subject, SchemaRequest{Schema: c.new, SchemaType: string(c.typ)})
			if (err == nil) != want {
				t.Errorf("%s %q under %s: register err=%v, want ok=%v", c.typ, c.name, level, err, want)
			}
			if e, ok := err.(*Error); err != nil && (!ok || e.Code != CodeIncompatibleSchema) {
				t.Errorf("%s %q: error %v, want code 409", c.typ, c.name, err)
			}
			key := string(c.typ) + " " + level
			if want {
				passed[key]++
			} else {
				refused[key]++
			}
		}
	}
	for _, typ := range []schema.Type{schema.Avro, schema.Protobuf, schema.JSON} {
		for _, level := range allLevels[1:] {
			key := string(typ) + " " + level
			if passed[key] == 0 || refused[key] == 0 {
				t.Errorf("%s: %d passing and %d refused cases; want both", key, passed[key], refused[key])
			}
		}
	}
}

// Transitive levels compare with every live version, the others with the
// latest only.
func TestCompatibilityTransitive(t *testing.T) {
	ctx := context.Background()
	r := New(Config{Log: NewMemLog()})
	r.Start(ctx)
	defer r.Close()
	v1 := avroRec(`{"name":"id","type":"string"},{"name":"qty","type":"int"}`)
	v2 := avroRec(`{"name":"id","type":"string"}`)
	v3 := avroRec(`{"name":"id","type":"string"},{"name":"qty","type":"string","default":""}`)
	for _, tc := range []struct {
		level string
		ok    bool
	}{{"BACKWARD", true}, {"BACKWARD_TRANSITIVE", false}, {"NONE", true}} {
		subject := "t-" + tc.level
		_ = r.SetConfig(ctx, subject, "NONE")
		for _, s := range []string{v1, v2} {
			if _, err := r.Register(ctx, subject, SchemaRequest{Schema: s}); err != nil {
				t.Fatal(err)
			}
		}
		_ = r.SetConfig(ctx, subject, tc.level)
		_, err := r.Register(ctx, subject, SchemaRequest{Schema: v3})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err=%v, want ok=%v", tc.level, err, tc.ok)
		}
		// a soft-deleted version no longer counts
		if !tc.ok {
			if _, err := r.DeleteVersion(ctx, subject, 1, false); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Register(ctx, subject, SchemaRequest{Schema: v3}); err != nil {
				t.Errorf("%s after deleting v1: %v", tc.level, err)
			}
		}
	}
}
