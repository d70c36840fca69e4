package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
)

// maxStateOps bounds the operations of one state transaction: a partition
// created with its znode is two operations, about 280 bytes with its part of
// the notification, so a full transaction stays near 400 KB, well under
// ZooKeeper's jute.maxbuffer (1 MiB).
const maxStateOps = 2000

// WritePartitionStates writes many partition states, each with the meaning
// of CreatePartitionState (Create) or SetPartitionState, in as few ZooKeeper
// transactions as it can. Every transaction also creates one
// /state_change_notification entry naming its partitions and their new
// states, which is how every broker learns of them. It returns, for each
// write, the new znode version or the error: cluster.ErrStateExists,
// ErrNoState, ErrNoTopic, ErrBadVersion, ErrNotController (a fenced write by
// a controller that lost its role), or one wrapping ErrUnavailable (the write
// may or may not have happened).
//
// When ctx carries a controller epoch (cluster.WithControllerEpoch), the writes are
// the controller's and are fenced: unless this session won that epoch in
// Campaign they fail at once, and their transactions check that
// /controller_epoch has not moved since, so a controller that lost the role
// without noticing cannot write. Other writes (a leader's ISR changes) are
// ordinary compare-and-sets.
func (c *Coordinator) WritePartitionStates(ctx context.Context, writes []cluster.StateWrite) ([]int32, []error) {
	versions := make([]int32, len(writes))
	errs := make([]error, len(writes))
	fail := func(idx []int, err error) {
		for _, i := range idx {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	all := make([]int, len(writes))
	for i := range all {
		all[i] = i
	}
	if err := c.writable(ctx); err != nil {
		fail(all, err)
		return versions, errs
	}

	// The topic ids the notification carries, from the cache; a topic not
	// cached yet is read first.
	ids := map[string]cluster.TopicID{}
	for _, w := range writes {
		if _, ok := ids[w.Topic]; ok {
			continue
		}
		id, ok := c.cachedTopicID(w.Topic)
		if !ok {
			if _, err := c.reloadTopic(w.Topic); err != nil {
				fail(all, fmt.Errorf("read topic %s: %w", w.Topic, err))
				return versions, errs
			}
			id, ok = c.cachedTopicID(w.Topic)
		}
		if ok {
			ids[w.Topic] = id
		}
	}

	// Creates need /brokers/topics/<t>/partitions/<p>: find which exist.
	existing := map[string]map[string]bool{}
	for i, w := range writes {
		if _, known := ids[w.Topic]; !known {
			errs[i] = fmt.Errorf("%w: %s", cluster.ErrNoTopic, w.Topic)
			continue
		}
		if !w.Create {
			continue
		}
		if _, ok := existing[w.Topic]; ok {
			continue
		}
		if err := c.ensurePath(partitionsPath(w.Topic)); err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				existing[w.Topic] = nil
				continue
			}
			fail(all, err)
			return versions, errs
		}
		kids, _, err := c.conn.Children(c.path(partitionsPath(w.Topic)))
		if err != nil {
			fail(all, fmt.Errorf("list %s: %w", partitionsPath(w.Topic), zkErr(err)))
			return versions, errs
		}
		m := make(map[string]bool, len(kids))
		for _, k := range kids {
			m[k] = true
		}
		existing[w.Topic] = m
	}

	var check *controllership
	if epoch, ok := cluster.ControllerEpochFrom(ctx); ok {
		c.mu.RLock()
		won := c.won
		c.mu.RUnlock()
		if won == nil || won.epoch != epoch || won.session != c.conn.SessionID() {
			fail(all, fmt.Errorf("%w: this broker does not hold controller epoch %d", cluster.ErrNotController, epoch))
			return versions, errs
		}
		check = won
	}
	var group []int
	for i, w := range writes {
		if errs[i] != nil {
			continue
		}
		if w.Create && existing[w.Topic] == nil {
			errs[i] = fmt.Errorf("%w: %s", cluster.ErrNoTopic, w.Topic)
			continue
		}
		group = append(group, i)
	}
	// Split into transactions and run a few at a time: ZooKeeper applies
	// them in order and commits them to its log together.
	var chunks [][]int
	for len(group) > 0 {
		n, ops := 0, 0
		for n < len(group) {
			w := writes[group[n]]
			k := 1
			if w.Create && !existing[w.Topic][strconv.Itoa(int(w.Partition))] {
				k = 2
			}
			if ops+k > maxStateOps && n > 0 {
				break
			}
			ops += k
			n++
		}
		chunks = append(chunks, group[:n])
		group = group[n:]
	}
	b := &stateBatch{writes: writes, ids: ids, existing: existing, check: check, versions: versions, errs: errs}
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, chunk := range chunks {
		if err := ctx.Err(); err != nil {
			fail(chunk, err)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.writeChunk(b, chunk)
		}()
	}
	wg.Wait()
	return versions, errs
}

