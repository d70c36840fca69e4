package comparisons_test

import (
	"net/http"
	"testing"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
)

// TestComparisonPagesZerosCarryUnits: a comparison of two equal streams
// (no mismatch, nothing missing, no duplicate) shows no bare zero on the
// comparisons list, its page or the overview's panel (webtest.BareZeros).
func TestComparisonPagesZerosCarryUnits(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 3, 30, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", createForm("ORDER", "ORDERNEW")), http.StatusSeeOther)
	h.waitState(t, 1, migration.StateFinished)
	var all []webtest.ZeroFinding
	for _, p := range []string{"/comparisons", "/comparisons/1", "/"} {
		r := op.Get(p)
		expectStatus(t, r, http.StatusOK)
		all = append(all, webtest.BareZeros(p, r.Text)...)
	}
	webtest.ExpectNoBareZeros(t, all)
}
