package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

// ManagerConfig configures the log manager (broker-level settings).
type ManagerConfig struct {
	Dirs                   []string         // log.dirs
	Logger                 *slog.Logger     // nil = discard
	Now                    func() time.Time // nil = time.Now (tests inject)
	RetentionCheckInterval time.Duration    // log.retention.check.interval.ms, 300000
	// CheckpointInterval is how often recovery points and log start offsets
	// are checkpointed (log.flush.offset.checkpoint.interval.ms, 60 s).
	CheckpointInterval time.Duration
	// HighWatermarkCheckpointInterval is how often the high watermarks are
	// (replica.high.watermark.checkpoint.interval.ms, 5 s).
	HighWatermarkCheckpointInterval time.Duration
	FlushSchedulerInterval          time.Duration // log.flush.scheduler.interval.ms; checks flush.ms, default 1 s
	CleanerEnabled                  bool          // log.cleaner.enable
	CleanerBackoff                  time.Duration // log.cleaner.backoff.ms, 15 s
	MaxOpenLogs                     int           // idle logs beyond this close their files and unmap indexes; 0 = no limit
	// IdleSegmentTimeout closes the files of segments not read or written
	// for this long (default 1 minute); the active segment of a log stays
	// open unless MaxOpenLogs pushes the log out.
	IdleSegmentTimeout time.Duration
	// ProducerIDExpiration forgets idle producers (producer.id.expiration.ms, 1 day).
	ProducerIDExpiration time.Duration
	DefaultConfig        func(topic string) LogConfig // config for logs found on disk at start; nil = DefaultLogConfig
	// MaxDecompressedBatchBytes bounds what one compressed producer batch
	// may decompress to when it is checked on append
	// (message.decompressed.max.bytes); a larger one is refused with
	// ErrInvalidRecord. 0 = DefaultMaxDecompressedBatchBytes.
	MaxDecompressedBatchBytes int64
	// FS is the filesystem the logs live on; nil = vfs.Default (the
	// operating system's). Tests put a fault-injecting one here
	// (package errorfs).
	FS vfs.FS
	// RecoveryThreadsPerDir is how many logs of one log dir load (and
	// recover) at once at start; the dirs load side by side
	// (num.recovery.threads.per.data.dir). 0 = DefaultRecoveryThreadsPerDir.
	RecoveryThreadsPerDir int
	// LoadProgress, when set, is told how far the start-up load is, about
	// once a second and when it ends (the appliance sends it to systemd as
	// sd_notify STATUS=). Called from another goroutine.
	LoadProgress func(LoadProgress)
}

// DefaultRecoveryThreadsPerDir is the start-up load's parallelism per log
// dir when none is configured, and the default of
// num.recovery.threads.per.data.dir (the config table's, which a test ties
// to this). Loading is mostly waiting for the disk (directory reads, index
// and header reads), so it runs more loads than there are cores; Kafka's
// default of 1 loads one log at a time.
const DefaultRecoveryThreadsPerDir = 8

func (c *ManagerConfig) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.RetentionCheckInterval, 5*time.Minute)
	def(&c.CheckpointInterval, time.Minute)
	def(&c.HighWatermarkCheckpointInterval, 5*time.Second)
	def(&c.FlushSchedulerInterval, time.Second)
	def(&c.CleanerBackoff, 15*time.Second)
	def(&c.IdleSegmentTimeout, time.Minute)
	def(&c.ProducerIDExpiration, 24*time.Hour)
	if c.DefaultConfig == nil {
		c.DefaultConfig = func(string) LogConfig { return DefaultLogConfig() }
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.RecoveryThreadsPerDir <= 0 {
		c.RecoveryThreadsPerDir = DefaultRecoveryThreadsPerDir
	}
	if c.MaxDecompressedBatchBytes <= 0 {
		c.MaxDecompressedBatchBytes = record.DefaultMaxDecompressedBatchBytes
	}
}

