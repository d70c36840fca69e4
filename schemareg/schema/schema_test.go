package schema

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
)

func TestParseTypeAndCanonical(t *testing.T) {
	for in, want := range map[string]Type{"": Avro, "avro": Avro, " PROTOBUF ": Protobuf, "json": JSON} {
		if got, err := ParseType(in); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseType("XML"); err == nil {
		t.Error("XML parsed")
	}
	if got := Canonical(Avro, "{ \"type\" :\n \"string\" }"); got != `{"type":"string"}` {
		t.Errorf("canonical avro %q", got)
	}
	if got := Canonical(Protobuf, "  syntax = \"proto3\";\n"); got != `syntax = "proto3";` {
		t.Errorf("canonical proto %q", got)
	}
}

// Every type's parse errors wrap ErrInvalid and say what is wrong; limits
// are enforced before parsing.
func TestParseErrors(t *testing.T) {
	for _, src := range []Source{
		{Type: Avro, Text: `{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}`},
		{Type: Avro, Text: `not json`},
		{Type: Protobuf, Text: `syntax = "proto3"; message M { strin a = 1; }`},
		{Type: Protobuf, Text: `syntax = "proto3"; import "missing.proto"; message M { string a = 1; }`},
		{Type: JSON, Text: `{"type":"object","properties":{"a":{"type":"nope"}}}`},
		{Type: JSON, Text: `{"$ref":"https://example.com/schema.json"}`},
		{Type: Avro, Text: strings.Repeat(" ", MaxSchemaBytes+1)},
		{Type: Avro, Text: `"string"`, References: deepRefs(MaxReferenceDeep + 2)},
		{Type: "XML", Text: `<a/>`},
	} {
		_, err := Parse(src)
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s %.40q: %v", src.Type, src.Text, err)
		}
	}
}

func deepRefs(n int) []Resolved {
	if n == 0 {
		return nil
	}
	return []Resolved{{Reference: Reference{Name: "r", Subject: "s", Version: 1}, Source: Source{Type: Avro, Text: `"int"`, References: deepRefs(n - 1)}}}
}

// A Protobuf schema registered as the base64 of a FileDescriptorProto (as
// some serializers send it) parses to the same messages as its .proto text.
func TestProtobufDescriptorBase64(t *testing.T) {
	text, err := Parse(Source{Type: Protobuf, Text: `syntax = "proto3"; package shop; import "google/protobuf/timestamp.proto";
message Order { string id = 1; google.protobuf.Timestamp at = 2; }`})
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(text.Proto()))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := Parse(Source{Type: Protobuf, Text: base64.StdEncoding.EncodeToString(b)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bin.MessageByIndexes([]int{0})
	if err != nil || m.FullName() != "shop.Order" || m.Fields().ByName("at").Message().FullName() != "google.protobuf.Timestamp" {
		t.Fatalf("descriptor schema: %v %v", m, err)
	}
	if msgs := Compatible(bin, text, Backward); len(msgs) != 0 {
		t.Fatalf("the descriptor and the text differ: %v", msgs)
	}
}

// JSON Schema rules follow local references.
func TestJSONCompatibleLocalRefs(t *testing.T) {
	old, err := Parse(Source{Type: JSON, Text: `{"type":"object","properties":{"m":{"$ref":"#/$defs/Money"}},"$defs":{"Money":{"type":"object","properties":{"cents":{"type":"number"}}}}}`})
	if err != nil {
		t.Fatal(err)
	}
	narrowed, err := Parse(Source{Type: JSON, Text: `{"type":"object","properties":{"m":{"$ref":"#/$defs/Money"}},"$defs":{"Money":{"type":"object","properties":{"cents":{"type":"integer"}}}}}`})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := Compatible(narrowed, old, Backward); len(msgs) == 0 || !strings.Contains(msgs[0], "properties/m/properties/cents") {
		t.Fatalf("narrowed through a $ref: %v", msgs)
	}
	if msgs := Compatible(narrowed, old, Forward); len(msgs) != 0 {
		t.Fatalf("forward: %v", msgs)
	}
}

// A hostile .proto nesting messages half a million deep is refused before the
// compiler's recursion sees it.
func TestProtobufNestingLimit(t *testing.T) {
	deep := `syntax = "proto3"; ` + strings.Repeat("message A { ", 500_000) + strings.Repeat("} ", 500_000)
	if _, err := Parse(Source{Type: Protobuf, Text: deep}); err == nil || !strings.Contains(err.Error(), "nest deeper") {
		t.Fatalf("deep proto: %v", err)
	}
	ok := `syntax = "proto3"; // a { in a comment
message A { string s = 1 [json_name = "x{"]; /* { */ message B { map<string, int32> m = 1; } }`
	if _, err := Parse(Source{Type: Protobuf, Text: ok}); err != nil {
		t.Fatal(err)
	}
}

// Deeply nested Avro and JSON Schema documents are refused, not a crash.
func TestDeepJSONSchemas(t *testing.T) {
	const n = 300_000
	deepAvro := strings.Repeat(`{"type":"array","items":`, n) + `"int"` + strings.Repeat(`}`, n)
	if _, err := Parse(Source{Type: Avro, Text: deepAvro}); err == nil {
		t.Fatal("a 300,000-deep Avro schema parsed")
	}
	deepJSON := strings.Repeat(`{"items":`, n) + `{}` + strings.Repeat(`}`, n)
	if _, err := Parse(Source{Type: JSON, Text: deepJSON}); err == nil {
		t.Fatal("a 300,000-deep JSON schema parsed")
	}
}
