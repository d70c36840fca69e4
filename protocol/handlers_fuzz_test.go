package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage"
)

// FuzzHandlers decodes a request frame of any served API key and version,
// as the connection reader does, runs it through the real handler of a
// single-node broker (standalone coordinator, storage in a temporary
// directory, controller and group coordinator), encodes the answer as the
// connection writer does, and asserts that nothing panics and that the
// allocation (and the answer) stays within fuzzAllocBound of the input and
// of the broker's state: one request must never take the process down,
// which is the class of bug of a CreateTopics of 2^31-1 partitions.
//
// The seed corpus is one valid request for every served (key, version),
// built here with kmsg (handlerSeeds), plus the tricky ones committed under
// testdata/fuzz/FuzzHandlers (huge counts, repeated resources, requests
// only brokers send, writes to __consumer_offsets; regenerate them with
// SLUICE_WRITE_FUZZ_CORPUS=1 go test -run TestWriteHandlerCorpus).
func FuzzHandlers(f *testing.F) {
	for _, frame := range handlerSeeds() {
		f.Add(frame)
	}
	// A soft limit keeps the collector close behind a handler that
	// allocates a lot; the assertion below is the bound.
	prev := debug.SetMemoryLimit(1 << 30)
	f.Cleanup(func() { debug.SetMemoryLimit(prev) })
	n := newFuzzNode(f)
	f.Cleanup(func() { n.close() })
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 10 || len(frame) > 1<<20 {
			return
		}
		r, a, _, err := decodeFrame(frame)
		if err != nil || a == nil {
			return // the reader closes the connection (FuzzRequestFrame)
		}
		if growsState(r.Msg) {
			return
		}
		r.Listener = "PLAINTEXT"
		// Half the inputs (by correlation id) come from the broker's own
		// registered address, so requests only brokers send get past
		// authorizeClusterAction; the others from a stranger.
		r.Remote = "192.0.2.1:40000"
		if r.CorrelationID%2 == 0 {
			r.Remote = "127.0.0.1:40000"
		}
		// What the broker does in the background because of an input
		// (creating the logs of a new topic) is finished before the
		// next input and counted as the input's.
		n.settle()
		state, parts := n.state()
		start := heapAllocated()
		out := n.run(a, r)
		n.settle()
		used := heapAllocated() - start
		_, after := n.state()
		limit := fuzzAllocBound(len(frame), state) + perNewPartition*uint64(max(after-parts, 0))
		if used > limit || uint64(len(out)) > limit {
			t.Fatalf("%s v%d: %d bytes of request allocated %d MiB and answered %d bytes (bound %d MiB)",
				kmsg.NameForKey(r.Key), r.Version, len(frame), used>>20, len(out), limit>>20)
		}
		if n.crowded() {
			// Inputs create topics; a broker holding thousands makes
			// every metadata change slow: start afresh.
			n.close()
			n = newFuzzNode(t)
		}
	})
}

// fuzzAllocBound is what a request may allocate: a constant, a multiple of
// its own size (decoded structures, an answer entry per entry asked for),
// and what describing the broker's whole state takes (state: Metadata for
// every topic, a group's members).
func fuzzAllocBound(frame int, state uint64) uint64 {
	return 4<<20 + 64*uint64(frame) + 2*state
}

// growsState reports whether req would create more than a few hundred
// partitions: allowed (up to 10,000 per request), but the broker then
// creates their logs in the background, whose allocations would be
// counted against the inputs that follow. validate_only requests are run.
func growsState(req kmsg.Request) bool {
	const most = 256
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		if r.ValidateOnly {
			return false
		}
		var n int64
		for _, t := range r.Topics {
			n += max(int64(t.NumPartitions), int64(len(t.ReplicaAssignment)))
		}
		return n > most
	case *kmsg.CreatePartitionsRequest:
		if r.ValidateOnly {
			return false
		}
		var n int64
		for _, t := range r.Topics {
			n += int64(t.Count)
		}
		return n > most
	}
	return false
}

// perNewPartition is what creating one partition may allocate (its log,
// its place in every image read while it is created; measured at 160-390
// KiB).
const perNewPartition = 1 << 20