// Manager owns the log directories: it loads and recovers every log at
// start, creates and deletes logs, and runs the background work (retention,
// compaction, flushes, checkpoints, closing idle files).
type Manager struct {
	cfg ManagerConfig
	env *env

	mu    sync.Mutex
	logs  map[TopicPartition]*Log
	dirOf map[TopicPartition]string // log dir holding each log
	// creating holds the logs CreateLogs is creating (outside mu).
	creating map[TopicPartition]*pendingLog
	locks    []vfs.File
	closed   bool

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	rolledC chan *Log
	// cleanerMu serialises compaction with checkpoint writes of its offsets.
	cleanerMu sync.Mutex
	// ckptMu guards written: each checkpoint file's content as last
	// written, so that a file whose offsets did not move is not written
	// (and fsynced) again: an idle broker of thousands of partitions then
	// writes none.
	ckptMu  sync.Mutex
	written map[string]map[TopicPartition]int64
}

// OpenManager locks the directories, recovers every log in them and starts
// the background work. A directory that cannot be read is an error naming
// it; a folder in it that is not a partition is logged and skipped. Nothing
// but interrupted deletions and temporary files is deleted.
func OpenManager(cfg ManagerConfig) (*Manager, error) {
	cfg.setDefaults()
	if len(cfg.Dirs) == 0 {
		return nil, errors.New("storage: no log directories")
	}
	m := &Manager{cfg: cfg, logs: make(map[TopicPartition]*Log), dirOf: make(map[TopicPartition]string),
		creating: make(map[TopicPartition]*pendingLog), rolledC: make(chan *Log, 1024)}
	m.env = &env{logger: cfg.Logger, now: cfg.Now, rolled: m.noteRolled, maxDecompressed: cfg.MaxDecompressedBatchBytes, fs: cfg.FS}
	seen := map[string]bool{}
	parts := map[TopicPartition]string{}
	cfgs := map[string]*logConfig{}
	var scans []*dirScan
	for _, d := range cfg.Dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			m.unlock()
			return nil, fmt.Errorf("log dir %s: %w", d, err)
		}
		if seen[abs] {
			m.unlock()
			return nil, fmt.Errorf("log dir %s listed twice", d)
		}
		seen[abs] = true
		sc, err := m.openDir(d, parts, cfgs)
		if err != nil {
			m.unlock()
			return nil, err
		}
		scans = append(scans, sc)
	}
	if err := m.loadLogs(scans); err != nil {
		m.closeLogs()
		m.unlock()
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.start()
	return m, nil
}

