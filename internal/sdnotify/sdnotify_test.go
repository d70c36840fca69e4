package sdnotify

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen opens a unixgram socket like systemd's and points $NOTIFY_SOCKET at it.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv(SocketEnv, name)
	return conn
}

func read(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func TestMessages(t *testing.T) {
	for _, socket := range []string{
		filepath.Join(t.TempDir(), "notify"),
		"@sluice-sdnotify-test-" + strconv.Itoa(os.Getpid()), // abstract namespace
	} {
		conn := listen(t, socket)
		for _, tc := range []struct {
			send func() error
			want string
		}{
			{Ready, "READY=1\nSTATUS=serving"},
			{Stopping, "STOPPING=1\nSTATUS=shutting down"},
			{Watchdog, "WATCHDOG=1"},
			{func() error { return Status("two\nlines") }, "STATUS=two lines"},
		} {
			if err := tc.send(); err != nil {
				t.Fatalf("%s: %v", socket, err)
			}
			if got := read(t, conn); got != tc.want {
				t.Fatalf("%s: got %q, want %q", socket, got, tc.want)
			}
		}
	}
}

func TestNoSocketIsNoop(t *testing.T) {
	t.Setenv(SocketEnv, "")
	sent, err := Notify("READY=1")
	if sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: sent=%v err=%v", sent, err)
	}
	if err := Ready(); err != nil {
		t.Fatal(err)
	}
}

func TestMissingSocketIsAnError(t *testing.T) {
	t.Setenv(SocketEnv, filepath.Join(t.TempDir(), "absent"))
	if err := Ready(); err == nil {
		t.Fatal("expected an error for a socket nobody listens on")
	}
}

func TestWatchdogInterval(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
		ok        bool
	}{
		{"", "", 0, false},
		{"30000000", "", 30 * time.Second, true},
		{"30000000", pid, 30 * time.Second, true},
		{"30000000", "1", 0, false}, // meant for another process
		{"junk", "", 0, false},
		{"0", "", 0, false},
	} {
		t.Setenv("WATCHDOG_USEC", tc.usec)
		t.Setenv("WATCHDOG_PID", tc.pid)
		got, ok := WatchdogInterval()
		if got != tc.want || ok != tc.ok {
			t.Errorf("USEC=%q PID=%q: got %v %v, want %v %v", tc.usec, tc.pid, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRunWatchdog(t *testing.T) {
	conn := listen(t, filepath.Join(t.TempDir(), "notify"))

	t.Setenv("WATCHDOG_USEC", "")
	if err := RunWatchdog(context.Background(), nil); !errors.Is(err, ErrNoWatchdog) {
		t.Fatalf("without WATCHDOG_USEC: %v", err)
	}

	t.Setenv("WATCHDOG_USEC", "40000") // 40ms: pings every 20ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunWatchdog(ctx, func() error { return nil }) }()
	for i := 0; i < 3; i++ {
		if got := read(t, conn); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: %q", i, got)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunWatchdog returned %v", err)
	}

	// Drain pings sent between the last read and the cancel.
	for {
		conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := conn.Read(make([]byte, 64)); err != nil {
			break
		}
	}

	// An unhealthy process sends no keep-alive.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := RunWatchdog(ctx, func() error { return errors.New("wedged") }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunWatchdog returned %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Fatalf("unhealthy process sent a keep-alive (%d bytes)", n)
	}
}
