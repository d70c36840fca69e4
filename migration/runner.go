package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/decompress"
	"github.com/sluice-io/sluice/migration/jsondiff"
	"github.com/sluice-io/sluice/schemareg/serde"
)

// Options configure how a Comparison reads and where it keeps its state.
type Options struct {
	// Brokers to bootstrap from (host:port).
	Brokers []string
	// ClientOpts are extra franz-go options for every client the comparison
	// makes (TLS, SASL, ...).
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
	// Checkpointer persists the state; nil keeps it in memory only.
	Checkpointer Checkpointer
	// CheckpointInterval is how often state is saved; default 5s.
	CheckpointInterval time.Duration
	// ExampleLimit is how many differences of each kind the snapshot (and
	// the verdict) keeps; default 10.
	ExampleLimit int
	// SampleLimit is how many differences of each kind are handed to the
	// Checkpointer; default 1000. Ignored without a Checkpointer.
	SampleLimit int
	// Limits bound memory; zero fields take defaults.
	Limits Limits
	// MetadataTimeout bounds each metadata and list-offsets request; default 15s.
	MetadataTimeout time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Schemas is where a Spec with Decode finds the schemas of
	// wire-format records (the in-process registry, or
	// serde.NewHTTPSource); required then.
	Schemas serde.Source
}

// Checkpointer saves and loads a comparison's state. Save must be atomic:
// the state and the differences of one Checkpoint are stored together or
// not at all.
type Checkpointer interface {
	// LoadCheckpoint returns the last saved state, or nil when there is none.
	LoadCheckpoint(ctx context.Context) ([]byte, error)
	SaveCheckpoint(ctx context.Context, cp *Checkpoint) error
}

// Checkpoint is what one save writes.
type Checkpoint struct {
	State       []byte       // the engine state (opaque)
	Snapshot    Snapshot     // the numbers at this point, for list pages
	Differences []Difference // differences found since the previous save
	Done        bool         // a bounded comparison that reached its end
}

// Comparison runs one comparison. Make it with New, then call Run once.
// Snapshot may be called from any goroutine at any time.
type Comparison struct {
	spec *compiledSpec
	opts Options
	log  *slog.Logger

	snap atomic.Pointer[Snapshot]

	// testAfterBatch, when set (tests only), is called by the run loop after
	// each fetch batch is processed.
	testAfterBatch func(e *core)

	// pollRecords is the most records taken from one side's client at a
	// time (tests lower it to interrupt runs mid-way).
	pollRecords int

	// Preview: read until previewN pairs that differ are found (or the
	// end, or the budget), keeping the first previewN of each sort, and
	// count which of the spec's paths the values have.
	previewN     int
	previewDiff  []PreviewPair
	previewEqual []PreviewPair
	previewPaths []pathUse

	decoder *serde.Decoder // when the spec decodes wire-format values
}

