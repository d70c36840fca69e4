package group

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
// and the rebalance they drive, after Kafka's GroupCoordinator.
//
//	Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
//	CompletingRebalance --leader's SyncGroup stored--> Stable
//	Stable|CompletingRebalance --join with new metadata, leader join, leave, expiry--> PreparingRebalance
//	PreparingRebalance --nobody left--> Empty
//
// Every method runs under the Coordinator's mutex; reply callbacks are
// called exactly once per request, maybe later (a parked JoinGroup or
// SyncGroup), and must not block.

// Client identifies the connection a group request came from.
type Client struct {
	ID   string // client.id from the request header
	Host string // the client's address as Kafka shows it, e.g. "/127.0.0.1"
}

func joinErr(req *kmsg.JoinGroupRequest, code int16, memberID string) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = code
	resp.Generation = -1
	resp.MemberID = memberID
	return resp
}

func instanceOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// join handles JoinGroup.
func (st *state) join(cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	if req.Group == "" {
		reply(joinErr(req, kerr.InvalidGroupID.Code, req.MemberID))
		return
	}
	if code := st.coordinatorError(req.Group); code != 0 {
		reply(joinErr(req, code, req.MemberID))
		return
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < st.cfg.MinSessionTimeout || session > st.cfg.MaxSessionTimeout {
		reply(joinErr(req, kerr.InvalidSessionTimeout.Code, req.MemberID))
		return
	}
	g, exists := st.groups[req.Group]
	if !exists {
		if req.MemberID != "" {
			// A member of a group this coordinator does not know (for
			// example after the group was deleted): start over.
			reply(joinErr(req, kerr.UnknownMemberID.Code, req.MemberID))
			return
		}
		g = st.getOrCreate(req.Group)
	}
	if req.MemberID == "" {
		st.joinNew(g, cl, req, reply)
	} else {
		st.joinKnown(g, cl, req, reply)
	}
	st.maybeDropUnused(g)
}

func (st *state) joinNew(g *group, cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	if g.state == stateDead {
		reply(joinErr(req, kerr.CoordinatorNotAvailable.Code, ""))
		return
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		reply(joinErr(req, kerr.InconsistentGroupProtocol.Code, ""))
		return
	}
	instanceID := instanceOf(req.InstanceID)
	newID := cl.ID + "-" + st.newID()
	if instanceID != "" {
		if oldID, ok := g.statics[instanceID]; ok {
			if old, ok := g.members[oldID]; ok {
				st.replaceStatic(g, old, newID, cl, req, reply)
				return
			}
			delete(g.statics, instanceID)
		}
	}
	if int32(len(g.members)+len(g.pending)) >= st.cfg.MaxSize {
		reply(joinErr(req, kerr.GroupMaxSizeReached.Code, ""))
		return
	}
	if instanceID == "" && req.Version >= 4 {
		// KIP-394: hand out the id and wait for the member to come back
		// with it within its session timeout. (A new static member joins
		// at once: Kafka's requireKnownMemberId is for dynamic members.)
		exp := st.now.Add(time.Duration(req.SessionTimeoutMillis) * time.Millisecond)
		g.pending[newID] = exp
		st.schedule(timer{at: exp, kind: timerPending, group: g.name, member: newID})
		reply(joinErr(req, kerr.MemberIDRequired.Code, newID))
		return
	}
	st.addMemberAndRebalance(g, newID, cl, req, reply)
}

func (st *state) joinKnown(g *group, cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	if g.state == stateDead {
		reply(joinErr(req, kerr.CoordinatorNotAvailable.Code, req.MemberID))
		return
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		reply(joinErr(req, kerr.InconsistentGroupProtocol.Code, req.MemberID))
		return
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		st.addMemberAndRebalance(g, req.MemberID, cl, req, reply)
		return
	}
	instanceID := instanceOf(req.InstanceID)
	if g.fenced(instanceID, req.MemberID) {
		reply(joinErr(req, kerr.FencedInstanceID.Code, req.MemberID))
		return
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		reply(joinErr(req, kerr.UnknownMemberID.Code, req.MemberID))
		return
	}
	switch g.state {
	case statePreparingRebalance:
		st.updateMemberAndRebalance(g, m, cl, req, reply)
	case stateCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// A retried join: answer with the generation it is part of.
			st.touch(g, m)
			reply(st.joinResponse(g, m, req))
			return
		}
		st.updateMemberAndRebalance(g, m, cl, req, reply)
	case stateStable:
		if m.id == g.leader || !m.sameProtocols(req.Protocols) {
			// The leader rejoins to make the group rebalance (for
			// example it saw new partitions); changed metadata needs a
			// new assignment.
			st.updateMemberAndRebalance(g, m, cl, req, reply)
			return
		}
		st.touch(g, m)
		reply(st.joinResponse(g, m, req))
	default:
		reply(joinErr(req, kerr.UnknownMemberID.Code, req.MemberID))
	}
}