func (m *Manager) unlock() {
	for _, f := range m.locks {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
	m.locks = nil
}

func (m *Manager) closeLogs() {
	for _, l := range m.logs {
		l.mu.Lock()
		l.closeLocked()
		l.mu.Unlock()
	}
}

// dirScan is what openDir found in one log dir: the logs to load, and
// whether the dir was shut down cleanly.
type dirScan struct {
	dir   string
	clean bool
	loads []logLoad
}

// openDir locks one log directory, finishes interrupted deletions, removes
// temporary files, reads its checkpoints and lists its logs (loaded later
// by loadLogs, in parallel).
func (m *Manager) openDir(dir string, seen map[TopicPartition]string, cfgs map[string]*logConfig) (*dirScan, error) {
	if err := m.cfg.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	lf, err := m.cfg.FS.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("log dir %s is in use by another process (lock %s): %w", dir, lf.Name(), err)
	}
	m.locks = append(m.locks, lf)

	ents, err := m.cfg.FS.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	clean := fileExists(m.cfg.FS, filepath.Join(dir, cleanShutdownFile))
	ckpt := func(name string) (map[TopicPartition]int64, error) {
		c, err := readOffsetCheckpoint(m.cfg.FS, filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("log dir %s: %w", dir, err)
		}
		return c, nil
	}
	rps, err := ckpt(recoveryPointCheckpoint)
	if err != nil {
		return nil, err
	}
	starts, err := ckpt(logStartCheckpoint)
	if err != nil {
		return nil, err
	}
	hws, err := ckpt(replicationCheckpoint)
	if err != nil {
		return nil, err
	}
	dirty, err := ckpt(cleanerCheckpoint)
	if err != nil {
		return nil, err
	}
	if rps == nil {
		clean = false // without recovery points a clean marker alone is not trusted
	}
	// What the files hold now counts as last written: a checkpoint whose
	// offsets did not move since the start (every one, after a clean
	// start and an idle run) is not written again by Close.
	m.ckptMu.Lock()
	if m.written == nil {
		m.written = map[string]map[TopicPartition]int64{}
	}
	for name, c := range map[string]map[TopicPartition]int64{recoveryPointCheckpoint: rps, logStartCheckpoint: starts,
		replicationCheckpoint: hws, cleanerCheckpoint: dirty} {
		if c != nil {
			m.written[filepath.Join(dir, name)] = c
		}
	}
	m.ckptMu.Unlock()
	get := func(c map[TopicPartition]int64, tp TopicPartition) int64 {
		if v, ok := c[tp]; ok {
			return v
		}
		return -1
	}
	scan := &dirScan{dir: dir, clean: clean}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		if !e.IsDir() {
			switch name {
			case recoveryPointCheckpoint, logStartCheckpoint, replicationCheckpoint, cleanerCheckpoint,
				cleanShutdownFile, lockFile, "meta.properties":
			default:
				if strings.HasSuffix(name, ".tmp") {
					m.cfg.FS.Remove(path) // an interrupted checkpoint write
				}
			}
			continue
		}
		if name == "lost+found" {
			continue
		}
		if strings.HasSuffix(name, "-delete") {
			// A log whose deletion was interrupted: finish it.
			m.cfg.Logger.Info("removing a deleted log", "dir", path)
			if err := m.cfg.FS.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("remove deleted log: %w", err)
			}
			continue
		}
		if strings.HasSuffix(name, "-future") || strings.HasSuffix(name, "-stray") {
			m.cfg.Logger.Warn("ignoring a future/stray log directory", "dir", path)
			continue
		}
		tp, err := parseTopicPartition(name)
		if err != nil {
			// Not a partition (a backup, a snapshot directory, a misplaced
			// data directory): skipped, as Kafka skips its own special
			// directories, so a stray folder cannot stop the broker.
			m.cfg.Logger.Warn("ignoring a directory that is not a partition", "dir", path, "err", err)
			continue
		}
		if other, dup := seen[tp]; dup {
			return nil, fmt.Errorf("partition %s is in two log dirs: %s and %s", tp, other, dir)
		}
		seen[tp] = dir
		// One config per topic: DefaultConfig may ask the metadata store.
		lc, ok := cfgs[tp.Topic]
		if !ok {
			if lc, err = newLogConfig(m.cfg.DefaultConfig(tp.Topic)); err != nil {
				return nil, fmt.Errorf("default config for %s: %w", tp, err)
			}
			cfgs[tp.Topic] = lc
		}
		scan.loads = append(scan.loads, logLoad{dir: path, tp: tp, cfg: lc, env: m.env,
			recoveryPoint: get(rps, tp), logStart: get(starts, tp), hw: get(hws, tp),
			firstDirty: get(dirty, tp), cleanShutdown: clean})
	}
	return scan, nil
}

// LoadProgress is how far OpenManager is in loading the logs it found.
type LoadProgress struct {
	Loaded, Total  int
	RecoveredBytes int64 // log bytes read and checked by recovery so far
	Elapsed        time.Duration
}

// String is the progress line of the broker's log and of systemd's status.
func (p LoadProgress) String() string {
	return fmt.Sprintf("loaded %d/%d logs, %.1f MB recovered", p.Loaded, p.Total, float64(p.RecoveredBytes)/1e6)
}

// loadProgressInterval is how often loadLogs reports its progress.
var loadProgressInterval = time.Second