// New checks spec and opts and returns a Comparison ready to Run.
func New(spec Spec, opts Options) (*Comparison, error) {
	cs, err := compile(spec)
	if err != nil {
		return nil, err
	}
	if len(opts.Brokers) == 0 {
		return nil, errors.New("migration: no brokers given")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = 5 * time.Second
	}
	if opts.ExampleLimit <= 0 {
		opts.ExampleLimit = 10
	}
	if opts.SampleLimit <= 0 {
		opts.SampleLimit = 1000
	}
	if opts.Checkpointer == nil {
		opts.SampleLimit = 0
	}
	if opts.MetadataTimeout <= 0 {
		opts.MetadataTimeout = 15 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Limits.setDefaults()
	c := &Comparison{spec: cs, opts: opts, log: opts.Logger.With("left", cs.Left, "right", cs.Right), pollRecords: 5000}
	if cs.Decode {
		if opts.Schemas == nil {
			return nil, errors.New("migration: decoding records needs a schema registry")
		}
		c.decoder = serde.NewDecoder(opts.Schemas)
	}
	c.snap.Store(&Snapshot{})
	return c, nil
}

// Snapshot returns the latest numbers (refreshed a few times a second while
// running).
func (c *Comparison) Snapshot() Snapshot { return *c.snap.Load() }

// ErrTopicNotFound is returned by Run when a topic does not exist.
var ErrTopicNotFound = errors.New("topic not found")

// Run reads both topics and compares them until a bounded comparison reaches
// its end (returning its final snapshot and nil) or ctx is done (saving a
// checkpoint first and returning ctx's error).
func (c *Comparison) Run(ctx context.Context) (Snapshot, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(c.opts.Brokers...)}, c.opts.ClientOpts...)
	admCl, err := kgo.NewClient(base...)
	if err != nil {
		return Snapshot{}, fmt.Errorf("migration: client: %w", err)
	}
	adm := kadm.NewClient(admCl)
	core, err := c.setup(ctx, adm)
	admCl.Close()
	if err != nil {
		return Snapshot{}, err
	}
	c.publish(core)
	if c.previewN > 0 {
		core.onPair = func(d *Difference, equal bool) {
			pp := PreviewPair{Equal: equal, Key: d.Key, Left: d.Left, Right: d.Right, Fields: d.Fields, SkewMs: d.SkewMs}
			if equal && len(c.previewEqual) < c.previewN {
				c.previewEqual = append(c.previewEqual, pp)
			} else if !equal && len(c.previewDiff) < c.previewN {
				c.previewDiff = append(c.previewDiff, pp)
			}
		}
		c.previewPaths = pathUses(c.spec)
		if len(c.previewPaths) > 0 {
			core.onValue = func(side int, d *jsondiff.Doc) {
				for i := range c.previewPaths {
					u := &c.previewPaths[i]
					u.Sampled[side]++
					if d.Has(&u.path) {
						u.Matched[side]++
					}
				}
			}
		}
	}
	if core.done() {
		return c.finish(ctx, core)
	}

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var chans [2]chan kgo.Fetches
	var clients [2]*kgo.Client
	topics := [2]string{c.spec.Left, c.spec.Right}
	for s := 0; s < 2; s++ {
		parts := map[int32]kgo.Offset{}
		for p := range core.sides[s].parts {
			if !core.sides[s].parts[p].done() {
				parts[int32(p)] = kgo.NewOffset().At(core.sides[s].parts[p].next)
			}
		}
		if len(parts) == 0 {
			continue
		}
		opts := append(append([]kgo.Opt{}, base...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topics[s]: parts}),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			// What consumers of the topic see: records of aborted
			// transactions are not compared, and an open transaction
			// holds the comparison at its start (the last stable
			// offset) until it ends. The markers (control records) move
			// a partition's position past the records dropped.
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(),
			kgo.FetchMaxWait(500*time.Millisecond),
			// A fetch is decompressed whole when it arrives, and JSON
			// compresses ~10x: 2 MiB compressed bounds what one client
			// buffers to a few tens of MiB however large the topic.
			kgo.FetchMaxBytes(2<<20),
			kgo.FetchMaxPartitionBytes(1<<20),
			// One batch expands to decompress.MaxBytes at most; a larger
			// one is a fetch error for its partition (logged).
			decompress.ClientOpt(),
		)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			cancel()
			wg.Wait()
			return Snapshot{}, fmt.Errorf("migration: consumer for %s: %w", topics[s], err)
		}
		ch := make(chan kgo.Fetches, 1)
		chans[s] = ch
		clients[s] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for {
				f := cl.PollRecords(runCtx, c.pollRecords)
				if runCtx.Err() != nil {
					return
				}
				select {
				case ch <- f:
				case <-runCtx.Done():
					return
				}
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastSave := c.opts.Now()
	lastPublish := lastSave
	saveEvery := c.opts.CheckpointInterval
	var paused, ahead [2][]int32
	for !core.done() {
		if c.previewN > 0 && (len(c.previewDiff) >= c.previewN || core.c.Compared() >= previewMaxPairs) {
			c.publish(core)
			return c.Snapshot(), nil
		}
		pauseLeft, pauseRight := core.flow()
		in := chans
		if pauseLeft {
			in[0] = nil
		}
		if pauseRight {
			in[1] = nil
		}
		select {
		case <-ctx.Done():
			c.publish(core)
			if err := c.save(context.WithoutCancel(ctx), core, false); err != nil {
				return c.Snapshot(), errors.Join(ctx.Err(), err)
			}
			return c.Snapshot(), ctx.Err()
		case f := <-in[0]:
			c.process(core, 0, f)
		case f := <-in[1]:
			c.process(core, 1, f)
		case <-tick.C:
		}
		now := c.opts.Now()
		core.setNow(now)
		core.expire()
		for s := 0; s < 2; s++ {
			if clients[s] == nil {
				continue
			}
			ahead[s] = core.aheadPartitions(s, ahead[s][:0])
			if !slices.Equal(ahead[s], paused[s]) {
				setPaused(clients[s], topics[s], paused[s], ahead[s])
				paused[s] = append(paused[s][:0], ahead[s]...)
			}
		}
		if c.testAfterBatch != nil {
			c.testAfterBatch(core)
		}
		if now.Sub(lastPublish) >= 200*time.Millisecond {
			c.publish(core)
			lastPublish = now
		}
		if c.opts.Checkpointer != nil && now.Sub(lastSave) >= saveEvery {
			started := time.Now()
			if err := c.save(ctx, core, false); errors.Is(err, errStale) {
				return c.Snapshot(), err
			} else if err != nil {
				c.log.Warn("comparison checkpoint failed; will retry", "err", err)
			}
			// A large window makes a large checkpoint: never spend more
			// than about 5% of the time saving.
			saveEvery = max(c.opts.CheckpointInterval, 20*time.Since(started))
			lastSave = now
		}
	}
	return c.finish(ctx, core)
}

