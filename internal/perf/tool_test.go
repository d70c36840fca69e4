package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestToolMain: a load generator built on Tool gets sluice perf's flags and
// checks, e2e's record count from throughput x duration, the result as text
// or JSON with its system named, and exit codes 0, 1 (failed run or record
// errors) and 2 (bad usage).
func TestToolMain(t *testing.T) {
	var load *Load
	var result *Result
	var runErr error
	tool := Tool{
		Name: "fakeperf", System: "fake", Version: func() string { return "fake 1.0" },
		NoCompression: "fake stores bodies as they are",
		Flags: func(fs *flag.FlagSet, mode string) *Load {
			load = &Load{}
			load.Flags(fs, mode, LoadNames{Partition: "logs", Body: "body", Acks: "all the same", Pending: "sends", NoCompression: "none here"})
			return load
		},
		Produce:  func(context.Context, io.Writer) (*Result, error) { return result, runErr },
		Consume:  func(context.Context, io.Writer) (*Result, error) { return result, runErr },
		EndToEnd: func(context.Context, io.Writer) (*Result, error) { return result, runErr },
	}
	main := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := tool.Main(context.Background(), args, &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, args := range [][]string{nil, {"fly"}, {"produce", "--compression", "gzip"}, {"produce", "x"}, {"e2e", "--throughput", "0"}} {
		if code, _, errs := main(args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errs)
		}
	}
	if _, _, errs := main("produce", "--compression", "gzip"); !strings.Contains(errs, "fake stores bodies as they are") {
		t.Errorf("the compression refusal does not say why: %q", errs)
	}

	result = &Result{Mode: "e2e", Records: 500}
	code, out, _ := main("e2e", "--throughput", "100", "--duration", "5s", "--output", "json")
	var got map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got["system"] != "fake" {
		t.Fatalf("e2e: exit %d, output %q", code, out)
	}
	if load.NumRecords != 500 {
		t.Errorf("e2e records %d, want throughput x duration = 500", load.NumRecords)
	}

	result, runErr = &Result{Mode: "produce", Records: 3, Errors: 1, FirstError: "refused"}, nil
	if code, out, _ := main("produce", "--num-records", "3"); code != 1 || !strings.Contains(out, "refused") {
		t.Errorf("a run with record errors: exit %d, output %q", code, out)
	}
	result, runErr = nil, errors.New("cannot connect")
	if code, _, errs := main("consume"); code != 1 || !strings.Contains(errs, "fakeperf consume: cannot connect") {
		t.Errorf("a failed run: exit %d, stderr %q", code, errs)
	}
	if code, out, _ := main("version"); code != 0 || out != "fake 1.0\n" {
		t.Errorf("version: %d %q", code, out)
	}
}