// loadLogs loads the logs the scans found: each log dir by its own pool of
// RecoveryThreadsPerDir workers, all dirs at once (Kafka's
// num.recovery.threads.per.data.dir). It reports progress every
// loadProgressInterval and at the end, to the log and to cfg.LoadProgress.
// The first failure stops the rest and is returned; the logs loaded stay
// in m.logs for the caller to close.
func (m *Manager) loadLogs(scans []*dirScan) error {
	start := time.Now()
	var loaded atomic.Int64
	var recovered atomic.Int64
	total := 0
	for _, sc := range scans {
		total += len(sc.loads)
	}
	progress := func() LoadProgress {
		return LoadProgress{Loaded: int(loaded.Load()), Total: total, RecoveredBytes: recovered.Load(), Elapsed: time.Since(start)}
	}
	report := func(p LoadProgress) {
		m.cfg.Logger.Info(p.String(), "elapsed", p.Elapsed.Round(time.Millisecond))
		if m.cfg.LoadProgress != nil {
			m.cfg.LoadProgress(p)
		}
	}
	stop, reporterDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reporterDone)
		t := time.NewTicker(loadProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				report(progress())
			}
		}
	}()
	threads := m.cfg.RecoveryThreadsPerDir
	if total > 0 {
		m.cfg.Logger.Info("loading logs", "logs", total, "dirs", len(scans), "threads_per_dir", threads)
	}
	var failed atomic.Bool
	var outer errgroup.Group
	for _, sc := range scans {
		outer.Go(func() error {
			var g errgroup.Group
			g.SetLimit(threads)
			for _, p := range sc.loads {
				g.Go(func() error {
					if failed.Load() {
						return nil
					}
					t0 := time.Now()
					p.recovered = &recovered
					l, err := openLog(p)
					if err != nil {
						failed.Store(true)
						return fmt.Errorf("load log %s: %w", p.dir, err)
					}
					m.mu.Lock()
					m.logs[p.tp], m.dirOf[p.tp] = l, sc.dir
					n := len(m.logs)
					m.mu.Unlock()
					if m.cfg.MaxOpenLogs > 0 && n > m.cfg.MaxOpenLogs {
						// Past the limit a loaded log gives its descriptors and
						// mappings back at once: a broker with thousands of
						// partitions must not hold thousands of files open
						// until the first idle sweep.
						l.closeIdle(0, true)
					}
					loaded.Add(1)
					m.cfg.Logger.Debug("loaded log", "partition", p.tp.String(), "segments", l.NumSegments(),
						"log_start", l.LogStartOffset(), "log_end", l.LogEndOffset(), "took", time.Since(t0))
					return nil
				})
			}
			return g.Wait()
		})
	}
	err := outer.Wait()
	close(stop)
	<-reporterDone
	if err != nil {
		return err
	}
	if total > 0 {
		report(progress())
	}
	for _, sc := range scans {
		// From now on a crash must trigger recovery.
		if err := removeIfExists(m.cfg.FS, filepath.Join(sc.dir, cleanShutdownFile)); err != nil {
			return fmt.Errorf("log dir: %w", err)
		}
		if err := syncDir(m.cfg.FS, sc.dir); err != nil {
			return fmt.Errorf("log dir: %w", err)
		}
	}
	return nil
}

// Logs returns every log, sorted by topic and partition.
func (m *Manager) Logs() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].tp, out[j].tp
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// logsUnordered is every log in no particular order: for the background
// sweeps, which run every second or so over every log and need no order
// (sorting 10,000 names each time was most of an idle flush tick).
func (m *Manager) logsUnordered() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	return out
}

// Log returns the log of tp.
func (m *Manager) Log(tp TopicPartition) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[tp]
	return l, ok
}

// GetOrCreateLog returns the log of tp, creating it in the log dir holding
// the fewest logs. An existing log takes cfg.
func (m *Manager) GetOrCreateLog(tp TopicPartition, cfg LogConfig) (*Log, error) {
	logs, errs := m.CreateLogs([]TopicPartition{tp}, []LogConfig{cfg})
	return logs[0], errs[0]
}

