// Package group is Sluice's group coordinator: Kafka's classic consumer
// group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed
// offsets (OffsetCommit, OffsetFetch, OffsetDelete) and group
// administration (DescribeGroups, ListGroups, DeleteGroups), with the
// groups' state kept in the compacted internal topic __consumer_offsets in
// Kafka's own record schemas.
//
// # Design
//
// The state machine (state, in state.go, membership.go, offsets.go,
// admin.go, load.go) does no I/O and starts no goroutines: time is a value
// it is given (advance fires due timers: session expiry, rebalance and
// initial-rebalance delays, the sync timeout, offset retention), appends to
// __consumer_offsets leave it as appendOps, and answers are callbacks. Tests
// drive it directly with a fake clock.
//
// Coordinator (coordinator.go) drives it under one mutex: a connection's
// goroutine runs its request on the state machine itself, a timer
// goroutine fires the timers. One writer per __consumer_offsets partition
// appends in order: the request that finds it idle appends on its own
// goroutine and is answered there once the append is committed; appends
// queued behind one in flight are written together in one Append (group
// commit) by the writer's goroutine. OffsetCommits a connection reads
// together are started (StartOffsetCommit) before any is written: the
// first claims the idle writer without writing, the next queue behind it,
// and the connection then leads the writer once (package protocol's
// conn.settle), so a pipelining client's commits, and other connections'
// commits of the partition meanwhile, go out in one Append. Commits of one
// group always go to one partition's queue, in the order the state machine
// made them, so a later commit is stored after, and wins over, an earlier. One loader goroutine per partition
// reads the log when this broker becomes the partition's leader. A group's coordinator is the leader of partition
// PartitionFor(group, offsets.topic.num.partitions); the broker tells the
// coordinator about leadership with BecomeLeader and Resign, and requests
// for groups of other partitions get NOT_COORDINATOR, of a partition still
// loading COORDINATOR_LOAD_IN_PROGRESS.
//
// Memory changes only after the log append succeeded (a commit is visible
// to OffsetFetch once stored; a SyncGroup leader's assignment is handed out
// once stored), so what a client was told survives a restart or a
// coordinator move.
//
// # Lock order
//
// There are no locks in the state machine; Coordinator.mu guards it and
// the fields after it. writer.mu guards only the writer's queue and may be
// taken under Coordinator.mu, never the other way round. Neither is held
// across an Append or a Read of the backend.
package group
