package storage

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/sluice-io/sluice/storage/vfs"
)

// leaderEpochCache maps leader epochs to their start offsets (KIP-101),
// persisted in <partition dir>/leader-epoch-checkpoint as Kafka does:
// "0", the count, then "<epoch> <startOffset>" lines.
type leaderEpochCache struct {
	mu      sync.RWMutex
	fs      vfs.FS
	path    string
	entries []epochEntry // increasing epochs and start offsets
}

type epochEntry struct {
	epoch int32
	start int64
}

func loadLeaderEpochCache(fsys vfs.FS, dir string) (*leaderEpochCache, error) {
	c := &leaderEpochCache{fs: fsys, path: dir + "/" + leaderEpochCheckpoint}
	lines, err := readCheckpointLines(fsys, c.path, 2)
	if err != nil {
		return nil, err
	}
	for _, f := range lines {
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad entry %q %q", c.path, f[0], f[1])
		}
		c.assignLocked(int32(e), o)
	}
	return c, nil
}

func (c *leaderEpochCache) writeLocked() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return writeFileAtomic(c.fs, c.path, b.Bytes())
}

// assign records that epoch starts at start. Entries that conflict (an epoch
// at or above it, or a start offset at or after it) are removed first, as
// Kafka does. Returns whether the cache changed.
func (c *leaderEpochCache) assign(epoch int32, start int64) (bool, error) {
	if epoch < 0 {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.assignLocked(epoch, start) {
		return false, nil
	}
	return true, c.writeLocked()
}

func (c *leaderEpochCache) assignLocked(epoch int32, start int64) bool {
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.epoch == epoch && start >= last.start {
			return false // already known
		}
	}
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].epoch >= epoch || c.entries[n-1].start >= start) {
		n--
	}
	c.entries = append(c.entries[:n], epochEntry{epoch, start})
	return true
}

func (c *leaderEpochCache) latest() (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return -1, false
	}
	return c.entries[len(c.entries)-1].epoch, true
}

// endOffsetFor answers OffsetForLeaderEpoch (Kafka's endOffsetFor): for the
// latest epoch the log end offset; otherwise the start offset of the first
// epoch above the requested one, with the largest epoch at or below it.
// (-1, -1) when the requested epoch is above every known epoch or undefined.
func (c *leaderEpochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if epoch < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if c.entries[len(c.entries)-1].epoch == epoch {
		return epoch, leo
	}
	for i, e := range c.entries {
		if e.epoch > epoch {
			if i == 0 {
				return epoch, e.start
			}
			return c.entries[i-1].epoch, e.start
		}
	}
	return -1, -1
}

// truncateFromEnd drops epochs starting at or after offset (log truncation).
func (c *leaderEpochCache) truncateFromEnd(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].start >= offset {
		n--
	}
	if n == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:n]
	return c.writeLocked()
}

// truncateFromStart drops epochs wholly below offset (the log start moved);
// the epoch covering offset now starts there.
func (c *leaderEpochCache) truncateFromStart(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].start <= offset {
		i++
	}
	if len(c.entries) == 0 || (i == 0 && c.entries[0].start >= offset) {
		return nil
	}
	c.entries = append(c.entries[:0], c.entries[i:]...)
	if c.entries[0].start < offset {
		c.entries[0].start = offset
	}
	return c.writeLocked()
}

func (c *leaderEpochCache) clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	err := c.writeLocked()
	return err
}

func (c *leaderEpochCache) snapshot() []epochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]epochEntry(nil), c.entries...)
}

func removeIfExists(fsys vfs.FS, path string) error {
	if err := fsys.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
