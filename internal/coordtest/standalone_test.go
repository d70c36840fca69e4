package coordtest

import (
	"testing"

	"github.com/sluice-io/sluice/cluster"
)

// standaloneStore is a data directory of the file coordinator.
type standaloneStore struct{ dir string }

func (s standaloneStore) Open(t *testing.T) cluster.Coordinator {
	c, err := cluster.OpenStandalone(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (standaloneStore) MultiSession() bool { return false }

func TestStandaloneConformance(t *testing.T) {
	Run(t, func(t *testing.T) Store { return standaloneStore{t.TempDir()} })
}
