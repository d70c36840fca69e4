package group

import (
	"math"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group administration: DescribeGroups, ListGroups, DeleteGroups.

// groupAuthorizedOperations is what DescribeGroups v3+ reports when asked:
// Sluice has no ACLs, so READ, DELETE and DESCRIBE on the group are
// allowed (the bits of kmsg.ACLOperation).
const groupAuthorizedOperations = int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDelete | 1<<kmsg.ACLOperationDescribe)

func (st *state) describe(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		rg.AuthorizedOperations = math.MinInt32
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = groupAuthorizedOperations
		}
		if code := st.coordinatorError(name); code != 0 {
			rg.ErrorCode = code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		g, ok := st.groups[name]
		if !ok {
			// Kafka describes a group it does not know as Dead, no error.
			rg.State = stateDead.String()
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State = g.state.String()
		rg.ProtocolType = g.protocolType
		stable := g.state == stateStable
		if stable {
			rg.Protocol = g.protocol
		}
		for _, id := range sortedKeys(g.members) {
			m := g.members[id]
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID = m.id
			if m.instanceID != "" {
				rm.InstanceID = kmsg.StringPtr(m.instanceID)
			}
			rm.ClientID = m.clientID
			rm.ClientHost = m.clientHost
			// Like Kafka, metadata and assignment only for a Stable group.
			rm.ProtocolMetadata = []byte{}
			rm.MemberAssignment = []byte{}
			if stable {
				if md, ok := m.metadataFor(g.protocol); ok {
					rm.ProtocolMetadata = md
				}
				rm.MemberAssignment = nonNil(m.assignment)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (st *state) list(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	for _, p := range st.partitions {
		if !p.loaded {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
	}
	var filter map[string]bool
	if req.Version >= 4 && len(req.StatesFilter) > 0 {
		filter = make(map[string]bool, len(req.StatesFilter))
		for _, s := range req.StatesFilter {
			filter[strings.ToLower(s)] = true
		}
	}
	for _, name := range sortedKeys(st.groups) {
		g := st.groups[name]
		state := g.state.String()
		if filter != nil && !filter[strings.ToLower(state)] {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group = name
		rg.ProtocolType = g.protocolType
		rg.GroupState = state
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// deleteGroups handles DeleteGroups: an Empty group's offsets and metadata
// are deleted with tombstones; a group with members is NON_EMPTY_GROUP.
func (st *state) deleteGroups(req *kmsg.DeleteGroupsRequest, reply func(*kmsg.DeleteGroupsResponse)) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	codes := make([]int16, len(req.Groups))
	waiting := 1 // released after the loop, so reply runs once, last
	finish := func() {
		waiting--
		if waiting > 0 {
			return
		}
		for i, name := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group = name
			rg.ErrorCode = codes[i]
			resp.Groups = append(resp.Groups, rg)
		}
		reply(resp)
	}
	for i, name := range req.Groups {
		if code := st.coordinatorError(name); code != 0 {
			codes[i] = code
			continue
		}
		g, ok := st.groups[name]
		switch {
		case !ok || g.state == stateDead:
			codes[i] = kerr.GroupIDNotFound.Code
			continue
		case g.state != stateEmpty || len(g.members) > 0:
			codes[i] = kerr.NonEmptyGroup.Code
			continue
		}
		recs := make([]offsetsRecord, 0, len(g.offsets)+1)
		for _, tp := range sortedOffsetKeys(g.offsets) {
			recs = append(recs, offsetsRecord{key: encodeOffsetKey(nil, name, tp.topic, tp.partition)})
		}
		recs = append(recs, offsetsRecord{key: encodeGroupKey(nil, name)})
		for id := range g.pending {
			delete(g.pending, id)
		}
		st.removeGroup(g)
		st.log.Info("group deleted", "group", name, "offsets", len(recs)-1)
		waiting++
		st.appendRecords(g.partition, recs, nil, func(err error) {
			if err != nil {
				codes[i] = storeErrorCode(err)
			}
			finish()
		})
	}
	finish()
}