// setPaused pauses fetching the partitions in want and resumes those in
// had but not in want. Records of a partition paused while buffered in the
// client are dropped by the client and fetched again after resuming.
func setPaused(cl *kgo.Client, topic string, had, want []int32) {
	var resume []int32
	for _, p := range had {
		if !slices.Contains(want, p) {
			resume = append(resume, p)
		}
	}
	if len(want) > 0 {
		cl.PauseFetchPartitions(map[string][]int32{topic: want})
	}
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(map[string][]int32{topic: resume})
	}
}

// finish expires everything left (the end of a bounded comparison), saves
// and returns the final snapshot.
func (c *Comparison) finish(ctx context.Context, core *core) (Snapshot, error) {
	core.setNow(c.opts.Now())
	core.expire()
	c.publish(core)
	if err := c.save(context.WithoutCancel(ctx), core, true); err != nil {
		return c.Snapshot(), err
	}
	return c.Snapshot(), nil
}

func (c *Comparison) publish(core *core) {
	s := core.snapshot(c.opts.Now())
	c.snap.Store(&s)
}

func (c *Comparison) save(ctx context.Context, core *core, done bool) error {
	if c.opts.Checkpointer == nil {
		return nil
	}
	state, err := core.encodeCheckpoint(nil)
	if err != nil {
		return err
	}
	// The numbers saved with the state are taken from the same moment.
	snap := core.snapshot(c.opts.Now())
	c.snap.Store(&snap)
	cp := &Checkpoint{State: state, Snapshot: snap, Differences: core.samples.unsaved, Done: done}
	if err := c.opts.Checkpointer.SaveCheckpoint(ctx, cp); err != nil {
		return fmt.Errorf("migration: save checkpoint: %w", err)
	}
	core.samples.unsaved = nil
	return nil
}

// process feeds one poll's records of side into the core.
func (c *Comparison) process(core *core, side int, f kgo.Fetches) {
	f.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		c.log.Warn("comparison fetch error", "topic", topic, "partition", p, "err", err)
	})
	f.EachPartition(func(fp kgo.FetchTopicPartition) {
		core.setHigh(side, fp.Partition, fp.HighWatermark)
		for _, r := range fp.Records {
			if !core.wants(side, r.Partition, r.Offset) {
				// Past a bounded end: everything below it is behind us
				// (a partition whose old records were deleted resumes
				// past the end).
				if ps := core.part(side, r.Partition); ps != nil && ps.end >= 0 && r.Offset >= ps.end {
					core.skipTo(side, r.Partition, ps.end)
				}
				continue
			}
			if r.Attrs.IsControl() {
				core.skipTo(side, r.Partition, r.Offset+1)
				continue
			}
			value := r.Value
			if c.decoder != nil {
				value = c.decode(core, side, value)
			}
			core.add(side, r.Partition, r.Offset, r.Timestamp.UnixMilli(), r.Key, value, r.Headers)
		}
	})
}

func (e *core) part(side int, p int32) *partState {
	if p < 0 || int(p) >= len(e.sides[side].parts) {
		return nil
	}
	return &e.sides[side].parts[p]
}

