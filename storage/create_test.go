package storage

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// CreateLogs creates many logs at once: spread over the log dirs, each
// usable and found again after a restart; existing logs take the new
// config; a bad entry fails alone; two calls creating the same partitions
// at once get the same logs.
func TestCreateLogs(t *testing.T) {
	noSync(t)
	d1, d2 := t.TempDir(), t.TempDir()
	m := openTestManager(t, d1, nil, func(c *ManagerConfig) { c.Dirs = []string{d1, d2} })
	existing, err := m.GetOrCreateLog(TopicPartition{"t", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	var tps []TopicPartition
	var cfgs []LogConfig
	cfg := DefaultLogConfig()
	cfg.RetentionMs = 12345
	for p := range 40 {
		tps = append(tps, TopicPartition{"t", int32(p)})
		cfgs = append(cfgs, cfg)
	}
	tps = append(tps, TopicPartition{"bad/name", 0}, TopicPartition{"t", -1})
	cfgs = append(cfgs, cfg, cfg)

	const callers = 3
	results := make([][]*Log, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			logs, errs := m.CreateLogs(tps, cfgs)
			for i, err := range errs {
				if bad := i >= 40; bad != (err != nil) {
					t.Errorf("caller %d: %s: err %v", c, tps[i], err)
				}
			}
			results[c] = logs
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	perDir := map[string]int{}
	for i := range 40 {
		l := results[0][i]
		for c := 1; c < callers; c++ {
			if results[c][i] != l {
				t.Fatalf("%s: callers got different logs", tps[i])
			}
		}
		if got, _ := m.Log(tps[i]); got != l {
			t.Fatalf("%s: manager holds %p, CreateLogs returned %p", tps[i], got, l)
		}
		if l.Config().RetentionMs != 12345 {
			t.Fatalf("%s: retention %d, want the new config", tps[i], l.Config().RetentionMs)
		}
		perDir[filepath.Dir(l.Dir())]++
		mustAppend(t, l, batchOfSize(t, 200, 10))
	}
	if results[0][0] != existing {
		t.Fatal("an existing log was created again")
	}
	if perDir[d1] != 20 || perDir[d2] != 20 {
		t.Fatalf("logs per dir %v, want 20 in each", perDir)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, errs := m.CreateLogs(tps[:1], cfgs[:1]); !errors.Is(errs[0], ErrLogClosed) {
		t.Fatalf("after Close: %v, want ErrLogClosed", errs[0])
	}

	m = openTestManager(t, d1, nil, func(c *ManagerConfig) { c.Dirs = []string{d1, d2} })
	defer m.Close()
	for i := range 40 {
		l, ok := m.Log(tps[i])
		if !ok || l.LogEndOffset() == 0 {
			t.Fatalf("%s after a restart: %v %v", tps[i], ok, l)
		}
	}
	if n := len(m.Logs()); n != 40 {
		t.Fatalf("%d logs after a restart, want 40", n)
	}
}
