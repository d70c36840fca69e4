package migration

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/schemareg/serde"
)

type serdeDecoded = serde.Decoded

const (
	orderSchemaV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"customer","type":"string"},{"name":"amount","type":"double"}]}`
	orderSchemaV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"customer","type":"string"},{"name":"amount","type":"double"},{"name":"channel","type":["null","string"],"default":null}]}`
)

type orderV1 struct {
	ID       string  `avro:"id"`
	Customer string  `avro:"customer"`
	Amount   float64 `avro:"amount"`
}

type orderV2 struct {
	ID       string  `avro:"id"`
	Customer string  `avro:"customer"`
	Amount   float64 `avro:"amount"`
	Channel  *string `avro:"channel"`
}

// confluentWire frames an Avro payload as Confluent's serializers do.
func confluentWire(id int, payload []byte) []byte {
	b := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

// The schema test: the old service writes ORDER with version 1 of
// the schema, the new one ORDERNEW with version 2 (one optional field
// added), both through hamba/avro in the Confluent wire format. Decoded,
// the records pair by id and compare equal once the new field is ignored;
// an injected changed amount is found; the report names the versions.
func TestCompareDecodedAvroVersions(t *testing.T) {
	brokers := testBrokers(t)
	ctx := context.Background()
	reg := schemareg.New(schemareg.Config{Log: schemareg.NewMemLog()})
	reg.Start(ctx)
	defer reg.Close()
	id1, err := reg.Register(ctx, "orders-value", schemareg.SchemaRequest{Schema: orderSchemaV1})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := reg.Register(ctx, "orders-value", schemareg.SchemaRequest{Schema: orderSchemaV2})
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := avro.MustParse(orderSchemaV1), avro.MustParse(orderSchemaV2)

	run := func(injectAt int) (Snapshot, string) {
		left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
		createTopics(t, brokers, 1, left, right)
		cl := newClient(t, brokers)
		base := time.Now().Add(-time.Hour)
		web := "web"
		var lrecs, rrecs []*kgo.Record
		for i := 0; i < 200; i++ {
			o := orderV1{ID: fmt.Sprintf("o-%04d", i), Customer: fmt.Sprintf("c-%d", i%17), Amount: float64(i) * 1.25}
			p1, err := avro.Marshal(s1, o)
			if err != nil {
				t.Fatal(err)
			}
			o2 := orderV2{ID: o.ID, Customer: o.Customer, Amount: o.Amount, Channel: &web}
			if i == injectAt {
				o2.Amount += 0.01
			}
			p2, err := avro.Marshal(s2, o2)
			if err != nil {
				t.Fatal(err)
			}
			ts := base.Add(time.Duration(i) * time.Millisecond)
			lrecs = append(lrecs, &kgo.Record{Topic: left, Key: []byte(o.ID), Value: confluentWire(id1, p1), Timestamp: ts})
			rrecs = append(rrecs, &kgo.Record{Topic: right, Key: []byte(o.ID), Value: confluentWire(id2, p2), Timestamp: ts.Add(3 * time.Millisecond)})
		}
		if err := cl.ProduceSync(ctx, append(lrecs, rrecs...)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		spec := DefaultSpec()
		spec.Left, spec.Right = left, right
		spec.Key, spec.Values, spec.Decode = "json:id", "json", true
		spec.Ignore = []string{"channel"}
		snap := runComparison(t, spec, Options{Brokers: brokers, Schemas: reg})
		var text strings.Builder
		if err := NewReport(spec, snap).WriteText(&text); err != nil {
			t.Fatal(err)
		}
		return snap, text.String()
	}

	snap, text := run(-1)
	v := Evaluate(DefaultSpec().Criteria, snap)
	if !v.Ready || snap.Counters.Matched != 200 {
		t.Fatalf("not ready: %s\n%s", v.Summary, text)
	}
	want := []SchemaUse{
		{Side: SideLeft, Subject: "orders-value", Version: 1, ID: id1, Type: "AVRO", Records: 200},
		{Side: SideRight, Subject: "orders-value", Version: 2, ID: id2, Type: "AVRO", Records: 200},
	}
	if fmt.Sprint(snap.Schemas) != fmt.Sprint(want) {
		t.Fatalf("schemas %+v, want %+v", snap.Schemas, want)
	}
	if !strings.Contains(text, "left  orders-value version 1 (id 1, AVRO): 200 records") ||
		!strings.Contains(text, "right orders-value version 2 (id 2, AVRO): 200 records") {
		t.Fatalf("report:\n%s", text)
	}

	snap, text = run(42)
	v = Evaluate(DefaultSpec().Criteria, snap)
	if v.Ready || snap.Counters.Mismatched != 1 || snap.Counters.Matched != 199 {
		t.Fatalf("injected change: %s\n%s", v.Summary, text)
	}
	ex := snap.Examples[KindMismatch]
	if len(ex) != 1 || ex[0].Key != "o-0042" || len(ex[0].Fields) != 1 || ex[0].Fields[0].Path != "amount" {
		t.Fatalf("mismatch example %+v", ex)
	}
}

// A comparison that decodes needs a schema source, and records that do
// not decode are counted and compared as bytes.
func TestCompareDecodeWithoutRegistry(t *testing.T) {
	spec := DefaultSpec()
	spec.Left, spec.Right, spec.Decode = "a", "b", true
	if _, err := New(spec, Options{Brokers: []string{"127.0.0.1:1"}}); err == nil || !strings.Contains(err.Error(), "schema registry") {
		t.Fatalf("no source: %v", err)
	}
}

// The writer schemas seen survive a checkpoint; a checkpoint without them
// (an older one, or a comparison that does not decode) still loads.
func TestCheckpointSchemas(t *testing.T) {
	spec := DefaultSpec()
	spec.Left, spec.Right, spec.Decode = "a", "b", true
	cs, err := compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *core {
		return newCore(cs, Limits{}, [2][]int64{{0}, {0}}, [2][]int64{{10}, {10}}, [2][]int64{{10}, {10}})
	}
	plain, err := mk().encodeCheckpoint(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := mk().decodeCheckpoint(plain); err != nil {
		t.Fatalf("checkpoint without schemas: %v", err)
	}
	e := mk()
	e.schemas.note(0, &serdeDecoded{ID: 1, Subject: "s", Version: 1, Type: "AVRO"})
	e.schemas.note(1, &serdeDecoded{ID: 2, Subject: "s", Version: 2, Type: "AVRO"})
	e.schemas.note(1, &serdeDecoded{ID: 2, Subject: "s", Version: 2, Type: "AVRO"})
	e.schemas.failures[1] = 3
	blob, err := e.encodeCheckpoint(nil)
	if err != nil {
		t.Fatal(err)
	}
	back := mk()
	if err := back.decodeCheckpoint(blob); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(back.snapshot(time.Now()).Schemas, back.schemas.failures), fmt.Sprint(e.schemas.list(), e.schemas.failures); got != want {
		t.Fatalf("restored %s, want %s", got, want)
	}
}
