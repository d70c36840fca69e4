package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/go-zookeeper/zk"
)

// MetricsEndpointsPath holds one ephemeral znode per host (under the
// chroot), /metrics_endpoints/<broker id>, whose data says where that host
// serves its Prometheus metrics (JSON, written by the appliance), so that
// the console that evaluates alert rules can read every host's.
const MetricsEndpointsPath = "/metrics_endpoints"

// AdvertiseMetrics keeps /metrics_endpoints/<brokerID> with data for as
// long as the returned Leadership is open: the node is ephemeral, made
// again in a new session, and deleted by Close. Each host is the only
// campaigner for its own node.
func (c *Coordinator) AdvertiseMetrics(brokerID int32, data []byte) (*Leadership, error) {
	if err := c.ensurePath(MetricsEndpointsPath); err != nil {
		return nil, err
	}
	return c.Lead(MetricsEndpointsPath+"/"+strconv.Itoa(int(brokerID)), data)
}

// MetricsEndpoints reads every host's advertisement: the data of each node
// under /metrics_endpoints, by broker id, in id order. A node that goes
// away while it is read is left out.
func (c *Coordinator) MetricsEndpoints(ctx context.Context) ([]MetricsEndpoint, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	names, _, err := c.conn.Children(c.path(MetricsEndpointsPath))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zkcoord: list %s: %w", MetricsEndpointsPath, zkErr(err))
	}
	out := make([]MetricsEndpoint, 0, len(names))
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			continue
		}
		b, _, err := c.conn.Get(c.path(MetricsEndpointsPath + "/" + n))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("zkcoord: read %s/%s: %w", MetricsEndpointsPath, n, zkErr(err))
		}
		out = append(out, MetricsEndpoint{BrokerID: int32(id), Data: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerID < out[j].BrokerID })
	return out, nil
}

// MetricsEndpoint is one host's advertisement.
type MetricsEndpoint struct {
	BrokerID int32
	Data     []byte
}
