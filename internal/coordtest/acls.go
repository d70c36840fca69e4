package coordtest

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// RunACLs runs the contract of cluster.ACLStore (the ACLs a Coordinator
// keeps): create, describe, delete with Kafka's filter semantics,
// persistence across sessions, change signals, and (for stores shared
// live) a peer seeing another's writes.
func RunACLs(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name  string
		multi bool
		fn    func(t *testing.T, s Store)
	}{
		{"CreateDescribeDelete", false, testACLCreateDelete},
		{"Validation", false, testACLValidation},
		{"PersistAndWatch", false, testACLPersist},
		{"PeerSeesACLs", true, testACLPeer},
		{"ConcurrentCreates", true, testACLConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if tc.multi && !s.MultiSession() {
				t.Skip("the store holds one session at a time")
			}
			tc.fn(t, s)
		})
	}
}

func acl(rt security.ResourceType, pt security.PatternType, name, principal, host string, perm security.Permission, op security.Operation) security.ACL {
	return security.ACL{Resource: security.Resource{Type: rt, Name: name, Pattern: pt},
		Entry: security.Entry{Principal: principal, Host: host, Operation: op, Permission: perm}}
}

var (
	aliceRead   = acl(security.ResourceTopic, security.PatternPrefixed, "orders-", "User:alice", "*", security.Allow, security.OpRead)
	aliceGroup  = acl(security.ResourceGroup, security.PatternPrefixed, "orders-", "User:alice", "*", security.Allow, security.OpRead)
	bobWrite    = acl(security.ResourceTopic, security.PatternLiteral, "orders-eu", "User:bob", "*", security.Allow, security.OpWrite)
	denyAll     = acl(security.ResourceTopic, security.PatternLiteral, "*", "User:*", "10.0.0.9", security.Deny, security.OpAll)
	clusterDesc = acl(security.ResourceCluster, security.PatternLiteral, security.ClusterName, "User:ops", "*", security.Allow, security.OpDescribe)
)

func sorted(acls []security.ACL) []security.ACL {
	out := slices.Clone(acls)
	security.SortACLs(out)
	return out
}

func wantACLs(t *testing.T, co cluster.Coordinator, want ...security.ACL) {
	t.Helper()
	got, err := co.ACLs(ctx(t))
	must(t, err)
	if !slices.Equal(got, sorted(want)) {
		t.Fatalf("ACLs:\n got %v\nwant %v", got, sorted(want))
	}
}

func testACLCreateDelete(t *testing.T, s Store) {
	co := s.Open(t)
	cx := ctx(t)
	wantACLs(t, co)
	errs := cluster.CreateACLs(cx, co, []security.ACL{aliceRead, aliceGroup, bobWrite, denyAll, clusterDesc, aliceRead})
	for _, err := range errs {
		must(t, err)
	}
	wantACLs(t, co, aliceRead, aliceGroup, bobWrite, denyAll, clusterDesc)

	// MATCH on orders-eu: the prefixed orders-, the literal and the
	// literal "*" of topics; Any on orders-eu: only the literal of that name.
	name := "orders-eu"
	match := security.Filter{Resource: security.ResourceFilter{Type: security.ResourceTopic, Name: &name, Pattern: security.PatternMatch},
		Entry: security.EntryFilter{Operation: security.OpAny, Permission: security.PermissionAny}}
	any := match
	any.Resource.Pattern = security.PatternAny
	got, err := co.ACLs(cx)
	must(t, err)
	var m []security.ACL
	for _, a := range got {
		if match.Matches(a) {
			m = append(m, a)
		}
	}
	if !slices.Equal(m, sorted([]security.ACL{aliceRead, bobWrite, denyAll})) {
		t.Fatalf("MATCH orders-eu selected %v", m)
	}

	// Delete: the first filter that selects a binding reports it.
	bob := "User:bob"
	byBob := security.MatchAll
	byBob.Entry.Principal = &bob
	deleted, ferrs, err := cluster.DeleteACLs(cx, co, []security.Filter{any, byBob, security.Filter{}})
	must(t, err)
	must(t, ferrs[0])
	must(t, ferrs[1])
	if ferrs[2] == nil {
		t.Fatal("an all-unknown filter was accepted")
	}
	if len(deleted[0]) != 1 || deleted[0][0].ACL != bobWrite || deleted[0][0].Err != nil || len(deleted[1]) != 0 {
		t.Fatalf("deleted %v", deleted)
	}
	wantACLs(t, co, aliceRead, aliceGroup, denyAll, clusterDesc)

	// Deleting every entry of a pattern removes the pattern.
	deleted, _, err = cluster.DeleteACLs(cx, co, []security.Filter{security.MatchAll})
	must(t, err)
	if len(deleted[0]) != 4 {
		t.Fatalf("MatchAll deleted %v", deleted[0])
	}
	wantACLs(t, co)
}

