package appliance

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/broker"
)

// served reports whether the listener at addr admits a new connection: an
// ApiVersions v0 round trip is answered (true), or the server closes the
// connection at accept (false). The connection stays open (closed at
// cleanup) when admitted, so that it counts against the limits.
func served(t *testing.T, addr string) bool {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	// size, api key 18 (ApiVersions), version 0, correlation id 7, client id "t".
	req := []byte{0, 0, 0, 11, 0, 18, 0, 0, 0, 0, 0, 7, 0, 1, 't'}
	if _, err := nc.Write(req); err != nil {
		return false // reset before the write
	}
	br := bufio.NewReader(nc)
	var hdr [8]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("neither answered nor closed within 10 s")
		}
		return false
	}
	if id := binary.BigEndian.Uint32(hdr[4:]); id != 7 {
		t.Fatalf("correlation id %d", id)
	}
	nc.SetDeadline(time.Time{})
	return true
}

// TestDynamicConnectionLimits: max.connections.per.ip and max.connections
// set as dynamic broker configs (the cluster default, then the broker's
// own) refuse the next connection at once, without a restart, while the
// connections open stay served; removing them admits connections again.
func TestDynamicConnectionLimits(t *testing.T) {
	app := startAppliance(t, "console.listen=")
	addr := app.BootstrapAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set := func(entity, key, value string) {
		t.Helper()
		op := broker.ConfigOp{Name: key, Value: value}
		if value == "" {
			op.Op = 1
		}
		if err := app.brk.IncrementalAlterBrokerConfigs(ctx, entity, []broker.ConfigOp{op}, false); err != nil {
			t.Fatalf("%s %s=%q: %v", entity, key, value, err)
		}
	}
	for i := range 5 {
		if !served(t, addr) {
			t.Fatalf("connection %d refused before any limit", i)
		}
	}
	id := strconv.Itoa(int(app.BrokerID()))
	for _, tc := range []struct{ entity, key string }{
		{"", "max.connections.per.ip"}, {id, "max.connections.per.ip"}, {"", "max.connections"}, {id, "max.connections"},
	} {
		set(tc.entity, tc.key, "3") // five are open already
		if served(t, addr) {
			t.Fatalf("%s=3 (entity %q): a sixth connection is admitted", tc.key, tc.entity)
		}
		set(tc.entity, tc.key, "")
		if !served(t, addr) {
			t.Fatalf("%s removed (entity %q): a new connection is refused", tc.key, tc.entity)
		}
	}
}
