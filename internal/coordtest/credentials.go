package coordtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/security"
)

// RunCredentials runs the contract of cluster.Credentials: SCRAM
// credentials are stored, described, replaced and deleted, survive a new
// session, and (on a store shared live) a change made through one
// coordinator is seen by another's cache within seconds.
func RunCredentials(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("Credentials", func(t *testing.T) { testCredentials(t, newStore(t)) })
	t.Run("PeerSeesCredentials", func(t *testing.T) {
		s := newStore(t)
		if !s.MultiSession() {
			t.Skip("store is not shared between sessions")
		}
		testPeerCredentials(t, s)
	})
}

func mustCred(t *testing.T, m *security.ScramMechanism, pw string) *security.ScramCredential {
	t.Helper()
	c, err := m.NewCredential(pw, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func testCredentials(t *testing.T, s Store) {
	ctx := context.Background()
	co := s.Open(t)
	if _, ok := co.ScramCredential("alice", "SCRAM-SHA-512"); ok {
		t.Fatal("credential before any was stored")
	}
	errs := co.AlterScramCredentials(ctx, []cluster.ScramChange{
		{User: "alice", Mechanism: "SCRAM-SHA-512", Credential: mustCred(t, security.ScramSHA512, "a1")},
		{User: "alice", Mechanism: "SCRAM-SHA-256", Credential: mustCred(t, security.ScramSHA256, "a2")},
		{User: "bob@corp", Mechanism: "SCRAM-SHA-256", Credential: mustCred(t, security.ScramSHA256, "b")},
		{User: "carol", Mechanism: "SCRAM-SHA-256"}, // delete what does not exist
		{User: "dave", Mechanism: "SCRAM-SHA-1", Credential: mustCred(t, security.ScramSHA256, "d")},
	})
	for i := 0; i < 3; i++ {
		if errs[i] != nil {
			t.Fatalf("change %d: %v", i, errs[i])
		}
	}
	if !errors.Is(errs[3], cluster.ErrNoCredential) || errs[4] == nil {
		t.Fatalf("errors %v", errs)
	}
	c, ok := co.ScramCredential("alice", "SCRAM-SHA-512")
	if !ok || !c.VerifyPassword("a1") {
		t.Fatal("alice's SCRAM-SHA-512 credential")
	}
	all, err := co.UserScramCredentials(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || len(all["alice"]) != 2 || all["alice"][0].Mechanism != "SCRAM-SHA-256" || len(all["bob@corp"]) != 1 {
		t.Fatalf("described %v", all)
	}
	some, _ := co.UserScramCredentials(ctx, []string{"bob@corp", "nobody"})
	if len(some) != 1 || len(some["bob@corp"]) != 1 {
		t.Fatalf("described %v", some)
	}
	// Replace and delete.
	errs = co.AlterScramCredentials(ctx, []cluster.ScramChange{
		{User: "alice", Mechanism: "SCRAM-SHA-512", Credential: mustCred(t, security.ScramSHA512, "new")},
		{User: "alice", Mechanism: "SCRAM-SHA-256"},
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if c, _ := co.ScramCredential("alice", "SCRAM-SHA-512"); !c.VerifyPassword("new") {
		t.Fatal("not replaced")
	}
	if _, ok := co.ScramCredential("alice", "SCRAM-SHA-256"); ok {
		t.Fatal("not deleted")
	}
	co.Close()
	// Persisted.
	co = s.Open(t)
	if c, ok := co.ScramCredential("alice", "SCRAM-SHA-512"); !ok || !c.VerifyPassword("new") {
		t.Fatal("credential lost across sessions")
	}
	if _, ok := co.ScramCredential("bob@corp", "SCRAM-SHA-256"); !ok {
		t.Fatal("bob@corp lost across sessions")
	}
}

func testPeerCredentials(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := s.Open(t), s.Open(t)
	if errs := a.AlterScramCredentials(ctx, []cluster.ScramChange{{User: "eve", Mechanism: "SCRAM-SHA-256", Credential: mustCred(t, security.ScramSHA256, "one")}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if c, ok := b.ScramCredential("eve", "SCRAM-SHA-256"); !ok || !c.VerifyPassword("one") {
			return errors.New("peer does not see the new credential")
		}
		return nil
	})
	if errs := a.AlterScramCredentials(ctx, []cluster.ScramChange{{User: "eve", Mechanism: "SCRAM-SHA-256"}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, ok := b.ScramCredential("eve", "SCRAM-SHA-256"); ok {
			return errors.New("peer still has the deleted credential")
		}
		return nil
	})
}
