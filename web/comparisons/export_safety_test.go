package comparisons_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web"
)

// TestCSVExportCannotInjectFormulas: a difference whose key and value a
// producer chose to look like spreadsheet formulas is exported as text,
// and the export is an access entry in the audit log.
func TestCSVExportCannotInjectFormulas(t *testing.T) {
	brokers := kfakeBrokers(t)
	extra := []order{{"@SUM(A1)", `=HYPERLINK("http://evil.example","open")`}} // missing on the left
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 5, nil, extra)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", createForm("ORDER", "ORDERNEW")), http.StatusSeeOther)
	h.waitState(t, 1, migration.StateFinished)

	v := h.signedIn(t, web.RoleViewer)
	r := v.Get("/comparisons/1/export?format=csv")
	expectStatus(t, r, http.StatusOK)
	rows, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("CSV export: %v %q", err, rows)
	}
	if strings.Join(rows[0], ",") != strings.Join(migration.DifferenceCSVHeader, ",") {
		t.Fatalf("header %q", rows[0])
	}
	row := strings.Join(rows[1], "|")
	if !strings.Contains(row, "|'@SUM(A1)|") || !strings.Contains(row, `|'=HYPERLINK("http://evil.example","open")|`) {
		t.Fatalf("formula cells exported raw: %q", rows[1])
	}
	for _, cell := range rows[1] {
		if cell != "" && strings.ContainsRune("=+@", rune(cell[0])) {
			t.Fatalf("cell %q would run as a formula", cell)
		}
	}
	es, _, err := h.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "access.comparison.export"})
	if err != nil || len(es) != 1 || !strings.Contains(es[0].Detail, "format=csv") {
		t.Fatalf("access audit: %+v %v", es, err)
	}
}
