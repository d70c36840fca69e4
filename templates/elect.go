package templates

import "github.com/sluice-io/sluice/kafkaview"

// ElectView is a topic's leader elections page: which partitions are not
// led by their preferred replica, which have no leader, and the results
// of the election just run.
type ElectView struct {
	Topic string
	// Partitions are the topic's partitions with their leadership.
	Partitions []ElectPartition
	// NotPreferred counts partitions led by another replica than their
	// preferred one; Leaderless those without a leader.
	NotPreferred, Leaderless int
	// Results are the outcome of the election just run (nil otherwise);
	// Unclean tells which kind it was.
	Results []ElectResult
	Unclean bool
	// Err is a request-wide error (the brokers refused, ...).
	Err string
}

// ElectPartition is one partition's leadership.
type ElectPartition struct {
	kafkaview.PartitionMeta
	Preferred int32 // the first replica, -1 without replicas
	// State: "preferred" (led by its preferred replica), "other" (led by
	// another replica), "none" (no leader).
	State string
}

// ElectResult is one partition's outcome in words.
type ElectResult struct {
	Partition int32
	// Kind: ok (elected), info (nothing to do), bad (failed).
	Kind string
	Text string
	Code string // Kafka's error name, "" on success
}
