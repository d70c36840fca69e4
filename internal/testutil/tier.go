package testutil

import "testing"

// The tests come in two tiers.
//
//   - The short tier (`go test -short ./...`, `make test-short`): everything
//     that runs inside the test process or starts only the sluice binary, on
//     loopback — unit, golden and fuzz-seed tests, in-process brokers
//     (internal/testcluster), franz-go and sarama clients. No JVM, no
//     browser, no package install, no network beyond 127.0.0.0/8.
//   - The heavy tier (plain `go test ./...`, `make test`): the short tier plus
//     every test that calls Heavy — ZooKeeper (a JVM), headless Chromium,
//     external Kafka clients (kcat, librdkafka via Python, kafkajs on node,
//     Burrow), building and installing the .deb and .rpm, and tests that are
//     slow by design (10,000 topics, a million records).

// Heavy marks t as a test of the heavy tier: under -short it is skipped,
// with why (what it needs: "ZooKeeper", "Chromium", "kcat", ...) in the skip
// message. Call it first thing in the test, before anything is started; the
// harnesses that start such things (zktest.Start, browsertest.New) call it
// too, so a test that forgets is still skipped.
func Heavy(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("heavy tier (%s): skipped with -short", why)
	}
}
