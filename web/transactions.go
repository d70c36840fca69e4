package web

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /transactions: every transactional id the coordinators know
// (ListTransactions, then DescribeTransactions) with its state, producer
// id and epoch, the open transaction's age, its timeout and partitions;
// filtered by state (?state=Ongoing) or to the hanging ones (?hanging=1:
// open longer than their timeout, which the coordinator should have
// aborted). Hanging first, then the oldest open, then by id.

type transactionLister interface {
	Transactions(ctx context.Context, states ...string) ([]kafkaview.Transaction, error)
}

type transactionsList struct{ kc transactionLister }

func (h transactionsList) get(c *fiber.Ctx) error {
	v := templates.TransactionsView{State: strings.Clone(c.Query("state")), Hanging: c.Query("hanging") == "1",
		States: kafkaview.TransactionStates, At: time.Now(), CanAbort: HasRole(c, RoleOperator)}
	if v.State != "" && !kafkaview.ValidTransactionState(v.State) {
		return BadRequest("state must be one of " + strings.Join(kafkaview.TransactionStates, ", "))
	}
	var states []string
	if v.State != "" {
		states = []string{v.State}
	}
	txns, err := h.kc.Transactions(requestCtx(c), states...)
	if err != nil {
		v.Err = err.Error()
	}
	fillTransactions(&v, txns)
	if WantsJSON(c) {
		return JSON(c, transactionsJSON(v))
	}
	if Fragment(c, "transactions-table") {
		return Render(c, fiber.StatusOK, templates.TransactionsTable(v))
	}
	return Render(c, fiber.StatusOK, templates.TransactionsPage(PageFor(c, "Transactions"), v))
}

// fillTransactions counts the open and hanging transactions among txns and
// puts the rows of the view's filter in order: hanging first, then the
// oldest open, then by id.
func fillTransactions(v *templates.TransactionsView, txns []kafkaview.Transaction) {
	for _, t := range txns {
		if t.Hanging(v.At) {
			v.HangingCount++
		}
		if t.Open() {
			v.OpenCount++
		}
		if v.Hanging && !t.Hanging(v.At) {
			continue
		}
		v.Rows = append(v.Rows, t)
	}
	sort.SliceStable(v.Rows, func(i, j int) bool {
		a, b := v.Rows[i], v.Rows[j]
		if ha, hb := a.Hanging(v.At), b.Hanging(v.At); ha != hb {
			return ha
		}
		if aa, ab := a.Age(v.At), b.Age(v.At); aa != ab {
			return aa > ab
		}
		return a.ID < b.ID
	})
}

func transactionsJSON(v templates.TransactionsView) fiber.Map {
	out := make([]fiber.Map, 0, len(v.Rows))
	for _, t := range v.Rows {
		parts := make([]fiber.Map, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			pm := fiber.Map{"topic": p.Topic, "partition": p.Partition, "lso_lag": nil}
			if lag, ok := t.LSOLag[p]; ok {
				pm["lso_lag"] = lag
			}
			parts = append(parts, pm)
		}
		m := fiber.Map{"transactional_id": t.ID, "state": t.State, "coordinator": t.Coordinator, "producer_id": t.ProducerID,
			"producer_epoch": t.ProducerEpoch, "timeout_ms": t.Timeout.Milliseconds(), "age_ms": t.Age(v.At).Milliseconds(),
			"hanging": t.Hanging(v.At), "partitions": parts, "error": t.Err, "started_at": nil}
		if !t.Started.IsZero() {
			m["started_at"] = t.Started.UTC()
		}
		out = append(out, m)
	}
	return fiber.Map{"transactions": out, "open": v.OpenCount, "hanging": v.HangingCount, "error": v.Err}
}
