package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-io/sluice/cluster"
)

// isrManager writes this broker's ISR changes, as leader, to the
// coordinator: followers that fell more than replica.lag.time.max.ms behind
// leave, followers that caught up join. Each change is a compare-and-set on
// the partition state (Kafka's ZooKeeper-mode leaders wrote the state znode
// the same way), and many partitions' changes go in one batch: when a
// follower dies, every partition it followed shrinks in one write. Only
// after the write succeeds does the leader use the new ISR for its high
// watermark, so a record counts as committed only once every member of the
// stored ISR has it — the ISR a new leader is elected from.
type isrManager struct {
	b      *Broker
	lagMax time.Duration
	log    *slog.Logger

	mu      sync.Mutex
	pending map[*Partition]struct{}
	wake    chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func newISRManager(b *Broker, lagMax time.Duration) *isrManager {
	return &isrManager{b: b, lagMax: lagMax, log: b.log, pending: map[*Partition]struct{}{}, wake: make(chan struct{}, 1)}
}

// schedule asks for p's ISR to be checked and written.
func (m *isrManager) schedule(p *Partition) {
	m.mu.Lock()
	m.pending[p] = struct{}{}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *isrManager) start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	go m.run(ctx)
}

func (m *isrManager) stop() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	<-m.done
	m.cancel = nil
}

func (m *isrManager) run(ctx context.Context) {
	defer close(m.done)
	// Check for laggards several times per lag period (Kafka: half of it).
	tick := m.b.clock.NewTicker(isrCheckInterval(m.lagMax))
	defer tick.Stop()
	var retry <-chan time.Time
	var backoff time.Duration // of the last failed write; 0: the last write succeeded
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-tick.Chan():
			now := m.b.now()
			for _, p := range m.b.Partitions() {
				if p.lagging(now, m.lagMax) {
					m.schedule(p)
				}
			}
			continue
		case <-retry:
		}
		retry = nil
		m.mu.Lock()
		batch := m.pending
		m.pending = map[*Partition]struct{}{}
		m.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if failed := m.write(ctx, batch, backoff > 0); len(failed) > 0 {
			m.mu.Lock()
			for _, p := range failed {
				m.pending[p] = struct{}{}
			}
			m.mu.Unlock()
			backoff = isrRetryBackoff(backoff)
			retry = m.b.clock.After(backoff)
		} else {
			backoff = 0
		}
	}
}

// write computes and writes the wanted ISR of each partition; it returns
// the partitions to try again. quiet: this is a retry, do not warn again.
func (m *isrManager) write(ctx context.Context, batch map[*Partition]struct{}, quiet bool) []*Partition {
	co := m.b.cfg.Coordinator
	now := m.b.now()
	var writes []cluster.StateWrite
	var parts []*Partition
	var epochs []int32
	var before [][]int32 // the ISR each write replaces
	for p := range batch {
		st, err := co.PartitionState(ctx, p.tp.Topic, p.tp.Partition)
		if err != nil {
			continue
		}
		isr, ok := p.wantISR(st, now, m.lagMax)
		if !ok {
			continue
		}
		next := st.Clone()
		next.ISR = isr
		writes = append(writes, cluster.StateWrite{Topic: p.tp.Topic, Partition: p.tp.Partition, State: next})
		parts = append(parts, p)
		epochs = append(epochs, st.LeaderEpoch)
		before = append(before, st.ISR)
	}
	if len(writes) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	versions, errs := cluster.WriteStates(wctx, co, writes)
	var again []*Partition
	for i, err := range errs {
		p, w := parts[i], writes[i]
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Lost to the controller or a newer state (re-read and decide
			// again), or the store is unreachable (keep trying; the ISR
			// and the high watermark stay as they are meanwhile).
			if !errors.Is(err, cluster.ErrBadVersion) {
				lvl := slog.LevelWarn
				if quiet {
					lvl = slog.LevelDebug
				}
				m.log.Log(ctx, lvl, "ISR change not written; retrying", "partition", p.tp.String(), "isr", w.State.ISR, "err", err)
			}
			again = append(again, p)
			continue
		}
		m.log.Info("ISR changed", "partition", p.tp.String(), "leader_epoch", epochs[i], "isr", w.State.ISR)
		m.b.countISRChange(before[i], w.State.ISR)
		p.setISR(epochs[i], w.State.ISR, versions[i])
	}
	return again
}
