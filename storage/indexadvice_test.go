package storage

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// TestIndexMappingsReadAtRandom: the active segment's index mappings carry
// MADV_RANDOM ("rr" in /proc/self/smaps' VmFlags). Without it a write fault
// on an index's preallocated sparse tail read ahead (zero-filled) hundreds
// of KiB of the file, and producing to 1,000 partitions at once spent
// nearly all of the broker's CPU there (BENCHMARKS.md, "Producing to many
// partitions").
func TestIndexMappingsReadAtRandom(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps")
	}
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	l, err := m.GetOrCreateLog(TopicPartition{"advice", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // past index.interval.bytes: entries are written
		mustAppend(t, l, recordtest.Batch(t, 10, 500, time.Now().UnixMilli(), record.CompressionNone))
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags := map[string]string{} // mapped file → VmFlags
	cur := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) >= 6 && strings.Contains(fields[0], "-") && strings.HasPrefix(fields[5], "/") {
			cur = fields[5]
			continue
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && cur != "" {
			flags[cur] = rest
			cur = ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".index", ".timeindex"} {
		path := filepath.Join(dir, "advice-0", "00000000000000000000"+ext)
		fl, ok := flags[path]
		if !ok {
			t.Fatalf("%s is not mapped (mapped: %d files)", path, len(flags))
		}
		if !strings.Contains(" "+fl+" ", " rr ") || !strings.Contains(" "+fl+" ", " wr ") {
			t.Errorf("%s VmFlags %q: want a writable mapping advised random (wr, rr)", path, strings.TrimSpace(fl))
		}
	}
}
