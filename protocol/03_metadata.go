package protocol

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// Metadata: v0-12
//
// Behaviour:
//   - Brokers are the live brokers with their endpoint for the listener the
//     request came in on; the controller is the coordinator's controller.
//   - v0: an empty topic list means every topic. v1+: null means every
//     topic, empty means none.
//   - An unknown topic is created when auto.create.topics.enable is on and
//     the request allows it (always for v0-3; AllowAutoTopicCreation from
//     v4); the broker waits briefly for its leaders and otherwise answers
//     LEADER_NOT_AVAILABLE, which clients retry. __consumer_offsets is
//     created whenever the request allows it, whatever
//     auto.create.topics.enable says (as ZooKeeper-mode Kafka does), with
//     its own settings (offsets.topic.*). Without auto-creation the answer
//     is UNKNOWN_TOPIC_OR_PARTITION; a bad name is INVALID_TOPIC_EXCEPTION.
//     The partitions created count against the client's
//     controller_mutation_rate, permissively (quotas.go): the topic is
//     created and the response throttled.
//   - A partition whose leader is not live has leader -1 and
//     LEADER_NOT_AVAILABLE; replicas that are not live are listed as
//     offline (v5+).
//   - Authorization: Describe on each topic, else it is left out of an
//     answer about every topic and answers TOPIC_AUTHORIZATION_FAILED when
//     named (existing or not); auto-creation needs Create on the cluster
//     or the topic (else TOPIC_AUTHORIZATION_FAILED).
//   - Topics marked for deletion are not shown. A topic named more than
//     once is answered once, as Kafka does. Unknown topics that would take
//     more than 10,000 metadata records to create (each is one record and
//     one per partition) are not created: POLICY_VIOLATION, Kafka's
//     answer to such a CreateTopics.
//
// Version notes:
//   - v1: ControllerID, IsInternal, Rack, nullable topic list.
//   - v2: ClusterID. v3: ThrottleMillis. v4: AllowAutoTopicCreation.
//   - v5: OfflineReplicas. v7: LeaderEpoch.
//   - v8: authorized operations (every supported one without an
//     authorizer; the cluster's only for a principal with Describe on it).
//   - v9: flexible. v10: TopicID (lookups by id answer UNKNOWN_TOPIC_ID when
//     unknown). v11: no cluster authorized operations. v12: nullable topic
//     names in the response.

func init() { register(3, 0, 12, handleMetadata) }

// autoCreateWait bounds how long Metadata waits for an auto-created topic's
// leaders before answering LEADER_NOT_AVAILABLE.
const autoCreateWait = 5 * time.Second

