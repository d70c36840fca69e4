package storage

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
	"github.com/sluice-io/sluice/storage/vfs"
)

func TestReadBoundaries(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, _ := m.GetOrCreateLog(TopicPartition{"reads", 0}, smallSegments())
	now := time.Now().UnixMilli()
	var sizes []int
	for i := 0; i < 30; i++ {
		b := recordtest.Batch(t, 5, 100, now, record.CompressionNone)
		sizes = append(sizes, len(b))
		mustAppend(t, l, b)
	}
	leo := l.LogEndOffset()
	// Offsets inside a batch return the whole batch.
	ri, err := l.Read(12, 1<<20, leo, false)
	if err != nil || ri.FirstOffset != 10 {
		t.Fatalf("read 12: first %d, %v", ri.FirstOffset, err)
	}
	ri.Release()
	// maxBytes holds two and a half batches: two whole batches.
	ri, _ = l.Read(0, int32(sizes[0]*5/2), leo, false)
	if ri.Region.Len != int64(2*sizes[0]) {
		t.Fatalf("region %d bytes, want %d", ri.Region.Len, 2*sizes[0])
	}
	ri.Release()
	// Less than one batch: nothing, unless minOneBatch.
	ri, _ = l.Read(0, 10, leo, false)
	if ri.Region.Len != 0 {
		t.Fatalf("region %d bytes for maxBytes 10", ri.Region.Len)
	}
	ri, _ = l.Read(0, 10, leo, true)
	if ri.Region.Len != int64(sizes[0]) {
		t.Fatalf("minOneBatch region %d", ri.Region.Len)
	}
	ri.Release()
	// maxOffset (the high watermark) stops before the batch holding it.
	ri, _ = l.Read(0, 1<<20, 23, false)
	data := make([]byte, ri.Region.Len)
	ri.Region.File.ReadAt(data, ri.Region.Pos)
	ri.Release()
	last := int64(-1)
	record.ForEachBatch(data, func(h *record.BatchHeader, _ []byte) error { last = h.LastOffset(); return nil })
	if last != 19 {
		t.Fatalf("read up to 23 ended at %d, want 19", last)
	}
	if ri, _ := l.Read(20, 1<<20, 23, true); ri.Region.Len != 0 {
		t.Fatal("a batch at the high watermark was returned")
	}
	// Reading at the log end is empty; past it is out of range.
	if ri, err := l.Read(leo, 100, leo, true); err != nil || ri.Region.Len != 0 {
		t.Fatalf("read at log end: %v %d", err, ri.Region.Len)
	}
	if _, err := l.Read(leo+1, 100, leo, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past log end: %v", err)
	}
	// Every offset reads (crossing segment boundaries).
	for off := int64(0); off < leo; off++ {
		ri, err := l.Read(off, 1<<20, leo, true)
		if err != nil || ri.Region.Len == 0 || ri.FirstOffset > off || ri.FirstOffset+5 <= off {
			t.Fatalf("read %d: first %d len %d %v", off, ri.FirstOffset, ri.Region.Len, err)
		}
		ri.Release()
	}
}

