package protocol

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/security"
)

var (
	alice = security.Principal{Type: "User", Name: "alice"}
	bob   = security.Principal{Type: "User", Name: "bob"}
	carol = security.Principal{Type: "User", Name: "carol"}
	admin = security.Principal{Type: "User", Name: "admin"}
)

func allow(p security.Principal, op security.Operation, rt security.ResourceType, pattern security.PatternType, name string) security.ACL {
	return security.ACL{
		Resource: security.Resource{Type: rt, Name: name, Pattern: pattern},
		Entry:    security.Entry{Principal: p.String(), Host: "*", Operation: op, Permission: security.Allow},
	}
}

func deny(p security.Principal, op security.Operation, rt security.ResourceType, pattern security.PatternType, name string) security.ACL {
	a := allow(p, op, rt, pattern, name)
	a.Entry.Permission = security.Deny
	return a
}

// newAuthzNode is the fuzz node (topics "fuzz" and "fuzz-wide", group
// "fuzz-group" with a committed offset) with an authorizer: admin is a
// super user; alice may read the topics starting with "fuzz" but not
// "fuzz-wide" (Deny beats Allow) and read the group; bob may write
// "fuzz"; carol has nothing.
func newAuthzNode(t *testing.T, extra ...security.ACL) *fuzzNode {
	t.Helper()
	az := security.NewAuthorizer(security.AuthorizerConfig{SuperUsers: []security.Principal{admin}}, nil)
	n := newFuzzNode(t, func(c *broker.Config) { c.Authorizer = az })
	t.Cleanup(n.close)
	az.SetACLs(append(extra,
		allow(alice, security.OpRead, security.ResourceTopic, security.PatternPrefixed, "fuzz"),
		deny(alice, security.OpRead, security.ResourceTopic, security.PatternLiteral, "fuzz-wide"),
		allow(alice, security.OpRead, security.ResourceGroup, security.PatternLiteral, "fuzz-group"),
		allow(bob, security.OpWrite, security.ResourceTopic, security.PatternLiteral, "fuzz"),
	))
	return n
}

// as handles req as principal p would have it handled on a connection from
// 192.0.2.1, and decodes the answer.
func (n *fuzzNode) as(t *testing.T, p security.Principal, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &Request{Key: req.Key(), Version: req.GetVersion(), Msg: req, Listener: "PLAINTEXT", Remote: "192.0.2.1:40000", Principal: p}
	a := lookup(req.Key())
	if a.stream == nil {
		resp, err := a.handler(ctx, n.s, r)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	sr, err := a.stream(ctx, n.s, r)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	defer sr.release()
	out, err := sr.appendResponse(nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	body := out[8:]
	if kwire.ResponseHeaderTags(resp.Key(), resp.IsFlexible()) {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

func produceReq(topic string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: seedBatch()}}}}
	return req
}

func fetchReq(topics ...string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes = 11, -1, 1<<20
	for _, topic := range topics {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.PartitionMaxBytes, p.CurrentLeaderEpoch = 0, 1<<20, -1
		req.Topics = append(req.Topics, kmsg.FetchRequestTopic{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{p}})
	}
	return req
}

func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation, req.IncludeTopicAuthorizedOperations = 9, true, true
	if topics == nil {
		req.Topics = nil // every topic
	}
	for _, t := range topics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(t)})
	}
	return req
}

func topicCodes(resp *kmsg.MetadataResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out[*t.Topic] = t.ErrorCode
		}
	}
	return out
}

