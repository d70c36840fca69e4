package protocol_test

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
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

// TestRequestsOfMoreThanABatch: DeleteTopics naming more than 10,000
// topics, IncrementalAlterConfigs and AlterConfigs setting more than
// 10,000 configs and AlterPartitionReassignments moving more than 10,000
// partitions are refused whole with POLICY_VIOLATION, as Kafka's
// controller refuses a request of more metadata records than that, and
// change nothing: the topic named among them is not deleted, its config
// not changed.
func TestRequestsOfMoreThanABatch(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()
	const over = 10001

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis = 5, 5000
	del.TopicNames = append(del.TopicNames, "bench")
	for i := range over {
		del.TopicNames = append(del.TopicNames, fmt.Sprint("absent-", i))
	}
	var delr kmsg.DeleteTopicsResponse
	delr.Version = del.Version
	if err := c.roundTrip(del, &delr); err != nil {
		t.Fatal(err)
	}
	if len(delr.Topics) != len(del.TopicNames) || delr.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("DeleteTopics of %d topics: %d answers, first %v", len(del.TopicNames), len(delr.Topics), kerr.ErrorForCode(delr.Topics[0].ErrorCode))
	}

	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "bench"
	for range over {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1000")
		res.Configs = append(res.Configs, cfg)
	}
	inc.Resources = append(inc.Resources, res)
	var incr kmsg.IncrementalAlterConfigsResponse
	incr.Version = inc.Version
	if err := c.roundTrip(inc, &incr); err != nil {
		t.Fatal(err)
	}
	if code := incr.Resources[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Fatalf("IncrementalAlterConfigs of %d configs: %v", over, kerr.ErrorForCode(code))
	}
	alt := kmsg.NewPtrAlterConfigsRequest()
	alt.Version = 2
	ares := kmsg.NewAlterConfigsRequestResource()
	ares.ResourceType, ares.ResourceName = kmsg.ConfigResourceTypeTopic, "bench"
	for range over {
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1000")
		ares.Configs = append(ares.Configs, cfg)
	}
	alt.Resources = append(alt.Resources, ares)
	var altr kmsg.AlterConfigsResponse
	altr.Version = alt.Version
	if err := c.roundTrip(alt, &altr); err != nil {
		t.Fatal(err)
	}
	if code := altr.Resources[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Fatalf("AlterConfigs of %d configs: %v", over, kerr.ErrorForCode(code))
	}

	re := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "bench"
	for i := range over {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = int32(i), []int32{1}
		rt.Partitions = append(rt.Partitions, rp)
	}
	re.Topics = append(re.Topics, rt)
	var rer kmsg.AlterPartitionAssignmentsResponse
	rer.Version = re.Version
	if err := c.roundTrip(re, &rer); err != nil {
		t.Fatal(err)
	}
	if rer.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("AlterPartitionReassignments of %d partitions: %v", over, kerr.ErrorForCode(rer.ErrorCode))
	}

	// Nothing happened to "bench".
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, "bench", []string{"retention.ms"}
	dc.Resources = append(dc.Resources, dr)
	var dcr kmsg.DescribeConfigsResponse
	dcr.Version = dc.Version
	if err := c.roundTrip(dc, &dcr); err != nil {
		t.Fatal(err)
	}
	if code := dcr.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("topic bench after the refused requests: %v", kerr.ErrorForCode(code))
	}
	if cfgs := dcr.Resources[0].Configs; len(cfgs) != 1 || cfgs[0].Value == nil || *cfgs[0].Value == "1000" {
		t.Fatalf("retention.ms of bench after refused alterations: %+v", cfgs)
	}
}