// TestFileRegionSendfile sends regions over a real TCP connection from many
// goroutines at once (sendfile with explicit offsets) and into a buffer.
func TestFileRegionSendfile(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, _ := m.GetOrCreateLog(TopicPartition{"sendfile", 0}, DefaultLogConfig())
	now := time.Now().UnixMilli()
	for i := 0; i < 40; i++ {
		mustAppend(t, l, recordtest.Batch(t, 20, 500, now, record.CompressionNone))
	}
	leo := l.LogEndOffset()
	want := func(ri ReadInfo) []byte {
		b := make([]byte, ri.Region.Len)
		ri.Region.File.ReadAt(b, ri.Region.Pos)
		return b
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Eight senders at once, all from the same segment file: each writes a
	// one-byte id, then its region with sendfile.
	const senders = 8
	expect := make([][]byte, senders)
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		ri, err := l.Read(int64(g*60), 64<<10, leo, true)
		if err != nil {
			t.Fatal(err)
		}
		expect[g] = want(ri)
		wg.Add(1)
		go func(g int, ri ReadInfo) {
			defer wg.Done()
			defer ri.Release()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.Write([]byte{byte(g)})
			if n, err := ri.Region.WriteTo(c); err != nil || n != ri.Region.Len {
				t.Errorf("WriteTo: %d %v", n, err)
			}
		}(g, ri)
	}
	for i := 0; i < senders; i++ {
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(s)
		s.Close()
		if len(got) == 0 || !bytes.Equal(got[1:], expect[got[0]]) {
			t.Fatalf("connection %d: got %d bytes", i, len(got))
		}
	}
	wg.Wait()
	// A plain writer gets a copy.
	ri, _ := l.Read(100, 32<<10, leo, true)
	var buf bytes.Buffer
	if n, err := ri.Region.WriteTo(&buf); err != nil || n != ri.Region.Len || !bytes.Equal(buf.Bytes(), want(ri)) {
		t.Fatalf("WriteTo(buffer): %d %v", n, err)
	}
	ri.Release()
}

// TestIdleFilesAndHeldRegions: idle logs close their files and unmap their
// indexes past MaxOpenLogs; a region held by a reader keeps its file open
// and readable through idle closing and through retention deleting it.
func TestIdleFilesAndHeldRegions(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil, func(c *ManagerConfig) { c.MaxOpenLogs = 2; c.IdleSegmentTimeout = time.Millisecond })
	defer m.Close()
	now := time.Now().UnixMilli()
	var logs []*Log
	for p := int32(0); p < 10; p++ {
		l, _ := m.GetOrCreateLog(TopicPartition{"many", p}, smallSegments())
		for i := 0; i < 10; i++ {
			mustAppend(t, l, recordtest.Batch(t, 5, 100, now, record.CompressionNone))
		}
		l.SetHighWatermark(l.LogEndOffset())
		logs = append(logs, l)
	}
	held, err := logs[0].Read(0, 1<<20, logs[0].LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	exp := make([]byte, held.Region.Len)
	held.Region.File.ReadAt(exp, held.Region.Pos)
	time.Sleep(2 * time.Millisecond)
	for _, l := range logs[1:3] {
		l.touch()
	}
	filesBefore, mapsBefore := m.OpenFiles()
	m.CloseIdleNow()
	files, maps := m.OpenFiles()
	if files >= filesBefore || maps >= mapsBefore {
		t.Fatalf("idle close: files %d -> %d, mappings %d -> %d", filesBefore, files, mapsBefore, maps)
	}
	if files != 3 { // two recent logs' active segments, plus the held region
		t.Fatalf("%d files open after closing idle logs", files)
	}
	// Retention removes the held segment; the region still reads.
	cfg := smallSegments()
	cfg.RetentionBytes = 1
	logs[0].SetConfig(cfg)
	if n, _ := logs[0].DeleteOldSegments(); n == 0 {
		t.Fatal("nothing deleted")
	}
	if fileExists(vfs.Default, filepath.Join(logs[0].Dir(), offsetFileName(0, logSuffix))) {
		t.Fatal("deleted segment still on disk")
	}
	var buf bytes.Buffer
	if _, err := held.Region.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), exp) {
		t.Fatalf("held region after deletion: %v", err)
	}
	held.Release()
	held.Release() // a second release is harmless
	// Closed logs reopen their files on demand.
	for _, l := range logs[3:] {
		if recs := readAllRecords(t, l, 0); len(recs) != 50 {
			t.Fatalf("%s: %d records after reopening files", l.TopicPartition(), len(recs))
		}
		mustAppend(t, l, recordtest.Batch(t, 1, 10, now, record.CompressionNone))
	}
}

