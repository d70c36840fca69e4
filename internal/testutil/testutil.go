// Package testutil holds small helpers shared by the tests of every package:
// free loopback ports, bounded polling (CheckFor), a concurrency-safe buffer
// (LockedBuffer), the test tiers (Heavy), and locating Debian-installed tools.
// Nothing here is used outside tests.
package testutil

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// FreePort returns a TCP port on host (default 127.0.0.1) that was free a
// moment ago. The usual race applies: bind it soon.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("free port on %s: %v", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeAddr returns "127.0.0.1:<free port>".
func FreeAddr(t testing.TB) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t, "")))
}

// CheckFor polls cond every interval until it returns nil or timeout passes,
// then fails the test with the last error. It never sleeps unboundedly.
func CheckFor(t testing.TB, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}

// RequireBinary returns the path of an external program the test needs. When
// it is missing the test fails (make test installs these), unless
// SLUICE_SKIP_MISSING_TOOLS=1 is set, in which case it is skipped: handy on a
// laptop without the Debian packages.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skipf("%s not installed", name)
		}
		t.Fatalf("%s not installed (run `make test-deps`): %v", name, err)
	}
	return p
}
