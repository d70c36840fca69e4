package broker

import "testing"

// FuzzReplicaFraming: the follower's handling of bytes from the leader —
// response header tags and the record bytes cut to whole batches — never
// panics and never returns more than it was given.
func FuzzReplicaFraming(f *testing.F) {
	f.Add([]byte{2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 'b'})
	f.Add([]byte{})
	f.Add(make([]byte, 80))
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, err := skipTags(b); err == nil && len(out) > len(b) {
			t.Fatal("skipTags grew its input")
		}
		if out := wholeBatches(b); len(out) > len(b) {
			t.Fatal("wholeBatches grew its input")
		}
	})
}