func TestLogAppendTimeAndRecompression(t *testing.T) {
	noSync(t)
	clock := newTestClock()
	m := openTestManager(t, t.TempDir(), clock)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.MessageTimestampType = "LogAppendTime"
	cfg.CompressionType = "zstd"
	l, _ := m.GetOrCreateLog(TopicPartition{"rewrite", 0}, cfg)
	old := clock.Now().Add(-time.Hour).UnixMilli()
	in := append(recordtest.Batch(t, 20, 50, old, record.CompressionGzip), recordtest.Batch(t, 3, 50, old, record.CompressionZstd)...)
	info := mustAppend(t, l, in)
	if info.LogAppendTime != clock.Now().UnixMilli() || info.RecordCount != 23 {
		t.Fatalf("info %+v", info)
	}
	ri, _ := l.Read(0, 1<<20, l.LogEndOffset(), true)
	data := make([]byte, ri.Region.Len)
	ri.Region.File.ReadAt(data, ri.Region.Pos)
	ri.Release()
	n := 0
	err := record.ForEachBatch(data, func(h *record.BatchHeader, b []byte) error {
		if h.Compression() != record.CompressionZstd || !h.LogAppendTime() || h.MaxTimestamp != info.LogAppendTime {
			t.Errorf("stored batch %+v", h)
		}
		return record.Records(b, func(h *record.BatchHeader, r *record.Record) error { n++; return nil })
	})
	if err != nil || n != 23 {
		t.Fatalf("%v, %d records", err, n)
	}
	// "producer" keeps the codec; "uncompressed" decompresses.
	cfg.CompressionType = "uncompressed"
	cfg.MessageTimestampType = "CreateTime"
	l.SetConfig(cfg)
	info = mustAppend(t, l, recordtest.Batch(t, 5, 50, old, record.CompressionLZ4))
	ri, _ = l.Read(info.FirstOffset, 1<<20, l.LogEndOffset(), true)
	data = make([]byte, ri.Region.Len)
	ri.Region.File.ReadAt(data, ri.Region.Pos)
	ri.Release()
	if h, err := record.ValidateBatch(data); err != nil || h.Compression() != record.CompressionNone || h.MaxTimestamp != old {
		t.Fatalf("stored %+v %v", h, err)
	}
	// Bad configs are refused.
	cfg.CompressionType = "brotli"
	if err := l.SetConfigChecked(cfg); err == nil {
		t.Fatal("brotli accepted")
	}
	if _, err := m.GetOrCreateLog(TopicPartition{"bad", 0}, LogConfig{}); err == nil {
		t.Fatal("zero config accepted")
	}
}

