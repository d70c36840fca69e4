package coordtest

import "testing"

func TestStandaloneACLs(t *testing.T) {
	RunACLs(t, func(t *testing.T) Store { return standaloneStore{t.TempDir()} })
}
