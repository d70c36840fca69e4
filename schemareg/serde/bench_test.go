package serde_test

import (
	"context"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/sluice-io/sluice/schemareg/serde"
)

// BenchmarkDecodeAvro: one Avro record of the order schema (9 fields,
// arrays, a map, a union) to JSON, schema cached.
func BenchmarkDecodeAvro(b *testing.B) {
	r := newRegistry(b)
	dec := serde.NewDecoder(r)
	note := "gift"
	payload, err := avro.Marshal(avro.MustParse(orderV1), order{ID: "o-000123", Amount: []byte{0x30, 0x39}, Qty: 3, Tags: []string{"a", "b"},
		Attrs: map[string]int64{"k": 7}, Status: "PAID", Ratio: 0.5, Raw: []byte{1, 2, 3}, Note: &note})
	if err != nil {
		b.Fatal(err)
	}
	rec := wire(1, payload)
	ctx := context.Background()
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeProtobuf: one Protobuf record (dynamicpb and protojson).
func BenchmarkDecodeProtobuf(b *testing.B) {
	r := newRegistry(b)
	dec := serde.NewDecoder(r)
	ctx := context.Background()
	rec, _, err := dec.Encode(ctx, "porders-value", -1, []byte(`{"id":"o-1","cents":"1250","tags":["x","y"],"lines":[{"sku":"A","qty":2}]}`), "shop.Order")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}
