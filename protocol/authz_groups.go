package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// The group APIs' authorization, as Kafka's KafkaApis checks it: the group
// resource first (Read to take part in a group and commit, Describe to
// find its coordinator, describe it or fetch its offsets, Delete to delete
// it or its offsets), then the topics the request names. A denied group
// answers GROUP_AUTHORIZATION_FAILED without the coordinator seeing the
// request; denied topics are taken out of the request before the
// coordinator sees it and answered TOPIC_AUTHORIZATION_FAILED beside its
// answer (or, when the request asks for every topic, left out).

// groupDenied reports whether r's principal may not perform op on group.
func (s *Server) groupDenied(r *Request, op security.Operation, group string) bool {
	return !s.allowedGroup(r, op, group)
}

// authorizeOffsetCommitTopics takes the topics r's principal may not read
// out of req and returns their answer (TOPIC_AUTHORIZATION_FAILED on each
// partition), nil when all may be read.
func (s *Server) authorizeOffsetCommitTopics(r *Request, req *kmsg.OffsetCommitRequest) []kmsg.OffsetCommitResponseTopic {
	var denied []kmsg.OffsetCommitResponseTopic
	var kept []kmsg.OffsetCommitRequestTopic // once one is denied: the others
	for i, t := range req.Topics {
		if s.allowedTopic(r, security.OpRead, t.Topic) {
			if denied != nil {
				kept = append(kept, t)
			}
			continue
		}
		if denied == nil {
			kept = append(kept, req.Topics[:i]...)
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if denied != nil {
		req.Topics = kept
	}
	return denied
}

// authorizeOffsetDeleteTopics is authorizeOffsetCommitTopics for
// OffsetDelete (Read on each topic).
func (s *Server) authorizeOffsetDeleteTopics(r *Request, req *kmsg.OffsetDeleteRequest) []kmsg.OffsetDeleteResponseTopic {
	var denied []kmsg.OffsetDeleteResponseTopic
	var kept []kmsg.OffsetDeleteRequestTopic // once one is denied: the others
	for i, t := range req.Topics {
		if s.allowedTopic(r, security.OpRead, t.Topic) {
			if denied != nil {
				kept = append(kept, t)
			}
			continue
		}
		if denied == nil {
			kept = append(kept, req.Topics[:i]...)
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if denied != nil {
		req.Topics = kept
	}
	return denied
}

// offsetFetchTopicsDenied answers the partitions of topics a principal may
// not describe in an OffsetFetch (v0-7 shape).
func offsetFetchTopicDenied(t kmsg.OffsetFetchRequestTopic) kmsg.OffsetFetchResponseTopic {
	rt := kmsg.NewOffsetFetchResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, kerr.TopicAuthorizationFailed.Code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// offsetFetchGroupTopicDenied is offsetFetchTopicDenied for v8+.
func offsetFetchGroupTopicDenied(t kmsg.OffsetFetchRequestGroupTopic) kmsg.OffsetFetchResponseGroupTopic {
	rt := kmsg.NewOffsetFetchResponseGroupTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, kerr.TopicAuthorizationFailed.Code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// offsetFetchAuthz is what authorizeOffsetFetch took out of a request, to
// be put back into its answer by finish.
type offsetFetchAuthz struct {
	s *Server
	r *Request
	// v0-7: the group was denied; the topics named that were denied; the
	// request asked for every topic (the answer is filtered).
	groupDenied bool
	topics      []kmsg.OffsetFetchResponseTopic
	allTopics   bool
	// v8+: the groups denied, the denied topics of each group kept, and
	// which groups asked for every topic.
	groups      []kmsg.OffsetFetchResponseGroup
	groupTopics map[string][]kmsg.OffsetFetchResponseGroupTopic
	groupAll    map[string]bool
}

// authorizeOffsetFetch checks an OffsetFetch (Describe on each group,
// Describe on each topic named) and takes what is denied out of req. It
// returns nil when there is no authorizer.
func (s *Server) authorizeOffsetFetch(r *Request, req *kmsg.OffsetFetchRequest) *offsetFetchAuthz {
	if s.cfg.Broker.Authorizer() == nil {
		return nil
	}
	a := &offsetFetchAuthz{s: s, r: r}
	if req.Version < 8 {
		if s.groupDenied(r, security.OpDescribe, req.Group) {
			a.groupDenied = true
			return a
		}
		a.allTopics = req.Topics == nil
		kept := req.Topics[:0:0]
		for _, t := range req.Topics {
			if s.allowedTopic(r, security.OpDescribe, t.Topic) {
				kept = append(kept, t)
			} else {
				a.topics = append(a.topics, offsetFetchTopicDenied(t))
			}
		}
		if a.topics != nil {
			req.Topics = kept
		}
		return a
	}
	keptGroups := req.Groups[:0:0]
	for _, g := range req.Groups {
		if s.groupDenied(r, security.OpDescribe, g.Group) {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
			a.groups = append(a.groups, rg)
			continue
		}
		if g.Topics == nil {
			if a.groupAll == nil {
				a.groupAll = map[string]bool{}
			}
			a.groupAll[g.Group] = true
		}
		kept := g.Topics[:0:0]
		for _, t := range g.Topics {
			if s.allowedTopic(r, security.OpDescribe, t.Topic) {
				kept = append(kept, t)
				continue
			}
			if a.groupTopics == nil {
				a.groupTopics = map[string][]kmsg.OffsetFetchResponseGroupTopic{}
			}
			a.groupTopics[g.Group] = append(a.groupTopics[g.Group], offsetFetchGroupTopicDenied(t))
		}
		if len(kept) != len(g.Topics) {
			g.Topics = kept
		}
		keptGroups = append(keptGroups, g)
	}
	if len(keptGroups) != len(req.Groups) || a.groupTopics != nil {
		req.Groups = keptGroups
	}
	return a
}

// deniedWhole reports whether the whole request was denied (v0-7: the
// group), with its answer.
func (a *offsetFetchAuthz) deniedWhole(req *kmsg.OffsetFetchRequest) (kmsg.Response, bool) {
	if a == nil || !a.groupDenied {
		return nil, false
	}
	return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), true
}

// finish puts the denied groups and topics into the answer and leaves out
// the topics of an every-topic request that may not be described.
func (a *offsetFetchAuthz) finish(resp *kmsg.OffsetFetchResponse) {
	if a == nil {
		return
	}
	// Left out of an every-topic answer: not a denial.
	describable := func(topic string) bool { return a.s.permitted(a.r, security.OpDescribe, security.ResourceTopic, topic) }
	if resp.Version < 8 {
		if a.allTopics {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if describable(t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
		resp.Topics = append(resp.Topics, a.topics...)
		return
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if a.groupAll[g.Group] {
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if describable(t.Topic) {
					kept = append(kept, t)
				}
			}
			g.Topics = kept
		}
		g.Topics = append(g.Topics, a.groupTopics[g.Group]...)
	}
	resp.Groups = append(resp.Groups, a.groups...)
}
