package schemareg

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/metrics"
)

// Requests are counted by endpoint (the route pattern, never the raw
// path) and status; compatibility checks by result; schemas are counted
// at scrape time.
func TestRegistryMetrics(t *testing.T) {
	m := metrics.New()
	r := New(Config{Log: NewMemLog(), Metrics: m.SchemaRegistry()})
	r.Start(context.Background())
	defer r.Close()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	tr := &testReg{t: t, r: r, srv: srv}
	tr.expect("POST", "/subjects/a/versions", body(avroV1), 200, "")
	tr.expect("POST", "/subjects/a/versions", body(avroV2), 200, "")
	tr.expect("GET", "/subjects/nope/versions", "", 404, "")
	tr.expect("POST", "/compatibility/subjects/a/versions/latest", body(`{"type":"int"}`), 200, `{"is_compatible":false}`)
	ms := httptest.NewServer(m.Handler())
	defer ms.Close()
	resp, err := ms.Client().Get(ms.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := string(b)
	for _, want := range []string{
		`sluice_schema_registry_http_requests_total{code="200",endpoint="POST /subjects/{subject}/versions",method="POST"} 2`,
		`sluice_schema_registry_http_requests_total{code="404",endpoint="GET /subjects/{subject}/versions",method="GET"} 1`,
		`sluice_schema_registry_compatibility_checks_total{result="compatible"} 1`,
		`sluice_schema_registry_compatibility_checks_total{result="incompatible"} 1`,
		`sluice_schema_registry_schema_versions 2`,
		`sluice_schema_registry_schema_ids 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
