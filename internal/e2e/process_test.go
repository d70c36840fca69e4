package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestServeProcessSignalsAndRestart runs the sluice binary: produce, stop it
// with SIGTERM (clean exit within seconds, clean-shutdown marker written),
// start it again on the same data and read everything, produce more, stop
// it with SIGINT, start again and read everything.
func TestServeProcessSignalsAndRestart(t *testing.T) {
	testutil.Heavy(t, "a sluice process started, signalled and restarted, ~4 s")
	dir := t.TempDir()
	addr := testutil.FreeAddr(t)
	p := startProc(t, dir, addr, "num.partitions=3")
	ctx := ctxFor(t, 60*time.Second)

	produce := func(from, to int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("proc"), kgo.AllowAutoTopicCreation(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "v%05d", i)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func(total int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"proc": {
			0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart(),
		}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		next := [3]int{0, 1, 2}
		got := 0
		for got < total {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d", got, total)
			}
			fs.EachRecord(func(r *kgo.Record) {
				want := fmt.Sprintf("v%05d", next[r.Partition])
				if string(r.Value) != want {
					t.Fatalf("partition %d: %q, want %q", r.Partition, r.Value, want)
				}
				next[r.Partition] += 3
				got++
			})
		}
	}

	produce(0, 3000)
	marker := filepath.Join(dir, "kafka", ".kafka_cleanshutdown")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("clean-shutdown marker present while running")
	}
	code, took := p.signal(sigterm, 15*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("SIGTERM shutdown took %v", took)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no clean-shutdown marker after SIGTERM: %v", err)
	}
	if !strings.Contains(p.stderr.String(), "shutting down") {
		t.Fatalf("no shutdown log line:\n%s", p.stderr.String())
	}

	p = startProc(t, dir, addr)
	readAll(3000)
	produce(3000, 4500)
	code, took = p.signal(sigint, 15*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d after SIGINT", code)
	}
	t.Logf("SIGINT shutdown took %v", took)

	p = startProc(t, dir, addr)
	readAll(4500)
	if code, _ := p.signal(sigterm, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestServeRejectsBadConfig: an unknown key or a bad value stops start-up
// with a message naming the key, for overrides and for the config file.
func TestServeRejectsBadConfig(t *testing.T) {
	testutil.Heavy(t, "starts the sluice binary once per bad config, 4 s")
	bin := sluiceBinary(t)
	run := func(args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("sluice serve %v did not exit: %s", args, out.String())
		}
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		return code, out.String()
	}
	dir := t.TempDir()
	base := []string{"--override", "log.dirs=" + filepath.Join(dir, "d"), "--override", "console.listen="}
	for _, tc := range []struct {
		args []string
		key  string
	}{
		{[]string{"--override", "log.retention.hourz=3"}, "log.retention.hourz"},
		{[]string{"--override", "num.partitions=many"}, "num.partitions"},
		{[]string{"--override", "listeners=PLAINTEXT://:99999"}, "listeners"},
	} {
		code, out := run(append(base, tc.args...)...)
		if code == 0 || !strings.Contains(out, tc.key) {
			t.Errorf("%v: exit %d, output does not name %s:\n%s", tc.args, code, tc.key, out)
		}
	}
	file := filepath.Join(dir, "server.properties")
	os.WriteFile(file, []byte("broker.id=0\nauto.create.topics.enable=maybe\n"), 0o644)
	if code, out := run(append(base, "--config", file)...); code == 0 || !strings.Contains(out, "auto.create.topics.enable") {
		t.Errorf("bad value in the file: exit %d:\n%s", code, out)
	}
	if code, out := run("--help"); code != 0 || !strings.Contains(out, "zookeeper.connect") || !strings.Contains(out, "--override") {
		t.Errorf("serve --help: exit %d:\n%s", code, out)
	}
}
