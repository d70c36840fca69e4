package quota

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
)

const d = cluster.DefaultQuotaName

// TestResolvePrecedence walks Kafka's eight levels: each quota entity
// wins over those below it, and the quota id follows the level's shape.
func TestResolvePrecedence(t *testing.T) {
	levels := []struct {
		e                  cluster.QuotaEntity
		idUser, idClientID string
	}{
		{cluster.QuotaEntity{User: "alice", ClientID: "app"}, "alice", "app"},
		{cluster.QuotaEntity{User: "alice", ClientID: d}, "alice", "app"},
		{cluster.QuotaEntity{User: "alice"}, "alice", ""},
		{cluster.QuotaEntity{User: d, ClientID: "app"}, "alice", "app"},
		{cluster.QuotaEntity{User: d, ClientID: d}, "alice", "app"},
		{cluster.QuotaEntity{User: d}, "alice", ""},
		{cluster.QuotaEntity{ClientID: "app"}, "", "app"},
		{cluster.QuotaEntity{ClientID: d}, "", "app"},
	}
	m := New(Config{})
	for i := range levels {
		// Levels i.. configured: level i wins.
		q := map[cluster.QuotaEntity]map[string]float64{}
		for j := i; j < len(levels); j++ {
			q[levels[j].e] = map[string]float64{cluster.QuotaProducerByteRate: float64(1000 + j)}
		}
		// Noise that must not match.
		q[cluster.QuotaEntity{User: "bob", ClientID: "app"}] = map[string]float64{cluster.QuotaProducerByteRate: 1}
		q[cluster.QuotaEntity{ClientID: "other"}] = map[string]float64{cluster.QuotaProducerByteRate: 1}
		m.Set(q)
		limit, u, c, ok := m.Resolve(Produce, "alice", "app")
		if !ok || limit != float64(1000+i) || u != levels[i].idUser || c != levels[i].idClientID {
			t.Errorf("level %d (%s): got %v %q %q %v, want %d %q %q", i+1, levels[i].e, limit, u, c, ok, 1000+i, levels[i].idUser, levels[i].idClientID)
		}
		if _, _, _, ok := m.Resolve(Fetch, "alice", "app"); ok {
			t.Errorf("level %d: a fetch quota resolved from producer_byte_rate", i+1)
		}
	}
	m.Set(nil)
	if m.Active() || m.Enabled(Produce) {
		t.Fatal("no quotas, yet enabled")
	}
}

// TestRateAndThrottle checks the rate over Kafka's windows and the
// throttle time: at twice the quota over a full window, the throttle is
// the window's length.
func TestRateAndThrottle(t *testing.T) {
	m := New(Config{Windows: 11, WindowSize: time.Second})
	m.Set(map[cluster.QuotaEntity]map[string]float64{{ClientID: "c"}: {cluster.QuotaProducerByteRate: 1000}})
	start := time.Unix(1_700_000_000, 0)
	// 900 bytes a second for 20 s: within the quota, never throttled.
	for i := 0; i < 200; i++ {
		if th := m.Record(Produce, "ANONYMOUS", "c", 90, start.Add(time.Duration(i)*100*time.Millisecond)); th != 0 {
			t.Fatalf("at quota, throttled %v at step %d", th, i)
		}
	}
	now := start.Add(20 * time.Second)
	if r := m.Rate(Produce, "ANONYMOUS", "c", now); r < 850 || r > 950 {
		t.Fatalf("rate %v, want about 900", r)
	}
	// A burst of 11000 bytes doubles the rate over the ~11 s window: the
	// throttle brings it back, about one window (11 s) long.
	th := m.Record(Produce, "ANONYMOUS", "c", 12000, now)
	if th < 9*time.Second || th > 13*time.Second {
		t.Fatalf("throttle %v, want about 11s", th)
	}
	// Another client id has no quota.
	if th := m.Record(Produce, "ANONYMOUS", "x", 1e9, now); th != 0 {
		t.Fatalf("unquoted client throttled %v", th)
	}
	// A first burst is measured over quota.window.num-1 windows (10 s):
	// 10 s worth of quota passes, more is throttled.
	m2 := New(Config{Windows: 11, WindowSize: time.Second})
	m2.Set(map[cluster.QuotaEntity]map[string]float64{{ClientID: "c"}: {cluster.QuotaProducerByteRate: 1000}})
	if th := m2.Record(Produce, "u", "c", 10000, start); th != 0 {
		t.Fatalf("10 s worth at once throttled %v", th)
	}
	if th := m2.Record(Produce, "u", "c", 10000, start); th != 10*time.Second {
		t.Fatalf("20 s worth at once: throttle %v, want 10s", th)
	}
	// The request quota's throttle is bounded by one window.
	m2.Set(map[cluster.QuotaEntity]map[string]float64{{ClientID: "c"}: {cluster.QuotaRequestPercentage: 10}})
	if th := m2.Record(Request, "u", "c", NanosToPercent(int64(50*time.Second)), start); th != time.Second {
		t.Fatalf("request throttle %v, want the 1s bound", th)
	}
}

// TestSensorsSwept: rates of client ids that went quiet for the whole
// measured window are dropped, so invented client ids do not accumulate.
func TestSensorsSwept(t *testing.T) {
	m := New(Config{Windows: 2, WindowSize: time.Second})
	m.Set(map[cluster.QuotaEntity]map[string]float64{{ClientID: d}: {cluster.QuotaProducerByteRate: 1000}})
	start := time.Unix(1_700_000_000, 0)
	for i := 0; i < 1000; i++ {
		m.Record(Produce, "u", string(rune('a'+i%26))+time.Duration(i).String(), 1, start)
	}
	if n := m.Sensors(); n != 1000 {
		t.Fatalf("%d sensors, want 1000", n)
	}
	m.Record(Produce, "u", "late", 1, start.Add(3*time.Second))
	if n := m.Sensors(); n != 1 {
		t.Fatalf("%d sensors after the window passed, want 1", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	m := New(Config{})
	m.Set(map[cluster.QuotaEntity]map[string]float64{{ClientID: d}: {cluster.QuotaProducerByteRate: 1e12}})
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		m.Record(Produce, "ANONYMOUS", "app", 1000, now)
	}
}

func TestMaxValueInWindow(t *testing.T) {
	m := New(Config{Windows: 11, WindowSize: time.Second})
	m.Set(map[cluster.QuotaEntity]map[string]float64{{User: "u"}: {cluster.QuotaConsumerByteRate: 1000}})
	if v, ok := m.MaxValueInWindow(Fetch, "u", "c"); !ok || v != 10000 {
		t.Fatalf("%v %v, want 10000 (ten windows of 1000 B/s)", v, ok)
	}
	if _, ok := m.MaxValueInWindow(Fetch, "other", "c"); ok {
		t.Fatal("a client without a quota has a bound")
	}
}