// heapAllocated is the cumulative number of bytes allocated on the heap
// (cheap: no stop-the-world, unlike runtime.ReadMemStats).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// fuzzNode is a single-node broker with its controller and group
// coordinator, serving no socket: FuzzHandlers calls its handlers.
type fuzzNode struct {
	s     *Server
	brk   *broker.Broker
	dir   string
	close func()
}

// crowded reports whether inputs made the broker hold so many topics or
// partitions that it is better replaced.
func (n *fuzzNode) crowded() bool {
	_, parts := n.state()
	return len(n.brk.Image().Topics) > 64 || parts > 1024
}

// opts adjust the broker's config (an authorizer).
func newFuzzNode(tb testing.TB, opts ...func(*broker.Config)) *fuzzNode {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "sluice-fuzz-handlers-")
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	coord, err := cluster.OpenStandalone(dir)
	if err != nil {
		tb.Fatal(err)
	}
	logDir := filepath.Join(dir, "kafka")
	logs, err := storage.OpenManager(storage.ManagerConfig{
		Dirs:   []string{logDir},
		Logger: log,
		DefaultConfig: func(topic string) storage.LogConfig {
			overrides, _ := coord.TopicConfig(context.Background(), topic)
			return broker.TopicLogConfig(nil, overrides)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	gcfg := group.DefaultConfig()
	gcfg.NumPartitions, gcfg.ReplicationFactor, gcfg.InitialRebalanceDelay = 3, 1, 0
	bcfg := broker.Config{
		BrokerID:                      1,
		Endpoints:                     []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		Logs:                          logs,
		Coordinator:                   coord,
		Logger:                        log,
		AutoCreateTopics:              true,
		DeleteTopicEnable:             true,
		OffsetsTopicPartitions:        gcfg.NumPartitions,
		OffsetsTopicReplicationFactor: 1,
		Metrics:                       nil,
	}
	for _, o := range opts {
		o(&bcfg)
	}
	brk, err := broker.New(bcfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := brk.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: coord, BrokerID: 1, Logger: log})
	ctlCtx, ctlStop := context.WithCancel(context.Background())
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		ctl.Run(ctlCtx)
	}()
	groups, err := group.NewForBroker(brk, gcfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := newServer(Config{
		Listeners: []Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"}},
		Broker:    brk, Groups: groups, Controller: ctl, Logger: log, LogDirs: []string{logDir},
	})
	if err != nil {
		tb.Fatal(err)
	}
	n := &fuzzNode{s: s, brk: brk, dir: dir, close: func() {
		s.cancelBase()
		groups.Close()
		ctlStop()
		<-ctlDone
		brk.Close()
		logs.Close()
		coord.Close()
		os.RemoveAll(dir)
	}}

	// State for the seeds to act on: topic "fuzz" (two partitions, a few
	// records), "fuzz-wide" (64 partitions: a large answer for a small
	// request) and group "fuzz-group" with a committed offset.
	for name, parts := range map[string]int32{"fuzz": 2, "fuzz-wide": 64} {
		if _, err := brk.CreateTopic(ctx, broker.TopicSpec{Name: name, Partitions: parts, ReplicationFactor: 1}, false, 10*time.Second); err != nil {
			tb.Fatal(err)
		}
	}
	p, err := brk.LeaderPartition("fuzz", 0)
	if err != nil {
		tb.Fatal(err)
	}
	batch, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()},
		[]record.Record{{Key: []byte("k"), Value: []byte("v")}, {OffsetDelta: 1, Value: []byte("w")}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := p.AppendRecords(batch, 1); err != nil {
		tb.Fatal(err)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "fuzz-group", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "fuzz", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	if err := groups.EnsureOffsetsTopic(ctx); err != nil {
		tb.Fatal(err)
	}
	for {
		// The coordinator loads its partitions once it leads them.
		resp, err := groups.OffsetCommit(ctx, commit)
		if err != nil {
			tb.Fatal(err)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			break
		}
		if ctx.Err() != nil {
			tb.Fatalf("commit: error %d", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// run handles r as the connection does and returns the encoded answer.
// Handlers get a context that ends soon: one that parks (a long-poll fetch,
// a JoinGroup waiting for its rebalance) must return when it ends.
func (n *fuzzNode) run(a *api, r *Request) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if a.stream != nil {
		resp, err := a.stream(ctx, n.s, r)
		if err != nil || resp == nil {
			return nil
		}
		defer resp.release()
		out, err := resp.appendResponse(nil, nil, r.CorrelationID)
		if err != nil {
			panic(fmt.Sprintf("%s v%d: encoding the answer: %v", kmsg.NameForKey(r.Key), r.Version, err))
		}
		return out
	}
	resp, err := a.handler(ctx, n.s, r)
	if err != nil || resp == nil {
		return nil
	}
	if resp.Key() != r.Key || resp.GetVersion() != r.Version {
		panic(fmt.Sprintf("%s v%d answered with key %d v%d", kmsg.NameForKey(r.Key), r.Version, resp.Key(), resp.GetVersion()))
	}
	return kwire.AppendResponse(nil, r.CorrelationID, resp)
}

// state is an estimate of what describing the broker's whole state takes
// (every partition in Metadata) and its number of partitions.
func (n *fuzzNode) state() (size uint64, partitions int) {
	img := n.brk.Image()
	for _, t := range img.Topics {
		size += 1 << 10
		partitions += len(t.Partitions)
		for _, p := range t.Partitions {
			size += 256 + 16*uint64(len(p.Replicas)+len(p.ISR))
		}
	}
	return size, partitions
}

// settle applies the latest metadata to the local partitions now (waiting
// for the apply loop if it is at work).
func (n *fuzzNode) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.brk.Sync(ctx)
}

// handlerSeeds returns a frame for every served (key, version): a request
// acting on the seeded state (topic "fuzz", group "fuzz-group").
func handlerSeeds() [][]byte {
	var out [][]byte
	for key := range int16(maxAPIKey) {
		a := lookup(key)
		if a == nil {
			continue
		}
		for v := a.min; v <= a.max; v++ {
			req := seedRequest(key, v)
			req.SetVersion(v)
			out = append(out, frameOf(req, int32(len(out)), "fuzz"))
		}
	}
	return out
}

// seedRequest is a valid request of key at version v.
func seedRequest(key, v int16) kmsg.Request {
	const topic, grp = "fuzz", "fuzz-group"
	switch key {
	case 0:
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = -1, 1000
		records := seedBatch()
		if v < 3 {
			records = seedMessageSetV1()
		}
		r.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 1, Records: records}}}}
		return r
	case 1:
		r := kmsg.NewPtrFetchRequest()
		r.ReplicaID, r.MaxWaitMillis, r.MinBytes, r.MaxBytes = -1, 50, 1, 1<<20
		r.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}}}
		return r
	case 2:
		r := kmsg.NewPtrListOffsetsRequest()
		r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1, MaxNumOffsets: 1}}}}
		return r
	case 3:
		r := kmsg.NewPtrMetadataRequest()
		r.AllowAutoTopicCreation = true
		r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}, {Topic: kmsg.StringPtr("fuzz-auto")}}
		return r
	case 7:
		r := kmsg.NewPtrControlledShutdownRequest()
		r.BrokerID, r.BrokerEpoch = 1, -1
		return r
	case 8:
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation, r.RetentionTimeMillis = grp, -1, -1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2, LeaderEpoch: -1, Metadata: kmsg.StringPtr("m")}}}}
		return r
	case 9:
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group = grp
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0, 1}}}
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: grp}}
		return r
	case 10:
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey = grp
		r.CoordinatorKeys = []string{grp, "other"}
		return r
	case 11:
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "fuzz-join", "consumer", 10000, 10000
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{topic}
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
		return r
	case 12:
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.Generation, r.MemberID = grp, 1, "member"
		return r
	case 13:
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group, r.MemberID = grp, "member"
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "member"}}
		return r
	case 14:
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.Generation, r.MemberID = grp, 1, "member"
		r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		r.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "member", MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
		return r
	case 15:
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = []string{grp, "fuzz-join"}
		r.IncludeAuthorizedOperations = true
		return r
	case 16:
		r := kmsg.NewPtrListGroupsRequest()
		r.StatesFilter = []string{"Empty"}
		return r
	case 18:
		r := kmsg.NewPtrApiVersionsRequest()
		r.ClientSoftwareName, r.ClientSoftwareVersion = "fuzz", "1.0"
		return r
	case 19:
		r := kmsg.NewPtrCreateTopicsRequest()
		r.TimeoutMillis, r.ValidateOnly = 1000, v%2 == 1
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = "fuzz-new-"+strconv.Itoa(int(v)), 2, 1
		t.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("60000")}}
		r.Topics = []kmsg.CreateTopicsRequestTopic{t}
		return r
	case 20:
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.TimeoutMillis = 1000
		r.TopicNames = []string{"fuzz-new-0"}
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("fuzz-new-0")}}
		return r
	case 21:
		r := kmsg.NewPtrDeleteRecordsRequest()
		r.TimeoutMillis = 1000
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 1, Offset: 0}}}}
		return r
	case 22:
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = 60000, -1, -1
		return r
	case 23:
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.ReplicaID = -1
		r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}}}}
		return r
	case 32:
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.IncludeSynonyms, r.IncludeDocumentation = true, true
		r.Resources = []kmsg.DescribeConfigsRequestResource{
			{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: topic},
			{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1", ConfigNames: []string{"log.retention.hours"}},
		}
		return r
	case 33:
		r := kmsg.NewPtrAlterConfigsRequest()
		r.ValidateOnly = true
		r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: topic,
			Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("60000")}}}}
		return r
	case 35:
		return kmsg.NewPtrDescribeLogDirsRequest()
	case 37:
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.TimeoutMillis, r.ValidateOnly = 1000, true
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: topic, Count: 3}}
		return r
	case 42:
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{"fuzz-gone"}
		return r
	case 43:
		r := kmsg.NewPtrElectLeadersRequest()
		r.TimeoutMillis = 1000
		r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		return r
	case 44:
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.ValidateOnly = true
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: topic,
			Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("60000")}}}}
		return r
	case 45:
		r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		r.TimeoutMillis = 1000
		r.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: topic, Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 1, Replicas: []int32{1}}}}}
		return r
	case 46:
		return kmsg.NewPtrListPartitionReassignmentsRequest()
	case 47:
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = grp
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
		return r
	case 29:
		r := kmsg.NewPtrDescribeACLsRequest()
		r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeMatch
		r.ResourceName = kmsg.StringPtr(topic)
		r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return r
	case 30:
		r := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:fuzz", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		r.Creations = append(r.Creations, c)
		return r
	case 31:
		r := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		r.Filters = append(r.Filters, f)
		return r
	case 60:
		r := kmsg.NewPtrDescribeClusterRequest()
		r.EndpointType = 1
		return r
	}
	return kmsg.RequestForKey(key)
}