// createWorkers bounds how many logs CreateLogs opens at once.
const createWorkers = 8

// CreateLogs is GetOrCreateLog for many partitions (cfgs[i] is tps[i]'s
// config): logs[i] or errs[i] for each. New logs are spread over the log
// dirs (fewest logs first), opened in parallel without the manager's lock,
// and each log dir that received some is fsynced once for the whole batch
// (the new directory entries), not once per log: creating thousands of
// partitions is otherwise bound by one directory fsync each, serialised. A
// partition being created by another call is waited for.
func (m *Manager) CreateLogs(tps []TopicPartition, cfgs []LogConfig) (logs []*Log, errs []error) {
	logs, errs = make([]*Log, len(tps)), make([]error, len(tps))
	lcs := make([]*logConfig, len(tps))
	for i, tp := range tps {
		lc, err := newLogConfig(cfgs[i])
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("%s: %w", tp, err)
		case validTopicName(tp.Topic) != nil:
			errs[i] = validTopicName(tp.Topic)
		case tp.Partition < 0:
			errs[i] = fmt.Errorf("storage: negative partition %d", tp.Partition)
		}
		lcs[i] = lc
	}
	type newLog struct {
		i   int
		dir string
	}
	for {
		var fresh []newLog
		var wait chan struct{}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			for i := range errs {
				if errs[i] == nil && logs[i] == nil {
					errs[i] = ErrLogClosed
				}
			}
			return logs, errs
		}
		counts := make(map[string]int, len(m.cfg.Dirs))
		for _, d := range m.dirOf {
			counts[d]++
		}
		for _, d := range m.creating {
			counts[d.dir]++
		}
		mine := map[TopicPartition]bool{}
		for i, tp := range tps {
			if errs[i] != nil || logs[i] != nil {
				continue
			}
			if l, ok := m.logs[tp]; ok {
				l.mu.Lock()
				l.cfg.Store(lcs[i])
				l.mu.Unlock()
				logs[i] = l
				continue
			}
			if c, ok := m.creating[tp]; ok {
				if !mine[tp] {
					wait = c.done // another call creates it: wait, then look again
				}
				continue
			}
			dir := m.cfg.Dirs[0]
			for _, d := range m.cfg.Dirs[1:] {
				if counts[d] < counts[dir] {
					dir = d
				}
			}
			counts[dir]++
			m.creating[tp] = &pendingLog{dir: dir, done: make(chan struct{})}
			mine[tp] = true
			fresh = append(fresh, newLog{i, dir})
		}
		m.mu.Unlock()
		if len(fresh) == 0 && wait == nil {
			return logs, errs
		}

		created := make([]*Log, len(fresh))
		var g errgroup.Group
		g.SetLimit(createWorkers)
		for k, n := range fresh {
			g.Go(func() error {
				tp := tps[n.i]
				l, err := openLog(logLoad{dir: filepath.Join(n.dir, tp.String()), tp: tp, cfg: lcs[n.i], env: m.env,
					recoveryPoint: 0, logStart: -1, hw: -1, firstDirty: -1, cleanShutdown: true, create: true})
				if err != nil {
					errs[n.i] = fmt.Errorf("create log %s: %w", tp, err)
					return nil
				}
				created[k] = l
				return nil
			})
		}
		g.Wait()
		// One fsync per log dir for every new entry in it.
		dirErr := map[string]error{}
		for k, n := range fresh {
			if _, done := dirErr[n.dir]; !done && created[k] != nil {
				dirErr[n.dir] = syncDir(m.cfg.FS, n.dir)
			}
		}
		m.mu.Lock()
		for k, n := range fresh {
			tp, l := tps[n.i], created[k]
			c := m.creating[tp]
			delete(m.creating, tp)
			close(c.done)
			if l == nil {
				continue
			}
			if err := dirErr[n.dir]; err != nil || m.closed {
				l.close()
				if err == nil {
					err = ErrLogClosed
				}
				errs[n.i] = fmt.Errorf("create log %s: %w", tp, err)
				continue
			}
			m.logs[tp], m.dirOf[tp] = l, n.dir
			logs[n.i] = l
		}
		m.mu.Unlock()
		if wait != nil {
			<-wait
		}
	}
}

