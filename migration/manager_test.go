package migration

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// The manager is what the console pages drive: create, live status, the
// differences table with its filter and pages, export, pause, resume,
// restart and delete, all persisted in SQLite.
func TestManagerLifecycle(t *testing.T) {
	brokers := testBrokers(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	g := generate(1000, base, true)
	produce(t, brokers, left, 1, g.left)
	produce(t, brokers, right, 1, g.right)
	store := openTestStore(t)
	ctx := context.Background()
	m := NewManager(store, ManagerOptions{Brokers: brokers, CheckpointInterval: 50 * time.Millisecond})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	if _, err := m.Create(ctx, "bad", Spec{Left: left}, "op"); err == nil {
		t.Fatal("created a comparison without a right topic")
	}
	id, err := m.Create(ctx, "orders", genSpec(left, right, true), "op")
	if err != nil {
		t.Fatal(err)
	}
	waitState := func(id int64, want State) Status {
		t.Helper()
		var st Status
		testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			st, err = m.Get(ctx, id)
			if err != nil {
				return err
			}
			if st.State != want {
				return fmt.Errorf("state %s (%s), want %s", st.State, st.Error, want)
			}
			return nil
		})
		return st
	}
	st := waitState(id, StateFinished)
	if st.Live || st.SavedAt.IsZero() {
		t.Fatalf("a finished comparison shows live numbers (%v) or no saved ones (%v)", st.Live, st.SavedAt)
	}
	if outcome(st.Snapshot.Counters) != g.want || st.CreatedBy != "op" || st.Name != "orders" {
		t.Fatalf("finished status %+v", st)
	}
	if st.Verdict.Ready || len(st.Verdict.Examples) == 0 || st.Verdict.Examples[0].Kind != KindMismatch {
		t.Fatalf("verdict %+v", st.Verdict)
	}

	// The differences table: filter by kind, pages.
	mm, total, err := m.Differences(ctx, id, DiffQuery{Kind: KindMismatch})
	if err != nil || total != 1 || len(mm) != 1 || mm[0].Fields[0].Path != "order.total" || mm[0].Left == nil || mm[0].Right == nil || mm[0].ID == 0 {
		t.Fatalf("mismatches %+v %d %v", mm, total, err)
	}
	var pages []Difference
	for off := 0; ; off += 3 {
		page, total, err := m.Differences(ctx, id, DiffQuery{Offset: off, Limit: 3})
		if err != nil || total != 8 {
			t.Fatalf("page at %d: total %d, %v", off, total, err)
		}
		pages = append(pages, page...)
		if len(page) < 3 {
			break
		}
	}
	if len(pages) != 8 {
		t.Fatalf("%d differences over the pages", len(pages))
	}
	if _, _, err := m.Differences(ctx, id, DiffQuery{Kind: "bogus"}); err == nil {
		t.Fatal("unknown kind accepted")
	}

	// Export.
	var js bytes.Buffer
	if err := m.Export(ctx, id, "", "json", &js); err != nil {
		t.Fatal(err)
	}
	var exported []Difference
	if err := json.Unmarshal(js.Bytes(), &exported); err != nil || len(exported) != 8 {
		t.Fatalf("json export: %d, %v", len(exported), err)
	}
	var cs bytes.Buffer
	if err := m.Export(ctx, id, KindMissingRight, "csv", &cs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(rows) != 3 || rows[1][0] != "missing_right" || rows[1][3] != orderID(200) {
		t.Fatalf("csv export %q %v", rows, err)
	}
	if err := m.Export(ctx, id, "", "xml", &cs); err == nil {
		t.Fatal("xml export accepted")
	}
	if err := m.Pause(ctx, id, 0); err == nil {
		t.Fatal("paused a finished comparison")
	}

	// Restart: generation 2, same result, old differences gone.
	if err := m.Restart(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	st = waitState(id, StateFinished)
	if st.Generation != 2 || outcome(st.Snapshot.Counters) != g.want {
		t.Fatalf("after restart %+v", st)
	}
	if _, total, _ := m.Differences(ctx, id, DiffQuery{}); total != 8 {
		t.Fatalf("%d differences after restart", total)
	}

	// A continuous comparison: live numbers, pause, resume, delete.
	spec := genSpec(left, right, true)
	spec.Bounded = false
	cid, err := m.Create(ctx, "live", spec, "op")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, err := m.Get(ctx, cid)
		if err != nil {
			return err
		}
		if !st.Live || st.Snapshot.Counters.Matched != g.want.Matched {
			return fmt.Errorf("live=%v %+v", st.Live, st.Snapshot.Counters)
		}
		return nil
	})
	if err := m.Pause(ctx, cid, 0); err != nil {
		t.Fatal(err)
	}
	st, _ = m.Get(ctx, cid)
	if st.State != StatePaused || st.Live || st.Snapshot.Counters.Matched != g.want.Matched {
		t.Fatalf("paused %+v", st)
	}
	if err := m.Resume(ctx, cid, 0); err != nil {
		t.Fatal(err)
	}
	waitState(cid, StateRunning)
	list, err := m.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != cid || len(m.Statuses()) != 2 {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := m.Delete(ctx, cid, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, cid); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := m.Delete(ctx, cid, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

// A comparison running when the console stops resumes where it was when the
// console starts again.
func TestManagerResumesAfterClose(t *testing.T) {
	brokers := testBrokers(t)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	store := openTestStore(t)
	ctx := context.Background()
	spec := DefaultSpec()
	spec.Left, spec.Right, spec.Bounded, spec.Window = left, right, false, Duration(100*time.Millisecond)
	m := NewManager(store, ManagerOptions{Brokers: brokers, CheckpointInterval: 20 * time.Millisecond})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := m.Create(ctx, "", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	recs := []genRecord{{key: []byte("a"), value: []byte("1"), ts: now}, {key: []byte("b"), value: []byte("2"), ts: now}}
	produce(t, brokers, left, 1, recs)
	produce(t, brokers, right, 1, recs)
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if st, _ := m.Get(ctx, id); st.Snapshot.Counters.Matched != 2 {
			return fmt.Errorf("%+v", st.Snapshot.Counters)
		}
		return nil
	})
	m.Close()
	st, err := store.Get(ctx, id)
	if err != nil || st.State != StateRunning || st.Snapshot == nil || st.Snapshot.Counters.Matched != 2 || st.Name != left+" vs "+right {
		t.Fatalf("after close: %+v %v", st, err)
	}
	produce(t, brokers, left, 1, recs[:1])
	produce(t, brokers, right, 1, recs[:1])
	m2 := NewManager(store, ManagerOptions{Brokers: brokers, CheckpointInterval: 20 * time.Millisecond})
	if err := m2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, _ := m2.Get(ctx, id)
		if c := st.Snapshot.Counters; c.Matched != 3 || c.LeftRecords != 3 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
}

// TestManagerUpdateAndDifferingPaths: the differing paths of a finished
// comparison, counted; an update (an edit, or "ignore this path") starts
// it over with the new spec and forgets the old differences.
func TestManagerUpdateAndDifferingPaths(t *testing.T) {
	brokers := testBrokers(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	g := generate(1000, base, true)
	produce(t, brokers, left, 1, g.left)
	produce(t, brokers, right, 1, g.right)
	ctx := context.Background()
	m := NewManager(openTestStore(t), ManagerOptions{Brokers: brokers, CheckpointInterval: 50 * time.Millisecond})
	defer m.Close()
	spec := genSpec(left, right, true)
	spec.Ignore = nil // processed_at now differs in #700
	id, err := m.Create(ctx, "orders", spec, "op")
	if err != nil {
		t.Fatal(err)
	}
	finished := func() Status {
		t.Helper()
		var st Status
		testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			st, err = m.Get(ctx, id)
			if err == nil && st.State != StateFinished {
				err = fmt.Errorf("state %s", st.State)
			}
			return err
		})
		return st
	}
	st := finished()
	paths, n, err := m.DifferingPaths(ctx, id, 10)
	if err != nil || n != int(st.Snapshot.Counters.Mismatched) || len(paths) != 2 {
		t.Fatalf("paths %+v of %d (%d mismatched) %v", paths, n, st.Snapshot.Counters.Mismatched, err)
	}
	got := map[string]int{}
	for _, p := range paths {
		got[p.Path] = p.Pairs
	}
	if got["order.total"] != 1 || got["processed_at"] != 1 {
		t.Fatalf("paths %+v", paths)
	}

	spec.Ignore = []string{paths[0].Path, paths[1].Path}
	if err := m.Update(ctx, id, "orders, ignoring", spec, 0); err != nil {
		t.Fatal(err)
	}
	st = finished()
	if st.Name != "orders, ignoring" || st.Generation != 2 || st.Snapshot.Counters.Mismatched != 0 || len(st.Spec.Ignore) != 2 {
		t.Fatalf("after the update: %+v", st)
	}
	if _, total, _ := m.Differences(ctx, id, DiffQuery{Kind: KindMismatch}); total != 0 {
		t.Fatalf("%d old mismatches kept", total)
	}
	if err := m.Update(ctx, id, "x", Spec{Left: left}, 0); err == nil {
		t.Fatal("an invalid spec was stored")
	}
	if err := m.Update(ctx, 999, "x", spec, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("updating nothing: %v", err)
	}
}

func TestCountPaths(t *testing.T) {
	diffs := []Difference{
		{Fields: []FieldDiff{{Path: "items[0].price", Left: "1", Right: "2"}, {Path: "items[1].price", Left: "3", Right: "4"}, {Path: "total"}}},
		{Fields: []FieldDiff{{Path: "items[4].price", Left: "5", Right: ""}}},
		{Fields: []FieldDiff{{Path: "total", Left: "9", Right: "9.5"}}},
	}
	got := CountPaths(diffs, 0)
	if len(got) != 2 || got[0].Path != "items[*].price" || got[0].Pairs != 2 || got[0].Example != "1 → 2" || got[1].Path != "total" || got[1].Pairs != 2 {
		t.Fatalf("%+v", got)
	}
	if got := CountPaths(diffs, 1); len(got) != 1 {
		t.Fatalf("limit: %+v", got)
	}
}
