package migration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/migration/jsondiff"
	"github.com/sluice-io/sluice/schemareg/serde"
)

// ManagerOptions configure a Manager. Brokers and ClientOpts are how the
// comparisons reach the cluster; the rest are passed to each Comparison.
type ManagerOptions struct {
	Brokers            []string
	ClientOpts         []kgo.Opt
	Logger             *slog.Logger
	CheckpointInterval time.Duration // default 5s
	ExampleLimit       int           // default 10
	SampleLimit        int           // differences of each kind stored; default 1000
	Limits             Limits
	// RetryMin and RetryMax bound the backoff after a run fails with an
	// error that may pass (broker down, topic not created yet); default
	// 5s and 2m.
	RetryMin, RetryMax time.Duration
	// Schemas decodes wire-format records for comparisons that ask for it.
	Schemas serde.Source
	// Leader, when set, says whether this process runs the comparisons
	// (the console doing the cluster's background work; nil: always).
	// Where it is false, Create, Resume and Restart only store, and the
	// leader's Reconcile starts the run.
	Leader func() bool
}

// Manager runs the stored comparisons in the background: the console's
// process creates one, calls Start, and the pages call its methods. All
// methods are safe for concurrent use.
type Manager struct {
	store *Store
	opts  ManagerOptions
	log   *slog.Logger

	mu     sync.Mutex
	runs   map[int64]*managedRun // running comparisons; guarded by mu
	ctx    context.Context       // parent of every run; canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

type managedRun struct {
	gen    int64
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	cmp    *Comparison // current attempt; nil between attempts
}

func (r *managedRun) comparison() *Comparison {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmp
}

// NewManager returns a Manager over store. Nothing runs until Start.
func NewManager(store *Store, opts ManagerOptions) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 5 * time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 2 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{store: store, opts: opts, log: opts.Logger, runs: make(map[int64]*managedRun), ctx: ctx, cancel: cancel}
}

// Start resumes every comparison in state running.
func (m *Manager) Start(ctx context.Context) error {
	list, err := m.store.List(ctx)
	if err != nil {
		return err
	}
	for _, st := range list {
		if st.State == StateRunning {
			m.launch(st)
		}
	}
	return nil
}

// Close stops every run (each saves a checkpoint) and waits for them.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

// Reconcile makes the runs match what is stored — the stored state may
// have been changed on another host of the cluster: it starts each running
// comparison without a run of its generation, and stops the runs of
// comparisons paused, finished, failed, restarted or deleted meanwhile.
// The leading console calls it every second.
func (m *Manager) Reconcile(ctx context.Context) error {
	list, err := m.store.List(ctx)
	if err != nil {
		return err
	}
	want := map[int64]Stored{}
	for _, st := range list {
		if st.State == StateRunning {
			want[st.ID] = st
		}
	}
	m.mu.Lock()
	var stale []int64
	for id, r := range m.runs {
		if st, ok := want[id]; !ok || st.Generation != r.gen {
			stale = append(stale, id)
		}
	}
	m.mu.Unlock()
	for _, id := range stale {
		m.stop(id)
	}
	for _, st := range want {
		m.launch(st)
	}
	return nil
}

// StopAll stops every run (each saves a checkpoint), leaving the stored
// states as they are: this console stopped leading, another resumes them.
func (m *Manager) StopAll() {
	m.mu.Lock()
	ids := make([]int64, 0, len(m.runs))
	for id := range m.runs {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.stop(id)
	}
}

// leads reports whether this process runs comparisons now.
func (m *Manager) leads() bool { return m.opts.Leader == nil || m.opts.Leader() }

// launch starts a run of st unless one is running.
func (m *Manager) launch(st Stored) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || !m.leads() {
		return
	}
	if r, ok := m.runs[st.ID]; ok && r.gen == st.Generation {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	r := &managedRun{gen: st.Generation, cancel: cancel, done: make(chan struct{})}
	m.runs[st.ID] = r
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(r.done)
		defer cancel()
		m.run(ctx, st, r)
		m.mu.Lock()
		if m.runs[st.ID] == r {
			delete(m.runs, st.ID)
		}
		m.mu.Unlock()
	}()
}

// run runs st until it finishes, fails for good, or ctx ends; errors that
// may pass are retried with backoff.
func (m *Manager) run(ctx context.Context, st Stored, r *managedRun) {
	log := m.log.With("comparison", st.ID, "name", st.Name)
	backoff := m.opts.RetryMin
	for {
		cmp, err := New(st.Spec, Options{
			Brokers: m.opts.Brokers, ClientOpts: m.opts.ClientOpts, Logger: log,
			Checkpointer:       m.store.Checkpointer(st.ID, st.Generation),
			CheckpointInterval: m.opts.CheckpointInterval, ExampleLimit: m.opts.ExampleLimit,
			SampleLimit: m.opts.SampleLimit, Limits: m.opts.Limits, Schemas: m.opts.Schemas,
		})
		if err != nil {
			m.fail(st, err, log)
			return
		}
		r.mu.Lock()
		r.cmp = cmp
		r.mu.Unlock()
		_, err = cmp.Run(ctx)
		switch {
		case err == nil:
			log.Info("comparison finished")
			return
		case ctx.Err() != nil, errors.Is(err, errStale):
			return
		case errors.Is(err, errCorruptCheckpoint), errors.Is(err, ErrCheckpointTooLarge):
			m.fail(st, err, log)
			return
		}
		log.Warn("comparison stopped by an error; retrying", "err", err, "in", backoff)
		if serr := m.store.setState(context.WithoutCancel(ctx), st.ID, StateRunning, "retrying: "+err.Error(), st.Generation, 0); errors.Is(serr, errStale) {
			return
		} else if serr != nil {
			log.Warn("comparison: record error", "err", serr)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, m.opts.RetryMax)
	}
}

