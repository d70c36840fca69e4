package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluice-io/sluice/storage/vfs"
)

// Kafka's checkpoint files are text: a version line ("0"), a count line, then
// one entry per line. The offset checkpoints of a log directory hold
// "<topic> <partition> <offset>"; leader-epoch-checkpoint holds
// "<epoch> <startOffset>".
const (
	recoveryPointCheckpoint = "recovery-point-offset-checkpoint"
	logStartCheckpoint      = "log-start-offset-checkpoint"
	replicationCheckpoint   = "replication-offset-checkpoint"
	cleanerCheckpoint       = "cleaner-offset-checkpoint"
	leaderEpochCheckpoint   = "leader-epoch-checkpoint"
	cleanShutdownFile       = ".kafka_cleanshutdown"
	lockFile                = ".lock"
)

// readCheckpointLines reads a checkpoint and returns its entry lines split
// into fields, each with want fields. A missing file is (nil, nil).
func readCheckpointLines(fsys vfs.FS, path string, want int) ([][]string, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := next()
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: empty file", path)
	}
	if v != "0" {
		return nil, fmt.Errorf("checkpoint %s: unsupported version %q", path, v)
	}
	c, ok := next()
	n, err := strconv.Atoi(c)
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("checkpoint %s: bad entry count %q", path, c)
	}
	out := make([][]string, 0, n)
	for {
		l, ok := next()
		if !ok {
			break
		}
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != want {
			return nil, fmt.Errorf("checkpoint %s line %d: %q has %d fields, want %d", path, line, l, len(f), want)
		}
		out = append(out, f)
	}
	if len(out) != n {
		return nil, fmt.Errorf("checkpoint %s: %d entries, header says %d", path, len(out), n)
	}
	return out, nil
}

// readOffsetCheckpoint reads a log directory's "<topic> <partition> <offset>" file.
func readOffsetCheckpoint(fsys vfs.FS, path string) (map[TopicPartition]int64, error) {
	lines, err := readCheckpointLines(fsys, path, 3)
	if err != nil || lines == nil {
		return nil, err // nil, nil: no file
	}
	m := make(map[TopicPartition]int64, len(lines))
	for _, f := range lines {
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("checkpoint %s: bad entry %q", path, strings.Join(f, " "))
		}
		m[TopicPartition{f[0], int32(p)}] = o
	}
	return m, nil
}

// writeOffsetCheckpoint writes entries sorted by topic and partition.
func writeOffsetCheckpoint(fsys vfs.FS, path string, m map[TopicPartition]int64) error {
	tps := make([]TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	return writeFileAtomic(fsys, path, b.Bytes())
}

// writeFileAtomic writes data to path.tmp, fsyncs it, renames it over path
// and fsyncs the directory: a crash leaves either the old or the new file.
func writeFileAtomic(fsys vfs.FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := fsyncFile(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(fsys, filepath.Dir(path))
}

func syncDir(fsys vfs.FS, dir string) error {
	d, err := vfs.Open(fsys, dir)
	if err != nil {
		return err
	}
	err = fsyncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncEnabled turns every fsync/msync of the package on (always, outside
// tests). Tests that exercise recovery logic by editing files, not by
// cutting power, turn it off: a crash test opens a log hundreds of times and
// each open and close fsyncs a dozen files.
var syncEnabled atomic.Bool

func init() { syncEnabled.Store(true) }

func fsyncFile(f vfs.File) error {
	if !syncEnabled.Load() {
		return nil
	}
	return f.Sync()
}
