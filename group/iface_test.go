package group

import "github.com/sluice-io/sluice/protocol"

// The coordinator is what the protocol server's group handlers call.
var _ protocol.GroupCoordinator = (*Coordinator)(nil)
var _ protocol.OffsetCommitStarter = (*Coordinator)(nil)
var _ protocol.OffsetCommitStarter = (*ForBroker)(nil)