func TestAppendValidation(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.MaxMessageBytes = 2000
	l, _ := m.GetOrCreateLog(TopicPartition{"validate", 0}, cfg)
	now := time.Now().UnixMilli()
	good := recordtest.Batch(t, 3, 10, now, record.CompressionNone)
	recrc := func(b []byte) []byte { record.SetLogAppendTime(b, now); return b } // any CRC-recomputing edit
	_ = recrc
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"too large", recordtest.Batch(t, 30, 100, now, record.CompressionNone), ErrBatchTooLarge},
		{"corrupt", func() []byte { b := append([]byte(nil), good...); b[70] ^= 1; return b }(), record.ErrCorruptBatch},
		{"truncated", good[:len(good)-2], record.ErrCorruptBatch},
		{"v1 message set", recordtest.Capture(t, "kcat-v1-none.bin"), record.ErrUnsupportedMagic},
		{"count mismatch", func() []byte {
			b := append([]byte(nil), good...)
			b[record.OffRecordCount+3] = 2
			b[record.OffCRC], b[record.OffCRC+1], b[record.OffCRC+2], b[record.OffCRC+3] = 0, 0, 0, 0
			c := record.BatchCRC(b)
			b[record.OffCRC], b[record.OffCRC+1], b[record.OffCRC+2], b[record.OffCRC+3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
			return b
		}(), record.ErrInvalidRecord},
	}
	for _, c := range cases {
		if _, err := l.AppendAsLeader(c.b, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if l.LogEndOffset() != 0 {
		t.Fatal("a rejected append changed the log")
	}
}

func TestFlushPolicy(t *testing.T) {
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l, _ := m.GetOrCreateLog(TopicPartition{"fsync", 0}, cfg)
	now := time.Now().UnixMilli()
	for i := 0; i < 5; i++ {
		mustAppend(t, l, recordtest.Batch(t, 2, 10, now, record.CompressionNone))
		if l.RecoveryPoint() != l.LogEndOffset() {
			t.Fatalf("flush.messages=1: recovery point %d, log end %d", l.RecoveryPoint(), l.LogEndOffset())
		}
	}
	l2, _ := m.GetOrCreateLog(TopicPartition{"pagecache", 0}, DefaultLogConfig())
	mustAppend(t, l2, recordtest.Batch(t, 2, 10, now, record.CompressionNone))
	if l2.RecoveryPoint() != 0 {
		t.Fatalf("default policy flushed: recovery point %d", l2.RecoveryPoint())
	}
	if err := l2.Flush(); err != nil || l2.RecoveryPoint() != 2 {
		t.Fatalf("Flush: %v, recovery point %d", err, l2.RecoveryPoint())
	}
}

func TestCleanShutdownAndCheckpoints(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"ckpt.topic-with-dash", 7}
	l, _ := m.GetOrCreateLog(tp, DefaultLogConfig())
	now := time.Now().UnixMilli()
	for i := 0; i < 3; i++ {
		mustAppend(t, l, recordtest.Batch(t, 4, 10, now, record.CompressionNone))
	}
	l.SetHighWatermark(8)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		recoveryPointCheckpoint: "0\n1\nckpt.topic-with-dash 7 12\n",
		logStartCheckpoint:      "0\n1\nckpt.topic-with-dash 7 0\n",
		replicationCheckpoint:   "0\n1\nckpt.topic-with-dash 7 8\n",
		cleanerCheckpoint:       "0\n0\n",
	} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, want %q (%v)", file, got, want, err)
		}
	}
	// A clean shutdown skips the scan: a damaged last batch is not even
	// looked at. Without the marker recovery finds and removes it.
	seg := filepath.Join(dir, tp.String(), offsetFileName(0, logSuffix))
	data, _ := os.ReadFile(seg)
	data[len(data)-2] ^= 1
	os.WriteFile(seg, data, 0o644)
	m = openTestManager(t, dir, nil)
	l, _ = m.Log(tp)
	if l.LogEndOffset() != 12 {
		t.Fatalf("clean restart log end %d", l.LogEndOffset())
	}
	if fileExists(vfs.Default, filepath.Join(dir, cleanShutdownFile)) {
		t.Fatal("clean shutdown marker not removed after start")
	}
	m.Close()
	simulateCrash(t, dir)
	m = openTestManager(t, dir, nil)
	defer m.Close()
	l, _ = m.Log(tp)
	if l.LogEndOffset() != 8 {
		t.Fatalf("recovered log end %d, want 8", l.LogEndOffset())
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, _ := m.GetOrCreateLog(TopicPartition{"times", 0}, smallSegments())
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := 0; i < 40; i++ {
		recs := []record.Record{{Key: []byte("a"), Value: make([]byte, 200)}, {Key: []byte("b"), Value: []byte("x"), TimestampDelta: 5}}
		b, _ := record.BuildBatch(record.BatchOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: base + int64(i)*10}, recs)
		mustAppend(t, l, b)
	}
	for _, c := range []struct {
		ts, off, got int64
		found        bool
	}{
		{0, 0, base, true},
		{base, 0, base, true},
		{base + 3, 1, base + 5, true},
		{base + 100, 20, base + 100, true},
		{base + 101, 21, base + 105, true},
		{base + 395, 79, base + 395, true},
		{base + 396, -1, -1, false},
	} {
		off, ts, found, err := l.OffsetForTimestamp(c.ts)
		if err != nil || found != c.found || off != c.off || ts != c.got {
			t.Errorf("OffsetForTimestamp(base+%d) = %d, base+%d, %v, %v; want %d, base+%d", c.ts-base, off, ts-base, found, err, c.off, c.got-base)
		}
	}
	if ts, off := l.MaxTimestampAndOffset(); ts != base+395 || off != 79 {
		t.Fatalf("MaxTimestampAndOffset %d %d", ts-base, off)
	}
}

