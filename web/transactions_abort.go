package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /transactions/:id/abort: the confirmation page of the Abort action
// for a transaction the Transactions page marks hanging (open past its
// timeout): what aborting does, its partitions and their LSO lag.
// POST /transactions/:id/abort: write ABORT markers for the transaction's
// producer on each of its partitions (kafkaview.AbortTransaction, what
// `sluice transactions abort` does per partition), audited as
// "transaction.abort". Operators and admins only. The form carries the
// producer id and epoch the page showed: a transaction that is no longer
// hanging, or now another producer's, is not aborted.

type transactionAborter interface {
	transactionLister
	AbortTransaction(ctx context.Context, t kafkaview.Transaction) ([]kafkaview.Aborted, error)
}

type transactionAbort struct{ kc transactionAborter }

// find is the transaction of the path's id, and whether it is hanging now.
func (h transactionAbort) find(c *fiber.Ctx) (kafkaview.Transaction, time.Time, error) {
	id, err := PathParam(c, "id")
	if err != nil {
		return kafkaview.Transaction{}, time.Time{}, err
	}
	txns, err := h.kc.Transactions(requestCtx(c))
	for _, t := range txns {
		if t.ID == id {
			return t, time.Now(), nil
		}
	}
	if err != nil {
		return kafkaview.Transaction{}, time.Time{}, Unavailable(err)
	}
	return kafkaview.Transaction{}, time.Time{}, NotFound("transactional id "+id, "The Transactions page lists the ones the coordinators know.")
}

func (h transactionAbort) get(c *fiber.Ctx) error {
	t, now, err := h.find(c)
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if !t.Hanging(now) {
		status = fiber.StatusConflict
	}
	return h.render(c, status, templates.TxnAbortView{Txn: t, At: now})
}

func (h transactionAbort) post(c *fiber.Ctx) error {
	t, now, err := h.find(c)
	if err != nil {
		return err
	}
	v := templates.TxnAbortView{Txn: t, At: now}
	if !t.Hanging(now) {
		return h.render(c, fiber.StatusConflict, v)
	}
	if c.FormValue("producer_id") != strconv.FormatInt(t.ProducerID, 10) || c.FormValue("producer_epoch") != strconv.Itoa(int(t.ProducerEpoch)) {
		v.Err = fmt.Sprintf("The transaction now belongs to producer %d epoch %d, not the one this page showed: nothing was aborted. Check it again below.", t.ProducerID, t.ProducerEpoch)
		return h.render(c, fiber.StatusConflict, v)
	}
	res, err := h.kc.AbortTransaction(requestCtx(c), t)
	var done, skipped, failed []string
	for _, a := range res {
		tp := a.Topic + "-" + strconv.Itoa(int(a.Partition))
		switch {
		case a.Err != nil:
			failed = append(failed, tp+": "+a.Err.Error())
		case a.Skip != "":
			skipped = append(skipped, tp)
		default:
			done = append(done, tp)
		}
	}
	if err == nil && len(failed) > 0 {
		err = fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	detail := fmt.Sprintf("producer_id=%d producer_epoch=%d aborted=%s", t.ProducerID, t.ProducerEpoch, strings.Join(done, ","))
	if len(skipped) > 0 {
		detail += " not_open=" + strings.Join(skipped, ",")
	}
	Audit(c, "transaction.abort", t.ID, detail, err)
	if err != nil {
		v.Err = "Not every partition was aborted: " + err.Error()
		if len(done) > 0 {
			v.Err += ". Aborted: " + strings.Join(done, ", ") + "."
		}
		return h.render(c, http.StatusBadGateway, v)
	}
	msg := fmt.Sprintf("Transaction %s aborted: ABORT markers written on %s.", t.ID, strings.Join(done, ", "))
	if len(done) == 0 {
		msg = fmt.Sprintf("Transaction %s had no open records on its partitions: no marker was needed.", t.ID)
	}
	Flash(c, "ok", msg)
	return SeeOther(c, "/transactions")
}

func (h transactionAbort) render(c *fiber.Ctx, status int, v templates.TxnAbortView) error {
	p := PageFor(c, "Abort transaction "+v.Txn.ID, templates.Crumb{Label: "Transactions", Href: "/transactions"})
	return Render(c, status, templates.TxnAbortPage(p, v))
}
