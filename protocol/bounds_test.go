package protocol_test

import (
	"math"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// allocatedDuring returns how many bytes the process allocated while fn
// ran (the cumulative heap allocation, which a slice made for a
// client-given count shows even when it is freed at once).
func allocatedDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeCountsAnsweredWithoutAllocating: CreateTopics and
// CreatePartitions asking for 2^31-1 partitions, with and without
// validate_only, answer POLICY_VIOLATION (Kafka's answer to a request of
// more than 10,000 metadata records) and the process allocates next to
// nothing for them; one such request used to take the whole process down
// with "fatal error: runtime: out of memory". So do a request whose topics
// add up to more than 10,000 partitions, a replication factor of 32767
// (INVALID_REPLICATION_FACTOR) and an assignment naming a million brokers
// (INVALID_REPLICA_ASSIGNMENT).
func TestHugeCountsAnsweredWithoutAllocating(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()

	createTopics := func(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) []kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis, req.ValidateOnly = 7, 5000, validateOnly
		req.Topics = topics
		var resp kmsg.CreateTopicsResponse
		resp.Version = req.Version
		if err := c.roundTrip(req, &resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != len(topics) {
			t.Fatalf("%d topics answered, %d asked", len(resp.Topics), len(topics))
		}
		return resp.Topics
	}
	topic := func(name string, partitions int32, rf int16) kmsg.CreateTopicsRequestTopic {
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = name, partitions, rf
		return tt
	}
	createPartitions := func(validateOnly bool, name string, count int32) kmsg.CreatePartitionsResponseTopic {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version, req.TimeoutMillis, req.ValidateOnly = 3, 5000, validateOnly
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		req.Topics = append(req.Topics, rt)
		var resp kmsg.CreatePartitionsResponse
		resp.Version = req.Version
		if err := c.roundTrip(req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0]
	}
	want := func(what string, code int16, msg *string, wantCode *kerr.Error) {
		t.Helper()
		if code != wantCode.Code {
			m := ""
			if msg != nil {
				m = *msg
			}
			t.Errorf("%s: %v (%s), want %s", what, kerr.ErrorForCode(code), m, wantCode.Message)
		}
	}

	const bound = 64 << 20
	used := allocatedDuring(func() {
		for _, validateOnly := range []bool{false, true} {
			got := createTopics(validateOnly, topic("huge", math.MaxInt32, 1))
			want("CreateTopics of 2^31-1 partitions", got[0].ErrorCode, got[0].ErrorMessage, kerr.PolicyViolation)
			if got[0].ErrorMessage == nil || *got[0].ErrorMessage != "Unable to perform excessively large batch operation." {
				t.Errorf("message %v", got[0].ErrorMessage)
			}
			cp := createPartitions(validateOnly, "bench", math.MaxInt32)
			want("CreatePartitions to 2^31-1", cp.ErrorCode, cp.ErrorMessage, kerr.PolicyViolation)
		}
		// Three topics of 4,000 partitions: 12,003 records, refused as one.
		got := createTopics(true, topic("a", 4000, 1), topic("b", 4000, 1), topic("c", 4000, 1))
		for _, g := range got {
			want("topic "+g.Topic+" of a request of 12,003 records", g.ErrorCode, g.ErrorMessage, kerr.PolicyViolation)
		}
		got = createTopics(false, topic("rf", 1, math.MaxInt16))
		want("replication factor 32767", got[0].ErrorCode, got[0].ErrorMessage, kerr.InvalidReplicationFactor)

		many := topic("assigned", -1, -1)
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Replicas = make([]int32, 1<<20)
		for i := range ra.Replicas {
			ra.Replicas[i] = int32(i + 2)
		}
		many.ReplicaAssignment = append(many.ReplicaAssignment, ra)
		got = createTopics(false, many)
		want("an assignment of a million brokers", got[0].ErrorCode, got[0].ErrorMessage, kerr.InvalidReplicaAssignment)
	})
	// The million-broker assignment is 4 MiB of request, held by the test
	// and the broker: well inside the bound; one slice for 2^31-1
	// partitions would be 48 GiB.
	if used > bound {
		t.Fatalf("the process allocated %d MiB answering these requests, more than %d MiB", used>>20, bound>>20)
	}

	// Within the bound, validate_only still validates a large topic.
	if got := createTopics(true, topic("large", 9000, 1)); got[0].ErrorCode != 0 || got[0].NumPartitions != 9000 {
		t.Fatalf("validate_only of 9,000 partitions: %v, %d partitions", kerr.ErrorForCode(got[0].ErrorCode), got[0].NumPartitions)
	}
}