func (m *Manager) fail(st Stored, err error, log *slog.Logger) {
	log.Error("comparison failed", "err", err)
	if serr := m.store.setState(context.Background(), st.ID, StateFailed, err.Error(), st.Generation, 0); serr != nil && !errors.Is(serr, errStale) {
		log.Warn("comparison: record failure", "err", serr)
	}
}

// stop stops the run of id, if any, and waits for its final checkpoint.
func (m *Manager) stop(id int64) {
	m.mu.Lock()
	r := m.runs[id]
	delete(m.runs, id)
	m.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// Create validates and stores a new comparison and starts it.
func (m *Manager) Create(ctx context.Context, name string, spec Spec, createdBy string) (int64, error) {
	id, err := m.store.Create(ctx, name, spec, createdBy)
	if err != nil {
		return 0, err
	}
	st, err := m.store.Get(ctx, id)
	if err != nil {
		return id, err
	}
	m.launch(st)
	return id, nil
}

// The actions below take base, the version of the comparison the operator
// acted on (Stored.Version as the page showed it; 0: no check): an action
// based on a version another change replaced since, on any host, is
// refused with a *consoledb.StaleError and changes nothing.

// Pause stops a comparison after saving its checkpoint.
func (m *Manager) Pause(ctx context.Context, id, base int64) error {
	st, err := m.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := m.store.CheckVersion(ctx, id, base); err != nil {
		return err
	}
	if st.State == StateFinished {
		return fmt.Errorf("comparison %d has finished; restart it to compare again", id)
	}
	m.stop(id)
	// Refused here (changed on another host since this host's view), the
	// leader's Reconcile starts the run again if it should run.
	return m.store.SetState(ctx, id, StatePaused, "", base)
}

// Resume continues a paused or failed comparison from its checkpoint.
func (m *Manager) Resume(ctx context.Context, id, base int64) error {
	st, err := m.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if st.State == StateFinished {
		return fmt.Errorf("comparison %d has finished; restart it to compare again", id)
	}
	if err := m.store.SetState(ctx, id, StateRunning, "", base); err != nil {
		return err
	}
	st.State = StateRunning
	m.launch(st)
	return nil
}

// Restart forgets a comparison's progress and differences and starts it
// over from its spec's start.
func (m *Manager) Restart(ctx context.Context, id, base int64) error {
	if err := m.store.CheckVersion(ctx, id, base); err != nil {
		return err
	}
	m.stop(id)
	if err := m.store.Reset(ctx, id, base); err != nil {
		return err
	}
	st, err := m.store.Get(ctx, id)
	if err != nil {
		return err
	}
	m.launch(st)
	return nil
}

// Update changes a comparison's name and spec and starts it over: its
// numbers and differences are forgotten (an edit, or "ignore this path and
// restart").
func (m *Manager) Update(ctx context.Context, id int64, name string, spec Spec, base int64) error {
	if _, err := m.store.Get(ctx, id); err != nil {
		return err
	}
	if _, err := compile(spec); err != nil {
		return err
	}
	if err := m.store.CheckVersion(ctx, id, base); err != nil {
		return err
	}
	m.stop(id)
	if err := m.store.Update(ctx, id, name, spec, base); err != nil {
		return err
	}
	st, err := m.store.Get(ctx, id)
	if err != nil {
		return err
	}
	m.launch(st)
	return nil
}

// PathCount is how many stored mismatches differ at one path.
type PathCount struct {
	Path    string `json:"path"`    // with array indexes as [*]: "items[*].price"
	Pairs   int    `json:"pairs"`   // mismatched pairs with a difference there
	Example string `json:"example"` // one of them: "left → right"
}

// DifferingPaths counts the paths at which a comparison's stored
// mismatches differ (the first 1,000 are stored), most frequent first, at
// most limit: where to look, and what an ignore line would silence.
func (m *Manager) DifferingPaths(ctx context.Context, id int64, limit int) ([]PathCount, int, error) {
	var all []Difference
	for off := 0; off < 5000; {
		page, _, err := m.Differences(ctx, id, DiffQuery{Kind: KindMismatch, Offset: off, Limit: 1000})
		if err != nil {
			return nil, 0, err
		}
		all = append(all, page...)
		if len(page) < 1000 {
			break
		}
		off += len(page)
	}
	return CountPaths(all, limit), len(all), nil
}

// CountPaths counts the field paths of mismatches (array indexes folded
// into [*], a pair counted once per path), most frequent first, at most
// limit (0: all).
func CountPaths(diffs []Difference, limit int) []PathCount {
	counts := map[string]*PathCount{}
	for _, d := range diffs {
		seen := map[string]bool{}
		for _, f := range d.Fields {
			p := jsondiff.Generalize(f.Path)
			if seen[p] {
				continue
			}
			seen[p] = true
			pc := counts[p]
			if pc == nil {
				pc = &PathCount{Path: p, Example: exampleOf(f)}
				counts[p] = pc
			}
			pc.Pairs++
		}
	}
	out := make([]PathCount, 0, len(counts))
	for _, pc := range counts {
		out = append(out, *pc)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pairs != out[j].Pairs {
			return out[i].Pairs > out[j].Pairs
		}
		return out[i].Path < out[j].Path
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func exampleOf(f FieldDiff) string {
	clip := func(s string) string {
		if s == "" {
			return "(absent)"
		}
		if len(s) > 60 {
			return s[:57] + "…"
		}
		return s
	}
	return clip(f.Left) + " → " + clip(f.Right)
}

// Delete stops and removes a comparison.
func (m *Manager) Delete(ctx context.Context, id, base int64) error {
	if err := m.store.CheckVersion(ctx, id, base); err != nil {
		return err
	}
	m.stop(id)
	return m.store.Delete(ctx, id, base)
}

// Status is a comparison as the console shows it: what is stored, with live
// numbers while it runs, and the verdict on those numbers.
type Status struct {
	Stored
	Live     bool     `json:"live"` // numbers come from the running engine, not the last checkpoint
	Snapshot Snapshot `json:"snapshot"`
	Verdict  Verdict  `json:"verdict"`
}

func (m *Manager) status(st Stored) Status {
	s := Status{Stored: st}
	if st.Snapshot != nil {
		s.Snapshot = *st.Snapshot
	}
	s.Stored.Snapshot = nil
	m.mu.Lock()
	r := m.runs[st.ID]
	m.mu.Unlock()
	// Only a running comparison's numbers come from its engine: once the
	// store says finished (or paused, or failed) its last checkpoint is the
	// final word, even while the goroutine that wrote it is still leaving.
	if r != nil && r.gen == st.Generation && st.State == StateRunning {
		if cmp := r.comparison(); cmp != nil {
			if snap := cmp.Snapshot(); !snap.Taken.IsZero() {
				s.Snapshot, s.Live = snap, true
			}
		}
	}
	s.Verdict = Evaluate(st.Spec.Criteria, s.Snapshot)
	return s
}

// Get returns one comparison's status.
func (m *Manager) Get(ctx context.Context, id int64) (Status, error) {
	st, err := m.store.Get(ctx, id)
	if err != nil {
		return Status{}, err
	}
	return m.status(st), nil
}

// List returns every comparison's status, newest first.
func (m *Manager) List(ctx context.Context) ([]Status, error) {
	list, err := m.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, len(list))
	for i, st := range list {
		out[i] = m.status(st)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].ID > out[b].ID })
	return out, nil
}

