// Package sdnotify tells systemd about the state of the service: READY=1 once
// the broker and the console listen (the unit is Type=notify), STOPPING=1 when
// a clean shutdown begins, and WATCHDOG=1 keep-alives when the unit sets
// WatchdogSec=.
//
// It speaks the sd_notify(3) datagram protocol directly over the unix socket
// named by $NOTIFY_SOCKET, with no dependency. Outside systemd (no
// $NOTIFY_SOCKET) every call is a no-op that returns nil, so the appliance can
// call it unconditionally.
package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// SocketEnv is the environment variable systemd sets to the notification
// socket of a Type=notify service.
const SocketEnv = "NOTIFY_SOCKET"

// Notify sends one state string (newline-separated KEY=VALUE assignments, see
// sd_notify(3)) to the socket named by $NOTIFY_SOCKET. It reports whether a
// message was sent: (false, nil) when $NOTIFY_SOCKET is unset.
func Notify(state string) (sent bool, err error) {
	socket := os.Getenv(SocketEnv)
	if socket == "" {
		return false, nil
	}
	// Abstract sockets are written "@name"; net maps a leading '@' to the NUL
	// byte of the abstract namespace on Linux.
	addr := &net.UnixAddr{Name: socket, Net: "unixgram"}
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return false, fmt.Errorf("sdnotify: dial %s: %w", socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sdnotify: send %q: %w", firstLine(state), err)
	}
	return true, nil
}

// Ready tells systemd the service is up: call it once the Kafka listeners and
// the console accept connections. Until it is sent, `systemctl start` waits.
func Ready() error {
	_, err := Notify("READY=1\nSTATUS=serving")
	return err
}

// Stopping tells systemd a clean shutdown has begun (so `systemctl status`
// shows "deactivating" and no restart is attempted meanwhile).
func Stopping() error {
	_, err := Notify("STOPPING=1\nSTATUS=shutting down")
	return err
}

// Watchdog sends one keep-alive. Send one every WatchdogInterval()/2 while the
// service is healthy; systemd restarts the service when they stop arriving.
func Watchdog() error {
	_, err := Notify("WATCHDOG=1")
	return err
}

// Status sets the free-form status line `systemctl status` shows.
func Status(msg string) error {
	_, err := Notify("STATUS=" + strings.ReplaceAll(msg, "\n", " "))
	return err
}

// WatchdogInterval returns the watchdog timeout systemd enforces on this
// process (WatchdogSec= in the unit), and false when the watchdog is off or
// meant for another process ($WATCHDOG_PID names a different pid).
func WatchdogInterval() (time.Duration, bool) {
	usec := os.Getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil || p != os.Getpid() {
			return 0, false
		}
	}
	return time.Duration(n) * time.Microsecond, true
}

// ErrNoWatchdog is returned by RunWatchdog when the unit has no WatchdogSec=.
var ErrNoWatchdog = errors.New("sdnotify: watchdog not enabled for this process")

// RunWatchdog sends WATCHDOG=1 every half watchdog interval for as long as
// healthy returns nil, until ctx is done. When healthy fails the keep-alive is
// skipped, so a wedged process is restarted by systemd. It blocks; run it in a
// goroutine owned by the caller. It returns ErrNoWatchdog at once when the
// watchdog is off, and ctx.Err() when ctx ends.
func RunWatchdog(ctx context.Context, healthy func() error) error {
	interval, ok := WatchdogInterval()
	if !ok {
		return ErrNoWatchdog
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		if healthy == nil || healthy() == nil {
			if err := Watchdog(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
