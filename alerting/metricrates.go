package alerting

import (
	"sort"
	"strings"
	"time"
)

// Rates of the broker metrics' counters are computed from their change
// between evaluation rounds, as Prometheus's rate() does between scrapes:
//
//   - a host read for the first time has no rate yet (its counters may
//     have grown for days): its subjects read "not measured yet";
//   - a series that is new on a host read before started at 0 after that
//     read (client_golang creates a series at its first increment): its
//     whole value is the increase;
//   - a counter that went down, or a host whose process start time
//     changed, started over: the increase is its value now;
//   - a host whose last read is older than maxRateGap is read as new
//     again, so an old burst is not spread over hours.
//
// Gauges are read as they are, and the reassignment gauge keeps when its
// value last changed, per host.

// maxRateGap is the longest gap between two reads of a host over which a
// rate is computed.
const maxRateGap = 15 * time.Minute

// seriesKey names one series of one host.
type seriesKey struct {
	broker int32
	name   string
	labels string // canonical: sorted k=v pairs joined by \xff
}

func labelsKey(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(0xff)
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
	}
	return b.String()
}

// hostMemo is what the evaluator remembers of a host between rounds.
type hostMemo struct {
	start float64   // process start time at the last read
	at    time.Time // the last successful read
	// series are the host's counters at the last read.
	series map[seriesKey]Sample
}

// progress remembers a gauge's last value and since when it has it.
type progress struct {
	value float64
	since time.Time
}

// metricMemory is the broker metrics' state between rounds. Owned by the
// evaluator (guarded by its mu).
type metricMemory struct {
	hosts map[int32]*hostMemo
	gauge map[seriesKey]progress // reassignment bytes remaining: when each last changed
}

func newMetricMemory() *metricMemory {
	return &metricMemory{hosts: map[int32]*hostMemo{}, gauge: map[seriesKey]progress{}}
}

// hostRound is one host's metrics in one round, with the rates derived.
type hostRound struct {
	broker int32
	addr   string
	err    error // unreadable this round
	// fresh: read for the first time (or after a long gap): counters have
	// no rate yet.
	fresh bool
	// prevSeries are the series keys the host had at its last read, so a
	// failed host's earlier subjects are known.
	prevSeries map[seriesKey]Sample
	series     []seriesRound
}

// seriesRound is one series of a host this round.
type seriesRound struct {
	Sample
	key seriesKey
	// rate is the counter's increase per second since the last read
	// (valid when hasRate).
	rate    float64
	hasRate bool
	// since is, for the reassignment gauge, when its value last changed.
	since time.Time
}

// isCounter reports whether a watched family is a counter (rates) or a
// gauge (values).
func isCounter(name string) bool {
	return name != MetricTxnOldestOpen && name != MetricReassignRemaining
}

// derive computes this round's rates from hosts and, unless readOnly (a
// preview), remembers the values for the next round. Hosts no longer
// reported are forgotten.
func (mm *metricMemory) derive(hosts []HostMetrics, now time.Time, readOnly bool) []hostRound {
	out := make([]hostRound, 0, len(hosts))
	reported := map[int32]bool{}
	for _, h := range hosts {
		reported[h.Broker] = true
		prev := mm.hosts[h.Broker]
		hr := hostRound{broker: h.Broker, addr: h.Addr, err: h.Err}
		if prev != nil {
			hr.prevSeries = prev.series
		}
		if h.Err != nil {
			out = append(out, hr)
			continue
		}
		gap := time.Duration(0)
		if prev != nil {
			gap = now.Sub(prev.at)
		}
		hr.fresh = prev == nil || gap <= 0 || gap > maxRateGap
		restarted := prev != nil && h.Start != 0 && prev.start != 0 && h.Start != prev.start
		memo := &hostMemo{start: h.Start, at: now, series: map[seriesKey]Sample{}}
		for _, s := range h.Samples {
			sr := seriesRound{Sample: s, key: seriesKey{h.Broker, s.Name, labelsKey(s.Labels)}}
			switch {
			case isCounter(s.Name):
				memo.series[sr.key] = s
				if hr.fresh {
					break
				}
				before, had := prev.series[sr.key]
				inc := s.Value - before.Value
				if !had || restarted || s.Value < before.Value {
					inc = s.Value // new since the last read, or started over
				}
				sr.rate, sr.hasRate = max(inc, 0)/gap.Seconds(), true
			case s.Name == MetricReassignRemaining:
				p, ok := mm.gauge[sr.key]
				if !ok || p.value != s.Value {
					p = progress{value: s.Value, since: now}
				}
				sr.since = p.since
				if !readOnly {
					mm.gauge[sr.key] = p
				}
			}
			hr.series = append(hr.series, sr)
		}
		if !readOnly {
			mm.hosts[h.Broker] = memo
			// A reassignment gauge the host no longer has is forgotten.
			for k := range mm.gauge {
				if k.broker != h.Broker {
					continue
				}
				if _, ok := findSeries(hr.series, k); !ok {
					delete(mm.gauge, k)
				}
			}
		}
		out = append(out, hr)
	}
	if !readOnly {
		for id := range mm.hosts {
			if !reported[id] {
				delete(mm.hosts, id)
			}
		}
		for k := range mm.gauge {
			if !reported[k.broker] {
				delete(mm.gauge, k)
			}
		}
	}
	return out
}

func findSeries(ss []seriesRound, k seriesKey) (seriesRound, bool) {
	for _, s := range ss {
		if s.key == k {
			return s, true
		}
	}
	return seriesRound{}, false
}
