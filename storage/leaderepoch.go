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
//
// When the file is written. Every write is whole and durable (a temporary
// file, fsynced, renamed over the old one, the directory fsynced): a crash
// leaves one complete version of the file, never a torn one. A new epoch
// after the cached ones (a new leader's, a follower's first batch of an
// epoch) changes only the cache: the log's next flush writes it before the
// recovery point moves (Log.syncEpochs), so the file lacks only epochs that
// start at or after the recovery point on disk, and recovery after a crash,
// which reads the log from that point on, assigns them again from the
// batches that carry them (recoverSegment). An epoch that no surviving batch
// carries describes no data and is forgotten. Kafka instead fsyncs the file
// on every assign (LeaderEpochFileCache.assign): with a thousand partitions
// changing leader at once, a thousand fsyncs on the failover's critical
// path. What drops entries (truncation at either end, clear, an assign
// below an epoch already cached) is written before it returns, so the file
// never holds an entry the cache dropped except ones at or after a newer
// entry's start, which recovery's assign of that newer epoch drops again.
// (Kafka since KAFKA-16541 writes truncations in the background and the
// assigns synchronously: the opposite choice.)
type leaderEpochCache struct {
	mu      sync.RWMutex
	fs      vfs.FS
	path    string
	entries []epochEntry // increasing epochs and start offsets
	// gen counts the changes to entries and written is the gen the file
	// holds (both under mu; written changes only under writeMu too).
	gen, written uint64
	// writeMu serializes the writes of the file; it is taken before mu.
	writeMu sync.Mutex
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
	if len(c.entries) == len(lines) {
		c.written = c.gen // the file holds the entries as read
	}
	return c, nil
}

// flush writes the file unless it holds the entries already. The entries
// written are the ones at the time writeMu is taken: a flush that returns
// nil has made durable every change made before it was called.
func (c *leaderEpochCache) flush() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.RLock()
	gen := c.gen
	if gen == c.written {
		c.mu.RUnlock()
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	c.mu.RUnlock()
	if err := writeFileAtomic(c.fs, c.path, b.Bytes()); err != nil {
		return err
	}
	c.mu.Lock()
	c.written = gen
	c.mu.Unlock()
	return nil
}

// assign records that epoch starts at start. Entries that conflict (an epoch
// at or above it, or a start offset at or after it) are removed first, as
// Kafka does. Returns whether the cache changed. The file is written at
// once only when an entry of an epoch at or above the new one was removed
// (the cache's history was rewritten); a new epoch after the cached ones is
// left to the next flush (see the type's comment).
func (c *leaderEpochCache) assign(epoch int32, start int64) (bool, error) {
	if epoch < 0 {
		return false, nil
	}
	c.mu.Lock()
	changed, rewrote := c.assignLocked(epoch, start)
	c.mu.Unlock()
	if !rewrote {
		return changed, nil
	}
	return true, c.flush()
}

// assignLocked is assign without the write: changed says whether the cache
// changed, rewrote whether an entry of an epoch at or above epoch was
// removed.
func (c *leaderEpochCache) assignLocked(epoch int32, start int64) (changed, rewrote bool) {
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.epoch == epoch && start >= last.start {
			return false, false // already known
		}
	}
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].epoch >= epoch || c.entries[n-1].start >= start) {
		if c.entries[n-1].epoch >= epoch {
			rewrote = true
		}
		n--
	}
	c.entries = append(c.entries[:n], epochEntry{epoch, start})
	c.gen++
	return true, rewrote
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

// truncateFromEnd drops epochs starting at or after offset (log truncation)
// and writes the file.
func (c *leaderEpochCache) truncateFromEnd(offset int64) error {
	c.mu.Lock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].start >= offset {
		n--
	}
	if n == len(c.entries) {
		c.mu.Unlock()
		return nil
	}
	c.entries = c.entries[:n]
	c.gen++
	c.mu.Unlock()
	return c.flush()
}

// truncateFromStart drops epochs wholly below offset (the log start moved);
// the epoch covering offset now starts there. It writes the file.
func (c *leaderEpochCache) truncateFromStart(offset int64) error {
	c.mu.Lock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].start <= offset {
		i++
	}
	if len(c.entries) == 0 || (i == 0 && c.entries[0].start >= offset) {
		c.mu.Unlock()
		return nil
	}
	c.entries = append(c.entries[:0], c.entries[i:]...)
	if c.entries[0].start < offset {
		c.entries[0].start = offset
	}
	c.gen++
	c.mu.Unlock()
	return c.flush()
}

// clear drops every epoch and writes the (empty) file.
func (c *leaderEpochCache) clear() error {
	c.mu.Lock()
	c.entries = nil
	c.gen++
	c.mu.Unlock()
	return c.flush()
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
