package testutil

import dto "github.com/prometheus/client_model/go"

// MetricSum adds up the series of family name whose labels include every
// pair of want (nil: all its series): a counter's or gauge's value, a
// histogram's sample count. ok is false when no series matches.
func MetricSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		default:
			continue
		}
		ok = true
	}
	return sum, ok
}

// ByName indexes gathered families by name, as a parsed scrape is.
func ByName(fams []*dto.MetricFamily) map[string]*dto.MetricFamily {
	m := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		m[f.GetName()] = f
	}
	return m
}
