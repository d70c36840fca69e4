package migration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
)

// Editing a comparison is a change of the replicated console state: the
// new name and spec, and the dropped checkpoint, are records of the console
// topic, so every host sees the edit.
func TestUpdateIsReplicated(t *testing.T) {
	ctx := context.Background()
	db, err := consoledb.Open(ctx, filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := consoledb.NewConsole(ctx, db); err != nil { // every replicated table must exist
		t.Fatal(err)
	}
	log := consoledb.NewMemLog()
	rep, err := consoledb.StartReplica(ctx, db, consoledb.ReplicaConfig{Log: log, Lock: consoledb.NewMutexLock(), Host: 1,
		ProbeInterval: 50 * time.Millisecond, UnreachableAfter: time.Second, WaitTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close() })
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rep.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}

	spec := Spec{Left: "orders", Right: "orders-new"}
	id, err := st.Create(ctx, "before", spec, "op")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, id, "after the edit", spec, 0); err != nil {
		t.Fatal(err)
	}
	var last string
	for _, r := range log.Records() {
		if strings.HasPrefix(string(r.Key), `["migration_comparisons",`) {
			last = string(r.Value)
		}
	}
	if !strings.Contains(last, `"after the edit"`) {
		t.Fatalf("the comparison's last record in the console topic: %s", last)
	}
}