// stateBatch is the shared state of one WritePartitionStates call. Each
// chunk writes only its own entries of versions and errs.
type stateBatch struct {
	writes []cluster.StateWrite
	ids    map[string]cluster.TopicID
	check  *controllership

	mu       sync.Mutex
	existing map[string]map[string]bool // partition znodes known to exist, by topic

	versions []int32
	errs     []error
}

func (b *stateBatch) exists(topic string, p int32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.existing[topic][strconv.Itoa(int(p))]
}

func (b *stateBatch) setExists(topic string, p int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.existing[topic]; m != nil {
		m[strconv.Itoa(int(p))] = true
	}
}

func (c *Coordinator) cachedTopicID(topic string) (cluster.TopicID, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.cache.topics[topic]
	if !ok {
		return cluster.TopicID{}, false
	}
	return e.assign.ID, true
}

// writeChunk writes the states of idx in one transaction. When an operation
// fails, that write gets its error and the others are tried again without
// it.
func (c *Coordinator) writeChunk(b *stateBatch, idx []int) {
	writes, ids, check, versions, errs := b.writes, b.ids, b.check, b.versions, b.errs
	for len(idx) > 0 {
		var ops []any
		opOf := make([]int, 0, len(idx)+1) // op index -> position in idx (-1: check or notification)
		parentOp := map[int]bool{}         // ops that create /partitions/<p>
		if check != nil {
			ops = append(ops, &zk.CheckVersionRequest{Path: c.path(controllerEpochPath), Version: check.zkVersion})
			opOf = append(opOf, -1)
		}
		note := stateChangeZNode{}
		for k, i := range idx {
			w := writes[i]
			data := encodeState(w.State)
			if w.Create {
				if !b.exists(w.Topic, w.Partition) {
					parentOp[len(ops)] = true
					ops = append(ops, &zk.CreateRequest{Path: c.path(partitionPath(w.Topic, w.Partition)), Acl: c.acl})
					opOf = append(opOf, k)
				}
				ops = append(ops, &zk.CreateRequest{Path: c.path(statePath(w.Topic, w.Partition)), Data: data, Acl: c.acl})
			} else {
				ops = append(ops, &zk.SetDataRequest{Path: c.path(statePath(w.Topic, w.Partition)), Data: data, Version: w.State.Version})
			}
			opOf = append(opOf, k)
			next := int32(0)
			if !w.Create {
				next = w.State.Version + 1
			}
			note.Partitions = append(note.Partitions, stateChangeEntry{
				Topic: w.Topic, TopicID: ids[w.Topic].String(), Partition: w.Partition, ZkVersion: next, State: toStateZNode(w.State),
			})
		}
		ops = append(ops, &zk.CreateRequest{Path: c.path(stateChangesPath + "/" + stateChangePrefix), Data: encodeStateChange(note), Acl: c.acl, Flags: zk.FlagSequence})
		opOf = append(opOf, -1)

		res, err := c.conn.Multi(ops...)
		if err == nil {
			changed := false
			c.mu.Lock()
			for k, i := range idx {
				w := writes[i]
				v := note.Partitions[k].ZkVersion
				versions[i] = v
				st := w.State.Clone()
				st.Version = v
				if ch, _ := c.applyState(w.Topic, ids[w.Topic], w.Partition, st); ch {
					changed = true
				}
				if w.Create {
					b.setExists(w.Topic, w.Partition)
				}
			}
			c.mu.Unlock()
			if changed {
				c.notify(cluster.ChangePartitions)
			}
			return
		}
		// Which operation failed?
		failed := -1
		for j, r := range res {
			if r.Error != nil && j < len(opOf) && !isRuntimeInconsistency(r.Error) {
				failed = j
				break
			}
		}
		if failed < 0 {
			// No per-operation answer: the connection failed and the
			// transaction may or may not have been applied.
			for _, i := range idx {
				errs[i] = fmt.Errorf("write state of %s-%d: %w", writes[i].Topic, writes[i].Partition, zkErr(err))
			}
			return
		}
		opErr := res[failed].Error
		k := opOf[failed]
		if k < 0 {
			if failed == 0 && check != nil {
				// /controller_epoch moved: another controller was elected.
				c.mu.Lock()
				if c.won == check {
					c.won = nil
				}
				c.mu.Unlock()
				c.log.Warn("fenced: a newer controller was elected; this broker's controller writes are refused")
				for _, i := range idx {
					errs[i] = fmt.Errorf("%w: the controller epoch moved past %d", cluster.ErrNotController, check.epoch)
				}
				return
			}
			for _, i := range idx {
				errs[i] = fmt.Errorf("write state change notification: %w", zkErr(opErr))
			}
			return
		}
		i := idx[k]
		w := writes[i]
		if parentOp[failed] && errors.Is(opErr, zk.ErrNodeExists) {
			// The partition znode exists after all (an earlier attempt
			// created it): try again creating only the state.
			b.setExists(w.Topic, w.Partition)
			continue
		}
		errs[i] = stateWriteError(w, opErr)
		if errors.Is(errs[i], cluster.ErrBadVersion) {
			c.refreshState(w.Topic, w.Partition)
		}
		idx = append(idx[:k:k], idx[k+1:]...)
	}
}