// joinResponse is the answer of a completed join for m: the generation,
// the protocol and the leader; the leader also gets every member's
// metadata for the selected protocol.
func (st *state) joinResponse(g *group, m *member, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	if m.id == g.leader {
		for _, id := range sortedKeys(g.members) {
			om := g.members[id]
			md, _ := om.metadataFor(g.protocol)
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = om.id
			if om.instanceID != "" {
				rm.InstanceID = kmsg.StringPtr(om.instanceID)
			}
			rm.ProtocolMetadata = md
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

func newMember(id string, cl Client, req *kmsg.JoinGroupRequest) *member {
	m := &member{id: id, instanceID: instanceOf(req.InstanceID)}
	setJoinFields(m, cl, req)
	return m
}

func setJoinFields(m *member, cl Client, req *kmsg.JoinGroupRequest) {
	m.clientID = cl.ID
	m.clientHost = cl.Host
	m.protocolType = req.ProtocolType
	m.protocols = copyProtocols(req.Protocols)
	m.sessionTimeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		m.rebalanceTimeout = m.sessionTimeout
	}
}

// park records m's JoinGroup; an earlier parked join of the same member is
// superseded (its connection is most likely gone).
func (st *state) park(m *member, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	if m.join != nil {
		m.join.reply(joinErr(m.join.req, kerr.RebalanceInProgress.Code, m.id))
	}
	m.join = &joinWait{req: req, reply: reply}
}

func (st *state) addMemberAndRebalance(g *group, id string, cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	m := newMember(id, cl, req)
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	if g.leader == "" {
		g.leader = id
	}
	if m.instanceID != "" {
		g.statics[m.instanceID] = id
	}
	g.newMemberAdded = true
	st.park(m, req, reply)
	m.deadline = st.now.Add(m.sessionTimeout)
	st.log.Debug("group member joined", "group", g.name, "member", id, "instance", m.instanceID, "client", cl.ID)
	if g.state == statePreparingRebalance {
		st.maybeCompleteJoin(g)
		return
	}
	st.prepareRebalance(g, "member "+id+" joined")
}

func (st *state) updateMemberAndRebalance(g *group, m *member, cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	setJoinFields(m, cl, req)
	st.park(m, req, reply)
	st.touch(g, m)
	if g.state == statePreparingRebalance {
		st.maybeCompleteJoin(g)
		return
	}
	st.prepareRebalance(g, "member "+m.id+" rejoined")
}

// replaceStatic handles a static member coming back under a new member id
// (KIP-345): the old id is fenced, the member keeps its assignment, and a
// Stable group whose protocol choice does not change does not rebalance.
func (st *state) replaceStatic(g *group, old *member, newID string, cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	// The old incarnation's parked requests are answered FENCED.
	if old.join != nil {
		old.join.reply(joinErr(old.join.req, kerr.FencedInstanceID.Code, old.id))
		old.join = nil
	}
	if old.sync != nil {
		old.sync.reply(syncErr(old.sync.req, kerr.FencedInstanceID.Code))
		old.sync = nil
	}
	oldID := old.id
	oldLeader := g.leader
	oldProtocols := old.protocols
	delete(g.members, oldID)
	m := old
	m.id = newID
	m.timerAt = time.Time{}
	g.members[newID] = m
	g.statics[m.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	setJoinFields(m, cl, req)
	st.touch(g, m)
	st.log.Info("static group member rejoined", "group", g.name, "instance", m.instanceID, "old_member", oldID, "member", newID)

	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocol {
			st.park(m, req, reply)
			st.prepareRebalance(g, "static member "+m.instanceID+" changed the group's protocol")
			return
		}
		// Store the new member id, then answer with the current
		// generation. The answer names the old leader id so that a
		// static leader does not compute an assignment a Stable group
		// would never hand out; it syncs as a follower and gets its own
		// assignment back.
		gen := g.generation
		st.storeGroup(g, func(err error) {
			if err != nil {
				if cur, ok := g.members[newID]; ok && g.generation == gen {
					delete(g.members, newID)
					cur.id = oldID
					cur.protocols = oldProtocols
					g.members[oldID] = cur
					g.statics[cur.instanceID] = oldID
					if g.leader == newID {
						g.leader = oldID
					}
				}
				reply(joinErr(req, storeErrorCode(err), ""))
				return
			}
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.Generation = g.generation
			resp.ProtocolType = kmsg.StringPtr(g.protocolType)
			resp.Protocol = kmsg.StringPtr(g.protocol)
			resp.LeaderID = oldLeader
			resp.MemberID = newID
			reply(resp)
		})
	case stateCompletingRebalance:
		st.park(m, req, reply)
		st.prepareRebalance(g, "static member "+m.instanceID+" rejoined during CompletingRebalance")
	default: // PreparingRebalance: it simply takes part.
		st.park(m, req, reply)
		st.maybeCompleteJoin(g)
	}
}

// prepareRebalance moves g to PreparingRebalance and starts the wait for
// its members to rejoin: the rebalance timeout, or for a group that was
// Empty the initial rebalance delay (group.initial.rebalance.delay.ms),
// extended while new members keep arriving, up to the rebalance timeout.
func (st *state) prepareRebalance(g *group, reason string) {
	if g.state == stateCompletingRebalance {
		st.resetAssignments(g, kerr.RebalanceInProgress.Code)
	}
	wasEmpty := g.state == stateEmpty
	g.transition(statePreparingRebalance, st.now)
	g.seq++
	timeout := g.rebalanceTimeout()
	st.log.Info("group rebalancing", "group", g.name, "reason", reason, "generation", g.generation, "members", len(g.members))
	if wasEmpty && st.cfg.InitialRebalanceDelay > 0 {
		d := min(st.cfg.InitialRebalanceDelay, timeout)
		g.inInitialDelay = true
		g.newMemberAdded = false
		g.initialRemaining = max(timeout-d, 0)
		st.schedule(timer{at: st.now.Add(d), kind: timerRebalance, group: g.name, seq: g.seq})
		return
	}
	g.inInitialDelay = false
	st.schedule(timer{at: st.now.Add(timeout), kind: timerRebalance, group: g.name, seq: g.seq})
	st.maybeCompleteJoin(g)
}

// maybeCompleteJoin ends PreparingRebalance as soon as every member has
// rejoined (never during the initial delay, which always runs its course).
func (st *state) maybeCompleteJoin(g *group) {
	if g.state == statePreparingRebalance && !g.inInitialDelay && g.allJoined() {
		st.completeJoin(g)
	}
}

// completeJoin ends PreparingRebalance: members that did not rejoin are
// removed (static ones stay until their session expires), the generation
// is bumped, a protocol chosen, and every parked JoinGroup answered.
func (st *state) completeJoin(g *group) {
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		if m.join == nil && m.instanceID == "" {
			st.log.Info("group member removed: did not rejoin within the rebalance timeout", "group", g.name, "member", m.id)
			st.removeMember(g, m, kerr.UnknownMemberID.Code)
		}
	}
	if len(g.members) == 0 {
		g.generation++
		g.protocol = ""
		g.leader = ""
		g.transition(stateEmpty, st.now)
		g.seq++
		st.log.Info("group is empty", "group", g.name, "generation", g.generation)
		st.storeGroup(g, func(err error) {
			if err != nil {
				st.log.Warn("storing empty group metadata failed", "group", g.name, "err", err)
			}
		})
		return
	}
	if lm, ok := g.members[g.leader]; !ok || lm.join == nil {
		g.leader = ""
		for _, id := range sortedKeys(g.members) {
			if g.members[id].join != nil {
				g.leader = id
				break
			}
		}
		if g.leader == "" {
			// Only static members that have not rejoined are left: give
			// them another rebalance timeout (their sessions may expire).
			g.seq++
			st.schedule(timer{at: st.now.Add(g.rebalanceTimeout()), kind: timerRebalance, group: g.name, seq: g.seq})
			return
		}
	}
	g.generation++
	g.protocol = g.selectProtocol()
	g.transition(stateCompletingRebalance, st.now)
	g.seq++
	st.schedule(timer{at: st.now.Add(g.rebalanceTimeout()), kind: timerSync, group: g.name, seq: g.seq})
	st.log.Info("group generation complete, awaiting sync", "group", g.name, "generation", g.generation,
		"protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		m.assignment = nil
		if m.join == nil {
			continue
		}
		w := m.join
		m.join = nil
		st.touch(g, m)
		w.reply(st.joinResponse(g, m, w.req))
	}
}

// removeMember takes m out of g, answering its parked requests with code.
func (st *state) removeMember(g *group, m *member, code int16) {
	if m.join != nil {
		m.join.reply(joinErr(m.join.req, code, m.id))
		m.join = nil
	}
	if m.sync != nil {
		m.sync.reply(syncErr(m.sync.req, code))
		m.sync = nil
	}
	delete(g.members, m.id)
	if m.instanceID != "" && g.statics[m.instanceID] == m.id {
		delete(g.statics, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		for _, id := range sortedKeys(g.members) {
			g.leader = id
			break
		}
	}
}

// removeMemberAndUpdate removes m (it left or expired) and moves the group
// on: a Stable or CompletingRebalance group rebalances; a rebalancing one
// may now be complete.
func (st *state) removeMemberAndUpdate(g *group, m *member, reason string) {
	st.removeMember(g, m, kerr.UnknownMemberID.Code)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		st.prepareRebalance(g, reason+": member "+m.id)
	case statePreparingRebalance:
		st.maybeCompleteJoin(g)
	}
}

// resetAssignments drops the assignments of a generation that will not
// become Stable, answering parked SyncGroups with code.
func (st *state) resetAssignments(g *group, code int16) {
	for _, m := range g.members {
		m.assignment = nil
		if m.sync != nil {
			m.sync.reply(syncErr(m.sync.req, code))
			m.sync = nil
		}
	}
}

func syncErr(req *kmsg.SyncGroupRequest, code int16) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = code
	return resp
}

