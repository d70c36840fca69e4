package txn

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// findCoordinatorWait bounds how long FindCoordinator waits for a new
// __transaction_state to get leaders.
const findCoordinatorWait = 5 * time.Second

// FindCoordinator answers FindCoordinator for transactional ids (key type
// 1): the leader of the id's __transaction_state partition. The first
// lookup creates the topic; COORDINATOR_NOT_AVAILABLE until it has a
// leader.
func (c *Coordinator) FindCoordinator(ctx context.Context, listener string, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		n, code := c.coordinatorFor(ctx, listener, req.CoordinatorKey)
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, n.ID, n.Host, n.Port
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		n, code := c.coordinatorFor(ctx, listener, key)
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Host, rc.Port, rc.ErrorCode = key, n.ID, n.Host, n.Port, code
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return resp
}

func (c *Coordinator) coordinatorFor(ctx context.Context, listener, id string) (Node, int16) {
	none := Node{ID: -1, Port: -1}
	if id == "" {
		return none, kerr.InvalidRequest.Code
	}
	p := PartitionFor(id, c.cfg.NumPartitions)
	if n, ok := c.backend.Leader(p, listener); ok {
		return n, 0
	}
	c.createMu.Lock()
	cctx, cancel := context.WithTimeout(ctx, findCoordinatorWait)
	if err := c.backend.EnsureTopic(cctx); err != nil {
		c.log.Warn("creating __transaction_state", "err", err)
	}
	cancel()
	c.createMu.Unlock()
	if n, ok := c.backend.Leader(p, listener); ok {
		return n, 0
	}
	return none, kerr.CoordinatorNotAvailable.Code
}

// Transaction is a transactional id as DescribeTransactions shows it.
type Transaction struct {
	ID            string
	State         State
	ProducerID    int64
	ProducerEpoch int16
	TimeoutMs     int32
	StartMs       int64 // -1: no transaction
	UpdateMs      int64
	Partitions    []TopicPartition
}

func (md *metadata) view() Transaction {
	return Transaction{ID: md.id, State: md.state, ProducerID: md.producerID, ProducerEpoch: md.epoch,
		TimeoutMs: md.timeoutMs, StartMs: md.startMs, UpdateMs: md.updateMs, Partitions: md.sortedPartitions()}
}

// DescribeTransactions answers DescribeTransactions: each id's state, or
// TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) DescribeTransactions(req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.TransactionalIDs {
		rt := kmsg.NewDescribeTransactionsResponseTransactionState()
		rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.StartTimestamp = id, -1, -1, -1
		ps, code := c.lookup(id)
		if code == 0 {
			if md, ok := ps.txns[id]; ok && md.state != Dead {
				v := md.view()
				rt.State, rt.TimeoutMillis, rt.StartTimestamp = v.State.String(), v.TimeoutMs, v.StartMs
				rt.ProducerID, rt.ProducerEpoch = v.ProducerID, v.ProducerEpoch
				for _, tp := range v.Partitions {
					if n := len(rt.Topics); n > 0 && rt.Topics[n-1].Topic == tp.Topic {
						rt.Topics[n-1].Partitions = append(rt.Topics[n-1].Partitions, tp.Partition)
						continue
					}
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
					rt.Topics = append(rt.Topics, t)
				}
			} else {
				code = kerr.TransactionalIDNotFound.Code
			}
		}
		rt.ErrorCode = code
		resp.TransactionStates = append(resp.TransactionStates, rt)
	}
	return resp
}

// ListTransactions answers ListTransactions with the transactional ids
// this broker coordinates, filtered by state, producer id and (v1) a
// minimum running time; COORDINATOR_LOAD_IN_PROGRESS while a partition
// loads. Unknown state names are listed in UnknownStateFilters.
func (c *Coordinator) ListTransactions(req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []State
	for _, s := range req.StateFilters {
		st, ok := ParseState(s)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			continue
		}
		states = append(states, st)
	}
	if len(resp.UnknownStateFilters) > 0 && len(states) == 0 {
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	for _, ps := range c.parts {
		if !ps.loaded {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			resp.TransactionStates = nil
			return resp
		}
		for _, md := range ps.txns {
			if len(states) > 0 && !slices.Contains(states, md.state) {
				continue
			}
			if len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, md.producerID) {
				continue
			}
			if req.DurationFilterMillis >= 0 && (md.state != Ongoing || now-md.startMs < req.DurationFilterMillis) {
				continue
			}
			rt := kmsg.NewListTransactionsResponseTransactionState()
			rt.TransactionalID, rt.ProducerID, rt.TransactionState = md.id, md.producerID, md.state.String()
			resp.TransactionStates = append(resp.TransactionStates, rt)
		}
	}
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		switch {
		case a.TransactionalID < b.TransactionalID:
			return -1
		case a.TransactionalID > b.TransactionalID:
			return 1
		}
		return 0
	})
	return resp
}

// Stats are the coordinator's counts, for metrics and the console.
type Stats struct {
	Open            int   // transactions Ongoing or preparing
	OldestOpenMs    int64 // start of the oldest open transaction, -1: none
	Commits, Aborts int64 // completed since start
	TimedOut        int64 // aborted by their timeout since start
}

// Stats returns the coordinator's counts.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{OldestOpenMs: -1, Commits: c.commits.Load(), Aborts: c.aborts.Load(), TimedOut: c.timedOut.Load()}
	for _, ps := range c.parts {
		for _, md := range ps.txns {
			if md.state == Ongoing || md.state == PrepareCommit || md.state == PrepareAbort {
				s.Open++
				if s.OldestOpenMs < 0 || md.startMs < s.OldestOpenMs {
					s.OldestOpenMs = md.startMs
				}
			}
		}
	}
	return s
}

// Describe returns the state of a transactional id this broker
// coordinates (for tests and the console); false when unknown.
func (c *Coordinator) Describe(id string) (Transaction, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, code := c.lookup(id)
	if code != 0 {
		return Transaction{}, false
	}
	md, ok := ps.txns[id]
	if !ok {
		return Transaction{}, false
	}
	return md.view(), true
}
