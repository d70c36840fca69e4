package group_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// killSwitch is a dialer whose connections can all be cut at once, after
// which it refuses to dial: the client is "killed" without leaving its
// group, like a process that died.
type killSwitch struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (k *killSwitch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		c.Close()
	}
}

// ledger records every record any member consumed.
type ledger struct {
	mu   sync.Mutex
	seen map[int32]map[int64][]string // partition -> offset -> members that consumed it
}

func (l *ledger) add(member string, p int32, o int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = make(map[int32]map[int64][]string)
	}
	if l.seen[p] == nil {
		l.seen[p] = make(map[int64][]string)
	}
	l.seen[p][o] = append(l.seen[p][o], member)
}

// missing reports the first record below end that nobody consumed.
func (l *ledger) missing(end map[int32]int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, e := range end {
		for o := int64(0); o < e; o++ {
			if len(l.seen[p][o]) == 0 {
				return fmt.Errorf("partition %d offset %d not consumed yet", p, o)
			}
		}
	}
	return nil
}

// groupMember is one franz-go group consumer that commits what it polled
// after every poll (and blocks rebalances while it processes a poll, so a
// handed-over partition resumes exactly where it was committed).
type groupMember struct {
	name   string
	cl     *kgo.Client
	ks     *killSwitch
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	committed map[int32]int64 // the member's last successful commit per partition

	// dieAfterPoll makes the member die (connections cut, no commit, no
	// leave) right after the next poll that returns records.
	dieAfterPoll atomic.Bool
}

func startMember(t *testing.T, n *node, name, group, topic string, l *ledger, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, ks: &killSwitch{}, done: make(chan struct{}), committed: map[int32]int64{}}
	base := []kgo.Opt{
		kgo.SeedBrokers(n.addr),
		kgo.ClientID(name),
		kgo.Dialer(m.ks.dial),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(2 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { l.add(name, r.Partition, r.Offset) })
			if fs.NumRecords() > 0 && m.dieAfterPoll.Load() {
				m.ks.kill()
				cl.AllowRebalance()
				return
			}
			// The commit outlives a cancelled poll context: a member
			// that leaves right after a poll still commits what that poll
			// returned, as a consumer shutting down cleanly does; else the
			// partition's next owner would rightly read those records again.
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := cl.CommitUncommittedOffsets(cctx); err == nil {
				m.mu.Lock()
				for _, ps := range cl.CommittedOffsets() {
					for p, eo := range ps {
						m.committed[p] = eo.Offset
					}
				}
				m.mu.Unlock()
			}
			ccancel()
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// leave stops polling and closes the client, which leaves the group.
func (m *groupMember) leave(t *testing.T) {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// dieWithUncommitted makes the member die right after its next poll of
// records, before committing them, and waits for that.
func (m *groupMember) dieWithUncommitted(t *testing.T) {
	m.dieAfterPoll.Store(true)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("member %s polled nothing to die with", m.name)
	}
}

func (m *groupMember) stop(t *testing.T) {
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Errorf("member %s did not stop", m.name)
	}
	closed := make(chan struct{})
	start := time.Now()
	go func() { m.cl.Close(); close(closed) }()
	select {
	case <-closed:
		_ = start
	case <-time.After(20 * time.Second):
		t.Errorf("member %s did not close", m.name)
	}
}

// assignment waits until the group is Stable with exactly the named
// members (by client id), every partition of the topic owned by exactly one
// of them and every member owning at least one.
func waitAssignment(t *testing.T, adm *kadm.Client, group string, partitions int32, members ...string) map[string][]int32 {
	t.Helper()
	var owners map[string][]int32
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		g := dg[group]
		if g.State != "Stable" {
			return fmt.Errorf("group %s", g.State)
		}
		owners = make(map[string][]int32)
		owned := make(map[int32]string)
		for _, m := range g.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return fmt.Errorf("member %s has no consumer assignment", m.ClientID)
			}
			owners[m.ClientID] = nil
			for _, at := range a.Topics {
				for _, p := range at.Partitions {
					if prev, ok := owned[p]; ok {
						return fmt.Errorf("partition %d owned by %s and %s", p, prev, m.ClientID)
					}
					owned[p] = m.ClientID
					owners[m.ClientID] = append(owners[m.ClientID], p)
				}
			}
		}
		if len(owners) != len(members) {
			return fmt.Errorf("members %v, want %v", keys(owners), members)
		}
		for _, name := range members {
			ps, ok := owners[name]
			if !ok {
				return fmt.Errorf("member %s missing: %v", name, keys(owners))
			}
			if len(ps) == 0 {
				return fmt.Errorf("member %s owns nothing: %v", name, owners)
			}
		}
		if int32(len(owned)) != partitions {
			return fmt.Errorf("%d of %d partitions owned: %v", len(owned), partitions, owners)
		}
		return nil
	})
	return owners
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// producer writes n records to each partition and returns the new ends.
type producer struct {
	cl    *kgo.Client
	topic string
	end   map[int32]int64
}

