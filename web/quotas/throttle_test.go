package quotas

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestThrottledLately: a client's throttle time since the previous
// reading, which is replaced only once it is minWindow old.
func TestThrottledLately(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_client_throttle_seconds_total"}, []string{"broker", "quota_type", "user", "client_id"})
	reg.MustRegister(c)
	h := handler{metrics: reg, last: &reading{}}
	t0 := time.Unix(1000, 0)
	c.WithLabelValues("1", "produce", "", "hog").Add(2)
	c.WithLabelValues("2", "produce", "", "hog").Add(1) // summed over brokers
	c.WithLabelValues("1", "fetch", "alice", "app").Add(4)
	got := h.throttled(t0)
	if len(got) != 2 || got[0].ClientID != "app" || got[0].Seconds != 4 || got[1].Seconds != 3 || got[0].Window != 0 {
		t.Fatalf("first reading %+v", got)
	}
	c.WithLabelValues("1", "produce", "", "hog").Add(1.5)
	got = h.throttled(t0.Add(5 * time.Second)) // too soon to replace the reading
	if got[0].ClientID != "hog" || got[0].Recent != 1.5 || got[0].Window != 5*time.Second || got[1].Recent != 0 {
		t.Fatalf("second reading %+v", got)
	}
	got = h.throttled(t0.Add(12 * time.Second)) // replaces it
	if got[0].Recent != 1.5 || got[0].Window != 12*time.Second {
		t.Fatalf("third reading %+v", got)
	}
	got = h.throttled(t0.Add(30 * time.Second))
	if got[0].Recent != 0 || got[0].Window != 18*time.Second {
		t.Fatalf("fourth reading %+v", got)
	}
}