// pendingLog is a log being created by CreateLogs: its dir, and done,
// closed when it is created (or failed).
type pendingLog struct {
	dir  string
	done chan struct{}
}

// DeleteLog closes the log, renames its directory to
// <topic>-<partition>.<uuid>-delete (deleteDirName) and removes it in the
// background. The log leaves the manager only once its directory is
// renamed: when the rename fails the log stays listed, closed (its records
// are never served again), and DeleteLog may be called again; a log of the
// same partition cannot be created meanwhile, so a topic created again
// under the name never finds the old records.
func (m *Manager) DeleteLog(tp TopicPartition) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrLogClosed
	}
	l, ok := m.logs[tp]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("storage: no log for %s", tp)
	}
	// Counted while m.mu is held, so Close (which sets closed under m.mu,
	// then waits) always waits for the removal below.
	m.wg.Add(1)
	m.mu.Unlock()

	l.mu.Lock()
	l.deleted = true
	err := l.closeLocked()
	l.mu.Unlock()
	if err != nil {
		m.cfg.Logger.Warn("closing deleted log", "partition", tp.String(), "err", err)
	}
	target := filepath.Join(filepath.Dir(l.dir), deleteDirName(tp))
	if err := m.cfg.FS.Rename(l.dir, target); err != nil {
		m.wg.Done()
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	m.mu.Lock()
	if m.logs[tp] == l {
		delete(m.logs, tp)
		delete(m.dirOf, tp)
	}
	m.mu.Unlock()
	syncDir(m.cfg.FS, filepath.Dir(l.dir))
	go func() {
		defer m.wg.Done()
		if err := m.cfg.FS.RemoveAll(target); err != nil {
			m.cfg.Logger.Error("remove deleted log", "dir", target, "err", err)
		}
	}()
	return nil
}

// deleteDirName is the name a deleted log's directory takes until it is
// removed: <topic>-<partition>.<32 hex digits>-delete, with the topic cut
// short so that the name fits in 255 bytes (NAME_MAX) whatever the topic's
// length (up to 249), as Kafka's LocalLog.logDeleteDirName does. Start-up
// removes any directory named so.
func deleteDirName(tp TopicPartition) string {
	var id [16]byte
	deleteDirRand(id[:])
	suffix := fmt.Sprintf("-%d.%s-delete", tp.Partition, hex.EncodeToString(id[:]))
	return tp.Topic[:min(len(tp.Topic), 255-len(suffix))] + suffix
}

// deleteDirRand fills the unique part of a delete-directory name (tests
// replace it to make a rename fail).
var deleteDirRand = func(b []byte) { rand.Read(b) }

// Close stops the background work, flushes and closes every log (in
// parallel, as they load), writes all checkpoints and the clean-shutdown
// marker, and releases the directories.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()

	// Each log's flush waits for the disk: the logs of each dir are closed
	// by RecoveryThreadsPerDir workers, all dirs at once (Kafka's
	// LogManager.shutdown uses the recovery threads the same way).
	var errs []error
	var errMu sync.Mutex
	byDir := map[string][]*Log{}
	m.mu.Lock()
	for tp, l := range m.logs {
		byDir[m.dirOf[tp]] = append(byDir[m.dirOf[tp]], l)
	}
	m.mu.Unlock()
	var outer sync.WaitGroup
	for _, logs := range byDir {
		outer.Go(func() {
			var g errgroup.Group
			g.SetLimit(m.cfg.RecoveryThreadsPerDir)
			for _, l := range logs {
				g.Go(func() error {
					if err := l.close(); err != nil {
						errMu.Lock()
						errs = append(errs, err)
						errMu.Unlock()
					}
					return nil
				})
			}
			g.Wait()
		})
	}
	outer.Wait()
	if err := m.writeCheckpoints(true, true); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		for _, d := range m.cfg.Dirs {
			if err := writeFileAtomic(m.cfg.FS, filepath.Join(d, cleanShutdownFile), nil); err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.unlock()
	return errors.Join(errs...)
}