// Statuses is List for metric collectors and alert evaluation, which have
// no request context; it gives up after 5 seconds and returns nil on error.
func (m *Manager) Statuses() []Status {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := m.List(ctx)
	if err != nil {
		m.log.Warn("comparison statuses", "err", err)
		return nil
	}
	return list
}

// Differences returns a page of a comparison's stored differences.
func (m *Manager) Differences(ctx context.Context, id int64, q DiffQuery) ([]Difference, int64, error) {
	if _, err := m.store.Get(ctx, id); err != nil {
		return nil, 0, err
	}
	return m.store.Differences(ctx, id, q)
}

// Export writes every stored difference of a comparison (of one kind, or
// all when kind is "") as "json" or "csv".
func (m *Manager) Export(ctx context.Context, id int64, kind Kind, format string, w io.Writer) error {
	if format != "json" && format != "csv" {
		return fmt.Errorf("export format %q: want json or csv", format)
	}
	var all []Difference
	for off := 0; ; {
		page, _, err := m.Differences(ctx, id, DiffQuery{Kind: kind, Offset: off, Limit: 1000})
		if err != nil {
			return err
		}
		all = append(all, page...)
		if len(page) < 1000 {
			break
		}
		off += len(page)
	}
	if format == "json" {
		return WriteDifferencesJSON(w, all)
	}
	return WriteDifferencesCSV(w, all, true)
}

// Preview reads the first pairs of spec, through the same engine, without
// storing anything: for the create form.
func (m *Manager) Preview(ctx context.Context, spec Spec, n int) (PreviewResult, error) {
	return Preview(ctx, Options{Brokers: m.opts.Brokers, ClientOpts: m.opts.ClientOpts, Logger: m.log, Limits: m.opts.Limits, Schemas: m.opts.Schemas}, spec, n)
}