func TestDeleteLog(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"gone", 0}
	l, _ := m.GetOrCreateLog(tp, DefaultLogConfig())
	mustAppend(t, l, recordtest.Batch(t, 2, 10, time.Now().UnixMilli(), record.CompressionNone))
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(recordtest.Batch(t, 1, 1, 0, record.CompressionNone), 0); !errors.Is(err, ErrLogDeleted) {
		t.Fatalf("append to deleted log: %v", err)
	}
	if _, ok := m.Log(tp); ok {
		t.Fatal("deleted log still listed")
	}
	m.Close()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			t.Fatalf("left behind %s", e.Name())
		}
	}
	m = openTestManager(t, dir, nil)
	defer m.Close()
	if len(m.Logs()) != 0 {
		t.Fatal("deleted log came back")
	}
}

// TestConcurrentReadersAndWriter runs readers against a log that is being
// appended to, rolled, retained and compacted at the same time (run it with
// -race). Every region a reader gets must hold whole, valid batches.
func TestConcurrentReadersAndWriter(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := smallSegments()
	cfg.Cleanup = "compact,delete"
	cfg.RetentionBytes = 64 << 10
	cfg.MinCleanableDirtyRatio = 0.1
	l, _ := m.GetOrCreateLog(TopicPartition{"busy", 0}, cfg)
	now := time.Now().UnixMilli()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the one writer
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.AppendAsLeader(recordtest.Batch(t, 1+i%7, 80, now, record.Compression(i%5)), 0); err != nil {
				t.Error(err)
				return
			}
			l.SetHighWatermark(l.LogEndOffset())
		}
	}()
	wg.Add(1)
	go func() { // retention and the cleaner
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.DeleteOldSegments(); err != nil {
				t.Error(err)
			}
			if _, err := l.Clean(false); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var reads sync.WaitGroup
	for r := 0; r < 3; r++ {
		reads.Add(1)
		go func() {
			defer reads.Done()
			for i := 0; i < 300; i++ {
				off := l.LogStartOffset()
				ri, err := l.Read(off, 16<<10, l.HighWatermark(), true)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // retention moved the start meanwhile
				}
				if err != nil {
					t.Error(err)
					return
				}
				var buf bytes.Buffer
				if _, err := ri.Region.WriteTo(&buf); err != nil {
					t.Error(err)
				}
				ri.Release()
				if err := record.ForEachBatch(buf.Bytes(), func(*record.BatchHeader, []byte) error { return nil }); err != nil {
					t.Errorf("read at %d: %v", off, err)
					return
				}
			}
		}()
	}
	reads.Wait()
	close(stop)
	wg.Wait()
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestManyPartitionsBounded: 400 partitions with MaxOpenLogs 50 keep about
// 50 segment files open; every partition still reads and appends, and all
// of them load again after a restart.
func TestManyPartitionsBounded(t *testing.T) {
	noSync(t)
	const parts, maxOpen = 400, 50
	small := func(c *ManagerConfig) {
		c.MaxOpenLogs = maxOpen
		c.DefaultConfig = func(string) LogConfig { return smallSegments() }
	}
	dir := t.TempDir()
	m := openTestManager(t, dir, nil, small)
	base := openFDs(t)
	now := time.Now().UnixMilli()
	batch := recordtest.Batch(t, 2, 20, now, record.CompressionNone)
	for p := int32(0); p < parts; p++ {
		l, err := m.GetOrCreateLog(TopicPartition{"wide", p}, smallSegments())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, append([]byte(nil), batch...))
		if p%100 == 99 {
			m.CloseIdleNow()
		}
	}
	m.CloseIdleNow()
	files, maps := m.OpenFiles()
	if files > maxOpen || maps > 2*maxOpen {
		t.Fatalf("%d files and %d mappings open for %d partitions (limit %d logs)", files, maps, parts, maxOpen)
	}
	if fds := openFDs(t) - base; fds > maxOpen+10 {
		t.Fatalf("%d more descriptors open than at start", fds)
	}
	for _, l := range m.Logs() {
		if recs := readAllRecords(t, l, 0); len(recs) != 2 {
			t.Fatalf("%s: %d records", l.TopicPartition(), len(recs))
		}
	}
	m.CloseIdleNow()
	m.Close()
	base = openFDs(t)
	m = openTestManager(t, dir, nil, small)
	defer m.Close()
	if n := len(m.Logs()); n != parts {
		t.Fatalf("%d logs after restart", n)
	}
	if fds := openFDs(t) - base; fds > maxOpen+10 {
		t.Fatalf("%d descriptors open after loading %d partitions", fds, parts)
	}
}

