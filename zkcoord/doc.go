// Package zkcoord is the ZooKeeper implementation of cluster.Coordinator,
// with Kafka's znode layout and JSON formats (kafka.zk.ZkData), so that an
// operator's habits and tools (zkCli.sh, zookeeper-shell) carry over:
//
//	/cluster/id                                   {"version":"1","id":"<22-char base64 uuid>"}
//	/brokers/ids/<id>          ephemeral          BrokerIdZNode version 5 (endpoints, rack, ...)
//	/brokers/seqid                                its znode version generates broker ids (1000 + n)
//	/brokers/topics/<t>                           {"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{},"topic_id":"..."}
//	/brokers/topics/<t>/partitions/<p>/state      {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}  (CAS on the znode version)
//	/controller                ephemeral          {"version":2,"brokerid":1,"timestamp":"...","kraftControllerEpoch":-1}
//	/controller_epoch                             a bare integer
//	/config/topics/<t>                            {"version":1,"config":{...}}
//	/config/brokers/<id>, /config/brokers/<default>  {"version":1,"config":{...}}  dynamic broker configs
//	/config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/<t>"} (or "brokers/<entity>")
//	/admin/delete_topics/<t>                      a topic marked for deletion
//	/admin/reassign_partitions                    {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}
//	/latest_producer_id_block                     {"version":1,"broker":1,"block_start":"0","block_end":"999"}
//	/state_change_notification/state_change_<seq> Sluice's own, see below
//
// All of it lives under the chroot of zookeeper.connect ("zk1:2181/sluice"),
// which is created when missing.
//
// # Reads come from a cache kept current by watches
//
// A Coordinator keeps the whole metadata in memory and answers every read
// method (Brokers, Topics, Topic, PartitionState, TopicConfig, Controller,
// PendingDeletions) from it, as a Kafka broker answers Metadata from its
// metadata cache. Every write goes to ZooKeeper first and then updates the
// cache (read-your-writes); writes by other brokers arrive through watches.
// Each cached znode keeps its ZooKeeper version (and creation zxid), and an
// update only replaces an older one, so concurrent loaders never move the
// cache backwards.
//
// One read goes to ZooKeeper itself: ReadTopicConfig, what DescribeConfigs
// answers for a topic and the base of AlterConfigs' read-modify-write (a
// conditional write on the config znode's version), as Kafka reads
// /config/topics/<t> there. A change made through another broker then
// shows at once, not when its notification reaches this broker's cache.
//
// # Watches: one per kind of thing, not one per partition
//
// A broker must learn within a second when a partition's leader, leader
// epoch or ISR changes, for every partition of the cluster (Metadata answers
// for all of them). Kafka's controller pushed LeaderAndIsr and
// UpdateMetadata RPCs instead; watching every state znode would cost one
// watch per partition per broker (30,000 with three brokers and 10,000
// partitions) and one round trip per change per broker to re-arm it.
//
// Instead every state write is a ZooKeeper transaction (multi) that also
// creates a sequential child of /state_change_notification carrying the
// written partitions, their topic ids, new states and new znode versions.
// Each broker holds one child watch on that node and applies new entries in
// sequence order without reading the state znodes at all. The controller
// writes many states per transaction (WritePartitionStates, the
// cluster.StateBatcher), so a failover that moves 3,000 leaders is two
// transactions and two notifications. A Coordinator sets a constant number of watches
// (/brokers/ids, /brokers/topics, /admin/delete_topics, /controller,
// /admin/reassign_partitions, /config/changes and
// /state_change_notification), whatever the number of topics and
// partitions. BENCHMARKS.md has the measurements.
//
// The controller purges notifications older than Config.ChangeRetention
// (never the newest one). A broker whose session expires reloads everything
// in its new session; a broker that finds it may have missed a purged entry
// (no entry at or below the last one it applied is left) reloads every
// partition state.
//
// # Sessions
//
// The go-zookeeper client reconnects by itself and keeps the session (and
// its watches and ephemeral nodes) when it gets back within the session
// timeout. When the session has expired it starts a new one; the
// Coordinator then registers the broker again, forgets any controllership,
// reloads every znode, sets its watches again and delivers ChangeAll to
// every Watch channel. While ZooKeeper is unreachable reads keep answering
// from the cache (the metadata does not change); writes wait for the
// session to come back, up to the session timeout (and their context), then
// fail with errors that wrap ErrUnavailable (cluster.ErrUnavailable);
// nothing panics and nothing is dropped locally. The session handshake with
// a server is bounded by a third of the session timeout (the client's own
// bound, ten times its receive timeout, outlives the session: a server that
// accepts connections before it serves them, as a restarting ZooKeeper
// does, would otherwise cost every broker its session).
//
// # Leaderships
//
// Lead holds a role that one process of the cluster has at a time through
// an ephemeral znode (the console that does the background work holds
// /console_leader); it re-campaigns when the node goes and in every new
// session, and reports no leadership while the session is in doubt.
//
// # Controller fencing
//
// Campaign creates /controller and increments /controller_epoch in one
// transaction (Kafka's registerControllerAndIncrementControllerEpoch). The
// controller marks its partition state writes with cluster.WithControllerEpoch;
// their transactions carry a check of /controller_epoch's znode version, so
// a controller that lost its role without noticing (a zombie) cannot write:
// its write fails with cluster.ErrNotController. A leader's own ISR changes
// are plain compare-and-sets on the state znode, as in Kafka.
//
// Lock order: the loader mutexes (stateLogMu, configLogMu, deletionsMu,
// topicsMu, brokersMu, controllerMu, in that order) before Coordinator.mu.
package zkcoord
