package web

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// A transaction open longer than its timeout is hanging: counted, listed
// first, marked on its row with a note above the table; "Hanging only"
// keeps just those; ids without an open transaction have no age.
func TestTransactionsHangingFirst(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tp := []kafkaview.TopicPartition{{Topic: "payments", Partition: 2}}
	txns := []kafkaview.Transaction{
		{ID: "a-idle", State: "Empty", ProducerID: 1, ProducerEpoch: 0, Timeout: time.Minute},
		{ID: "b-young", State: "Ongoing", ProducerID: 2, ProducerEpoch: 3, Timeout: time.Minute, Started: now.Add(-10 * time.Second), Partitions: tp},
		{ID: "c-old", State: "Ongoing", ProducerID: 3, ProducerEpoch: 1, Timeout: time.Minute, Started: now.Add(-40 * time.Second), Partitions: tp},
		{ID: "d-stuck", State: "PrepareCommit", ProducerID: 4, ProducerEpoch: 7, Timeout: time.Minute, Started: now.Add(-15 * time.Minute), Partitions: tp},
		{ID: "e-done", State: "CompleteCommit", ProducerID: 5, ProducerEpoch: 2, Timeout: time.Minute, Started: now.Add(-time.Hour)},
	}
	v := templates.TransactionsView{At: now}
	fillTransactions(&v, txns)
	var ids []string
	for _, r := range v.Rows {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, ","); got != "d-stuck,c-old,b-young,a-idle,e-done" || v.OpenCount != 3 || v.HangingCount != 1 {
		t.Fatalf("rows %s, %d open, %d hanging", got, v.OpenCount, v.HangingCount)
	}
	if a := txns[4].Age(now); a != 0 {
		t.Fatalf("a completed transaction's age: %v", a)
	}
	html := renderTxns(t, v)
	for _, want := range []string{"1 transaction is still open past its timeout", `class="firing" data-txn="d-stuck"`, "15 min", "1 min", "payments</a>/2</span>", "PrepareCommit"} {
		if !strings.Contains(html, want) {
			t.Fatalf("table lacks %q:\n%s", want, html)
		}
	}
	if strings.Count(html, ">hanging<") != 1 {
		t.Fatalf("%d hanging badges, want 1", strings.Count(html, ">hanging<"))
	}

	only := templates.TransactionsView{At: now, Hanging: true}
	fillTransactions(&only, txns)
	if len(only.Rows) != 1 || only.Rows[0].ID != "d-stuck" || only.OpenCount != 3 {
		t.Fatalf("hanging only: %+v", only.Rows)
	}
	none := templates.TransactionsView{At: now, State: "Dead"}
	fillTransactions(&none, nil)
	if html := renderTxns(t, none); !strings.Contains(html, "No transaction matches") {
		t.Fatalf("empty filtered list: %s", html)
	}
	if html := renderTxns(t, templates.TransactionsView{At: now}); !strings.Contains(html, "No transactional producers") {
		t.Fatalf("empty list: %s", html)
	}
}

func renderTxns(t *testing.T, v templates.TransactionsView) string {
	t.Helper()
	var b bytes.Buffer
	ctx := templates.WithRequest(context.Background(), &templates.Request{Loc: time.UTC})
	if err := templates.TransactionsTable(v).Render(ctx, &b); err != nil {
		t.Fatal(fmt.Errorf("render: %w", err))
	}
	return b.String()
}
