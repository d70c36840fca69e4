package metrics

import (
	"testing"
)

// The transaction families: one series per broker with a coordinator,
// read at scrape time; two coordinators of one broker id add up (the
// oldest age is the larger); a removed coordinator's series go.
func TestTransactionMetrics(t *testing.T) {
	r := New()
	st := TransactionStats{Open: 2, OldestOpenSeconds: 42.5, Committed: 7, Aborted: 3, TimedOut: 1}
	remove1 := r.Transactions(1, func() TransactionStats { return st })
	remove2 := r.Transactions(2, func() TransactionStats { return TransactionStats{} })
	remove2b := r.Transactions(2, func() TransactionStats {
		return TransactionStats{Open: 1, OldestOpenSeconds: 5, Committed: 1}
	})
	fams := scrape(t, r.Handler())
	for name, want := range map[string]float64{
		"sluice_broker_transactions_open":               2,
		"sluice_broker_transaction_oldest_open_seconds": 42.5,
		"sluice_broker_transactions_committed_total":    7,
		"sluice_broker_transactions_aborted_total":      3,
		"sluice_broker_transactions_timed_out_total":    1,
	} {
		if got := value(t, fams, name, map[string]string{"broker": "1"}); got != want {
			t.Errorf("%s{broker=1} = %v, want %v", name, got, want)
		}
	}
	if got := value(t, fams, "sluice_broker_transaction_oldest_open_seconds", map[string]string{"broker": "2"}); got != 5 {
		t.Errorf("oldest on broker 2: %v", got)
	}
	if got := value(t, fams, "sluice_broker_transactions_committed_total", map[string]string{"broker": "2"}); got != 1 {
		t.Errorf("committed on broker 2: %v", got)
	}
	st = TransactionStats{}
	fams = scrape(t, r.Handler())
	if got := value(t, fams, "sluice_broker_transaction_oldest_open_seconds", map[string]string{"broker": "1"}); got != 0 {
		t.Errorf("oldest with none open: %v", got)
	}
	remove1()
	remove2()
	remove2b()
	fams = scrape(t, r.Handler())
	if f := fams["sluice_broker_transaction_oldest_open_seconds"]; f != nil && len(f.Metric) > 0 {
		t.Fatalf("series after every coordinator left: %v", f)
	}
}