// sync handles SyncGroup.
func (st *state) sync(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	if req.Group == "" {
		reply(syncErr(req, kerr.InvalidGroupID.Code))
		return
	}
	if code := st.coordinatorError(req.Group); code != 0 {
		reply(syncErr(req, code))
		return
	}
	g, ok := st.groups[req.Group]
	if !ok {
		reply(syncErr(req, kerr.UnknownMemberID.Code))
		return
	}
	if g.fenced(instanceOf(req.InstanceID), req.MemberID) {
		reply(syncErr(req, kerr.FencedInstanceID.Code))
		return
	}
	if g.state == stateDead {
		reply(syncErr(req, kerr.CoordinatorNotAvailable.Code))
		return
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		reply(syncErr(req, kerr.UnknownMemberID.Code))
		return
	}
	if req.Generation != g.generation {
		reply(syncErr(req, kerr.IllegalGeneration.Code))
		return
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol) {
		reply(syncErr(req, kerr.InconsistentGroupProtocol.Code))
		return
	}
	switch g.state {
	case statePreparingRebalance:
		reply(syncErr(req, kerr.RebalanceInProgress.Code))
	case stateCompletingRebalance:
		if m.sync != nil {
			m.sync.reply(syncErr(m.sync.req, kerr.RebalanceInProgress.Code))
		}
		m.sync = &syncWait{req: req, reply: reply}
		st.touch(g, m)
		if m.id == g.leader {
			st.leaderSync(g, req)
		}
	case stateStable:
		st.touch(g, m)
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		resp.Protocol = kmsg.StringPtr(g.protocol)
		resp.MemberAssignment = nonNil(m.assignment)
		reply(resp)
	default:
		reply(syncErr(req, kerr.UnknownMemberID.Code))
	}
}

