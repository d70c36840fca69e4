package zktest

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestServerRestartKeepsData starts ZooKeeper, writes a znode, restarts the
// server on the same port and data directory and reads the znode back; a
// client's session outlives the restart.
func TestServerRestartKeepsData(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	s := Start(t, Options{})
	// The session timeout outlasts a restart on a loaded machine (the JVM
	// start and snapshot load took over 4 s while the whole suite ran).
	conn, _, err := zk.Connect([]string{s.Addr()}, 20*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Create("/x", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := conn.SessionID()
	s.Stop()
	if reply, err := FourLetter(s.Addr(), "ruok", 500*time.Millisecond); err == nil {
		t.Fatalf("stopped server answered %q", reply)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _, err := conn.Get("/x")
		if err == nil {
			if string(b) != "hello" {
				t.Fatalf("got %q", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("znode not readable after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if conn.SessionID() != sid {
		t.Fatalf("session changed across a short restart: %x -> %x", sid, conn.SessionID())
	}
}

// TestProxyBlockExpiresSession cuts a client off through the proxy for longer
// than its session timeout: on reconnect the client gets a new session.
func TestProxyBlockExpiresSession(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	conn, _, err := zk.Connect([]string{p.Addr()}, time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Create("/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := conn.SessionID()
	p.Block()
	time.Sleep(2500 * time.Millisecond)
	p.Unblock()
	deadline := time.Now().Add(20 * time.Second)
	for conn.SessionID() == sid || conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatal("no new session after the block")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ok, _, err := conn.Exists("/eph"); err != nil || ok {
		t.Fatalf("ephemeral node of the expired session: exists=%v err=%v", ok, err)
	}
}
