package appliance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/record"
)

// TestConnectionAndDecompressionKeys: the connection limits and
// message.decompressed.max.bytes load with their defaults, are validated
// with errors naming the key, and reach the protocol server's config with
// the host names of the overrides resolved.
func TestConnectionAndDecompressionKeys(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ConnectionsMaxIdleMs != 600000 || c.SocketRequestReadTimeoutMs != 30000 || c.MaxConnections != protocol.DefaultMaxConnections ||
		c.MaxConnectionsPerIP != 2147483647 || len(c.MaxConnectionsPerIPOverrides) != 0 ||
		c.QueuedMaxRequestBytes != protocol.DefaultQueuedMaxRequestBytes || c.MessageDecompressedMaxBytes != record.DefaultMaxDecompressedBatchBytes {
		t.Fatalf("defaults: %+v", c)
	}
	var hand Config
	hand.EnsureDefaults()
	if hand.MaxConnections != c.MaxConnections || hand.QueuedMaxRequestBytes != c.QueuedMaxRequestBytes ||
		hand.MessageDecompressedMaxBytes != c.MessageDecompressedMaxBytes || hand.ConnectionsMaxIdleMs != c.ConnectionsMaxIdleMs {
		t.Fatalf("EnsureDefaults: %+v", hand)
	}

	c, err = Load("", []string{
		"connections.max.idle.ms=-1",
		"socket.request.read.timeout.ms=5000",
		"max.connections=100",
		"max.connections.per.ip=0",
		"max.connections.per.ip.overrides=127.0.0.1:7, [::1]:3 ,localhost:5",
		"queued.max.request.bytes=-1",
		"message.decompressed.max.bytes=1048576",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MaxConnectionsPerIPOverrides; len(got) != 3 || got["127.0.0.1"] != 7 || got["::1"] != 3 || got["localhost"] != 5 {
		t.Fatalf("overrides %v", got)
	}
	var pc protocol.Config
	if err := connectionLimits(context.Background(), c, &pc); err != nil {
		t.Fatal(err)
	}
	if pc.ConnectionsMaxIdle >= 0 || pc.RequestReadTimeout != 5*time.Second || pc.MaxConnections != 100 || pc.MaxConnectionsPerIP != 0 || pc.QueuedMaxRequestBytes != -1 {
		t.Fatalf("protocol config %+v", pc)
	}
	// localhost resolves to 127.0.0.1 (and perhaps ::1), taking its limit.
	if pc.MaxConnectionsPerIPOverrides["127.0.0.1"] != 5 && pc.MaxConnectionsPerIPOverrides["127.0.0.1"] != 7 || len(pc.MaxConnectionsPerIPOverrides) < 2 {
		t.Fatalf("resolved overrides %v", pc.MaxConnectionsPerIPOverrides)
	}
	if _, err := protocol.Bind(protocol.Config{Listeners: []protocol.Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"}},
		MaxConnectionsPerIPOverrides: pc.MaxConnectionsPerIPOverrides}); err != nil {
		t.Fatalf("the server refuses the resolved overrides: %v", err)
	}
	c.MaxConnectionsPerIPOverrides = map[string]int{"no-such-host.invalid": 1}
	if err := connectionLimits(context.Background(), c, &pc); err == nil || !strings.Contains(err.Error(), "max.connections.per.ip.overrides") {
		t.Fatalf("unresolvable host: %v", err)
	}

	for _, bad := range []string{
		"connections.max.idle.ms=0", "socket.request.read.timeout.ms=-2", "max.connections=0",
		"max.connections.per.ip=-1", "max.connections.per.ip=0", "max.connections.per.ip.overrides=host",
		"max.connections.per.ip.overrides=host:-1", "max.connections.per.ip.overrides=:3",
		"queued.max.request.bytes=1000", "message.decompressed.max.bytes=0", "message.decompressed.max.bytes=268435457",
	} {
		key, _, _ := strings.Cut(bad, "=")
		if _, err := Load("", []string{bad}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v, want one naming %s", bad, err, key)
		}
	}
}
