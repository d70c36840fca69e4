package appliance

import (
	"io"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/protocol"
)

// newGroupCoordinator builds the consumer-group coordinator of package
// group for a broker that has started but does not serve yet, with the
// offsets.* and group.* keys of the configuration. The protocol server's
// group handlers call it; the closer is closed after the listener stops.
func newGroupCoordinator(a *App, b *broker.Broker) (protocol.GroupCoordinator, io.Closer, error) {
	cfg := group.NewConfig(&a.cfg.Config)
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	g, err := group.NewForBroker(b, cfg, a.logger)
	if err != nil {
		return nil, nil, err
	}
	return g, g, nil
}
