package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compareTestBrokers is SLUICE_TEST_BROKERS when set (a real broker), else
// an in-process kfake cluster on a loopback port.
func compareTestBrokers(t *testing.T) string {
	t.Helper()
	if s := os.Getenv("SLUICE_TEST_BROKERS"); s != "" {
		return s
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// compareProduceOrders creates two topics and writes n orders to each, the
// right side writing JSON members in another order; the orders listed in
// changed get a different total on the right.
func compareProduceOrders(t *testing.T, brokers string, n int, changed ...int) (left, right string) {
	t.Helper()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	left, right = "ORDER-"+suffix, "ORDERNEW-"+suffix
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, left, right); err != nil {
		t.Fatal(err)
	}
	isChanged := map[int]bool{}
	for _, c := range changed {
		isChanged[c] = true
	}
	base := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		id := fmt.Sprintf("o-%04d", i)
		total := 10 + i
		recs = append(recs, &kgo.Record{Topic: left, Key: []byte(id), Timestamp: ts,
			Value: fmt.Appendf(nil, `{"order":{"id":%q,"total":%d},"at":"%d"}`, id, total, i)})
		if isChanged[i] {
			total++
		}
		recs = append(recs, &kgo.Record{Topic: right, Key: []byte(id), Timestamp: ts,
			Value: fmt.Appendf(nil, `{"at":"x%d","order":{"total":%d,"id":%q}}`, i, total, id)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return left, right
}

func runCompareCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := compareMain(ctx, args, &out, &errb, func(string) string { return "" })
	return code, out.String(), errb.String()
}

// The exit codes a deploy pipeline gates on: 0 for a matching pair of
// topics, 1 for a mismatching one, 2 for a bad command line.
func TestCompareCommandExitCodes(t *testing.T) {
	brokers := compareTestBrokers(t)
	okLeft, okRight := compareProduceOrders(t, brokers, 200)
	badLeft, badRight := compareProduceOrders(t, brokers, 200, 42)
	common := []string{"--brokers", brokers, "--until-end", "--key", "json:order.id", "--json-values", "--ignore", "at", "--window", "5s"}

	code, out, errOut := runCompareCmd(t, append([]string{"--left", okLeft, "--right", okRight}, common...)...)
	if code != 0 || !strings.Contains(out, "Verdict: Ready to cut over") || !strings.Contains(out, "matched") {
		t.Fatalf("matching topics: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCompareCmd(t, append([]string{"--left", badLeft, "--right", badRight}, common...)...)
	if code != 1 || !strings.Contains(out, "FAIL no_mismatch") || !strings.Contains(out, "order.total: 52 -> 53") {
		t.Fatalf("mismatching topics: exit %d\n%s\n%s", code, out, errOut)
	}
	// JSON output carries the same verdict.
	code, out, _ = runCompareCmd(t, append([]string{"--left", badLeft, "--right", badRight, "--output", "json"}, common...)...)
	var rep struct {
		Snapshot struct {
			Counters struct{ Matched, Mismatched int64 }
		}
		Verdict struct {
			Ready  bool
			Failed []string
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Verdict.Ready || rep.Snapshot.Counters.Mismatched != 1 ||
		rep.Snapshot.Counters.Matched != 199 || len(rep.Verdict.Failed) != 1 || rep.Verdict.Failed[0] != "no_mismatch" {
		t.Fatalf("json: exit %d %+v\n%s", code, rep, out)
	}
	// Exact bytes (the default): every value is written differently; the
	// examples still show which field differs.
	code, out, _ = runCompareCmd(t, "--brokers", brokers, "--until-end", "--left", okLeft, "--right", okRight)
	if code != 1 || !strings.Contains(out, "FAIL no_mismatch       want 0, got 200") || !strings.Contains(out, `at: "0" -> "x0"`) {
		t.Fatalf("exact bytes: exit %d\n%s", code, out)
	}
	// Not enough records for the verdict.
	code, out, _ = runCompareCmd(t, append([]string{"--left", okLeft, "--right", okRight, "--min-records", "1000"}, common...)...)
	if code != 1 || !strings.Contains(out, "FAIL min_records") {
		t.Fatalf("min records: exit %d\n%s", code, out)
	}
	// Continuous for a while, then the report and the verdict's exit code.
	code, out, errOut = runCompareCmd(t, "--brokers", brokers, "--left", okLeft, "--right", okRight, "--key", "json:order.id",
		"--json-values", "--ignore", "at", "--duration", "1500ms")
	if code != 0 || !strings.Contains(out, "continuous") || !strings.Contains(out, "Verdict: Ready to cut over") {
		t.Fatalf("continuous: exit %d\n%s\n%s", code, out, errOut)
	}
	// A topic that does not exist: not ready, with a message.
	code, _, errOut = runCompareCmd(t, "--brokers", brokers, "--until-end", "--left", okLeft, "--right", "missing-topic", "--connect-timeout", "5s")
	if code != 1 || !strings.Contains(errOut, "missing-topic") {
		t.Fatalf("missing topic: exit %d %s", code, errOut)
	}

	for _, bad := range [][]string{
		{"--left", "A"},                                         // no right
		{"--left", "A", "--right", "A"},                         // same topic
		{"--left", "A", "--right", "B", "--key", "value"},       // bad key mode
		{"--left", "A", "--right", "B", "--key", "json:a..b"},   // bad path
		{"--left", "A", "--right", "B", "--tolerance", "0.1"},   // tolerance without JSON
		{"--left", "A", "--right", "B", "--ignore", "x"},        // ignore without JSON
		{"--left", "A", "--right", "B", "--window", "-1s"},      // negative window
		{"--left", "A", "--right", "B", "--output", "xml"},      // bad output
		{"--left", "A", "--right", "B", "--start", "yesterday"}, // bad start
		{"--left", "A", "--right", "B", "--bogus"},              // unknown flag
		{"--left", "A", "--right", "B", "stray"},                // stray argument
		{"--left", "A", "--right", "B", "--min-records", "0"},   // no records needed
		{"--left", "A", "--right", "B", "--until-end", "--duration", "1s"},
	} {
		code, _, errOut := runCompareCmd(t, append([]string{"--brokers", brokers}, bad...)...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q", bad, code, errOut)
		}
	}
	if code, _, _ := runCompareCmd(t, "--help"); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
}