// TestRepeatedResourcesAnsweredOnce: a request naming one resource many
// times gets its description once. Metadata answers a topic named twice
// once (as Kafka does); DescribeConfigs answers the repeats
// INVALID_REQUEST. Before, 20,000 repeats of one topic in a 100 KB
// DescribeConfigs made an answer of every config 20,000 times over.
// A DescribeConfigs naming a million configs of a topic does not allocate
// a million entries either.
func TestRepeatedResourcesAnsweredOnce(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()
	const repeats = 20000

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for range repeats {
		md.Topics = append(md.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("bench")})
	}
	var mr kmsg.MetadataResponse
	mr.Version = md.Version
	if err := c.roundTrip(md, &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata naming bench %d times: %d topics answered", repeats, len(mr.Topics))
	}

	var dcr kmsg.DescribeConfigsResponse
	used := allocatedDuring(func() {
		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.Version, dc.IncludeDocumentation, dc.IncludeSynonyms = 4, true, true
		for range repeats {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "bench"
			dc.Resources = append(dc.Resources, r)
		}
		dcr.Version = dc.Version
		if err := c.roundTrip(dc, &dcr); err != nil {
			t.Fatal(err)
		}
	})
	if len(dcr.Resources) != repeats || dcr.Resources[0].ErrorCode != 0 || len(dcr.Resources[0].Configs) == 0 {
		t.Fatalf("DescribeConfigs: %d resources answered", len(dcr.Resources))
	}
	for _, r := range dcr.Resources[1:] {
		if r.ErrorCode != kerr.InvalidRequest.Code || len(r.Configs) != 0 {
			t.Fatalf("a repeat of bench: %v with %d configs", kerr.ErrorForCode(r.ErrorCode), len(r.Configs))
		}
	}
	if used > 64<<20 {
		t.Fatalf("DescribeConfigs of one topic named %d times allocated %d MiB", repeats, used>>20)
	}

	used = allocatedDuring(func() {
		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.Version = 4
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "bench"
		r.ConfigNames = make([]string, 1<<20)
		dc.Resources = append(dc.Resources, r)
		dcr.Version = dc.Version
		if err := c.roundTrip(dc, &dcr); err != nil {
			t.Fatal(err)
		}
	})
	if used > 96<<20 {
		t.Fatalf("DescribeConfigs naming a million configs allocated %d MiB", used>>20)
	}
}

// TestMetadataAutoCreatesAtMostABatch: unknown topics a Metadata request
// would auto-create, together more than 10,000 metadata records (here two
// topics of num.partitions=9999), are not created: POLICY_VIOLATION, as
// Kafka's controller refuses such a CreateTopics.
func TestMetadataAutoCreatesAtMostABatch(t *testing.T) {
	n := startNodeWith(t, nil, func(c *broker.Config) { c.AutoCreateTopics, c.NumPartitions = true, 9999 })
	c := dialRaw(t, n.addr)
	defer c.Close()
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.AllowAutoTopicCreation = 12, true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("auto-a")}, {Topic: kmsg.StringPtr("auto-b")}}
	var mr kmsg.MetadataResponse
	mr.Version = md.Version
	if err := c.roundTrip(md, &mr); err != nil {
		t.Fatal(err)
	}
	for _, mt := range mr.Topics {
		if mt.ErrorCode != kerr.PolicyViolation.Code {
			t.Fatalf("auto-creating two topics of 9999 partitions: %s %v", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode))
		}
	}
	if _, ok := n.brk.Image().Topics["auto-a"]; ok {
		t.Fatal("auto-a was created")
	}
}

// TestFetchMaxBytes: a Fetch asking for more than fetch.max.bytes gets
// about that much (the first batch whatever its size, then whole batches
// while they fit), and a min_bytes above it does not hold the answer back
// for max_wait_ms.
func TestFetchMaxBytes(t *testing.T) {
	n := startNodeWith(t, nil, func(c *broker.Config) { c.FetchMaxBytes = 4096 })
	c := dialRaw(t, n.addr)
	defer c.Close()
	batch := benchBatch(t, 1, 1500)
	f := produceFrame(1, batch)
	for range 10 {
		if ec := produceErr(c.recv(c.send(f))); ec != 0 {
			t.Fatalf("produce error %d", ec)
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, 10000, 1<<20, 1<<20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "bench", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}}}
	var fr kmsg.FetchResponse
	fr.Version = req.Version
	start := time.Now()
	if err := c.roundTrip(req, &fr); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a min_bytes above fetch.max.bytes held the answer %v", d)
	}
	got := len(fr.Topics[0].Partitions[0].RecordBatches)
	if got == 0 || got > 4096 {
		t.Fatalf("%d record bytes with fetch.max.bytes=4096 (10 batches of %d there)", got, len(batch))
	}
}

// TestTimeoutIsForTheWholeRequest: CreateTopics' timeout_ms bounds the
// whole request, as in Kafka: eight topics whose leaders never come (no
// controller) answer REQUEST_TIMED_OUT within about one timeout, not one
// timeout per topic.
func TestTimeoutIsForTheWholeRequest(t *testing.T) {
	n := startBenchNode(t, nil)
	n.stop() // no controller: new partitions get no leader
	<-n.done
	c := dialRaw(t, n.addr)
	defer c.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 400
	for i := range 8 {
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = fmt.Sprint("leaderless-", i), 1, 1
		req.Topics = append(req.Topics, tt)
	}
	var resp kmsg.CreateTopicsResponse
	resp.Version = req.Version
	start := time.Now()
	if err := c.roundTrip(req, &resp); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for _, tt := range resp.Topics {
		if tt.ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("%s: %v, want REQUEST_TIMED_OUT", tt.Topic, kerr.ErrorForCode(tt.ErrorCode))
		}
	}
	if took > 2*time.Second {
		t.Fatalf("8 topics with timeout_ms 400 answered after %v (one timeout per topic is 3.2 s)", took)
	}
}
