package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/storage/vfs"
)

// gateFS counts, per log dir, the loads reading their partition directory
// at the same moment, and holds each until a whole wave of want loads of
// its dir has arrived (or a bound passes): with RecoveryThreadsPerDir
// workers the loads of a dir overlap exactly that many at a time.
type gateFS struct {
	vfs.FS
	dirs  []string
	want  int
	total int // logs per dir

	mu       sync.Mutex
	cond     *sync.Cond
	off      bool            // after the open: no more gating
	seen     map[string]bool // partition dirs read (the first read of each is gated)
	arrived  map[string]int
	inFlight map[string]int
	maxIn    map[string]int
	timedOut bool
}

func newGateFS(dirs []string, want, total int) *gateFS {
	g := &gateFS{FS: vfs.Default, dirs: dirs, want: want, total: total,
		seen: map[string]bool{}, arrived: map[string]int{}, inFlight: map[string]int{}, maxIn: map[string]int{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gateFS) ReadDir(name string) ([]os.DirEntry, error) {
	parent := filepath.Dir(name)
	for _, d := range g.dirs {
		if parent == d {
			g.hold(d, name)
			break
		}
	}
	return g.FS.ReadDir(name)
}

// hold waits, at most 10 s, until the wave of loads this one belongs to
// (want of them) is complete in dir.
func (g *gateFS) hold(dir, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.off || g.seen[name] {
		return
	}
	g.seen[name] = true
	g.arrived[dir]++
	g.inFlight[dir]++
	g.maxIn[dir] = max(g.maxIn[dir], g.inFlight[dir])
	wave := (g.arrived[dir] + g.want - 1) / g.want * g.want
	deadline := time.Now().Add(10 * time.Second)
	stop := time.AfterFunc(10*time.Second, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop.Stop()
	for g.arrived[dir] < wave && time.Now().Before(deadline) {
		g.cond.Wait()
	}
	if g.arrived[dir] < wave {
		g.timedOut = true
	}
	g.cond.Broadcast()
	// The wave is complete: a load of the next one arriving now, while
	// this one is held a moment longer, would be one too many at once.
	// (A miss under heavy load is possible; a false alarm is not.)
	linger := time.Now().Add(100 * time.Millisecond)
	stop2 := time.AfterFunc(100*time.Millisecond, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop2.Stop()
	for g.arrived[dir] == wave && g.arrived[dir] < g.total && time.Now().Before(linger) {
		g.cond.Wait()
	}
	g.inFlight[dir]--
}

// TestRecoveryThreadsPerDir: num.recovery.threads.per.data.dir
// (RecoveryThreadsPerDir) is how many logs of one log dir load at once at
// start, in each dir: never more, and that many when there are enough.
func TestRecoveryThreadsPerDir(t *testing.T) {
	noSync(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	const perDir = 6
	m := openTestManager(t, dirs[0], nil, func(c *ManagerConfig) { c.Dirs = dirs })
	var tps []TopicPartition
	var cfgs []LogConfig
	for p := range 2 * perDir {
		tps = append(tps, TopicPartition{Topic: "threads", Partition: int32(p)})
		cfgs = append(cfgs, DefaultLogConfig())
	}
	if _, errs := m.CreateLogs(tps, cfgs); errs != nil {
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 3} {
		t.Run(fmt.Sprint(threads), func(t *testing.T) {
			fs := newGateFS(dirs, threads, perDir)
			m := openTestManager(t, dirs[0], nil, func(c *ManagerConfig) {
				c.Dirs, c.FS, c.RecoveryThreadsPerDir = dirs, fs, threads
			})
			fs.mu.Lock()
			fs.off = true
			fs.mu.Unlock()
			if n := len(m.Logs()); n != 2*perDir {
				t.Errorf("%d logs loaded, want %d", n, 2*perDir)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			fs.mu.Lock()
			defer fs.mu.Unlock()
			for _, d := range dirs {
				if fs.arrived[d] != perDir {
					t.Errorf("dir %s: %d logs read, want %d", d, fs.arrived[d], perDir)
				}
				if fs.maxIn[d] != threads {
					t.Errorf("dir %s: at most %d logs loading at once, want %d (num.recovery.threads.per.data.dir)", d, fs.maxIn[d], threads)
				}
			}
			if fs.timedOut {
				t.Errorf("a wave of %d loads in one dir never formed within 10 s: fewer load at once than configured", threads)
			}
		})
	}
}

// TestRecoveryThreadsDefault: the manager's default is the config table's
// default of num.recovery.threads.per.data.dir.
func TestRecoveryThreadsDefault(t *testing.T) {
	if got := config.Default().NumRecoveryThreadsPerDataDir; int(got) != DefaultRecoveryThreadsPerDir {
		t.Errorf("num.recovery.threads.per.data.dir defaults to %d in the config table, %d in storage", got, DefaultRecoveryThreadsPerDir)
	}
	var c ManagerConfig
	c.setDefaults()
	if c.RecoveryThreadsPerDir != DefaultRecoveryThreadsPerDir {
		t.Errorf("RecoveryThreadsPerDir 0 becomes %d, want %d", c.RecoveryThreadsPerDir, DefaultRecoveryThreadsPerDir)
	}
}
