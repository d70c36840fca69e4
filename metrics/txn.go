package metrics

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// TransactionStats is what a broker's transaction coordinator reports at
// scrape time about the transactional ids it coordinates.
type TransactionStats struct {
	// Open is the transactions open now (Ongoing, or preparing a commit or
	// an abort while the markers are written).
	Open int
	// OldestOpenSeconds is the age of the oldest open transaction, 0 when
	// none is open.
	OldestOpenSeconds float64
	// Committed and Aborted count the transactions completed since the
	// broker started (their markers written); Aborted includes TimedOut,
	// the transactions the coordinator aborted because they outlived
	// their transaction.timeout.ms.
	Committed, Aborted, TimedOut int64
}

// txnCollector reads the coordinators' TransactionStats at scrape time.
type txnCollector struct {
	open, oldest, committed, aborted, timedOut *prometheus.Desc

	mu      sync.Mutex
	sources map[int32]map[int]func() TransactionStats // by broker, by registration
	next    int
}

func (r *Registry) txnFamilies() *txnCollector {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.txns == nil {
		d := func(name, help string) *prometheus.Desc {
			return prometheus.NewDesc(prometheus.BuildFQName(namespace, "broker", name), help, []string{"broker"}, nil)
		}
		r.txns = &txnCollector{
			open:      d("transactions_open", "Transactions open now among those this broker coordinates (Ongoing, or preparing a commit or an abort)."),
			oldest:    d("transaction_oldest_open_seconds", "Age of the oldest open transaction this broker coordinates; 0 when none is open."),
			committed: d("transactions_committed_total", "Transactions this broker's coordinator committed (every marker written)."),
			aborted:   d("transactions_aborted_total", "Transactions this broker's coordinator aborted (every marker written), those aborted for their timeout included."),
			timedOut:  d("transactions_timed_out_total", "Transactions this broker's coordinator aborted because they stayed open longer than their transaction.timeout.ms."),
			sources:   map[int32]map[int]func() TransactionStats{},
		}
		r.reg.MustRegister(r.txns)
	}
	return r.txns
}

// Transactions registers stats, called at every scrape, as the transaction
// coordinator of broker brokerID (sluice_broker_transactions_open,
// sluice_broker_transaction_oldest_open_seconds,
// sluice_broker_transactions_{committed,aborted,timed_out}_total). stats
// runs on the scraping goroutine and must be quick. remove unregisters it
// (call it when the coordinator closes).
func (r *Registry) Transactions(brokerID int32, stats func() TransactionStats) (remove func()) {
	c := r.txnFamilies()
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	if c.sources[brokerID] == nil {
		c.sources[brokerID] = map[int]func() TransactionStats{}
	}
	c.sources[brokerID][id] = stats
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.sources[brokerID], id)
		if len(c.sources[brokerID]) == 0 {
			delete(c.sources, brokerID)
		}
	}
}

func (c *txnCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.oldest, c.committed, c.aborted, c.timedOut} {
		ch <- d
	}
}

// Collect reports each broker once; two coordinators registered for one
// broker id (tests running brokers side by side) add up, the oldest age
// is the larger.
func (c *txnCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ids := make([]int32, 0, len(c.sources))
	fns := map[int32][]func() TransactionStats{}
	for id, m := range c.sources {
		ids = append(ids, id)
		for _, fn := range m {
			fns[id] = append(fns[id], fn)
		}
	}
	c.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		var s TransactionStats
		for _, fn := range fns[id] {
			one := fn()
			s.Open += one.Open
			s.OldestOpenSeconds = max(s.OldestOpenSeconds, one.OldestOpenSeconds)
			s.Committed += one.Committed
			s.Aborted += one.Aborted
			s.TimedOut += one.TimedOut
		}
		b := itoa32(id)
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(s.Open), b)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestOpenSeconds, b)
		ch <- prometheus.MustNewConstMetric(c.committed, prometheus.CounterValue, float64(s.Committed), b)
		ch <- prometheus.MustNewConstMetric(c.aborted, prometheus.CounterValue, float64(s.Aborted), b)
		ch <- prometheus.MustNewConstMetric(c.timedOut, prometheus.CounterValue, float64(s.TimedOut), b)
	}
}