// writeCheckpoints writes each log dir's checkpoint files: the recovery
// points, log start offsets and cleaner offsets (recovery), the high
// watermarks (hw). A file whose content would be what it was last written
// with is left alone.
func (m *Manager) writeCheckpoints(recovery, hw bool) error {
	type perDir struct{ rp, ls, hw, dirty map[TopicPartition]int64 }
	m.mu.Lock()
	dirs := make(map[string]*perDir)
	for _, d := range m.cfg.Dirs {
		pd := &perDir{}
		if recovery {
			pd.rp, pd.ls, pd.dirty = map[TopicPartition]int64{}, map[TopicPartition]int64{}, map[TopicPartition]int64{}
		}
		if hw {
			pd.hw = map[TopicPartition]int64{}
		}
		dirs[d] = pd
	}
	for tp, l := range m.logs {
		pd := dirs[m.dirOf[tp]]
		if recovery {
			pd.rp[tp] = l.recoveryPoint.Load()
			pd.ls[tp] = l.LogStartOffset()
			if d := l.firstDirty.Load(); d >= 0 {
				pd.dirty[tp] = d
			}
		}
		if hw {
			pd.hw[tp] = l.HighWatermark()
		}
	}
	m.mu.Unlock()
	var errs []error
	for d, pd := range dirs {
		if recovery {
			errs = append(errs,
				m.writeCheckpoint(filepath.Join(d, recoveryPointCheckpoint), pd.rp),
				m.writeCheckpoint(filepath.Join(d, logStartCheckpoint), pd.ls),
				m.writeCheckpoint(filepath.Join(d, cleanerCheckpoint), pd.dirty))
		}
		if hw {
			errs = append(errs, m.writeCheckpoint(filepath.Join(d, replicationCheckpoint), pd.hw))
		}
	}
	return errors.Join(errs...)
}

// writeCheckpoint writes one checkpoint file unless it was last written
// with exactly these offsets.
func (m *Manager) writeCheckpoint(path string, offsets map[TopicPartition]int64) error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	if last, ok := m.written[path]; ok && maps.Equal(last, offsets) {
		return nil
	}
	delete(m.written, path) // unknown until the write succeeds
	if err := writeOffsetCheckpoint(m.cfg.FS, path, offsets); err != nil {
		return err
	}
	if m.written == nil {
		m.written = map[string]map[TopicPartition]int64{}
	}
	m.written[path] = offsets
	return nil
}

// CheckpointNow writes every checkpoint file now (tests, operators).
func (m *Manager) CheckpointNow() error { return m.writeCheckpoints(true, true) }

func (m *Manager) noteRolled(l *Log) {
	select {
	case m.rolledC <- l:
	default:
		// The flusher is behind; the flush scheduler catches up.
	}
}