// seedBatch is a record batch v2 of two records.
func seedBatch() []byte {
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1700000000000},
		[]record.Record{{Key: []byte("k"), Value: []byte("v")}, {OffsetDelta: 1, Value: []byte("w")}})
	if err != nil {
		panic(err)
	}
	return b
}

// seedMessageSetV1 is a message set of one message in format v1 (Produce
// v0-v2).
func seedMessageSetV1() []byte {
	msg := []byte{1, 0} // magic 1, attributes
	msg = binary.BigEndian.AppendUint64(msg, 1700000000000)
	msg = binary.BigEndian.AppendUint32(msg, 0xffffffff) // null key
	msg = binary.BigEndian.AppendUint32(msg, 5)
	msg = append(msg, "value"...)
	crc := crc32.ChecksumIEEE(msg)
	out := binary.BigEndian.AppendUint64(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(4+len(msg)))
	out = binary.BigEndian.AppendUint32(out, crc)
	return append(out, msg...)
}

// TestHandlerSeedsCoverEveryAPI: the seed corpus holds one request for
// every served (key, version), and each decodes as the reader decodes it.
func TestHandlerSeedsCoverEveryAPI(t *testing.T) {
	seeds := handlerSeeds()
	want := 0
	for key := range int16(maxAPIKey) {
		if a := lookup(key); a != nil {
			want += int(a.max-a.min) + 1
		}
	}
	if len(seeds) != want || want < 150 {
		t.Fatalf("%d seeds for %d served (key, version) pairs", len(seeds), want)
	}
	for _, frame := range seeds {
		if _, a, _, err := decodeFrame(frame); err != nil || a == nil {
			t.Fatalf("seed %x does not decode: %v", frame[:4], err)
		}
	}
}