// leaderSync stores the leader's assignment with the group metadata and,
// once stored, hands each member its part and makes the group Stable.
func (st *state) leaderSync(g *group, req *kmsg.SyncGroupRequest) {
	assignments := make(map[string][]byte, len(g.members))
	for _, a := range req.GroupAssignment {
		if _, ok := g.members[a.MemberID]; ok {
			// The request's bytes alias the connection's frame buffer.
			assignments[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
	}
	gen := g.generation
	st.storeGroupWith(g, assignments, func(err error) {
		if st.groups[g.name] != g || g.state != stateCompletingRebalance || g.generation != gen {
			return // moved on meanwhile; the parked syncs were answered then
		}
		if err != nil {
			st.log.Warn("storing group assignment failed", "group", g.name, "generation", gen, "err", err)
			st.resetAssignments(g, storeErrorCode(err))
			st.prepareRebalance(g, "storing the assignment failed")
			return
		}
		for id, m := range g.members {
			m.assignment = nonNil(assignments[id])
		}
		g.transition(stateStable, st.now)
		g.seq++
		st.log.Info("group stable", "group", g.name, "generation", g.generation, "members", len(g.members))
		for _, id := range sortedKeys(g.members) {
			m := g.members[id]
			if m.sync == nil {
				continue
			}
			w := m.sync
			m.sync = nil
			st.touch(g, m)
			resp := w.req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ProtocolType = kmsg.StringPtr(g.protocolType)
			resp.Protocol = kmsg.StringPtr(g.protocol)
			resp.MemberAssignment = m.assignment
			w.reply(resp)
		}
	})
}

// heartbeat handles Heartbeat.
func (st *state) heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = st.heartbeatCode(req)
	return resp
}

func (st *state) heartbeatCode(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	if code := st.coordinatorError(req.Group); code != 0 {
		return code
	}
	g, ok := st.groups[req.Group]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if g.fenced(instanceOf(req.InstanceID), req.MemberID) {
		return kerr.FencedInstanceID.Code
	}
	switch g.state {
	case stateDead:
		return kerr.CoordinatorNotAvailable.Code
	case stateEmpty:
		return kerr.UnknownMemberID.Code
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	st.touch(g, m)
	if g.state == statePreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// leave handles LeaveGroup (v0-2 one member, v3+ a batch of members, by
// member id or by group.instance.id).
func (st *state) leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	top := int16(0)
	switch {
	case req.Group == "":
		top = kerr.InvalidGroupID.Code
	default:
		top = st.coordinatorError(req.Group)
	}
	g, ok := st.groups[req.Group]
	if top == 0 && ok && g.state == stateDead {
		top = kerr.CoordinatorNotAvailable.Code
	}
	if top != 0 {
		resp.ErrorCode = top
		return resp
	}
	codes := make([]int16, len(leaving))
	for i, lm := range leaving {
		if !ok {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		codes[i] = st.leaveOne(g, lm.MemberID, instanceOf(lm.InstanceID))
	}
	if req.Version < 3 {
		resp.ErrorCode = codes[0]
		return resp
	}
	for i, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = lm.MemberID
		rm.InstanceID = lm.InstanceID
		rm.ErrorCode = codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func (st *state) leaveOne(g *group, memberID, instanceID string) int16 {
	if instanceID != "" {
		cur, ok := g.statics[instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if memberID != "" && memberID != cur {
			return kerr.FencedInstanceID.Code
		}
		memberID = cur
	} else if _, ok := g.pending[memberID]; ok {
		delete(g.pending, memberID)
		st.maybeCompleteJoin(g)
		return 0
	}
	m, ok := g.members[memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	st.log.Info("group member left", "group", g.name, "member", m.id, "instance", m.instanceID)
	st.removeMemberAndUpdate(g, m, "left the group")
	return 0
}
