package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadPlan(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[3,1]}]}`), 0o644)
	p, err := readPlan(good)
	if err != nil || len(p.Partitions) != 1 || !slices.Equal(p.Partitions[0].Replicas, []int32{3, 1}) {
		t.Fatalf("%+v %v", p, err)
	}
	for name, body := range map[string]string{"empty.json": `{"version":1,"partitions":[]}`, "bad.json": `{`, "notopic.json": `{"partitions":[{"partition":1}]}`} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := readPlan(path); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
