package protocol

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// TestRequestBudget: reservations beyond the budget wait for releases, give
// up at their deadline or with their context, and never overdraw it.
func TestRequestBudget(t *testing.T) {
	b := newRequestBudget(100)
	ctx := context.Background()
	if err := b.acquire(ctx, 60, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := b.acquire(ctx, 50, time.Now().Add(50*time.Millisecond)); !errors.Is(err, errBudgetTimeout) {
		t.Fatalf("over the budget: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.acquire(cctx, 50, time.Time{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	got := make(chan error, 2)
	for range 2 {
		go func() { got <- b.acquire(ctx, 50, time.Now().Add(5*time.Second)) }()
	}
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("acquired beyond the budget: %v", err)
	default:
	}
	b.release(60) // both fit now
	for range 2 {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	if a := b.avail.Load(); a != 0 {
		t.Fatalf("available %d, want 0", a)
	}
}

// TestConnGate: max.connections, max.connections.per.ip and the overrides
// (an override of 0 refuses an address; a default of 0 admits only the
// overrides, as in Kafka).
func TestConnGate(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	g := connGate{maxTotal: 3, maxPerIP: 2, overrides: map[netip.Addr]int{b: 0}, perIP: map[netip.Addr]int{}}
	for i, want := range []string{"", "", "max.connections.per.ip"} {
		if got, _ := g.admit(a, true); got != want {
			t.Fatalf("connection %d from a: %q, want %q", i, got, want)
		}
	}
	if got, _ := g.admit(b, true); got != "max.connections.per.ip" {
		t.Fatalf("b (override 0): %q", got)
	}
	if got, _ := g.admit(netip.Addr{}, false); got != "" {
		t.Fatalf("no address: %q", got)
	}
	if got, _ := g.admit(netip.MustParseAddr("10.0.0.3"), true); got != "max.connections" {
		t.Fatalf("fourth connection: %q", got)
	}
	g.leave(a, true)
	g.leave(a, true)
	if g.total != 1 || len(g.perIP) != 0 {
		t.Fatalf("after leaving: total %d, per ip %v", g.total, g.perIP)
	}
	if _, err := parseOverrides(map[string]int{"example.com": 1}); err == nil {
		t.Fatal("a host name reached the server unresolved")
	}
}