func code(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestAuthorizeDataPath: Produce needs Write and Fetch Read on the topic
// (TOPIC_AUTHORIZATION_FAILED per partition, nothing appended); a Deny
// beats a prefixed Allow; super users may do everything; Write does not
// allow Read.
func TestAuthorizeDataPath(t *testing.T) {
	n := newAuthzNode(t)
	hw := func() int64 {
		p, err := n.brk.LeaderPartition("fuzz", 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.HighWatermark()
	}
	before := hw()
	for _, p := range []security.Principal{alice, carol} {
		resp := n.as(t, p, produceReq("fuzz")).(*kmsg.ProduceResponse)
		code(t, p.String()+" produce", resp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	}
	if got := hw(); got != before {
		t.Fatalf("a refused produce appended: high watermark %d -> %d", before, got)
	}
	for _, p := range []security.Principal{bob, admin} {
		resp := n.as(t, p, produceReq("fuzz")).(*kmsg.ProduceResponse)
		code(t, p.String()+" produce", resp.Topics[0].Partitions[0].ErrorCode, nil)
	}
	if got := hw(); got != before+4 {
		t.Fatalf("high watermark %d, want %d", got, before+4)
	}
	// A transactional id needs Write on it, for the whole request.
	txn := produceReq("fuzz")
	txn.TransactionID = kmsg.StringPtr("tx")
	code(t, "bob transactional produce", n.as(t, bob, txn).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	// Fetch: alice reads "fuzz" and not "fuzz-wide" (denied) in one request.
	fr := n.as(t, alice, fetchReq("fuzz", "fuzz-wide")).(*kmsg.FetchResponse)
	code(t, "alice fetch fuzz", fr.Topics[0].Partitions[0].ErrorCode, nil)
	if len(fr.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Error("alice fetch fuzz: no records")
	}
	code(t, "alice fetch fuzz-wide", fr.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	if len(fr.Topics[1].Partitions[0].RecordBatches) != 0 {
		t.Error("a refused fetch returned records")
	}
	fr = n.as(t, bob, fetchReq("fuzz")).(*kmsg.FetchResponse)
	code(t, "bob fetch fuzz (Write only)", fr.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	fr = n.as(t, admin, fetchReq("fuzz-wide")).(*kmsg.FetchResponse)
	code(t, "admin fetch fuzz-wide", fr.Topics[0].Partitions[0].ErrorCode, nil)

	// ListOffsets needs Describe (implied by Read and by Write).
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version, lo.ReplicaID = 4, -1
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp, lp.CurrentLeaderEpoch = -1, -1
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "fuzz", Partitions: []kmsg.ListOffsetsRequestTopicPartition{lp}}}
	code(t, "bob list offsets", n.as(t, bob, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode, nil)
	code(t, "carol list offsets", n.as(t, carol, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// DeleteRecords needs Delete.
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version, dr.TimeoutMillis = 1, 5000
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "fuzz", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	code(t, "alice delete records", n.as(t, alice, dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// InitProducerId: Write on some topic (KIP-679) or IdempotentWrite.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	code(t, "bob init producer id", n.as(t, bob, ip).(*kmsg.InitProducerIDResponse).ErrorCode, nil)
	code(t, "carol init producer id", n.as(t, carol, ip).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
}

// TestAuthorizeMetadata: an every-topic answer lists only the topics the
// principal may describe; a named topic it may not describe answers
// TOPIC_AUTHORIZATION_FAILED whether it exists or not; auto-creation
// needs Create; authorized operations are the principal's.
func TestAuthorizeMetadata(t *testing.T) {
	n := newAuthzNode(t)
	all := func(p security.Principal) map[string]int16 {
		return topicCodes(n.as(t, p, metadataReq()).(*kmsg.MetadataResponse))
	}
	if got := all(carol); len(got) != 0 {
		t.Errorf("carol sees %v, want nothing", got)
	}
	if got := all(bob); len(got) != 1 || got["fuzz"] != 0 {
		t.Errorf("bob sees %v, want fuzz only", got)
	}
	// A Deny of Read does not deny Describe: alice sees both.
	if got := all(alice); len(got) != 2 {
		t.Errorf("alice sees %v, want fuzz and fuzz-wide", got)
	}
	if got := all(admin); len(got) < 2 {
		t.Errorf("admin sees %v", got)
	}

	got := topicCodes(n.as(t, carol, metadataReq("fuzz", "nope")).(*kmsg.MetadataResponse))
	code(t, "carol metadata fuzz", got["fuzz"], kerr.TopicAuthorizationFailed)
	code(t, "carol metadata nope", got["nope"], kerr.TopicAuthorizationFailed)

	// alice may describe fuzz-new (the prefix) but not create it.
	got = topicCodes(n.as(t, alice, metadataReq("fuzz-new")).(*kmsg.MetadataResponse))
	code(t, "alice auto-create fuzz-new", got["fuzz-new"], kerr.TopicAuthorizationFailed)
	if _, ok := n.brk.Image().Topics["fuzz-new"]; ok {
		t.Fatal("a principal without Create auto-created a topic")
	}
	n.as(t, admin, metadataReq("fuzz-admin"))
	if _, ok := n.brk.Image().Topics["fuzz-admin"]; !ok {
		t.Fatal("a super user's metadata request did not auto-create the topic")
	}

	md := n.as(t, bob, metadataReq("fuzz")).(*kmsg.MetadataResponse)
	// Write implies Describe; nothing else.
	if want := int32(1<<security.OpWrite | 1<<security.OpDescribe); md.Topics[0].AuthorizedOperations != want {
		t.Errorf("bob's authorized operations on fuzz: %b, want %b", md.Topics[0].AuthorizedOperations, want)
	}

	// DescribeCluster's operations need Describe on the cluster.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if ops := n.as(t, bob, dc).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != 0 {
		t.Errorf("bob's cluster operations %b, want none", ops)
	}
	if ops := n.as(t, admin, dc).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops&(1<<security.OpAlter) == 0 {
		t.Errorf("admin's cluster operations %b lack Alter", ops)
	}
}

// TestAuthorizeGroups: taking part in a group and committing needs Read on
// it, describing and fetching offsets Describe, deleting Delete
// (GROUP_AUTHORIZATION_FAILED); the topics of a commit need Read
// (TOPIC_AUTHORIZATION_FAILED per partition, the others committed);
// ListGroups lists only the groups the principal may describe.
func TestAuthorizeGroups(t *testing.T) {
	n := newAuthzNode(t)
	commit := func(topics ...string) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, "fuzz-group", -1
		for _, topic := range topics {
			req.Topics = append(req.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic,
				Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}})
		}
		return req
	}
	oc := n.as(t, alice, commit("fuzz", "fuzz-wide")).(*kmsg.OffsetCommitResponse)
	codes := map[string]int16{}
	for _, tp := range oc.Topics {
		codes[tp.Topic] = tp.Partitions[0].ErrorCode
	}
	code(t, "alice commit fuzz", codes["fuzz"], nil)
	code(t, "alice commit fuzz-wide", codes["fuzz-wide"], kerr.TopicAuthorizationFailed)
	oc = n.as(t, bob, commit("fuzz")).(*kmsg.OffsetCommitResponse)
	code(t, "bob commit", oc.Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "fuzz-group"}}
	ofr := n.as(t, alice, of).(*kmsg.OffsetFetchResponse)
	code(t, "alice offset fetch", ofr.Groups[0].ErrorCode, nil)
	if len(ofr.Groups[0].Topics) == 0 {
		t.Error("alice offset fetch: no committed offsets")
	}
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "fuzz-group"}}
	ofr = n.as(t, carol, of).(*kmsg.OffsetFetchResponse)
	code(t, "carol offset fetch", ofr.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 7, "fuzz-group", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	code(t, "bob join", n.as(t, bob, join).(*kmsg.JoinGroupResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 4, "fuzz-group", "m"
	code(t, "carol heartbeat", n.as(t, carol, hb).(*kmsg.HeartbeatResponse).ErrorCode, kerr.GroupAuthorizationFailed)

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{"fuzz-group"}
	code(t, "alice describe group", n.as(t, alice, dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode, nil)
	dg.Groups = []string{"fuzz-group"}
	code(t, "carol describe group", n.as(t, carol, dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)

	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	if groups := n.as(t, carol, lg).(*kmsg.ListGroupsResponse).Groups; len(groups) != 0 {
		t.Errorf("carol lists %v", groups)
	}
	if groups := n.as(t, alice, lg).(*kmsg.ListGroupsResponse).Groups; len(groups) != 1 || groups[0].Group != "fuzz-group" {
		t.Errorf("alice lists %v", groups)
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"fuzz-group", "other"}
	fcr := n.as(t, alice, fc).(*kmsg.FindCoordinatorResponse)
	byKey := map[string]int16{}
	for _, c := range fcr.Coordinators {
		byKey[c.Key] = c.ErrorCode
	}
	code(t, "alice find coordinator fuzz-group", byKey["fuzz-group"], nil)
	code(t, "alice find coordinator other", byKey["other"], kerr.GroupAuthorizationFailed)

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"fuzz-group"}
	code(t, "alice delete group (Read only)", n.as(t, alice, del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "fuzz-group"
	code(t, "alice offset delete", n.as(t, alice, od).(*kmsg.OffsetDeleteResponse).ErrorCode, kerr.GroupAuthorizationFailed)
}

// TestAuthorizeAdmin: topic administration needs Create (on the cluster
// or the topic), Describe and Delete, Alter; configs DescribeConfigs and
// AlterConfigs on the topic (TOPIC_AUTHORIZATION_FAILED) or the cluster
// (CLUSTER_AUTHORIZATION_FAILED); cluster administration Alter or Describe
// on the cluster; requests only brokers send ClusterAction.
func TestAuthorizeAdmin(t *testing.T) {
	n := newAuthzNode(t)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version, ct.ValidateOnly = 7, true
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "fresh", NumPartitions: 1, ReplicationFactor: 1}}
	code(t, "bob create topic", n.as(t, bob, ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	code(t, "admin create topic", n.as(t, admin, ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, nil)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TopicNames = 5, []string{"fuzz"}
	code(t, "alice delete topic", n.as(t, alice, dt).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	if _, ok := n.brk.Image().Topics["fuzz"]; !ok {
		t.Fatal("a refused DeleteTopics deleted the topic")
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.ValidateOnly = 3, true
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "fuzz", Count: 4}}
	code(t, "alice create partitions", n.as(t, alice, cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fuzz"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
	dcr := n.as(t, alice, dc).(*kmsg.DescribeConfigsResponse)
	code(t, "alice describe topic configs", dcr.Resources[0].ErrorCode, kerr.TopicAuthorizationFailed)
	code(t, "alice describe broker configs", dcr.Resources[1].ErrorCode, kerr.ClusterAuthorizationFailed)
	dc.Resources = dc.Resources[:1]
	code(t, "admin describe topic configs", n.as(t, admin, dc).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode, nil)

	ac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ac.Version, ac.ValidateOnly = 1, true
	ac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fuzz",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}}}
	code(t, "bob alter configs", n.as(t, bob, ac).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode, kerr.TopicAuthorizationFailed)

	el := kmsg.NewPtrElectLeadersRequest()
	el.Version = 2
	code(t, "bob elect leaders", n.as(t, bob, el).(*kmsg.ElectLeadersResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	apr := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	code(t, "bob alter reassignments", n.as(t, bob, apr).(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	lpr := kmsg.NewPtrListPartitionReassignmentsRequest()
	code(t, "bob list reassignments", n.as(t, bob, lpr).(*kmsg.ListPartitionReassignmentsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	code(t, "admin list reassignments", n.as(t, admin, lpr).(*kmsg.ListPartitionReassignmentsResponse).ErrorCode, nil)
	ld := kmsg.NewPtrDescribeLogDirsRequest()
	ld.Version = 4
	ldr := n.as(t, bob, ld).(*kmsg.DescribeLogDirsResponse)
	code(t, "bob describe log dirs", ldr.ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(ldr.Dirs) != 0 {
		t.Errorf("bob sees log dirs %v", ldr.Dirs)
	}

	// The ACL APIs: Describe on the cluster to list, Alter to change.
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version = 3
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	code(t, "carol describe ACLs", n.as(t, carol, da).(*kmsg.DescribeACLsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	if dar := n.as(t, admin, da).(*kmsg.DescribeACLsResponse); dar.ErrorCode != 0 || len(dar.Resources) != 4 {
		t.Errorf("admin describe ACLs: %v, %d resources, want 4", kerr.ErrorForCode(dar.ErrorCode), len(dar.Resources))
	}
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Version = 3
	cc := kmsg.NewCreateACLsRequestCreation()
	cc.ResourceType, cc.ResourceName, cc.Principal, cc.Host = kmsg.ACLResourceTypeTopic, "fuzz", carol.String(), "*"
	cc.Operation, cc.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	ca.Creations = append(ca.Creations, cc)
	code(t, "carol create ACLs", n.as(t, carol, ca).(*kmsg.CreateACLsResponse).Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	dl := kmsg.NewPtrDeleteACLsRequest()
	dl.Version = 3
	df := kmsg.NewDeleteACLsRequestFilter()
	df.ResourceType, df.ResourcePatternType, df.Operation, df.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dl.Filters = append(dl.Filters, df)
	code(t, "carol delete ACLs", n.as(t, carol, dl).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)

	// ClusterAction: with an authorizer, the principal decides, not the
	// address (192.0.2.1 registered nothing, yet admin may).
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.Version, cs.BrokerID = 3, 1
	code(t, "bob controlled shutdown", n.as(t, bob, cs).(*kmsg.ControlledShutdownResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	follower := fetchReq("fuzz")
	follower.ReplicaID = 1
	code(t, "alice follower fetch", n.as(t, alice, follower).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	follower = fetchReq("fuzz")
	follower.ReplicaID = 1
	// Past the check: the broker answers (it leads the partition itself,
	// so not as a follower's leader).
	if ec := n.as(t, admin, follower).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; ec == kerr.TopicAuthorizationFailed.Code {
		t.Error("admin follower fetch: refused")
	}
}

// TestAuthorizeAllowedPathDoesNotAllocate: the check a produce and a fetch
// make per topic allocates nothing.
func TestAuthorizeAllowedPathDoesNotAllocate(t *testing.T) {
	n := newAuthzNode(t)
	r := &Request{Remote: "192.0.2.1:40000", Principal: alice}
	if !n.s.allowedTopic(r, security.OpRead, "fuzz") {
		t.Fatal("alice may not read fuzz")
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		n.s.allowedTopic(r, security.OpRead, "fuzz")
		n.s.allowedTopic(r, security.OpWrite, "fuzz")
	}); allocs != 0 {
		t.Fatalf("%v allocations per check", allocs)
	}
}

// TestAuthorizeScramAndLoggers: SCRAM credentials are described with
// Describe on the cluster and altered with Alter on it, as Kafka checks
// them; log levels (BROKER_LOGGER) are changed with AlterConfigs on it.
func TestAuthorizeScramAndLoggers(t *testing.T) {
	n := newAuthzNode(t)
	d := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	code(t, "bob describe credentials", n.as(t, bob, d).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	if c := n.as(t, admin, d).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode; c == kerr.ClusterAuthorizationFailed.Code {
		t.Fatal("a super user was refused describing credentials")
	}

	a := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	a.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "mallory", Mechanism: 2, Iterations: 8192, Salt: []byte("salt"), SaltedPassword: []byte("salted")}}
	a.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 1}}
	res := n.as(t, bob, a).(*kmsg.AlterUserSCRAMCredentialsResponse).Results
	if len(res) != 2 {
		t.Fatalf("alter by bob: %d results, want 2", len(res))
	}
	for _, r := range res {
		code(t, "bob alter credentials of "+r.User, r.ErrorCode, kerr.ClusterAuthorizationFailed)
	}
	for _, r := range n.as(t, admin, a).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if r.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("a super user was refused altering %s", r.User)
		}
	}

	lg := kmsg.NewPtrIncrementalAlterConfigsRequest()
	lg.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "1",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "broker", Op: 0, Value: kmsg.StringPtr("DEBUG")}}}}
	lg.ValidateOnly = true
	code(t, "bob set a log level", n.as(t, bob, lg).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode, kerr.ClusterAuthorizationFailed)
}

// TestAuthorizeTransactions: the transaction APIs check Write on the
// transactional id, Write on each topic added, Read on the group and its
// topics, ClusterAction for the brokers' requests and Describe to see a
// transaction, with Kafka's error codes; nothing refused reaches the
// coordinators.
func TestAuthorizeTransactions(t *testing.T) {
	n := newAuthzNode(t, allow(bob, security.OpWrite, security.ResourceTransactionalID, security.PatternLiteral, "bob-txn"))
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.TransactionalID, ip.TransactionTimeoutMillis = 4, kmsg.StringPtr("alice-txn"), 60000
	code(t, "carol init alice-txn", n.as(t, carol, ip).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	ip.TransactionalID = kmsg.StringPtr("bob-txn")
	if c := n.as(t, bob, ip).(*kmsg.InitProducerIDResponse).ErrorCode; c == kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatal("bob was refused his own transactional id")
	}

	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version, ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = 3, "bob-txn", 1, 0
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "fuzz", Partitions: []int32{0}}, {Topic: "fuzz-wide", Partitions: []int32{0}}}
	got := map[string]int16{}
	for _, rt := range n.as(t, bob, ap).(*kmsg.AddPartitionsToTxnResponse).Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	code(t, "bob adds fuzz-wide", got["fuzz-wide"], kerr.TopicAuthorizationFailed)
	code(t, "bob adds fuzz beside a refused topic", got["fuzz"], kerr.OperationNotAttempted)
	for _, rt := range n.as(t, carol, ap).(*kmsg.AddPartitionsToTxnResponse).Topics {
		code(t, "carol adds to bob-txn", rt.Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	}
	ap4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap4.Version = 4
	ap4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "bob-txn", ProducerID: 1, VerifyOnly: true}}
	code(t, "bob sends the brokers' batched AddPartitionsToTxn", n.as(t, bob, ap4).(*kmsg.AddPartitionsToTxnResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.Group = "bob-txn", "fuzz-group"
	code(t, "bob adds a group he may not read", n.as(t, bob, ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	ao.TransactionalID = "alice-txn"
	code(t, "alice adds offsets to a transactional id she may not write", n.as(t, alice, ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.Commit = "bob-txn", true
	code(t, "carol ends bob-txn", n.as(t, carol, et).(*kmsg.EndTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	to := kmsg.NewPtrTxnOffsetCommitRequest()
	to.Version, to.TransactionalID, to.Group = 3, "bob-txn", "fuzz-group"
	to.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "fuzz", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	for _, rt := range n.as(t, bob, to).(*kmsg.TxnOffsetCommitResponse).Topics {
		code(t, "bob commits for a group he may not read", rt.Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)
	}

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Committed: true, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "fuzz", Partitions: []int32{0}}}}}
	code(t, "bob writes a marker", n.as(t, bob, wm).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode, kerr.ClusterAuthorizationFailed)

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"alice-txn"}
	for _, st := range n.as(t, carol, dt).(*kmsg.DescribeTransactionsResponse).TransactionStates {
		code(t, "carol describes alice-txn", st.ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	}

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "fuzz", Partitions: []int32{0}}}
	code(t, "carol describes fuzz's producers", n.as(t, carol, dp).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
}

// TestAuthorizeFetchSession: a consumer's fetch session does not carry
// access past the check: the partitions of a topic it may not read are
// refused on the full fetch that opens the session and on every
// incremental fetch after it.
func TestAuthorizeFetchSession(t *testing.T) {
	n := newAuthzNode(t)
	full := fetchReq("fuzz")
	full.SessionID, full.SessionEpoch = 0, 0
	resp := n.as(t, carol, full).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("full fetch: %d topics", len(resp.Topics))
	}
	code(t, "carol's full fetch", resp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	if resp.SessionID == 0 {
		t.Fatal("no session opened")
	}
	inc := fetchReq()
	inc.SessionID, inc.SessionEpoch = resp.SessionID, 1
	resp = n.as(t, carol, inc).(*kmsg.FetchResponse)
	if len(resp.Topics) == 0 {
		t.Fatal("the incremental fetch left out the refused partition")
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			code(t, "carol's incremental fetch of "+rt.Topic, rp.ErrorCode, kerr.TopicAuthorizationFailed)
		}
	}
}

// TestAuthorizeFetchSessionACLChange: a consumer whose session is idle
// (incremental fetches answer nothing) and that loses Read on the topic is
// told so by its next incremental fetch, not only when the partition next
// changes; a later fetch with the ACLs unchanged answers as before.
func TestAuthorizeFetchSessionACLChange(t *testing.T) {
	n := newAuthzNode(t)
	full := fetchReq("fuzz")
	full.SessionID, full.SessionEpoch = 0, 0
	resp := n.as(t, alice, full).(*kmsg.FetchResponse)
	if resp.SessionID == 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alice's full fetch: session %d, %+v", resp.SessionID, resp.Topics)
	}
	end := resp.Topics[0].Partitions[0].HighWatermark
	// Move the session's position to the end: from then on it is idle.
	at := fetchReq("fuzz")
	at.Topics[0].Partitions[0].FetchOffset = end
	at.SessionID, at.SessionEpoch = resp.SessionID, 1
	n.as(t, alice, at)
	epoch := int32(2)
	idle := func() *kmsg.FetchResponse {
		t.Helper()
		inc := fetchReq()
		inc.SessionID, inc.SessionEpoch = resp.SessionID, epoch
		epoch++
		return n.as(t, alice, inc).(*kmsg.FetchResponse)
	}
	for i := 0; i < 5 && len(idle().Topics) > 0; i++ {
	}
	if got := idle(); len(got.Topics) != 0 {
		t.Fatalf("the session is not idle: %+v", got.Topics)
	}

	n.s.cfg.Broker.Authorizer().SetACLs([]security.ACL{
		allow(alice, security.OpRead, security.ResourceGroup, security.PatternLiteral, "fuzz-group"),
	})
	got := idle()
	if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 1 {
		t.Fatalf("after alice lost Read: %+v, want fuzz-0 refused", got.Topics)
	}
	code(t, "alice's idle session after losing Read", got.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
}