func isRuntimeInconsistency(err error) bool {
	return err != nil && err.Error() == fmt.Sprintf("unknown error: %v", -2)
}

func stateWriteError(w cluster.StateWrite, err error) error {
	tp := fmt.Sprintf("%s-%d", w.Topic, w.Partition)
	switch {
	case w.Create && errors.Is(err, zk.ErrNodeExists):
		return fmt.Errorf("%w: %s", cluster.ErrStateExists, tp)
	case w.Create && errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: %s", cluster.ErrNoTopic, w.Topic)
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: %s", cluster.ErrNoState, tp)
	case errors.Is(err, zk.ErrBadVersion):
		return fmt.Errorf("%w: %s state not at version %d", cluster.ErrBadVersion, tp, w.State.Version)
	}
	return fmt.Errorf("write state of %s: %w", tp, zkErr(err))
}

// refreshState reads one partition state after a lost compare-and-set, so
// that the caller's next read sees the current one.
func (c *Coordinator) refreshState(topic string, p int32) {
	b, st, err := c.conn.Get(c.path(statePath(topic, p)))
	if err != nil {
		return
	}
	ok, tst, err := c.conn.Exists(c.path(topicPath(topic)))
	if err != nil || !ok || st.Czxid < tst.Czxid {
		return
	}
	s, err := decodeState(b, st.Version)
	if err != nil {
		return
	}
	c.mu.Lock()
	e, known := c.cache.topics[topic]
	changed := false
	if known && e.czxid == tst.Czxid {
		changed, _ = c.applyState(topic, e.assign.ID, p, s)
	}
	c.mu.Unlock()
	if !known || e.czxid != tst.Czxid {
		c.reloadTopic(topic)
		return
	}
	if changed {
		c.notify(cluster.ChangePartitions)
	}
}

var (
	_ cluster.StateBatcher     = (*Coordinator)(nil)
	_ cluster.LegacyReassigner = (*Coordinator)(nil)
)
