package zkcoord

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/coordtest"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// One ZooKeeper server for the package; every test works in its own chroot.
var (
	zkServer *zktest.Server
	chroots  atomic.Int64
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// No ZooKeeper in the short tier: the tests that need it call
		// testutil.Heavy and are skipped; the pure ones run.
		os.Exit(m.Run())
	}
	if err := zktest.Available(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			fmt.Println("skipping zkcoord tests:", err)
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "%v (run `make test-deps`)\n", err)
		os.Exit(1)
	}
	s, err := zktest.StartServer(zktest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	zkServer = s
	code := m.Run()
	s.Close()
	os.Exit(code)
}

// newChroot returns a fresh chroot path.
func newChroot() string { return fmt.Sprintf("/test%d", chroots.Add(1)) }

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("ZKCOORD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// open opens a coordinator on addr+chroot with a short session timeout,
// closed with the test.
func open(t testing.TB, addr, chroot string, mod ...func(*Config)) *Coordinator {
	t.Helper()
	// 5 s: short, yet long enough that a session does not expire because
	// the machine is busy (tests that want expiry set their own).
	cfg := Config{Connect: addr + chroot, SessionTimeout: 5 * time.Second, Logger: testLogger(t)}
	for _, m := range mod {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn is a plain ZooKeeper client for looking at znodes directly.
func rawConn(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(discardZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.Now().Add(10 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatal("raw zookeeper client: no session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return conn
}

type discardZK struct{}

func (discardZK) Printf(string, ...any) {}

type zkStore struct{ chroot string }

func (s zkStore) Open(t *testing.T) cluster.Coordinator { return open(t, zkServer.Addr(), s.chroot) }
func (zkStore) MultiSession() bool                      { return true }

// TestConformance runs the Coordinator contract shared with the standalone
// coordinator.
func TestConformance(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	coordtest.Run(t, func(t *testing.T) coordtest.Store { return zkStore{newChroot()} })
}
