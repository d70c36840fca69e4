package schemareg

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type testReg struct {
	t   *testing.T
	r   *Registry
	srv *httptest.Server
	log *MemLog
}

func newTestReg(t *testing.T) *testReg {
	t.Helper()
	log := NewMemLog()
	r := New(Config{Log: log})
	r.Start(context.Background())
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() { srv.Close(); r.Close() })
	return &testReg{t: t, r: r, srv: srv, log: log}
}

// do sends a request and returns the status and the body as text.
func (tr *testReg) do(method, path, body string) (int, string) {
	tr.t.Helper()
	req, _ := http.NewRequest(method, tr.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", ContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tr.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// expect checks the status and that the body is want as JSON (compared
// after parsing, so member order and spacing do not matter).
func (tr *testReg) expect(method, path, body string, status int, want string) string {
	tr.t.Helper()
	st, got := tr.do(method, path, body)
	if st != status {
		tr.t.Fatalf("%s %s: status %d, want %d (body %s)", method, path, st, status, got)
	}
	if want != "" && !jsonEq(got, want) {
		tr.t.Fatalf("%s %s:\n got %s\nwant %s", method, path, got, want)
	}
	return got
}

func jsonEq(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return strings.TrimSpace(a) == strings.TrimSpace(b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

const avroV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"}]}`
const avroV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"note","type":["null","string"],"default":null}]}`

func body(schemaText string) string {
	b, _ := json.Marshal(map[string]string{"schema": schemaText})
	return string(b)
}

func typedBody(t, schemaText string, refs string) string {
	m := map[string]any{"schema": schemaText, "schemaType": t}
	if refs != "" {
		m["references"] = json.RawMessage(refs)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// The examples of Confluent's API reference (docs.confluent.io, Schema
// Registry API reference), endpoint by endpoint.
func TestConfluentAPIExamples(t *testing.T) {
	tr := newTestReg(t)
	// GET /subjects on an empty registry
	tr.expect("GET", "/subjects", "", 200, `[]`)
	tr.expect("GET", "/schemas/types", "", 200, `["JSON","PROTOBUF","AVRO"]`)
	tr.expect("GET", "/", "", 200, `{}`)

	// POST /subjects/(string: subject)/versions -> {"id":1}
	tr.expect("POST", "/subjects/test/versions", body(avroV1), 200, `{"id":1}`)
	// idempotent: the same schema (other spacing) answers the same id
	tr.expect("POST", "/subjects/test/versions", body(strings.ReplaceAll(avroV1, ",", ", ")), 200, `{"id":1}`)
	// the same schema under another subject keeps its id
	tr.expect("POST", "/subjects/other/versions", body(avroV1), 200, `{"id":1}`)
	tr.expect("POST", "/subjects/test/versions", body(avroV2), 200, `{"id":2}`)

	tr.expect("GET", "/subjects", "", 200, `["other","test"]`)
	tr.expect("GET", "/subjects/test/versions", "", 200, `[1,2]`)
	tr.expect("GET", "/subjects/test/versions/1", "", 200,
		`{"subject":"test","version":1,"id":1,"schema":`+mustQuote(avroV1)+`}`)
	tr.expect("GET", "/subjects/test/versions/latest", "", 200,
		`{"subject":"test","version":2,"id":2,"schema":`+mustQuote(avroV2)+`}`)
	if _, got := tr.do("GET", "/subjects/test/versions/1/schema", ""); !jsonEq(got, avroV1) {
		t.Fatalf("raw schema: %s", got)
	}
	tr.expect("GET", "/schemas/ids/1", "", 200, `{"schema":`+mustQuote(avroV1)+`}`)
	tr.expect("GET", "/schemas/ids/1/versions", "", 200, `[{"subject":"other","version":1},{"subject":"test","version":1}]`)
	tr.expect("GET", "/schemas/ids/1/subjects", "", 200, `["other","test"]`)
	if _, got := tr.do("GET", "/schemas/ids/2/schema", ""); !jsonEq(got, avroV2) {
		t.Fatalf("raw schema by id: %s", got)
	}

	// POST /subjects/(string: subject): lookup
	tr.expect("POST", "/subjects/test", body(avroV1), 200,
		`{"subject":"test","version":1,"id":1,"schema":`+mustQuote(avroV1)+`}`)

	// errors, with Confluent's codes and messages
	tr.expect("GET", "/subjects/nope/versions", "", 404, `{"error_code":40401,"message":"Subject 'nope' not found."}`)
	tr.expect("GET", "/subjects/test/versions/9", "", 404, `{"error_code":40402,"message":"Version 9 not found."}`)
	tr.expect("GET", "/schemas/ids/99", "", 404, `{"error_code":40403,"message":"Schema 99 not found"}`)
	tr.expect("POST", "/subjects/test", body(`{"type":"string"}`), 404, `{"error_code":40403,"message":"Schema not found"}`)
	tr.expect("POST", "/subjects/nope", body(avroV1), 404, `{"error_code":40401,"message":"Subject 'nope' not found."}`)
	tr.expect("GET", "/subjects/test/versions/abc", "", 422, "")
	if _, got := tr.do("GET", "/subjects/test/versions/0", ""); !strings.Contains(got, `"error_code":42202`) {
		t.Fatalf("version 0: %s", got)
	}
	if _, got := tr.do("POST", "/subjects/test/versions", body(`{"type":"record","name":"x"`)); !strings.Contains(got, `"error_code":42201`) {
		t.Fatalf("invalid schema: %s", got)
	}
	if st, got := tr.do("POST", "/subjects/test/versions", `{"schema":`); st != 422 {
		t.Fatalf("malformed body: %d %s", st, got)
	}
	// incompatible (the default BACKWARD): a required field added without default
	incompatible := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"qty","type":"int"}]}`
	st, got := tr.do("POST", "/subjects/test/versions", body(incompatible))
	if st != 409 || !strings.Contains(got, `"error_code":409`) {
		t.Fatalf("incompatible: %d %s", st, got)
	}

	// compatibility
	tr.expect("POST", "/compatibility/subjects/test/versions/latest", body(incompatible), 200, `{"is_compatible":false}`)
	got = tr.expect("POST", "/compatibility/subjects/test/versions/latest?verbose=true", body(incompatible), 200, "")
	if !strings.Contains(got, `"messages":["version 2: backward:`) {
		t.Fatalf("verbose: %s", got)
	}
	tr.expect("POST", "/compatibility/subjects/test/versions/1", body(avroV2), 200, `{"is_compatible":true}`)
	tr.expect("POST", "/compatibility/subjects/test/versions", body(avroV2), 200, `{"is_compatible":true}`)

	// config
	tr.expect("GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`)
	tr.expect("PUT", "/config", `{"compatibility":"FULL"}`, 200, `{"compatibility":"FULL"}`)
	tr.expect("GET", "/config", "", 200, `{"compatibilityLevel":"FULL"}`)
	tr.expect("GET", "/config/test", "", 404, `{"error_code":40408,"message":"Subject 'test' does not have subject-level compatibility configured"}`)
	tr.expect("GET", "/config/test?defaultToGlobal=true", "", 200, `{"compatibilityLevel":"FULL"}`)
	tr.expect("PUT", "/config/test", `{"compatibility":"NONE"}`, 200, `{"compatibility":"NONE"}`)
	tr.expect("GET", "/config/test", "", 200, `{"compatibilityLevel":"NONE"}`)
	tr.expect("PUT", "/config/test", `{"compatibility":"SIDEWAYS"}`, 422, "")
	tr.expect("POST", "/subjects/test/versions", body(incompatible), 200, `{"id":3}`)
	tr.expect("DELETE", "/config/test", "", 200, `{"compatibilityLevel":"NONE"}`)
	tr.expect("DELETE", "/config", "", 200, `{"compatibilityLevel":"FULL"}`)
	tr.expect("GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`)

	// mode
	tr.expect("GET", "/mode", "", 200, `{"mode":"READWRITE"}`)
	tr.expect("PUT", "/mode/test", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`)
	tr.expect("GET", "/mode/test", "", 200, `{"mode":"READONLY"}`)
	st, got = tr.do("POST", "/subjects/test/versions", body(`{"type":"string"}`))
	if st != 422 || !strings.Contains(got, `"error_code":42205`) {
		t.Fatalf("read-only: %d %s", st, got)
	}
	tr.expect("PUT", "/mode", `{"mode":"SOMETIMES"}`, 422, "")
	tr.expect("DELETE", "/mode/test", "", 200, `{"mode":"READONLY"}`)
	tr.expect("GET", "/mode/test", "", 404, "")
	tr.expect("PUT", "/mode", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`)
	tr.expect("DELETE", "/subjects/other", "", 422, "")
	tr.expect("PUT", "/mode", `{"mode":"READWRITE"}`, 200, `{"mode":"READWRITE"}`)

	// deletes: soft, then permanent
	tr.expect("DELETE", "/subjects/test/versions/1?permanent=true", "", 404,
		`{"error_code":40407,"message":"Subject 'test' Version 1 was not deleted first before being permanently deleted"}`)
	tr.expect("DELETE", "/subjects/test/versions/1", "", 200, `1`)
	tr.expect("GET", "/subjects/test/versions", "", 200, `[2,3]`)
	tr.expect("GET", "/subjects/test/versions?deleted=true", "", 200, `[1,2,3]`)
	tr.expect("DELETE", "/subjects/test/versions/1", "", 404,
		`{"error_code":40406,"message":"Subject 'test' Version 1 was soft deleted.Set permanent=true to delete permanently"}`)
	tr.expect("DELETE", "/subjects/test/versions/1?permanent=true", "", 200, `1`)
	tr.expect("GET", "/subjects/test/versions?deleted=true", "", 200, `[2,3]`)
	tr.expect("DELETE", "/subjects/test?permanent=true", "", 404,
		`{"error_code":40405,"message":"Subject 'test' was not deleted first before being permanently deleted"}`)
	tr.expect("DELETE", "/subjects/test", "", 200, `[2,3]`)
	tr.expect("GET", "/subjects", "", 200, `["other"]`)
	tr.expect("GET", "/subjects?deleted=true", "", 200, `["other","test"]`)
	tr.expect("DELETE", "/subjects/test", "", 404,
		`{"error_code":40404,"message":"Subject 'test' was soft deleted.Set permanent=true to delete permanently"}`)
	// id 2 is still readable while a soft-deleted version holds it
	tr.expect("GET", "/schemas/ids/2", "", 200, "")
	tr.expect("DELETE", "/subjects/test?permanent=true", "", 200, `[2,3]`)
	tr.expect("GET", "/subjects?deleted=true", "", 200, `["other"]`)
	tr.expect("GET", "/schemas/ids/2", "", 404, "")
	// ids are never reused: the next new schema gets 4
	tr.expect("POST", "/subjects/test/versions", body(`{"type":"string"}`), 200, `{"id":4}`)
	tr.expect("GET", "/subjects/test/versions", "", 200, `[1]`)

	tr.expect("GET", "/nothing/here", "", 404, "")
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestReferences(t *testing.T) {
	tr := newTestReg(t)
	// Avro: a record naming a type registered under another subject
	tr.expect("POST", "/subjects/money/versions", body(`{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"}]}`), 200, `{"id":1}`)
	order := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"total","type":"shop.Money"}]}`
	tr.expect("POST", "/subjects/order/versions", typedBody("AVRO", order, `[{"name":"shop.Money","subject":"money","version":1}]`), 200, `{"id":2}`)
	tr.expect("GET", "/subjects/order/versions/1", "", 200,
		`{"subject":"order","version":1,"id":2,"references":[{"name":"shop.Money","subject":"money","version":1}],"schema":`+mustQuote(order)+`}`)
	tr.expect("GET", "/subjects/money/versions/1/referencedby", "", 200, `[2]`)
	// without the reference the schema does not parse
	if _, got := tr.do("POST", "/subjects/order2/versions", body(order)); !strings.Contains(got, `42201`) {
		t.Fatalf("missing reference: %s", got)
	}
	// a referenced version cannot be deleted
	if _, got := tr.do("DELETE", "/subjects/money/versions/1", ""); !strings.Contains(got, `42206`) {
		t.Fatalf("delete referenced: %s", got)
	}
	// Protobuf: an import
	tr.expect("POST", "/subjects/common/versions", typedBody("PROTOBUF", `syntax = "proto3"; package common; message Money { int64 cents = 1; }`, ""), 200, `{"id":3}`)
	tr.expect("POST", "/subjects/porder/versions", typedBody("PROTOBUF",
		`syntax = "proto3"; package shop; import "common/money.proto"; message Order { string id = 1; common.Money total = 2; }`,
		`[{"name":"common/money.proto","subject":"common","version":1}]`), 200, `{"id":4}`)
	tr.expect("GET", "/schemas/ids/4", "", 200, "")
	// JSON Schema: a $ref
	tr.expect("POST", "/subjects/jmoney/versions", typedBody("JSON", `{"type":"object","properties":{"cents":{"type":"integer"}}}`, ""), 200, `{"id":5}`)
	tr.expect("POST", "/subjects/jorder/versions", typedBody("JSON",
		`{"type":"object","properties":{"id":{"type":"string"},"total":{"$ref":"money.json"}}}`,
		`[{"name":"money.json","subject":"jmoney","version":1}]`), 200, `{"id":6}`)
	// a $ref outside the references is refused, never loaded
	if _, got := tr.do("POST", "/subjects/jx/versions", typedBody("JSON", `{"$ref":"file:///etc/passwd"}`, "")); !strings.Contains(got, `42201`) {
		t.Fatalf("file ref: %s", got)
	}
}

// The records written are Confluent's, and a log written by Confluent's
// registry (here: its records as text) reads as it is.
func TestConfluentRecords(t *testing.T) {
	if got := string(MarshalKey(Key{Type: KeySchema, Subject: "orders-value", Version: 3})); got != `{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}` {
		t.Fatalf("schema key %s", got)
	}
	if got := string(MarshalKey(Key{Type: KeyConfig})); got != `{"keytype":"CONFIG","magic":0}` {
		t.Fatalf("config key %s", got)
	}
	if got := string(MarshalKey(Key{Type: KeyNoop})); got != `{"keytype":"NOOP","magic":0}` {
		t.Fatalf("noop key %s", got)
	}
	log := NewMemLog()
	copied := [][2]string{
		{`{"keytype":"CONFIG","subject":null,"magic":0}`, `{"compatibilityLevel":"FULL"}`},
		{`{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}`, `{"subject":"orders-value","version":1,"id":7,"schema":"\"string\"","deleted":false}`},
		{`{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}`, `{"subject":"orders-value","version":2,"id":9,"schemaType":"JSON","schema":"{\"type\":\"object\"}","deleted":false,"metadata":null,"ruleSet":null}`},
		{`{"keytype":"NOOP","magic":0}`, ``},
		{`{"keytype":"SCHEMA","subject":"gone","version":1,"magic":1}`, `{"subject":"gone","version":1,"id":3,"schema":"\"int\"","deleted":false}`},
		{`{"keytype":"DELETE_SUBJECT","subject":"gone","magic":0}`, `{"subject":"gone","version":1}`},
		{`{"keytype":"ASSOC","magic":0}`, `{}`},
		{`not json`, `x`},
	}
	var recs []Record
	for _, kv := range copied {
		r := Record{Key: []byte(kv[0])}
		if kv[1] != "" {
			r.Value = []byte(kv[1])
		}
		recs = append(recs, r)
	}
	if _, err := log.Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Log: log})
	r.Start(context.Background())
	defer r.Close()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	tr := &testReg{t: t, r: r, srv: srv, log: log}
	if err := r.WaitFor(context.Background(), int64(len(recs)-1)); err != nil {
		t.Fatal(err)
	}
	tr.expect("GET", "/config", "", 200, `{"compatibilityLevel":"FULL"}`)
	tr.expect("GET", "/subjects", "", 200, `["orders-value"]`)
	tr.expect("GET", "/subjects/orders-value/versions/2", "", 200, `{"subject":"orders-value","version":2,"id":9,"schemaType":"JSON","schema":"{\"type\":\"object\"}"}`)
	tr.expect("GET", "/subjects/gone/versions?deleted=true", "", 200, `[1]`)
	// new ids continue after the largest seen
	tr.expect("PUT", "/config", `{"compatibility":"NONE"}`, 200, "")
	tr.expect("POST", "/subjects/new/versions", body(`{"type":"long"}`), 200, `{"id":10}`)
	last := log.Records()[len(log.Records())-1]
	if string(last.Key) != `{"keytype":"SCHEMA","subject":"new","version":1,"magic":1}` ||
		!jsonEq(string(last.Value), `{"subject":"new","version":1,"id":10,"schema":"{\"type\":\"long\"}","deleted":false}`) {
		t.Fatalf("written record %s = %s", last.Key, last.Value)
	}
}

func TestRequestBounds(t *testing.T) {
	log := NewMemLog()
	r := New(Config{Log: log, MaxRequestBytes: 1024})
	r.Start(context.Background())
	defer r.Close()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	tr := &testReg{t: t, r: r, srv: srv, log: log}
	st, got := tr.do("POST", "/subjects/x/versions", body(strings.Repeat(" ", 2000)+`"string"`))
	if st != 413 {
		t.Fatalf("large body: %d %s", st, got)
	}
	// a hostile schema: deep nesting is refused, not a crash
	deep := strings.Repeat(`{"type":"array","items":`, 5000) + `"int"` + strings.Repeat(`}`, 5000)
	log2 := NewMemLog()
	r2 := New(Config{Log: log2})
	r2.Start(context.Background())
	defer r2.Close()
	srv2 := httptest.NewServer(r2.Handler())
	defer srv2.Close()
	tr2 := &testReg{t: t, r: r2, srv: srv2, log: log2}
	st, _ = tr2.do("POST", "/subjects/x/versions", body(deep))
	if st != 200 && st != 422 {
		t.Fatalf("deep schema: %d", st)
	}
}

// The listing endpoints and their query parameters.
func TestListings(t *testing.T) {
	tr := newTestReg(t)
	tr.expect("POST", "/subjects/orders-value/versions", body(avroV1), 200, `{"id":1}`)
	tr.expect("POST", "/subjects/orders-value/versions", body(avroV2), 200, `{"id":2}`)
	tr.expect("POST", "/subjects/payments-value/versions", typedBody("JSON", `{"type":"object"}`, ""), 200, `{"id":3}`)
	tr.expect("POST", "/subjects/old-value/versions", body(`"string"`), 200, `{"id":4}`)
	tr.expect("DELETE", "/subjects/old-value", "", 200, `[1]`)

	tr.expect("GET", "/subjects?subjectPrefix=pay", "", 200, `["payments-value"]`)
	tr.expect("GET", "/subjects?deletedOnly=true", "", 200, `["old-value"]`)
	tr.expect("GET", "/schemas?subjectPrefix=orders&latestOnly=true", "", 200,
		`[{"subject":"orders-value","version":2,"id":2,"schema":`+mustQuote(avroV2)+`}]`)
	tr.expect("GET", "/schemas?subjectPrefix=pay", "", 200,
		`[{"subject":"payments-value","version":1,"id":3,"schemaType":"JSON","schema":"{\"type\":\"object\"}"}]`)
	tr.expect("GET", "/schemas/ids/3?fetchMaxId=true", "", 200, `{"schemaType":"JSON","schema":"{\"type\":\"object\"}","maxId":4}`)
	tr.expect("GET", "/schemas/ids/1?subject=payments-value", "", 404, "")
	tr.expect("GET", "/schemas/ids/4/versions", "", 200, `[]`)
	tr.expect("GET", "/schemas/ids/4/versions?deleted=true", "", 200, `[{"subject":"old-value","version":1}]`)
	tr.expect("GET", "/subjects/old-value/versions/1", "", 404, `{"error_code":40401,"message":"Subject 'old-value' not found."}`) // as Confluent: the subject has no live version
	tr.expect("GET", "/subjects/old-value/versions/1?deleted=true", "", 200, "")
	tr.expect("GET", "/schemas/ids/abc", "", 404, "")
	// a subject name with a slash, escaped in the path
	tr.expect("POST", "/subjects/a%2Fb/versions", body(`"long"`), 200, `{"id":5}`)
	tr.expect("GET", "/subjects/a%2Fb/versions", "", 200, `[1]`)
}