// start runs the background loops; each stops when ctx is cancelled and
// Close waits for all of them.
func (m *Manager) start() {
	loop := func(name string, every time.Duration, fn func()) {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-m.ctx.Done():
					return
				case <-t.C:
					fn()
				}
			}
		}()
	}
	// Roll flushes: fsync a rolled segment soon after the roll.
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-m.ctx.Done():
				return
			case l := <-m.rolledC:
				if err := l.flushRolled(); err != nil && !l.closed.Load() {
					m.cfg.Logger.Error("flush rolled segment", "partition", l.tp.String(), "err", err)
				}
			}
		}
	}()
	loop("flush", m.cfg.FlushSchedulerInterval, m.flushTick)
	loop("checkpoint", m.cfg.CheckpointInterval, func() {
		if err := m.writeCheckpoints(true, false); err != nil {
			m.cfg.Logger.Error("write recovery checkpoints", "err", err)
		}
	})
	loop("hw-checkpoint", m.cfg.HighWatermarkCheckpointInterval, func() {
		if err := m.writeCheckpoints(false, true); err != nil {
			m.cfg.Logger.Error("write high watermark checkpoint", "err", err)
		}
	})
	loop("retention", m.cfg.RetentionCheckInterval, func() { m.RunRetention() })
	if m.cfg.CleanerEnabled {
		loop("cleaner", m.cfg.CleanerBackoff, func() { m.RunCleaner() })
	}
	loop("idle", max(m.cfg.IdleSegmentTimeout/4, time.Second), m.closeIdle)
}

func (m *Manager) flushTick() {
	now := m.env.nowMs()
	for _, l := range m.logsUnordered() {
		if err := l.maybeFlushByTime(now); err != nil && !l.closed.Load() {
			m.cfg.Logger.Error("flush", "partition", l.tp.String(), "err", err)
		}
		if l.active().base > l.recoveryPoint.Load() {
			if err := l.flushRolled(); err != nil && !l.closed.Load() {
				m.cfg.Logger.Error("flush rolled segment", "partition", l.tp.String(), "err", err)
			}
		}
	}
}

// RunRetention applies retention and expires idle producers on every log
// now; the manager also runs it every RetentionCheckInterval.
func (m *Manager) RunRetention() int {
	n := 0
	cutoff := m.env.nowMs() - m.cfg.ProducerIDExpiration.Milliseconds()
	for _, l := range m.logsUnordered() {
		if m.ctx != nil && m.ctx.Err() != nil {
			break
		}
		d, err := l.DeleteOldSegments()
		if err != nil && !l.closed.Load() {
			m.cfg.Logger.Error("retention", "partition", l.tp.String(), "err", err)
		}
		n += d
		l.mu.Lock()
		l.producers.expire(cutoff)
		l.mu.Unlock()
	}
	return n
}

// closeIdle closes segment files unused for IdleSegmentTimeout and, past
// MaxOpenLogs, every file of the least recently used logs. It also drops the
// mapped pages of segments not read for a second (segment.trimIdleMapping),
// which would otherwise count in the broker's RSS until the file closes.
func (m *Manager) closeIdle() {
	logs := m.logsUnordered()
	now := time.Now()
	cutoff := now.Add(-m.cfg.IdleSegmentTimeout).UnixNano()
	trimCutoff := now.Add(-time.Second).UnixNano()
	for _, l := range logs {
		segs := l.segments()
		for _, s := range segs {
			s.trimIdleMapping(trimCutoff)
		}
		for _, s := range segs[:len(segs)-1] {
			if s.lastUse.Load() < cutoff && s.hasOpenResources() {
				l.closeIdle(cutoff, false)
				break
			}
		}
	}
	if m.cfg.MaxOpenLogs <= 0 || len(logs) <= m.cfg.MaxOpenLogs {
		return
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].lastUse.Load() > logs[j].lastUse.Load() })
	for _, l := range logs[m.cfg.MaxOpenLogs:] {
		l.closeIdle(0, true)
	}
}

// CloseIdleNow runs the idle-file sweep immediately (tests, operators).
func (m *Manager) CloseIdleNow() { m.closeIdle() }

// OpenFiles counts the segment files and index mappings currently open,
// for tests and metrics.
func (m *Manager) OpenFiles() (files, mappings int) {
	for _, l := range m.Logs() {
		for _, s := range l.segments() {
			s.mu.RLock()
			if s.file != nil {
				files++
			}
			if s.oi.mapped && s.oi.data != nil {
				mappings++
			}
			if s.ti.mapped && s.ti.data != nil {
				mappings++
			}
			s.mu.RUnlock()
		}
	}
	return files, mappings
}