// TestDeleteLogLongTopicName: a partition of a topic with a long name (249
// characters, Kafka's limit) is deleted: its delete-directory name is cut
// to fit 255 bytes, as Kafka cuts it, where the full name made the rename
// fail with ENAMETOOLONG and the old records came back when a topic of the
// name was created again.
func TestDeleteLogLongTopicName(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{strings.Repeat("t", 249), 7}
	l, err := m.GetOrCreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, recordtest.Batch(t, 2, 10, time.Now().UnixMilli(), record.CompressionNone))
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Log(tp); ok {
		t.Fatal("deleted log still listed")
	}
	again, err := m.GetOrCreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	if again.LogEndOffset() != 0 {
		t.Fatalf("log created again under the name has log end %d: the old records came back", again.LogEndOffset())
	}
	m.Close()
	m = openTestManager(t, dir, nil)
	defer m.Close()
	if l, ok := m.Log(tp); !ok || l.LogEndOffset() != 0 || len(m.Logs()) != 1 {
		t.Fatalf("after a restart: %d logs, the partition's %v", len(m.Logs()), ok)
	}
	if name := deleteDirName(tp); len(name) != 255 || !strings.HasSuffix(name, "-delete") || !strings.HasPrefix(name, strings.Repeat("t", 213)+"-7.") {
		t.Fatalf("delete-directory name %q (%d bytes)", name, len(name))
	}
	if name := deleteDirName(TopicPartition{"short", 3}); !strings.HasPrefix(name, "short-3.") || len(name) != len("short-3.")+32+len("-delete") {
		t.Fatalf("delete-directory name of a short topic %q", name)
	}
}

// TestDeleteLogRenameFails: when the directory cannot be renamed the log
// stays listed (closed: nothing is served from it) and no new log of the
// partition can be made over the old records; deleting again works.
func TestDeleteLogRenameFails(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	defer m.Close()
	tp := TopicPartition{"stuck", 0}
	l, _ := m.GetOrCreateLog(tp, DefaultLogConfig())
	mustAppend(t, l, recordtest.Batch(t, 2, 10, time.Now().UnixMilli(), record.CompressionNone))
	// The rename target exists and is not empty: rename(2) fails.
	defer func(f func([]byte)) { deleteDirRand = f }(deleteDirRand)
	deleteDirRand = func(b []byte) { clear(b) }
	target := filepath.Join(dir, deleteDirName(tp))
	if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteLog(tp); err == nil {
		t.Fatal("DeleteLog succeeded over an occupied target")
	}
	if got, ok := m.Log(tp); !ok || got != l {
		t.Fatal("a log whose directory was not renamed left the manager")
	}
	if _, err := l.AppendAsLeader(recordtest.Batch(t, 1, 1, 0, record.CompressionNone), 0); !errors.Is(err, ErrLogDeleted) {
		t.Fatalf("append to a log being deleted: %v", err)
	}
	os.RemoveAll(target)
	if err := m.DeleteLog(tp); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Log(tp); ok {
		t.Fatal("deleted log still listed")
	}
	if _, err := os.Stat(filepath.Join(dir, tp.String())); !os.IsNotExist(err) {
		t.Fatalf("log directory after delete: %v", err)
	}
}

