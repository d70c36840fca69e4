package web

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/schemareg/serde"
)

// Schemas of the decoding tests: an Avro order (version 1, and version 2
// with an added field), a Protobuf order.
const (
	testOrderV1    = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"total","type":"double"},{"name":"customer","type":"string"}]}`
	testOrderV2    = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"total","type":"double"},{"name":"customer","type":"string"},{"name":"channel","type":["null","string"],"default":null}]}`
	testJSONSchema = `{"type":"object","properties":{"id":{"type":"string"},"cents":{"type":"integer"}},"required":["id"]}`
	testProto      = "syntax = \"proto3\";\npackage shop;\nmessage Payment {\n  string ref = 1;\n  int64 cents = 2;\n  string payer = 3;\n}\n"
)

// decodingServer is a test console whose messages page decodes with an
// in-memory registry holding orders-value (2 versions) and payments-value.
func decodingServer(t *testing.T) (*testServer, *serde.Decoder) {
	t.Helper()
	ctx := context.Background()
	reg := schemareg.New(schemareg.Config{Log: schemareg.NewMemLog()})
	reg.Start(ctx)
	t.Cleanup(func() { reg.Close() })
	for _, s := range []struct{ subject, typ, text string }{
		{"orders-value", "AVRO", testOrderV1},
		{"orders-value", "AVRO", testOrderV2},
		{"payments-value", "PROTOBUF", testProto},
		{"refunds-value", "JSON", testJSONSchema},
	} {
		if _, err := reg.Register(ctx, s.subject, schemareg.SchemaRequest{Schema: s.text, SchemaType: s.typ}); err != nil {
			t.Fatal(err)
		}
	}
	dec := serde.NewDecoder(reg)
	ts := newTestServer(t, func(c *Config) {
		c.Decoder = dec
		c.SchemaSubjects = func() []string {
			var out []string
			for _, s := range reg.Subjects() {
				out = append(out, s.Subject)
			}
			return out
		}
	})
	return ts, dec
}

