package quota

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
)

func mutationManager(rate float64) *Manager {
	m := New(Config{MutationWindows: 11, MutationWindowSize: time.Second})
	m.Set(map[cluster.QuotaEntity]map[string]float64{{ClientID: "c"}: {cluster.QuotaControllerMutationRate: rate}})
	return m
}

// TestMutationStrict: a full bucket holds 11 s of the quota; the topic
// that takes it below zero is accepted, the next ones are refused with
// the time the refill takes to bring it back to zero, and the refill
// admits topics again.
func TestMutationStrict(t *testing.T) {
	m := mutationManager(2) // a bucket of 22 partitions
	now := time.Unix(1_700_000_000, 0)
	q := m.MutationQuota("ANONYMOUS", "c", true)
	if !q.Strict() {
		t.Fatal("not strict")
	}
	for i := range 2 {
		if !q.Record(10, now) {
			t.Fatalf("topic %d of 10 partitions refused with a full bucket", i)
		}
	}
	if th := q.Throttle(now); th != 0 {
		t.Fatalf("throttled %v within the bucket", th)
	}
	// 2 tokens left: a topic of 10 goes through, leaving a debt of 8.
	if !q.Record(10, now) {
		t.Fatal("the topic that empties the bucket was refused")
	}
	if tok, ok := m.Tokens("ANONYMOUS", "c", now); !ok || tok != -8 {
		t.Fatalf("tokens %v %v, want -8", tok, ok)
	}
	if th := q.Throttle(now); th != 0 {
		t.Fatalf("strict quota throttled %v before refusing anything", th)
	}
	// Below zero: refused, nothing taken, throttle = 8 / 2 per second.
	if q.Record(1, now) {
		t.Fatal("a topic was accepted with the bucket below zero")
	}
	if th := q.Throttle(now); th != 4*time.Second {
		t.Fatalf("throttle %v, want 4s", th)
	}
	if th := q.Throttle(now.Add(1500 * time.Millisecond)); th != 2500*time.Millisecond {
		t.Fatalf("throttle 1.5 s later %v, want 2.5s", th)
	}
	if tok, _ := m.Tokens("ANONYMOUS", "c", now); tok != -8 {
		t.Fatalf("a refused topic took tokens: %v", tok)
	}
	// Another request of the same client id shares the bucket.
	q2 := m.MutationQuota("other-user", "c", true)
	if q2.Record(1, now.Add(3*time.Second)) {
		t.Fatal("3 s later (2 tokens short) a topic was accepted")
	}
	if th := q2.Throttle(now.Add(3 * time.Second)); th != time.Second {
		t.Fatalf("throttle %v, want 1s", th)
	}
	// Once refilled to zero, topics go through again.
	if !q2.Record(1, now.Add(4*time.Second)) {
		t.Fatal("refused after the refill")
	}
	// The bucket fills up to 22, no more.
	if tok, _ := m.Tokens("ANONYMOUS", "c", now.Add(time.Hour)); tok != 22 {
		t.Fatalf("tokens after an hour %v, want the burst 22", tok)
	}
	// Other client ids have no quota.
	if q := m.MutationQuota("ANONYMOUS", "x", true); q != nil || !q.Record(1e9, now) || q.Throttle(now) != 0 {
		t.Fatal("a client without a quota got one")
	}
}

// TestMutationPermissive: an old request version is never refused; the
// bucket goes into debt and the request is throttled for it.
func TestMutationPermissive(t *testing.T) {
	m := mutationManager(10) // a bucket of 110
	now := time.Unix(1_700_000_000, 0)
	q := m.MutationQuota("u", "c", false)
	if q.Strict() {
		t.Fatal("strict")
	}
	if !q.Record(100, now) || q.Throttle(now) != 0 {
		t.Fatal("within the bucket: refused or throttled")
	}
	if !q.Record(30, now) {
		t.Fatal("permissive quota refused")
	}
	if th := q.Throttle(now); th != 2*time.Second { // 20 short at 10/s
		t.Fatalf("throttle %v, want 2s", th)
	}
	if !q.Record(50, now) {
		t.Fatal("permissive quota refused")
	}
	if th := q.Throttle(now); th != 7*time.Second { // 70 short
		t.Fatalf("throttle %v, want 7s", th)
	}
	// The debt is the client's: a strict request now is refused.
	if m.MutationQuota("u", "c", true).Record(1, now.Add(time.Second)) {
		t.Fatal("strict request accepted while in debt")
	}
	// Manager.Record is the permissive path.
	// (recording nothing in debt is throttled, as Kafka's Sensor.record
	// checks the quota after recording)
	if th := m.Record(Mutation, "u", "c", 0, now.Add(time.Second)); th != 6*time.Second {
		t.Fatalf("recording nothing in a debt of 60: throttle %v, want 6s", th)
	}
	if th := m.Record(Mutation, "u", "c", 10, now.Add(time.Second)); th != 7*time.Second {
		t.Fatalf("throttle %v, want 7s (60 short, then 10 more)", th)
	}
	if m.Rate(Mutation, "u", "c", now) != 0 || m.Sensors() != 0 {
		t.Fatal("the mutation quota made a rate sensor")
	}
}