// setup loads the checkpoint or, for a new comparison, resolves the start
// and end offsets, and returns the core.
func (c *Comparison) setup(ctx context.Context, adm *kadm.Client) (*core, error) {
	mctx, cancel := context.WithTimeout(ctx, c.opts.MetadataTimeout)
	defer cancel()
	topics := [2]string{c.spec.Left, c.spec.Right}
	tds, err := adm.ListTopics(mctx, topics[:]...)
	if err != nil {
		return nil, fmt.Errorf("migration: read metadata of %s and %s: %w", topics[0], topics[1], err)
	}
	var nparts [2]int
	for s, t := range topics {
		td, ok := tds[t]
		if !ok || td.Err != nil {
			if ok && td.Err != nil {
				return nil, fmt.Errorf("migration: topic %s: %w: %w", t, ErrTopicNotFound, td.Err)
			}
			return nil, fmt.Errorf("migration: topic %s: %w", t, ErrTopicNotFound)
		}
		nparts[s] = len(td.Partitions)
		if nparts[s] == 0 {
			return nil, fmt.Errorf("migration: topic %s has no partitions", t)
		}
	}

	if c.opts.Checkpointer != nil {
		blob, err := c.opts.Checkpointer.LoadCheckpoint(ctx)
		if err != nil {
			return nil, fmt.Errorf("migration: load checkpoint: %w", err)
		}
		if blob != nil {
			core := c.newCore([2][]int64{}, nil, [2][]int64{})
			if err := core.decodeCheckpoint(blob); err != nil {
				return nil, err
			}
			for s := 0; s < 2; s++ {
				if have := len(core.sides[s].parts); have > nparts[s] {
					return nil, fmt.Errorf("migration: topic %s has %d partitions but the checkpoint has %d: was it recreated? Restart the comparison", topics[s], nparts[s], have)
				} else if have < nparts[s] {
					c.log.Warn("topic gained partitions after the comparison started; the new ones are not read (restart the comparison to include them)",
						"topic", topics[s], "partitions", nparts[s], "read", have)
				}
			}
			c.log.Info("comparison resumed from checkpoint", "compared", core.c.Compared())
			return core, nil
		}
	}

	var starts, highs, ends [2][]int64
	for s, t := range topics {
		hi, err := adm.ListEndOffsets(mctx, t)
		if err != nil {
			return nil, fmt.Errorf("migration: list end offsets of %s: %w", t, err)
		}
		var st kadm.ListedOffsets
		switch c.spec.startMode {
		case startEarliest:
			st, err = adm.ListStartOffsets(mctx, t)
		case startLatest:
			st = hi
		default:
			st, err = adm.ListOffsetsAfterMilli(mctx, c.spec.startMilli, t)
		}
		if err != nil {
			return nil, fmt.Errorf("migration: list start offsets of %s: %w", t, err)
		}
		starts[s], highs[s] = make([]int64, nparts[s]), make([]int64, nparts[s])
		for p := 0; p < nparts[s]; p++ {
			h, ok := hi.Lookup(t, int32(p))
			if !ok || h.Err != nil {
				return nil, fmt.Errorf("migration: end offset of %s/%d: %v", t, p, h.Err)
			}
			o, ok := st.Lookup(t, int32(p))
			if !ok || o.Err != nil {
				return nil, fmt.Errorf("migration: start offset of %s/%d: %v", t, p, o.Err)
			}
			start := o.Offset
			if start < 0 || start > h.Offset { // no record at or after the time
				start = h.Offset
			}
			starts[s][p], highs[s][p] = start, h.Offset
		}
		ends[s] = highs[s]
	}
	core := c.newCore(starts, &ends, highs)
	// Save the resolved positions at once, so a restart before the first
	// interval resumes from the same starts and ends.
	c.publish(core)
	if err := c.save(ctx, core, false); err != nil {
		return nil, err
	}
	return core, nil
}

func (c *Comparison) newCore(starts [2][]int64, ends *[2][]int64, highs [2][]int64) *core {
	var e [2][]int64
	if ends != nil {
		e = *ends
	}
	core := newCore(c.spec, c.opts.Limits, starts, e, highs)
	core.samples.exampleLimit = c.opts.ExampleLimit
	core.samples.storeLimit = c.opts.SampleLimit
	return core
}

// PreviewPair is one pair found by Preview.
type PreviewPair struct {
	Equal  bool        `json:"equal"`
	Key    string      `json:"key"`
	Left   *RecordInfo `json:"left"`
	Right  *RecordInfo `json:"right"`
	Fields []FieldDiff `json:"fields,omitempty"`
	SkewMs int64       `json:"skew_ms"`
}

// PathUse says how many of the values a preview read have a path of the
// spec: an ignore path or the pairing path that matches none of them is
// most likely mistyped.
type PathUse struct {
	Path string `json:"path"`
	Role string `json:"role"` // "ignore" or "pairing"
	// Sampled counts the values read that are JSON, left and right;
	// Matched those that have the path.
	Sampled [2]int64 `json:"sampled"`
	Matched [2]int64 `json:"matched"`
	// Suggest are differing paths found that end like this one (what it
	// was probably meant to be).
	Suggest []string `json:"suggest,omitempty"`
}