func encode(t *testing.T, dec *serde.Decoder, subject string, version int, doc string) []byte {
	t.Helper()
	b, _, err := dec.Encode(context.Background(), subject, version, []byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMessagesDecodeWireFormat(t *testing.T) {
	ts, dec := decodingServer(t)
	createTopic(t, ts, "orders", 1)
	cl := kgoClient(t, ts.brokers)
	recs := []*kgo.Record{
		{Topic: "orders", Key: []byte("o-1"), Value: encode(t, dec, "orders-value", 1, `{"id":"o-1","total":12.5,"customer":"ann"}`)},
		{Topic: "orders", Key: []byte("o-2"), Value: encode(t, dec, "orders-value", 2, `{"id":"o-2","total":7,"customer":"bob","channel":"web"}`)},
		{Topic: "orders", Key: []byte("p-1"), Value: encode(t, dec, "payments-value", -1, `{"ref":"p-1","cents":"1250","payer":"cy"}`)},
		{Topic: "orders", Key: []byte("bad-id"), Value: []byte{0, 0, 0, 0x27, 0x0f, 1, 2, 3}},     // schema id 9999
		{Topic: "orders", Key: []byte("corrupt"), Value: []byte{0, 0, 0, 0, 1, 0xff, 0xff, 0xff}}, // id 1, bytes that are no order
		{Topic: "orders", Key: []byte("plain"), Value: []byte(`{"id":"o-9"}`)},
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v := ts.signedIn(t, "vic", RoleViewer)
	page := "/topics/orders/messages"

	r := v.Get(page + "?from=earliest&format=json")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r,
		`href="/schemas/orders-value?version=1"`, `orders-value v1</a>`, `· id 1 · AVRO`,
		`href="/schemas/orders-value?version=2"`, `· id 2 · AVRO`,
		`href="/schemas/payments-value?version=1"`, `· id 3 · PROTOBUF`,
		`<span class="k">&#34;customer&#34;</span>: <span class="s">&#34;ann&#34;</span>`,
		`<span class="k">&#34;channel&#34;</span>: <span class="s">&#34;web&#34;</span>`,
		`<span class="k">&#34;payer&#34;</span>: <span class="s">&#34;cy&#34;</span>`,
		"not decoded: schema id 9999 is not in the registry",
		"not decoded: decode with schema id 1",
	)
	// The writer schema's field order, not sorted: id, total, customer.
	i, j, k := strings.Index(r.Text, "&#34;id&#34;"), strings.Index(r.Text, "&#34;total&#34;"), strings.Index(r.Text, "&#34;customer&#34;")
	if !(i >= 0 && i < j && j < k) {
		t.Fatalf("decoded fields out of the schema's order: id %d total %d customer %d", i, j, k)
	}
	// The text format shows the decoded JSON too; hex shows the bytes with
	// the schema named.
	r = v.Get(page + "?from=earliest&limit=1")
	expectContains(t, r, `orders-value v1</a>`, `&#34;customer&#34;`)
	r = v.Get(page + "?from=earliest&limit=1&format=hex")
	expectContains(t, r, `orders-value v1</a>`, "00000000  00 00 00 00 01")

	// A search looks into the decoded JSON: the Avro bytes hold no "customer".
	r = v.Get(page + `?field=value&q="customer":"bob"`)
	expectContains(t, r, "Found 1 ·", `&#34;o-2&#34;`)
	r = v.Get(page + `?field=value&q=bob&format=json`)
	expectContains(t, r, "Found 1 ·", `<span class="s">&#34;<mark>bob</mark>&#34;</span>`) // matches highlighted in the decoded JSON
	r = v.Get(page + `?field=value&q="payer":"cy"`)
	expectContains(t, r, "Found 1 ·", "p-1")

	// The page's JSON and the exports give the decoded JSON with the schema.
	var page1 struct {
		Records []exportRecord `json:"records"`
	}
	v.GetJSON(page+"?from=earliest", &page1)
	if len(page1.Records) != len(recs) {
		t.Fatalf("records %d, want %d", len(page1.Records), len(recs))
	}
	got := page1.Records[0]
	if got.ValueSchema == nil || *got.ValueSchema != (exportSchema{Subject: "orders-value", Version: 1, ID: 1, Type: "AVRO"}) ||
		deref(got.Value) != `{"id":"o-1","total":12.5,"customer":"ann"}` || got.ValueEncoding != "" {
		t.Fatalf("decoded record in JSON: %+v %q", got.ValueSchema, deref(got.Value))
	}
	if bad := page1.Records[3]; bad.ValueSchema != nil || deref(bad.Value) != string(recs[3].Value) || !strings.Contains(bad.ValueDecodeError, "9999") {
		t.Fatalf("undecodable record in JSON: %+v", bad)
	}
	if plain := page1.Records[5]; plain.ValueSchema != nil || plain.ValueDecodeError != "" || deref(plain.Value) != `{"id":"o-9"}` {
		t.Fatalf("plain record in JSON: %+v", plain)
	}
	r = v.Get(page + "/export?as=json&from=earliest")
	expectStatus(t, r, http.StatusOK)
	var exp []exportRecord
	if err := json.Unmarshal([]byte(r.Text), &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp) != len(recs) || exp[2].ValueSchema == nil || exp[2].ValueSchema.Type != "PROTOBUF" || deref(exp[2].Value) != `{"ref":"p-1","cents":"1250","payer":"cy"}` {
		t.Fatalf("JSON export: %+v", exp)
	}
	r = v.Get(page + "/export?as=csv&from=earliest")
	rows, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if h := rows[0]; h[len(h)-1] != "value_schema" || rows[2][len(h)-1] != "orders-value version 2 (id 2, AVRO)" ||
		rows[2][6] != `{"id":"o-2","total":7,"customer":"bob","channel":"web"}` {
		t.Fatalf("CSV export: %q", rows[:3])
	}
}

// Without a decoder (no schema registry) wire-format records are shown as
// they are.
func TestMessagesWithoutDecoder(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "raw", 1)
	cl := kgoClient(t, ts.brokers)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "raw", Value: []byte{0, 0, 0, 0, 1, 2, 'o', '1'}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := ts.signedIn(t, "v", RoleViewer).Get("/topics/raw/messages?from=earliest&format=json")
	expectStatus(t, r, http.StatusOK)
	if strings.Contains(r.Text, "not decoded") || strings.Contains(r.Text, "/schemas/") {
		t.Fatalf("page decodes without a decoder")
	}
}

// The live tail decodes the records it streams and searches their JSON.
func TestLiveTailDecodes(t *testing.T) {
	ts, dec := decodingServer(t)
	createTopic(t, ts, "live", 1)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := ts.signedIn(t, "v", RoleViewer)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp := ts.openTail(t, ctx, c, `/topics/live/messages/tail?format=json&field=value&q=%22customer%22%3A%22keep%22`)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() || sc.Text() != "event: note" {
		t.Fatalf("first line %q", sc.Text())
	}
	cl := kgoClient(t, ts.brokers)
	go func() {
		// Give the tail a moment to take the end offsets, then write one
		// record that the search drops and one it keeps.
		time.Sleep(500 * time.Millisecond)
		cl.ProduceSync(ctx,
			&kgo.Record{Topic: "live", Value: encode(t, dec, "orders-value", 1, `{"id":"o-drop","total":1,"customer":"drop"}`)},
			&kgo.Record{Topic: "live", Value: encode(t, dec, "orders-value", 2, `{"id":"o-keep","total":2,"customer":"keep","channel":null}`)})
	}()
	var data string
	for sc.Scan() {
		if sc.Text() == "event: records" && sc.Scan() {
			data = sc.Text()
			break
		}
	}
	for _, want := range []string{`orders-value v2</a>`, `&#34;o-keep&#34;`, `&#34;keep&#34;`} {
		if !strings.Contains(data, want) {
			t.Fatalf("tail data lacks %q: %q (scan err %v)", want, data, sc.Err())
		}
	}
	if strings.Contains(data, "o-drop") {
		t.Fatalf("tail sent the record the search drops: %q", data)
	}
}

// The produce form encodes a JSON value with a chosen subject and version.
func TestProduceEncodesWithSchema(t *testing.T) {
	ts, _ := decodingServer(t)
	createTopic(t, ts, "orders", 1)
	op := ts.signedIn(t, "op", RoleOperator)
	page := "/topics/orders/messages"
	expectContains(t, op.Get(page), `name="schema"`, `name="schema_version"`, "Encode with a schema")

	send := func(subject, version, message, value string) (int, string) {
		r := op.Post(page, page, url.Values{"value": {value}, "schema": {subject}, "schema_version": {version}, "schema_message": {message}})
		return r.StatusCode, r.Text
	}
	for _, c := range []struct{ subject, version, value string }{
		{"orders-value", "1", `{"id":"e-1","total":3.5,"customer":"dee"}`},
		{"orders-value", "", `{"id":"e-2","total":4,"customer":"eve","channel":"shop"}`}, // the latest: version 2
		{"payments-value", "", `{"ref":"e-3","cents":"99","payer":"fay"}`},
		{"refunds-value", "1", `{"id":"e-4","cents":5}`},
	} {
		if st, body := send(c.subject, c.version, "", c.value); st != http.StatusSeeOther {
			t.Fatalf("produce with %s %q: status %d: %s", c.subject, c.version, st, body)
		}
	}
	// Mistakes come back on the form's fields.
	for _, c := range []struct{ subject, version, value, want string }{
		{"nope-value", "", `{}`, "There is no subject nope-value in the schema registry."},
		{"orders-value", "7", `{}`, "The subject orders-value has no version 7."},
		{"orders-value", "x", `{}`, "A version is a number from 1"},
		{"orders-value", "1", `{"id":"e-5"}`, "Not encoded: "},
		{"refunds-value", "1", `{"cents":5}`, "Not encoded: "}, // id is required
	} {
		st, body := send(c.subject, c.version, "", c.value)
		if st != http.StatusUnprocessableEntity || !strings.Contains(body, html.EscapeString(c.want)) {
			t.Fatalf("produce with %s %q %s: status %d, want the error %q: %s", c.subject, c.version, c.value, st, c.want, body)
		}
	}
	var got struct {
		Records []exportRecord `json:"records"`
	}
	op.GetJSON(page+"?from=earliest", &got)
	want := []struct{ schema, value string }{
		{"orders-value version 1 (id 1, AVRO)", `{"id":"e-1","total":3.5,"customer":"dee"}`},
		{"orders-value version 2 (id 2, AVRO)", `{"id":"e-2","total":4,"customer":"eve","channel":"shop"}`},
		{"payments-value version 1 (id 3, PROTOBUF)", `{"ref":"e-3","cents":"99","payer":"fay"}`},
		{"refunds-value version 1 (id 4, JSON)", `{"id":"e-4","cents":5}`},
	}
	if len(got.Records) != len(want) {
		t.Fatalf("records %d, want %d", len(got.Records), len(want))
	}
	for i, w := range want {
		if r := got.Records[i]; r.ValueSchema.String() != w.schema || deref(r.Value) != w.value {
			t.Errorf("record %d: %s %s, want %s %s", i, r.ValueSchema, deref(r.Value), w.schema, w.value)
		}
	}
	// Copy to produce fills the decoded value and its schema.
	r := op.Get(page + "?copy=0:2")
	expectContains(t, r, `value="payments-value"`, `name="schema_version"`, `value="shop.Payment"`, `&#34;payer&#34;:&#34;fay&#34;`)
}

// The topic page names the subjects its records use: those named after the
// topic and those of the schema ids in its latest records.
func TestTopicPageSubjects(t *testing.T) {
	ts, dec := decodingServer(t)
	createTopic(t, ts, "orders", 1)
	createTopic(t, ts, "plain", 1)
	cl := kgoClient(t, ts.brokers)
	if err := cl.ProduceSync(context.Background(),
		&kgo.Record{Topic: "orders", Value: encode(t, dec, "orders-value", 2, `{"id":"o-1","total":1,"customer":"a","channel":null}`)},
		&kgo.Record{Topic: "orders", Value: encode(t, dec, "payments-value", -1, `{"ref":"p-1"}`)}, // another subject on the same topic
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v := ts.signedIn(t, "v", RoleViewer)
	r := v.Get("/topics/orders")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `id="topic-subjects"`,
		`<a href="/schemas/orders-value?version=2">orders-value</a></td><td>value</td><td>TopicNameStrategy</td><td>version 2 (id 2, AVRO)</td>`,
		`<a href="/schemas/payments-value?version=1">payments-value</a></td><td>value</td><td>RecordNameStrategy</td><td>version 1 (id 3, PROTOBUF)</td>`)
	// A topic named like a subject shows it even before records are seen.
	createTopic(t, ts, "refunds", 1)
	expectContains(t, v.Get("/topics/refunds"), `<a href="/schemas/refunds-value">refunds-value</a></td><td>value</td><td>TopicNameStrategy</td><td><span class="dim">not seen</span>`)
	if r := v.Get("/topics/plain"); strings.Contains(r.Text, `id="topic-subjects"`) {
		t.Fatal("a topic without schemas lists subjects")
	}
}
