package serde_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/schemareg/serde"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},{"name":"qty","type":"int"},{"name":"tags","type":{"type":"array","items":"string"}},{"name":"attrs","type":{"type":"map","values":"long"}},{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},{"name":"ratio","type":"double"},{"name":"raw","type":"bytes"},{"name":"note","type":["null","string"],"default":null}]}`

const protoText = `syntax = "proto3"; package shop;
message Other { string x = 1; }
message Order { string id = 1; int64 cents = 2; repeated string tags = 3; message Line { string sku = 1; int32 qty = 2; } repeated Line lines = 4; }`

const jsonText = `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id"]}`

func newRegistry(t testing.TB) *schemareg.Registry {
	t.Helper()
	ctx := context.Background()
	r := schemareg.New(schemareg.Config{Log: schemareg.NewMemLog()})
	r.Start(ctx)
	t.Cleanup(func() { r.Close() })
	for _, s := range []struct{ subject, typ, text string }{
		{"orders-value", "AVRO", orderV1},
		{"porders-value", "PROTOBUF", protoText},
		{"jorders-value", "JSON", jsonText},
	} {
		if _, err := r.Register(ctx, s.subject, schemareg.SchemaRequest{Schema: s.text, SchemaType: s.typ}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func wire(id int, payload []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

type order struct {
	ID     string           `avro:"id"`
	Amount []byte           `avro:"amount"`
	Qty    int32            `avro:"qty"`
	Tags   []string         `avro:"tags"`
	Attrs  map[string]int64 `avro:"attrs"`
	Status string           `avro:"status"`
	Ratio  float64          `avro:"ratio"`
	Raw    []byte           `avro:"raw"`
	Note   *string          `avro:"note"`
}

// A record written by hamba/avro's own encoder decodes to JSON in the
// writer schema's field order, with the subject, version and id.
func TestDecodeAvro(t *testing.T) {
	r := newRegistry(t)
	dec := serde.NewDecoder(r)
	note := "gift"
	payload, err := avro.Marshal(avro.MustParse(orderV1), order{ID: "o-1", Amount: []byte{0x30, 0x39}, Qty: 3, Tags: []string{"a"},
		Attrs: map[string]int64{"k": 7}, Status: "PAID", Ratio: 0.5, Raw: []byte{0, 0xff}, Note: &note})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dec.Decode(context.Background(), wire(1, payload))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"o-1","amount":123.45,"qty":3,"tags":["a"],"attrs":{"k":7},"status":"PAID","ratio":0.5,"raw":"\u0000ÿ","note":"gift"}`
	if string(d.JSON) != want {
		t.Fatalf("decoded\n %s\nwant\n %s", d.JSON, want)
	}
	if d.Subject != "orders-value" || d.Version != 1 || d.ID != 1 || d.Type != "AVRO" {
		t.Fatalf("decoded %+v", d)
	}
	// encode the JSON back: hamba reads it as the record it wrote (its
	// array blocks carry byte sizes, so the bytes differ)
	b, reg, err := dec.Encode(context.Background(), "orders-value", -1, d.JSON, "")
	if err != nil {
		t.Fatal(err)
	}
	var back order
	if err := avro.Unmarshal(avro.MustParse(orderV1), b[5:], &back); err != nil || reg.ID != 1 || back.ID != "o-1" || back.Attrs["k"] != 7 ||
		!bytes.Equal(back.Amount, []byte{0x30, 0x39}) || !bytes.Equal(back.Raw, []byte{0, 0xff}) || *back.Note != "gift" {
		t.Fatalf("re-encoded %x: %+v %v", b, back, err)
	}
	// a missing optional field takes its default
	b, _, err = dec.Encode(context.Background(), "orders-value", 1, []byte(`{"id":"x","amount":"-1.5","qty":1,"tags":[],"attrs":{},"status":"NEW","ratio":1,"raw":""}`), "")
	if err != nil {
		t.Fatal(err)
	}
	d, err = dec.Decode(context.Background(), b)
	if err != nil || string(d.JSON) != `{"id":"x","amount":-1.50,"qty":1,"tags":[],"attrs":{},"status":"NEW","ratio":1,"raw":"","note":null}` {
		t.Fatalf("round trip %s %v", d.JSON, err)
	}
	// errors name what is wrong
	if _, _, err := dec.Encode(context.Background(), "orders-value", 1, []byte(`{"id":1}`), ""); err == nil || !strings.Contains(err.Error(), "$.id") {
		t.Fatalf("bad document: %v", err)
	}
}

func TestDecodeProtobufAndJSON(t *testing.T) {
	r := newRegistry(t)
	dec := serde.NewDecoder(r)
	ctx := context.Background()
	b, reg, err := dec.Encode(ctx, "porders-value", -1, []byte(`{"id":"o-1","cents":"1250","tags":["x"],"lines":[{"sku":"A","qty":2}]}`), "shop.Order")
	if err != nil {
		t.Fatal(err)
	}
	if reg.ID != 2 || b[5] != 2 || b[6] != 2 { // message indexes [1]: count 1, index 1 (zigzag)
		t.Fatalf("header %x", b[:8])
	}
	d, err := dec.Decode(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.JSON) != `{"id":"o-1","cents":"1250","tags":["x"],"lines":[{"sku":"A","qty":2}]}` || d.Message != "shop.Order" || d.Subject != "porders-value" {
		t.Fatalf("decoded %s %+v", d.JSON, d)
	}
	// nested message by index path [1, 0]
	b, _, err = dec.Encode(ctx, "porders-value", -1, []byte(`{"sku":"B"}`), "shop.Order.Line")
	if err != nil {
		t.Fatal(err)
	}
	if d, err = dec.Decode(ctx, b); err != nil || d.Message != "shop.Order.Line" || string(d.JSON) != `{"sku":"B"}` {
		t.Fatalf("nested %v %+v", err, d)
	}
	// JSON Schema: validated on encoding, kept as it is on decoding
	if _, _, err := dec.Encode(ctx, "jorders-value", -1, []byte(`{"n":1}`), ""); err == nil {
		t.Fatal("a document missing a required property was encoded")
	}
	b, _, err = dec.Encode(ctx, "jorders-value", -1, []byte(`{ "id": "x", "n": 2 }`), "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err = dec.Decode(ctx, b); err != nil || string(d.JSON) != `{"id":"x","n":2}` || d.Type != "JSON" {
		t.Fatalf("json %v %+v", err, d)
	}
}

func TestDecodeErrors(t *testing.T) {
	r := newRegistry(t)
	dec := serde.NewDecoder(r)
	ctx := context.Background()
	for name, b := range map[string][]byte{
		"plain json":      []byte(`{"a":1}`),
		"too short":       {0, 0, 0},
		"unknown id":      wire(99, nil),
		"truncated avro":  wire(1, []byte{0x06, 'a'}),
		"huge length":     wire(1, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}),
		"trailing bytes":  wire(3, []byte(`{} x`)),
		"bad proto index": wire(2, []byte{0x02, 0x40}),
		"huge array":      append(wire(1, []byte{0x02, 'a', 0x02, 0x30, 0x02}), 0xfe, 0xff, 0xff, 0xff, 0x0f),
	} {
		if _, err := dec.Decode(ctx, b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if serde.IsWireFormat([]byte(`{"a":1}`)) || !serde.IsWireFormat(wire(1, nil)) {
		t.Fatal("IsWireFormat")
	}
}

// The decoder never panics and never produces invalid JSON, whatever the
// bytes (a hostile producer controls them all).
func FuzzDecode(f *testing.F) {
	r := newRegistry(f)
	dec := serde.NewDecoder(r)
	dec.MaxOutput = 1 << 20
	f.Add(wire(1, []byte{0x06, 'o', '-', '1', 0x04, 0x30, 0x39, 0x06, 0x02, 0x02, 'a', 0x00, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f, 0x00, 0x00}))
	f.Add(wire(2, []byte{0x02, 0x02, 0x0a, 0x01, 'x'}))
	f.Add(wire(2, []byte{0x00, 0x0a, 0x01, 'x'}))
	f.Add(wire(3, []byte(`{"id":"x"}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := dec.Decode(context.Background(), b)
		if err != nil {
			return
		}
		if !json.Valid(d.JSON) {
			t.Fatalf("invalid JSON %q from %x", d.JSON, b)
		}
	})
}
