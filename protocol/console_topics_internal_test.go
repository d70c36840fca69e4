package protocol

import (
	"context"
	"net/netip"
	"testing"

	"github.com/sluice-io/sluice/cluster"
)

// TestBrokerHostAddr: the console's topics take produces only from a
// broker's host: this machine, or an address a registered broker
// advertises; any other client is refused.
func TestBrokerHostAddr(t *testing.T) {
	brokers := []cluster.Broker{{ID: 2, Endpoints: []cluster.Endpoint{{Host: "192.0.2.7", Port: 9092}}}}
	local := func(a netip.Addr) bool { return a.IsLoopback() }
	for remote, want := range map[string]bool{
		"127.0.0.1:5000":       true,  // this machine
		"[::1]:5000":           true,  // this machine
		"192.0.2.7:41000":      true,  // broker 2's host
		"[::ffff:192.0.2.7]:1": true,  // the same, as a mapped address
		"192.0.2.8:41000":      false, // a client elsewhere
		"not-an-address":       false,
	} {
		if got := brokerHostAddr(context.Background(), remote, brokers, local); got != want {
			t.Errorf("%s: %v, want %v", remote, got, want)
		}
	}
}
