package appliance

import (
	"fmt"
	"io"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/protocol"
)

// newGroupCoordinator builds the consumer-group coordinator of package
// group for a broker that has started but does not serve yet, fed the
// group.* and offsets.* keys given in the config (the others keep Kafka's
// defaults, which are also this package's defaults). The protocol server's
// group handlers call it; the closer is closed after the listener stops.
func newGroupCoordinator(a *App, b *broker.Broker) (protocol.GroupCoordinator, io.Closer, error) {
	cfg := group.DefaultConfig()
	for _, k := range group.ConfigKeys {
		v, ok := a.cfg.Given[k]
		if !ok {
			continue
		}
		if _, err := cfg.Set(k, v); err != nil {
			return nil, nil, fmt.Errorf("config: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	g, err := group.NewForBroker(b, cfg, a.logger)
	if err != nil {
		return nil, nil, err
	}
	return g, g, nil
}
