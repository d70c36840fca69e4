package coordtest

import "testing"

func TestStandaloneCredentials(t *testing.T) {
	RunCredentials(t, func(t *testing.T) Store { return standaloneStore{t.TempDir()} })
}