// TestTailReadsFromRecentBatches: reads near the log end (a follower's
// fetch) take the headers of the last appended batches from the segment's
// memory, not from the file, and answer exactly as reads from the file do —
// for every offset, budget and bound, after a truncation and after more
// appends.
func TestTailReadsFromRecentBatches(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.IndexIntervalBytes = 512
	l, _ := m.GetOrCreateLog(TopicPartition{"tail", 0}, cfg)
	now := time.Now().UnixMilli()
	appendSome := func(n int) {
		for i := range n {
			mustAppend(t, l, recordtest.Batch(t, 1+i%7, 50+30*(i%5), now, record.CompressionNone))
		}
	}
	// fromFile is a read with the segment's memory of recent batches
	// set aside.
	fromFile := func(off int64, maxBytes int32, maxOffset int64, minOne bool) (ReadInfo, error) {
		s := l.active()
		s.mu.Lock()
		saved := s.recent
		s.recent = nil
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.recent = saved
			s.mu.Unlock()
		}()
		return l.Read(off, maxBytes, maxOffset, minOne)
	}
	compare := func(stage string) {
		t.Helper()
		leo := l.LogEndOffset()
		if len(l.active().recent) == 0 {
			t.Fatalf("%s: the active segment remembers no batch", stage)
		}
		for off := int64(0); off <= leo; off++ {
			for _, maxBytes := range []int32{10, 200, 700, 1 << 20} {
				for _, maxOffset := range []int64{leo, leo - 3, off + 2} {
					for _, minOne := range []bool{false, true} {
						got, err1 := l.Read(off, maxBytes, maxOffset, minOne)
						want, err2 := fromFile(off, maxBytes, maxOffset, minOne)
						if (err1 == nil) != (err2 == nil) || got.Region.Pos != want.Region.Pos || got.Region.Len != want.Region.Len ||
							got.FirstOffset != want.FirstOffset || got.NextOffset != want.NextOffset {
							t.Fatalf("%s: read(%d, %d, %d, %v) = pos %d len %d first %d next %d %v; from the file: pos %d len %d first %d next %d %v",
								stage, off, maxBytes, maxOffset, minOne, got.Region.Pos, got.Region.Len, got.FirstOffset, got.NextOffset, err1,
								want.Region.Pos, want.Region.Len, want.FirstOffset, want.NextOffset, err2)
						}
						got.Release()
						want.Release()
					}
				}
			}
		}
	}
	appendSome(40)
	compare("appended")
	if err := l.Truncate(l.LogEndOffset() - 9); err != nil {
		t.Fatal(err)
	}
	compare("truncated")
	appendSome(5)
	compare("appended after the truncation")

	// The last batch's header is not read from the file: with its magic
	// byte damaged on disk, a read at the tail still answers, and the
	// same read from the file sees the damage.
	s := l.active()
	last := s.recent[len(s.recent)-1]
	f, err := os.OpenFile(s.path(".log"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x7f}, last.pos+record.OffMagic); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ri, err := l.Read(last.base, 1<<20, l.LogEndOffset(), true)
	if err != nil || ri.Region.Pos != last.pos || ri.Region.Len != int64(last.size) {
		t.Fatalf("tail read: pos %d len %d %v, want pos %d len %d", ri.Region.Pos, ri.Region.Len, err, last.pos, last.size)
	}
	ri.Release()
	if _, err := fromFile(last.base, 1<<20, l.LogEndOffset(), true); !errors.Is(err, record.ErrCorruptBatch) {
		t.Fatalf("the same read from the file: %v, want the damaged header", err)
	}
}
