package appliance

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/sluice-io/sluice/zkcoord"
)

// Console leadership in a cluster: of the consoles of a cluster's hosts,
// the one whose ZooKeeper session holds the ephemeral /console_leader znode
// (under the chroot) does the background work — alert evaluation, lag
// export and history, migration comparisons. The others serve their pages
// and stand by: when the holder's session ends (its process stops, is
// killed and ZooKeeper expires the session, or is cut off), another console
// creates the node and takes over within the session timeout. A console
// cut off from ZooKeeper stops leading at once, since another may have
// taken over. On a single node (no zookeeper.connect) the console always
// leads.

// consoleLeaderNode is the data of /console_leader: who holds it, for
// operators (zkCli.sh get /sluice/console_leader) and logs.
type consoleLeaderNode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Host      string `json:"host"`
	Console   string `json:"console"`
	Timestamp string `json:"timestamp"`
}

// newConsoleLeader builds the leadership of a console that is about to
// start (the broker is up, a.Coordinator() is usable): an ephemeral
// ZooKeeper node in cluster mode, nil (always lead) on a single node.
func newConsoleLeader(a *App) (consoleLeader, error) {
	zc, ok := a.Coordinator().(*zkcoord.Coordinator)
	if !ok {
		return nil, nil // single node: always leads
	}
	host, _ := os.Hostname()
	data, err := json.Marshal(consoleLeaderNode{
		Version:   1,
		BrokerID:  a.BrokerID(),
		Host:      host,
		Console:   a.Config().ConsoleListen,
		Timestamp: fmt.Sprint(time.Now().UnixMilli()),
	})
	if err != nil {
		return nil, err
	}
	l, err := zc.Lead(zkcoord.ConsoleLeaderPath, data)
	if err != nil {
		return nil, err
	}
	// Let the first campaign finish, so that the console's first rounds
	// know whether they lead (it continues in the background otherwise).
	select {
	case <-l.Decided():
	case <-time.After(5 * time.Second):
	}
	return l, nil
}