// TestMutationQuotaEntities: the bucket is per quota id (a user quota is
// shared by the user's client ids), follows a quota change, and only
// controller_mutation_rate enables it.
func TestMutationQuotaEntities(t *testing.T) {
	m := New(Config{})
	now := time.Unix(1_700_000_000, 0)
	m.Set(map[cluster.QuotaEntity]map[string]float64{{User: "alice"}: {cluster.QuotaProducerByteRate: 1}})
	if m.Enabled(Mutation) || m.MutationQuota("alice", "a", true) != nil {
		t.Fatal("a byte-rate quota enabled the mutation quota")
	}
	m.Set(map[cluster.QuotaEntity]map[string]float64{{User: "alice"}: {cluster.QuotaControllerMutationRate: 1}})
	if !m.Enabled(Mutation) || !m.Active() {
		t.Fatal("controller_mutation_rate not enabled")
	}
	m.MutationQuota("alice", "a", true).Record(12, now) // 11 in the bucket
	if m.MutationQuota("alice", "b", true).Record(1, now) {
		t.Fatal("the user's other client id has its own bucket")
	}
	// A higher quota: a bigger bucket and a faster refill from the debt.
	m.Set(map[cluster.QuotaEntity]map[string]float64{{User: "alice"}: {cluster.QuotaControllerMutationRate: 100}})
	if !m.MutationQuota("alice", "b", true).Record(1, now.Add(100*time.Millisecond)) {
		t.Fatal("refused after the quota was raised")
	}
	if tok, _ := m.Tokens("alice", "z", now.Add(time.Hour)); tok != 1100 {
		t.Fatalf("tokens %v, want 1100", tok)
	}
	// Removing the quota admits everything.
	q := m.MutationQuota("alice", "b", true)
	m.Set(nil)
	if !q.Record(1e9, now) || m.MutationQuota("alice", "b", true) != nil {
		t.Fatal("a removed quota still applies")
	}
}

// TestBucketsSwept: buckets that have refilled are dropped, so invented
// client ids do not accumulate; one in debt is kept.
func TestBucketsSwept(t *testing.T) {
	m := New(Config{MutationWindows: 2, MutationWindowSize: time.Second})
	m.Set(map[cluster.QuotaEntity]map[string]float64{{ClientID: d}: {cluster.QuotaControllerMutationRate: 1}})
	start := time.Unix(1_700_000_000, 0)
	for i := range 1000 {
		m.MutationQuota("u", "c"+time.Duration(i).String(), true).Record(1, start)
	}
	m.MutationQuota("u", "debtor", false).Record(1000, start)
	if n := m.Buckets(); n != 1001 {
		t.Fatalf("%d buckets, want 1001", n)
	}
	m.MutationQuota("u", "late", true).Record(1, start.Add(3*time.Second))
	if n := m.Buckets(); n != 2 {
		t.Fatalf("%d buckets after the refill, want 2 (the debtor's and late's)", n)
	}
	if tok, _ := m.Tokens("u", "debtor", start.Add(3*time.Second)); tok != -995 {
		t.Fatalf("debtor's tokens %v, want -995", tok)
	}
}

func TestStrictMutations(t *testing.T) {
	for _, c := range []struct {
		key, version int16
		strict       bool
	}{
		{19, 5, false}, {19, 6, true}, {19, 7, true},
		{20, 4, false}, {20, 5, true},
		{37, 2, false}, {37, 3, true},
		{3, 12, false}, // Metadata's auto-creation: permissive
	} {
		if got := StrictMutations(c.key, c.version); got != c.strict {
			t.Errorf("key %d v%d: strict %v, want %v", c.key, c.version, got, c.strict)
		}
	}
}