// Unmatched reports whether the path matched none of the sampled values.
func (u PathUse) Unmatched() bool {
	return u.Sampled[0]+u.Sampled[1] > 0 && u.Matched[0]+u.Matched[1] == 0
}

type pathUse struct {
	PathUse
	path jsondiff.Path
}

func pathUses(cs *compiledSpec) []pathUse {
	var out []pathUse
	if cs.keyJSON {
		out = append(out, pathUse{PathUse: PathUse{Path: cs.keyPath.String(), Role: "pairing"}, path: cs.keyPath})
	}
	for _, p := range cs.ignore {
		out = append(out, pathUse{PathUse: PathUse{Path: p.String(), Role: "ignore"}, path: p})
	}
	return out
}

// PreviewResult is what Preview found.
type PreviewResult struct {
	// Pairs are the pairs that differ first (at most n), then pairs that
	// are equal, n in all when there are enough.
	Pairs []PreviewPair `json:"pairs"`
	// Missing are the first records that found no partner (missing on
	// either side), duplicates and unkeyed records, when the preview read
	// to the end of the topics.
	Missing []Difference `json:"missing"`
	// Paths say which of the spec's paths the values read have.
	Paths    []PathUse `json:"paths"`
	Counters Counters  `json:"counters"`
	// Complete is false when the preview stopped before reading to the end
	// of the topics: at its time limit, its budget of pairs, or once it had
	// n pairs that differ.
	Complete bool `json:"complete"`
}

// Differing is the number of pairs in Pairs that differ.
func (r PreviewResult) Differing() int {
	n := 0
	for _, p := range r.Pairs {
		if !p.Equal {
			n++
		}
	}
	return n
}

// UnmatchedPaths are the spec's paths that matched no value read.
func (r PreviewResult) UnmatchedPaths() []PathUse {
	var out []PathUse
	for _, u := range r.Paths {
		if u.Unmatched() {
			out = append(out, u)
		}
	}
	return out
}

// previewTimeout bounds a preview that finds few pairs.
const previewTimeout = 10 * time.Second

// previewMaxPairs bounds the pairs a preview compares looking for ones that
// differ.
const previewMaxPairs = 100_000

// Preview compares the records of spec from its start (nothing stored) and
// returns the pairs that differ first — up to n of them — then pairs that
// are equal, up to n pairs in all, the records that found no partner, and
// which of the spec's paths the values have, so a user can check the
// pairing and the ignore rules before creating the comparison. It reads
// until it has n pairs that differ, reaches the end of the topics,
// compares 100,000 pairs, or runs 10 seconds.
func Preview(ctx context.Context, opts Options, spec Spec, n int) (PreviewResult, error) {
	if n <= 0 || n > 1000 {
		return PreviewResult{}, fmt.Errorf("preview: want 1 to 1000 pairs, not %d", n)
	}
	spec.Bounded = true
	opts.Checkpointer = nil
	c, err := New(spec, opts)
	if err != nil {
		return PreviewResult{}, err
	}
	c.previewN = n
	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	snap, err := c.Run(pctx)
	res := PreviewResult{Counters: snap.Counters, Complete: err == nil && snap.Done}
	res.Pairs = append(res.Pairs, c.previewDiff...)
	if rest := n - len(res.Pairs); rest > 0 {
		res.Pairs = append(res.Pairs, c.previewEqual[:min(rest, len(c.previewEqual))]...)
	}
	if res.Pairs == nil {
		res.Pairs = []PreviewPair{}
	}
	for _, k := range []Kind{KindMissingRight, KindMissingLeft, KindDuplicate, KindUnkeyed} {
		res.Missing = append(res.Missing, snap.Examples[k]...)
	}
	if res.Missing == nil {
		res.Missing = []Difference{}
	}
	differing := CountPaths(diffsOf(c.previewDiff), 0)
	for _, u := range c.previewPaths {
		pu := u.PathUse
		if pu.Unmatched() && pu.Role == "ignore" {
			last := u.path.Last()
			for _, d := range differing {
				if p, err := jsondiff.ParsePath(d.Path); err == nil && last != "" && p.Last() == last && len(pu.Suggest) < 3 {
					pu.Suggest = append(pu.Suggest, d.Path)
				}
			}
		}
		res.Paths = append(res.Paths, pu)
	}
	if res.Paths == nil {
		res.Paths = []PathUse{}
	}
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		err = nil // our own time limit: return what was found
	}
	return res, err
}

func diffsOf(pairs []PreviewPair) []Difference {
	out := make([]Difference, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, Difference{Kind: KindMismatch, Fields: p.Fields})
	}
	return out
}