func handleMetadata(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := s.cfg.Broker

	allTopics := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	if !allTopics {
		req.Topics = uniqueTopics(req.Topics)
	}

	// Authorization (Kafka's): a topic the principal may not describe is
	// left out of an answer about every topic, and answers
	// TOPIC_AUTHORIZATION_FAILED when named (whether it exists or not);
	// creating one needs Create on the cluster or on the topic.
	// A topic left out of an all-topics answer is not a denial (Kafka's
	// logIfDenied=false); one named and refused is, once.
	describable := func(name string) bool {
		if allTopics {
			return s.permitted(r, security.OpDescribe, security.ResourceTopic, name)
		}
		return s.allowedTopic(r, security.OpDescribe, name)
	}
	clusterCreate := s.permittedCluster(r, security.OpCreate)
	creatable := func(name string) bool { return clusterCreate || s.allowedTopic(r, security.OpCreate, name) }
	// mayCreate is asked before the answer, which asks again and counts.
	mayCreate := func(name string) bool {
		return s.permitted(r, security.OpDescribe, security.ResourceTopic, name) &&
			(clusterCreate || s.permitted(r, security.OpCreate, security.ResourceTopic, name))
	}

	// Create unknown topics first, all at once, so the answer below comes
	// from one image.
	if !allTopics && autoCreate {
		img := b.Image()
		var missing []string
		var records int64
		for _, t := range req.Topics {
			if t.Topic == nil {
				continue
			}
			if ti, ok := img.Topics[*t.Topic]; (!ok || ti.Deleting) && b.AutoCreates(*t.Topic) && mayCreate(*t.Topic) {
				missing = append(missing, *t.Topic)
				records += b.AutoCreateRecords(*t.Topic)
			}
		}
		if len(missing) > 0 {
			errs := make(map[string]error, len(missing))
			if records > cluster.MaxRecordsPerRequest {
				// As many topics as Kafka would refuse in one
				// CreateTopics: none is created.
				for _, name := range missing {
					errs[name] = broker.ErrExcessiveBatch
				}
				missing = nil
			} else {
				r.Detach()
			}
			wctx, cancel := context.WithTimeout(ctx, autoCreateWait)
			mq := s.mutationQuota(r) // permissive: Metadata refuses nothing for it
			defer endMutations(r, mq)
			for _, name := range missing {
				if wctx.Err() != nil {
					break // the rest answer LEADER_NOT_AVAILABLE: clients ask again
				}
				if ti, ok := b.Image().Topics[name]; ok && !ti.Deleting {
					continue
				}
				if err := b.AutoCreateTopic(wctx, name); err != nil {
					errs[name] = err
				} else if ti, ok := b.Image().Topics[name]; ok {
					_ = recordMutations(mq, len(ti.Partitions)) // permissive: never refused
				}
			}
			cancel()
			defer func() { applyCreateErrors(resp, errs) }()
		}
	}

	img := b.Image()
	for _, br := range img.Brokers {
		ep, ok := br.Endpoint(r.Listener)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = br.ID, ep.Host, ep.Port
		if br.Rack != "" {
			rack := br.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	if img.ClusterID != "" {
		id := img.ClusterID
		resp.ClusterID = &id
	}
	resp.ControllerID = img.Controller
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if s.permittedCluster(r, security.OpDescribe) {
			resp.AuthorizedOperations = s.authorizedOps(r, security.ResourceCluster, security.ClusterName)
		}
	}
	live := func(id int32) bool { _, ok := img.Broker(id); return ok }

	addTopic := func(t *broker.TopicImage) {
		mt := kmsg.NewMetadataResponseTopic()
		name := t.Name
		mt.Topic = &name
		mt.TopicID = t.ID
		mt.IsInternal = t.Internal
		if req.IncludeTopicAuthorizedOperations {
			mt.AuthorizedOperations = s.authorizedOps(r, security.ResourceTopic, t.Name)
		}
		for _, p := range t.Partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = p.Partition
			mp.Leader = p.Leader
			mp.LeaderEpoch = p.LeaderEpoch
			mp.Replicas = slices.Clone(p.Replicas)
			mp.ISR = slices.Clone(p.ISR)
			if mp.ISR == nil {
				mp.ISR = []int32{}
			}
			for _, rep := range p.Replicas {
				if !live(rep) {
					mp.OfflineReplicas = append(mp.OfflineReplicas, rep)
				}
			}
			if p.Leader < 0 || !live(p.Leader) {
				mp.Leader = -1
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	unknown := func(name *string, id [16]byte, code int16) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = name
		mt.TopicID = id
		mt.ErrorCode = code
		resp.Topics = append(resp.Topics, mt)
	}

	if allTopics {
		for _, name := range img.TopicNames() {
			if t := img.Topics[name]; !t.Deleting && describable(name) {
				addTopic(t)
			}
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			if t, ok := img.TopicByID(cluster.TopicID(rt.TopicID)); ok && !t.Deleting && !describable(t.Name) {
				// Kafka: topic ids are not secret; the name is.
				unknown(nil, rt.TopicID, kerr.TopicAuthorizationFailed.Code)
			} else if ok && !t.Deleting {
				addTopic(t)
			} else {
				unknown(nil, rt.TopicID, kerr.UnknownTopicID.Code)
			}
			continue
		}
		if !describable(*rt.Topic) {
			unknown(rt.Topic, [16]byte{}, kerr.TopicAuthorizationFailed.Code)
			continue
		}
		if t, ok := img.Topics[*rt.Topic]; ok && !t.Deleting {
			addTopic(t)
			continue
		}
		code := kerr.UnknownTopicOrPartition.Code
		if err := cluster.ValidateTopicName(*rt.Topic); err != nil {
			code = kerr.InvalidTopicException.Code
		} else if autoCreate && b.AutoCreates(*rt.Topic) && !creatable(*rt.Topic) {
			code = kerr.TopicAuthorizationFailed.Code
		} else if autoCreate && b.AutoCreates(*rt.Topic) {
			// Created but not visible yet: clients retry on this.
			code = kerr.LeaderNotAvailable.Code
		}
		unknown(rt.Topic, [16]byte{}, code)
	}
	return resp, nil
}

// uniqueTopics returns topics with each name (or, for a lookup by id, each
// topic id) once, in the order first named: Kafka answers a topic named
// twice once (it reads the names into a set), and an answer never holds a
// topic's partitions more than once however often a request names it.
func uniqueTopics(topics []kmsg.MetadataRequestTopic) []kmsg.MetadataRequestTopic {
	if len(topics) < 2 {
		return topics
	}
	names := make(map[string]struct{}, len(topics))
	var ids map[[16]byte]struct{}
	out := topics[:0:0]
	for _, t := range topics {
		if t.Topic != nil {
			if _, dup := names[*t.Topic]; dup {
				continue
			}
			names[*t.Topic] = struct{}{}
		} else {
			if ids == nil {
				ids = map[[16]byte]struct{}{}
			}
			if _, dup := ids[t.TopicID]; dup {
				continue
			}
			ids[t.TopicID] = struct{}{}
		}
		out = append(out, t)
	}
	return out
}

// applyCreateErrors puts the error of a failed auto-creation on its topic
// (INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION, ...), replacing the
// generic code the topic got for being absent.
func applyCreateErrors(resp *kmsg.MetadataResponse, errs map[string]error) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil {
			continue
		}
		if err, ok := errs[*t.Topic]; ok && len(t.Partitions) == 0 {
			t.ErrorCode, _ = broker.ErrorCode(err)
		}
	}
}