func testACLValidation(t *testing.T, s Store) {
	co := s.Open(t)
	bad := []security.ACL{
		acl(security.ResourceCluster, security.PatternLiteral, "other", "User:a", "*", security.Allow, security.OpAlter),
		acl(security.ResourceTopic, security.PatternLiteral, "", "User:a", "*", security.Allow, security.OpRead),
		acl(security.ResourceTopic, security.PatternLiteral, "a/b", "User:a", "*", security.Allow, security.OpRead),
		acl(security.ResourceTopic, security.PatternMatch, "a", "User:a", "*", security.Allow, security.OpRead),
		acl(security.ResourceTopic, security.PatternLiteral, "a", "alice", "*", security.Allow, security.OpRead),
		acl(security.ResourceTopic, security.PatternLiteral, "a", "User:a", "*", security.PermissionAny, security.OpRead),
	}
	for i, err := range cluster.CreateACLs(ctx(t), co, append(bad, aliceRead)) {
		if i < len(bad) && err == nil {
			t.Errorf("%v accepted", bad[i])
		}
		if i == len(bad) {
			must(t, err)
		}
	}
	wantACLs(t, co, aliceRead)
}

func testACLPersist(t *testing.T, s Store) {
	co := s.Open(t)
	cx := ctx(t)
	ch := co.WatchACLs(cx)
	for _, err := range cluster.CreateACLs(cx, co, []security.ACL{aliceRead, clusterDesc}) {
		must(t, err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no ACL change signal")
	}
	must(t, co.Close())
	co = s.Open(t)
	wantACLs(t, co, aliceRead, clusterDesc)
}

func testACLPeer(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	wantACLs(t, b) // b follows from here
	ch := b.WatchACLs(cx)
	for _, err := range cluster.CreateACLs(cx, a, []security.ACL{aliceRead, bobWrite}) {
		must(t, err)
	}
	deadline := time.After(10 * time.Second)
	for {
		got, err := b.ACLs(cx)
		must(t, err)
		if slices.Equal(got, sorted([]security.ACL{aliceRead, bobWrite})) {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the peer sees %v", got)
		}
	}
	_, _, err := cluster.DeleteACLs(cx, a, []security.Filter{security.MatchAll})
	must(t, err)
	deadline = time.After(10 * time.Second)
	for {
		got, err := b.ACLs(cx)
		must(t, err)
		if len(got) == 0 {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the peer still sees %v", got)
		}
	}
}

// testACLConcurrent: two sessions adding entries to the same pattern at
// once lose none (the compare-and-set retries).
func testACLConcurrent(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	var want []security.ACL
	done := make(chan error, 2)
	for i, co := range []cluster.Coordinator{a, b} {
		var mine []security.ACL
		for j := range 10 {
			p := "User:u" + string(rune('a'+i)) + string(rune('0'+j))
			mine = append(mine, acl(security.ResourceTopic, security.PatternLiteral, "shared", p, "*", security.Allow, security.OpRead))
		}
		want = append(want, mine...)
		go func() {
			for _, x := range mine {
				if err := cluster.CreateACLs(cx, co, []security.ACL{x})[0]; err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	must(t, <-done)
	must(t, <-done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := a.ACLs(cx)
		must(t, err)
		if slices.Equal(got, sorted(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after concurrent creates: %d bindings, want %d", len(got), len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
