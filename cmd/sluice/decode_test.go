package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/schemareg"
)

// `sluice consume --decode` prints Confluent wire-format records as JSON,
// with the schema used in --format json; other records stay as they are.
func TestConsumeDecode(t *testing.T) {
	b := startTestBroker(t, "kfake")
	ctx := context.Background()
	reg := schemareg.New(schemareg.Config{Log: schemareg.NewMemLog()})
	reg.Start(ctx)
	defer reg.Close()
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	const orderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"}]}`
	id, err := reg.Register(ctx, "orders-value", schemareg.SchemaRequest{Schema: orderSchema})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := avro.Marshal(avro.MustParse(orderSchema), map[string]any{"id": "o-1", "amount": 12.5})
	if err != nil {
		t.Fatal(err)
	}
	value := append([]byte{0, 0, 0, 0, 0}, payload...)
	binary.BigEndian.PutUint32(value[1:5], uint32(id))

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k1"), Value: value}, &kgo.Record{Key: []byte("k2"), Value: []byte(`plain`)},
		&kgo.Record{Key: []byte("k3"), Value: []byte{0, 0, 0, 0, 99, 1}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	common := []string{"consume", "orders", "--from", "earliest", "--max-messages", "3", "--decode", "--schema-registry", srv.URL}
	code, out, errOut := runCLI(t, b.addr, "", append(common, "--format", "kv", "--key-separator", "=")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.HasPrefix(out, "k1={\"id\":\"o-1\",\"amount\":12.5}\nk2=plain\nk3=") {
		t.Fatalf("kv output:\n%s", out)
	}
	if !strings.Contains(errOut, "orders[0]@2: value not decoded") || !strings.Contains(errOut, "1 keys or values could not be decoded") {
		t.Fatalf("stderr: %s", errOut)
	}
	code, out, errOut = runCLI(t, b.addr, "", append(common, "--format", "json", "--max-messages", "1")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `"key":"k1","value":{"id":"o-1","amount":12.5},"value_schema":{"subject":"orders-value","version":1,"id":1,"type":"AVRO"}}`
	if !strings.Contains(out, want) {
		t.Fatalf("json output:\n%s\nwant it to contain\n%s", out, want)
	}
}

// `sluice compare --decode`: two writer-schema versions of the same
// records are ready to cut over once the added field is ignored, and the
// report names the versions.
func TestCompareDecode(t *testing.T) {
	b := startTestBroker(t, "kfake")
	ctx := context.Background()
	reg := schemareg.New(schemareg.Config{Log: schemareg.NewMemLog()})
	reg.Start(ctx)
	defer reg.Close()
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	v1 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"}]}`
	v2 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"channel","type":["null","string"],"default":null}]}`
	id1, err := reg.Register(ctx, "orders-value", schemareg.SchemaRequest{Schema: v1})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := reg.Register(ctx, "orders-value", schemareg.SchemaRequest{Schema: v2})
	if err != nil {
		t.Fatal(err)
	}
	wire := func(id int, s, doc string) []byte {
		var v map[string]any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		p, err := avro.Marshal(avro.MustParse(s), v)
		if err != nil {
			t.Fatal(err)
		}
		out := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(out[1:], uint32(id))
		return append(out, p...)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "ORDER", "ORDERNEW"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs,
			&kgo.Record{Topic: "ORDER", Value: wire(id1, v1, fmt.Sprintf(`{"id":"o-%d","amount":%d.5}`, i, i))},
			&kgo.Record{Topic: "ORDERNEW", Value: wire(id2, v2, fmt.Sprintf(`{"id":"o-%d","amount":%d.5,"channel":{"string":"web"}}`, i, i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	code := compareMain(ctx, []string{"--brokers", b.addr, "--left", "ORDER", "--right", "ORDERNEW", "--key", "json:id",
		"--json-values", "--ignore", "channel", "--until-end", "--decode", "--schema-registry", srv.URL}, &out, &errOut, func(string) string { return "" })
	if code != 0 || !strings.Contains(out.String(), "right orders-value version 2 (id 2, AVRO): 5 records") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
}
