package group_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/internal/testcluster"
)

// offsetsPartitions is offsets.topic.num.partitions of the test broker.
const offsetsPartitions = 10

// groupSettings are the coordinator settings of the tests: sessions may be
// as short as 1.5s so a killed member is noticed quickly, and the first
// rebalance of a group waits 200ms (not 3s).
var groupSettings = []string{
	"offsets.topic.num.partitions=10",
	"group.min.session.timeout.ms=1500",
	"group.initial.rebalance.delay.ms=200",
}

// node is one in-process single-node broker with the group coordinator,
// wired as it ships (testcluster), with the tests' group settings. Its
// data directory and port survive restart.
type node struct {
	t    testing.TB
	addr string
	c    *testcluster.Cluster
}

func startNode(t testing.TB) *node {
	t.Helper()
	c := testcluster.New(t, testcluster.Settings(groupSettings...))
	return &node{t: t, addr: c.Addr(), c: c}
}

func (n *node) restart() {
	n.t.Helper()
	n.c.Node(0).Restart()
}

// broker is the node's broker (changes at restart).
func (n *node) broker() *broker.Broker { return n.c.Broker() }

// groups is the node's group coordinator.
func (n *node) groups() *group.ForBroker { return n.c.App().Groups().(*group.ForBroker) }

// client returns a franz-go client for the node, closed with the test.
func (n *node) client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	return n.c.Client(opts...)
}

func (n *node) admin() *kadm.Client { return kadm.NewClient(n.client()) }

func (n *node) createTopic(name string, partitions int32) {
	n.t.Helper()
	n.c.CreateTopic(name, partitions, 1, nil)
}