func (p *producer) produce(t *testing.T, partitions int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for part := int32(0); part < partitions; part++ {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: p.topic, Partition: part, Value: fmt.Appendf(nil, "%d-%d", part, p.end[part]+int64(i))})
		}
	}
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < partitions; part++ {
		p.end[part] += int64(n)
	}
}

// TestRebalance: three group consumers share a six-partition topic, each
// partition owned by exactly one of them; a fourth joins, one leaves
// cleanly, one is killed without leaving. After each change the partitions
// move (within the session timeout for the killed one), no record is lost,
// and only records the killed member read but had not committed are read a
// second time. Eager (range) and cooperative (cooperative-sticky).
func TestRebalance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		protocol string
	}{
		{"range", kgo.RangeBalancer(), "range"},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), "cooperative-sticky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := startNode(t)
			const parts = 6
			topic, group := "rb-"+tc.name, "g-"+tc.name
			n.createTopic(topic, parts)
			adm := n.admin()
			prod := &producer{cl: n.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), topic: topic, end: map[int32]int64{}}
			l := &ledger{}
			consumed := func() {
				t.Helper()
				testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error { return l.missing(prod.end) })
			}
			bal := kgo.Balancers(tc.balancer)

			prod.produce(t, parts, 40)
			c1 := startMember(t, n, "c1", group, topic, l, bal)
			c2 := startMember(t, n, "c2", group, topic, l, bal)
			c3 := startMember(t, n, "c3", group, topic, l, bal)
			owners := waitAssignment(t, adm, group, parts, "c1", "c2", "c3")
			for name, ps := range owners {
				if len(ps) != 2 {
					t.Errorf("%s owns %v; six partitions over three members is two each", name, ps)
				}
			}
			consumed()
			dg, _ := adm.DescribeGroups(context.Background(), group)
			if p := dg[group].Protocol; p != tc.protocol {
				t.Errorf("protocol %q, want %q", p, tc.protocol)
			}

			// A fourth member joins.
			c4 := startMember(t, n, "c4", group, topic, l, bal)
			waitAssignment(t, adm, group, parts, "c1", "c2", "c3", "c4")
			prod.produce(t, parts, 20)
			consumed()

			// c2 leaves cleanly.
			c2.leave(t)
			waitAssignment(t, adm, group, parts, "c1", "c3", "c4")
			prod.produce(t, parts, 20)
			consumed()

			// c3 is killed right after it read records and before it
			// committed them: its partitions move once its session (2s)
			// expires, and its new owners read those records again.
			c3.dieAfterPoll.Store(true)
			prod.produce(t, parts, 20)
			c3.dieWithUncommitted(t)
			killedAt := time.Now()
			waitAssignment(t, adm, group, parts, "c1", "c4")
			if moved := time.Since(killedAt); moved > 8*time.Second {
				t.Errorf("partitions of the killed member moved after %v (session timeout 2s)", moved)
			}
			prod.produce(t, parts, 20)
			consumed()

			// Only what c3 read after its last commit may have been read twice.
			c3.mu.Lock()
			lastCommit := c3.committed
			c3.mu.Unlock()
			l.mu.Lock()
			defer l.mu.Unlock()
			var twice int
			for p, offs := range l.seen {
				for o, who := range offs {
					if len(who) < 2 {
						continue
					}
					twice++
					readByC3 := false
					for _, w := range who {
						readByC3 = readByC3 || w == "c3"
					}
					c, ok := lastCommit[p]
					if !readByC3 || (ok && o < c) || len(who) > 2 {
						t.Errorf("partition %d offset %d read by %v (c3's last commit there: %d, %v)", p, o, who, c, ok)
					}
				}
			}
			if twice == 0 {
				t.Error("the records the killed member read but did not commit were not read again")
			}
			t.Logf("%s: %d records, %d read twice (read but not committed by the killed member)", tc.name, total(prod.end), twice)
			_, _ = c1, c4
		})
	}
}

func total(end map[int32]int64) int {
	var n int64
	for _, e := range end {
		n += e
	}
	return int(n)
}