// TestWriteHandlerCorpus writes the committed corpus of FuzzHandlers when
// SLUICE_WRITE_FUZZ_CORPUS=1: the tricky requests, each of which once
// crashed a broker or made it answer with far more than it was asked.
func TestWriteHandlerCorpus(t *testing.T) {
	if os.Getenv("SLUICE_WRITE_FUZZ_CORPUS") != "1" {
		t.Skip("set SLUICE_WRITE_FUZZ_CORPUS=1 to write testdata/fuzz/FuzzHandlers")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzHandlers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, req := range trickyRequests() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", frameOf(req, 1, "fuzz"))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// trickyRequests are the committed corpus entries, by file name.
func trickyRequests() map[string]kmsg.Request {
	out := map[string]kmsg.Request{}
	ct := func(v int16, validateOnly bool, partitions int32, rf int16) *kmsg.CreateTopicsRequest {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Version, r.TimeoutMillis, r.ValidateOnly = v, 1000, validateOnly
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = "huge", partitions, rf
		r.Topics = []kmsg.CreateTopicsRequestTopic{t}
		return r
	}
	out["create-topics-2-31-partitions"] = ct(4, false, 1<<31-1, 1)
	out["create-topics-2-31-partitions-validate-only"] = ct(7, true, 1<<31-1, 1)
	out["create-topics-rf-32767"] = ct(5, false, 1, 1<<15-1)
	many := ct(7, true, 4000, 1)
	for i := range 3 {
		t := many.Topics[0]
		t.Topic = "many-" + strconv.Itoa(i)
		many.Topics = append(many.Topics, t)
	}
	out["create-topics-over-10000-records"] = many
	asg := ct(5, false, -1, -1)
	asg.Topics[0].ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: make([]int32, 4096)}}
	out["create-topics-assignment-of-4096-replicas"] = asg
	for _, vo := range []bool{false, true} {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.Version, r.TimeoutMillis, r.ValidateOnly = 3, 1000, vo
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "fuzz", Count: 1<<31 - 1}}
		out["create-partitions-2-31"+map[bool]string{true: "-validate-only"}[vo]] = r
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group = 1, "fuzz-group"
	for i := range 512 {
		of.Topics = append(of.Topics, kmsg.OffsetFetchRequestTopic{Topic: "fuzz", Partitions: []int32{int32(i)}})
	}
	out["offset-fetch-topic-repeated"] = of
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version, dc.IncludeDocumentation, dc.IncludeSynonyms = 4, true, true
	for range 1024 {
		dc.Resources = append(dc.Resources, kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fuzz"})
	}
	out["describe-configs-resource-repeated"] = dc
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for range 1024 {
		md.Topics = append(md.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("fuzz-wide")})
	}
	out["metadata-topic-repeated"] = md
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	for range 256 {
		dg.Groups = append(dg.Groups, "fuzz-group")
	}
	out["describe-groups-repeated"] = dg
	fr := kmsg.NewPtrFetchRequest()
	fr.Version, fr.ReplicaID, fr.MaxBytes = 12, 2, 1<<20
	fr.Topics = []kmsg.FetchRequestTopic{{Topic: "fuzz", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 2, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}}}
	out["fetch-as-unregistered-follower"] = fr
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.Version, cs.BrokerID, cs.BrokerEpoch = 3, 7, -1
	out["controlled-shutdown-unregistered-broker"] = cs
	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks, pr.TimeoutMillis = 9, 1, 1000
	pr.Topics = []kmsg.ProduceRequestTopic{{Topic: "__consumer_offsets", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: seedBatch()}}}}
	out["produce-to-consumer-offsets"] = pr
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version, dr.TimeoutMillis = 2, 1000
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "__consumer_offsets", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: -1}}}}
	out["delete-records-consumer-offsets"] = dr
	lr := kmsg.NewPtrListPartitionReassignmentsRequest()
	lr.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "fuzz", Partitions: make([]int32, 4096)}}
	out["list-reassignments-partitions-repeated"] = lr
	jg := seedRequest(11, 9).(*kmsg.JoinGroupRequest)
	jg.Version = 9
	for i := range 256 {
		jg.Protocols = append(jg.Protocols, kmsg.JoinGroupRequestProtocol{Name: "p" + strconv.Itoa(i), Metadata: []byte{0, 1}})
	}
	out["join-group-many-protocols"] = jg
	return out
}
