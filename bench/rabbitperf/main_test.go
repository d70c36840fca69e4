package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBadCommandLines: every bad flag is exit 2 with a message naming it,
// before any connection is tried.
func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"fly"}, "unknown mode"},
		{[]string{"produce", "--queue-type", "classic"}, "--queue-type"},
		{[]string{"produce", "--compression", "zstd"}, "--compression"},
		{[]string{"produce", "--acks", "0"}, "--acks"},
		{[]string{"produce", "--payload", "zeros"}, "--payload"},
		{[]string{"produce", "--partitions", "0"}, "--partitions"},
		{[]string{"produce", "--max-pending", "0"}, "--max-pending"},
		{[]string{"consume", "--prefetch", "70000"}, "--prefetch"},
		{[]string{"produce", "--num-records", "0"}, "--num-records"},
		{[]string{"produce", "--output", "yaml"}, "--output"},
		{[]string{"e2e", "--throughput", "-1"}, "positive --throughput"},
		{[]string{"e2e", "--record-size", "4"}, "--record-size of at least 8"},
		{[]string{"produce", "stray"}, "unexpected arguments"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("rabbitperf %v: exit %d, want 2 with %q; stderr %q", tc.args, code, tc.want, errb.String())
		}
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "amqp091-go ") {
		t.Errorf("version: exit %d, %q", code, out.String())
	}
	// Nothing listens: a clear error, exit 1, the password not shown.
	var errb bytes.Buffer
	code := run(context.Background(), []string{"produce", "--url", "amqp://guest:secret@127.0.0.1:1/", "--num-records", "1"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "127.0.0.1:1") || strings.Contains(errb.String(), "secret") {
		t.Errorf("unreachable broker: exit %d, stderr %q", code, errb.String())
	}
}

func TestWindow(t *testing.T) {
	w := newWindow(2)
	ctx := context.Background()
	if err := w.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.acquire(cctx); err == nil {
		t.Fatal("a full window let a third message through")
	}
	if err := w.wait(ctx, 10e6); err == nil || !strings.Contains(err.Error(), "outstanding") {
		t.Fatalf("wait on a full window: %v", err)
	}
	w.release()
	w.release()
	if err := w.wait(ctx, 10e6); err != nil {
		t.Fatalf("wait on an empty window: %v", err)
	}
}
