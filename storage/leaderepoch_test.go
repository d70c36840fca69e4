package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs/errorfs"
)

// Tests of when the leader-epoch checkpoint is written (a new epoch waits
// for the next flush; what drops entries is written at once) and that no
// crash, kill -9 or power loss, loses the epoch of a batch that survives it.

// epochTestConfig rolls only where a test asks (Roll): a roll schedules a
// background flush, which would write the checkpoint at a time the test
// does not choose.
func epochTestConfig() LogConfig {
	cfg := crashLogConfig()
	cfg.SegmentBytes = 1 << 20
	return cfg
}

// followerBatch is a batch of n records at base in epoch, as a leader's
// fetch response carries it.
func followerBatch(t testing.TB, base int64, epoch int32, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("k"), Value: []byte(fmt.Sprintf("f%d-%d", base, i)), OffsetDelta: int32(i)}
	}
	b, err := record.BuildBatch(record.BatchOptions{BaseOffset: base, PartitionLeaderEpoch: epoch, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendInEpoch(t testing.TB, l *Log, i int, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(faultBatch(t, i, time.Now().UnixMilli()), epoch)
	if err != nil {
		t.Fatalf("append %d in epoch %d: %v", i, epoch, err)
	}
	return info
}

func appendAsFollower(t testing.TB, l *Log, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.AppendAsFollower(followerBatch(t, l.LogEndOffset(), epoch, 3))
	if err != nil {
		t.Fatalf("follower append in epoch %d: %v", epoch, err)
	}
	return info
}

func checkEpochs(t testing.TB, l *Log, want [][2]int64) {
	t.Helper()
	if got := l.LeaderEpochs(); !slices.Equal(got, want) {
		t.Fatalf("leader epochs %v, want %v", got, want)
	}
}

// checkpointFile is the content of l's leader-epoch-checkpoint ("" when
// there is none).
func checkpointFile(t testing.TB, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, leaderEpochCheckpoint))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestLeaderEpochCheckpointWrites: a new leader's epoch and a follower's
// first batch of an epoch change the cache at once and the file only at the
// next flush, which moves the recovery point; a truncation, and an assign
// below an epoch already cached, write the file before they return.
func TestLeaderEpochCheckpointWrites(t *testing.T) {
	noSync(t)
	cfg := epochTestConfig()
	m := openTestManager(t, t.TempDir(), nil, func(c *ManagerConfig) { c.DefaultConfig = func(string) LogConfig { return cfg } })
	defer m.Close()
	l, err := m.GetOrCreateLog(TopicPartition{"epochs", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendInEpoch(t, l, 0, 1) // offsets 0-1
	if err := l.AssignEpochStartOffset(3, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	appendInEpoch(t, l, 1, 3) // 2-3
	appendAsFollower(t, l, 5) // 4-6
	checkEpochs(t, l, [][2]int64{{1, 0}, {3, 2}, {5, 4}})
	if got := checkpointFile(t, l.Dir()); got != "" {
		t.Fatalf("leader-epoch-checkpoint written before a flush:\n%s", got)
	}
	if l.RecoveryPoint() != 0 {
		t.Fatalf("recovery point %d before a flush", l.RecoveryPoint())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpointFile(t, l.Dir()), "0\n3\n1 0\n3 2\n5 4\n"; got != want {
		t.Fatalf("leader-epoch-checkpoint after the flush:\n%s\nwant:\n%s", got, want)
	}
	if l.RecoveryPoint() != 7 {
		t.Fatalf("recovery point %d after the flush, want 7", l.RecoveryPoint())
	}

	// A follower's truncation drops the epochs after it from the file too.
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpointFile(t, l.Dir()), "0\n2\n1 0\n3 2\n"; got != want {
		t.Fatalf("leader-epoch-checkpoint after Truncate(4):\n%s\nwant:\n%s", got, want)
	}
	// An epoch below the latest rewrites the cache's history: written now.
	if err := l.AssignEpochStartOffset(2, 4); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpointFile(t, l.Dir()), "0\n2\n1 0\n2 4\n"; got != want {
		t.Fatalf("leader-epoch-checkpoint after assigning epoch 2 below epoch 3:\n%s\nwant:\n%s", got, want)
	}
	// A new epoch after it waits again for a flush.
	if err := l.AssignEpochStartOffset(7, 4); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpointFile(t, l.Dir()), "0\n2\n1 0\n2 4\n"; got != want {
		t.Fatalf("leader-epoch-checkpoint after assigning epoch 7:\n%s\nwant:\n%s", got, want)
	}
	checkEpochs(t, l, [][2]int64{{1, 0}, {7, 4}})
}

// epochFixture opens a log and writes epoch 1 over three segments, and
// closes it (every background flush of the rolls done: the checkpoint holds
// epoch 1, the recovery point is the log end); opened again, it gets a new
// leader's epoch 4 with two batches and a follower's epoch 6 with one,
// neither flushed. It returns the log and the epochs it must have.
func epochFixture(t testing.TB, open func() (*Manager, *Log)) (*Manager, *Log, [][2]int64) {
	t.Helper()
	m, l := open()
	for i := range 3 {
		appendInEpoch(t, l, 2*i, 1)
		appendInEpoch(t, l, 2*i+1, 1)
		if i < 2 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, l = open()
	rp := l.LogEndOffset()
	if l.RecoveryPoint() != rp || l.NumSegments() != 3 {
		t.Fatalf("after a clean restart: recovery point %d, log end %d, %d segments", l.RecoveryPoint(), rp, l.NumSegments())
	}
	if err := l.AssignEpochStartOffset(4, rp); err != nil {
		t.Fatal(err)
	}
	appendInEpoch(t, l, 10, 4)
	appendInEpoch(t, l, 11, 4)
	f := appendAsFollower(t, l, 6)
	want := [][2]int64{{1, 0}, {4, rp}, {6, f.FirstOffset}}
	checkEpochs(t, l, want)
	if got, want := checkpointFile(t, l.Dir()), "0\n1\n1 0\n"; got != want {
		t.Fatalf("leader-epoch-checkpoint before the crash:\n%s\nwant (epoch 1 only):\n%s", got, want)
	}
	return m, l, want
}

// TestLeaderEpochsAfterKill: kill -9 leaves the files as the process wrote
// them: the log's batches in the page cache, the leader-epoch checkpoint
// without the epochs assigned since the last flush. The start after it
// recovers the log from the recovery point and takes those epochs back from
// the batches that carry them.
func TestLeaderEpochsAfterKill(t *testing.T) {
	noSync(t)
	cfg := epochTestConfig()
	opt := func(c *ManagerConfig) { c.DefaultConfig = func(string) LogConfig { return cfg } }
	dir := t.TempDir()
	tp := TopicPartition{"epochs", 0}
	m, l, want := epochFixture(t, func() (*Manager, *Log) {
		m := openTestManager(t, dir, nil, opt)
		l, err := m.GetOrCreateLog(tp, cfg)
		if err != nil {
			m.Close()
			t.Fatal(err)
		}
		return m, l
	})
	leo := l.LogEndOffset()
	// The process dies: its files are what a copy taken now holds.
	killed := t.TempDir()
	copyDir(t, dir, killed)
	m.Close()

	m2 := openTestManager(t, killed, nil, opt)
	defer m2.Close()
	l2, ok := m2.Log(tp)
	if !ok {
		t.Fatal("log not loaded after the kill")
	}
	if l2.LogEndOffset() != leo {
		t.Fatalf("log end %d after the kill, want %d", l2.LogEndOffset(), leo)
	}
	checkEpochs(t, l2, want)
	if e, o := l2.EndOffsetForEpoch(4); e != 4 || o != want[2][1] {
		t.Fatalf("EndOffsetForEpoch(4) = %d, %d after the kill; want 4, %d", e, o, want[2][1])
	}
	if e, o := l2.EndOffsetForEpoch(1); e != 1 || o != want[1][1] {
		t.Fatalf("EndOffsetForEpoch(1) = %d, %d after the kill; want 1, %d", e, o, want[1][1])
	}
}

// TestLeaderEpochsAfterPowerLoss: on a filesystem that loses what was not
// fsynced. (1) The power goes in the flush, after the segments were synced
// and while the checkpoint is written: the start after it takes the epochs
// from the batches (the recovery point never passed them). (2) A flush that
// completes puts them in the checkpoint before the recovery point passes
// them: a crash after it, whose recovery reads only the segment after them,
// keeps them from the file.
func TestLeaderEpochsAfterPowerLoss(t *testing.T) {
	fsys := errorfs.New(nil)
	dir := t.TempDir()
	cfg := epochTestConfig()
	m, l, want := epochFixture(t, func() (*Manager, *Log) { return openFaultLog(t, dir, fsys, cfg) })
	leo := l.LogEndOffset()

	fsys.Inject(errorfs.Fault{Ops: errorfs.OpWrite, Match: errorfs.Suffix(leaderEpochCheckpoint + ".tmp"), Torn: true})
	if err := l.Flush(); !errors.Is(err, ErrStorage) {
		t.Fatalf("flush with the power gone in the checkpoint write: %v, want ErrStorage", err)
	}
	seg := filepath.Join(l.Dir(), offsetFileName(l.segments()[len(l.segments())-1].base, logSuffix))
	if n, _ := fsys.DurableSize(seg); n != l.active().size.Load() {
		t.Fatalf("active segment durable to %d of %d bytes: the flush should have synced it", n, l.active().size.Load())
	}
	crashAndRestart(t, fsys, m)

	m, l = openFaultLog(t, dir, fsys, cfg)
	if l.LogEndOffset() != leo {
		m.Close()
		t.Fatalf("log end %d after the power loss, want %d", l.LogEndOffset(), leo)
	}
	checkEpochs(t, l, want)
	if got, want := checkpointFile(t, l.Dir()), "0\n1\n1 0\n"; got != want {
		m.Close()
		t.Fatalf("leader-epoch-checkpoint after the restart:\n%s\nwant (epoch 1 only: the others came from the batches):\n%s", got, want)
	}

	// (2) Flush (the recovered epochs reach the file), checkpoint the
	// recovery point, start a segment and write to it without a flush.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendAsFollower(t, l, 6)
	crashAndRestart(t, fsys, m)

	m, l = openFaultLog(t, dir, fsys, cfg)
	defer m.Close()
	if l.LogEndOffset() != leo {
		t.Fatalf("log end %d after the second power loss, want %d (the unflushed batch lost)", l.LogEndOffset(), leo)
	}
	checkEpochs(t, l, want)
}
