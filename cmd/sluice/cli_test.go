package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/cli/<broker kind>")

// runCLI runs one operator subcommand in-process, as `sluice args...` would.
func runCLI(t *testing.T, brokers, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	run, ok := cliRunners[args[0]]
	if !ok {
		t.Fatalf("no CLI subcommand %q", args[0])
	}
	var out, errb bytes.Buffer
	env := &cliEnv{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string {
			if k == brokersEnv {
				return brokers
			}
			return ""
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = run(ctx, env, args[1:])
	return code, out.String(), errb.String()
}

// cliMasker replaces what differs between runs (ports, ids, timestamps) with
// fixed text of the same width, so tables stay aligned.
type cliMasker struct{ repl []string }

var (
	uuidRE      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hex32RE     = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	hostPortRE  = regexp.MustCompile(`(/?127\.0\.0\.1):\d{5}\b`)
	topicIDRE   = regexp.MustCompile(`"id": "[A-Za-z0-9_-]{22}"`)
	timestampRE = regexp.MustCompile(`"timestamp":\s?\d+`)
)

func sameWidth(label string, n int) string {
	if len(label) >= n {
		return label
	}
	return label + strings.Repeat("_", n-len(label))
}

func (m *cliMasker) add(token, label string) {
	if token != "" {
		m.repl = append(m.repl, token, sameWidth(label, len(token)))
	}
}

func (m *cliMasker) mask(s string) string {
	s = uuidRE.ReplaceAllString(s, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
	s = hex32RE.ReplaceAllString(s, strings.Repeat("x", 32))
	s = topicIDRE.ReplaceAllString(s, `"id": "<topic-id>"`)
	s = timestampRE.ReplaceAllString(s, `"timestamp": <ms>`)
	s = strings.NewReplacer(m.repl...).Replace(s)
	// Client ports of group members (the broker's own were replaced above).
	return hostPortRE.ReplaceAllString(s, "$1:<prt>")
}

// cliStep is one command of a golden script.
type cliStep struct {
	args       []string
	stdin      string
	sortStdout bool // records of several partitions arrive in no fixed order
}

func cliSh(stdin string, args ...string) cliStep { return cliStep{args: args, stdin: stdin} }

// TestCLIGolden runs every operator subcommand against a real broker and
// compares what it prints (table and JSON), and its exit code, with
// testdata/cli/*.golden. Run `go test ./cmd/sluice -run TestCLIGolden -update`
// to rewrite them after an intended change.
func TestCLIGolden(t *testing.T) {
	testutil.Heavy(t, "builds and runs the sluice binary for every golden case, 5 s")
	for _, kind := range testBrokerKinds(true) {
		t.Run(kind, func(t *testing.T) { testCLIGolden(t, kind) })
	}
}

func testCLIGolden(t *testing.T, kind string) {
	b := startTestBroker(t, kind)
	waitForBroker(t, b.addr)
	t.Logf("broker: %s at %s", b.kind, b.addr)

	m := &cliMasker{}
	host, port, _ := net.SplitHostPort(strings.Split(b.addr, ",")[0])
	m.add(b.addr, "<broker>")
	m.add(host+":"+port, "<broker>")
	m.add(port, "<prt>")
	adm := newTestAdmin(t, b.addr)
	meta, err := adm.BrokerMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m.add(meta.Cluster, "<cluster-id>")
	closed := testutil.FreeAddr(t) // nothing listens here
	m.add(closed, "<closed-addr>")

	scripts := []struct {
		name  string
		steps []cliStep
		after func(t *testing.T) // runs after the script, before its golden compare
	}{
		{name: "cluster", steps: []cliStep{
			cliSh("", "cluster"),
			cliSh("", "cluster", "-o", "json"),
			cliSh("", "cluster", "--check"),
		}},
		{name: "topics", steps: []cliStep{
			cliSh("", "topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000"),
			cliSh("", "topics", "create", "payments", "--partitions", "2", "--replication-factor", "1", "-o", "json"),
			cliSh("", "topics", "create", "orders", "--partitions", "3"),
			cliSh("", "topics", "create", "orders", "--partitions", "3", "--if-not-exists"),
			cliSh("", "topics", "create", "scratch", "--dry-run", "--partitions", "1"),
			cliSh("", "topics", "list"),
			cliSh("", "topics", "list", "--output", "json"),
			cliSh("", "topics", "describe", "orders"),
			cliSh("", "topics", "describe", "orders", "payments", "-o", "json"),
			cliSh("", "topics", "describe", "missing"),
			cliSh("", "topics", "alter", "payments", "--partitions", "3"),
			cliSh("", "topics", "alter", "payments", "--partitions", "3", "-o", "json"),
			cliSh("", "topics", "alter", "payments", "--partitions", "1"),
			cliSh("", "topics", "alter", "payments", "--config", "retention.ms=60000"),
			cliSh("", "topics", "describe", "payments"),
		}},
		{name: "produce", steps: []cliStep{
			cliSh("k1:first\nk2:second\nk3:third\nk1:fourth\n", "produce", "orders", "--key-separator", ":", "--header", "source=golden"),
			cliSh("a\nb\n\nd\n", "produce", "payments", "--partition", "1", "-o", "json"),
			cliSh("no separator here\n", "produce", "orders", "--key-separator", ":"),
			cliSh("x\n", "produce", "missing"),
			cliSh("x\n", "produce", "payments", "--partition", "7"),
			cliSh("", "topics", "describe", "orders", "payments"),
		}},
		{name: "consume", steps: []cliStep{
			cliSh("", "consume", "payments", "--partition", "1", "--from", "earliest", "--max-messages", "4"),
			cliSh("", "consume", "payments", "--partition", "1", "--from", "1", "--max-messages", "2", "--format", "%t/%p@%o [%k] %s (%S bytes)\\n"),
			cliSh("", "consume", "payments", "--partition", "1", "--from", "-1", "--max-messages", "1", "-o", "json"),
			{args: []string{"consume", "orders", "--from", "earliest", "--max-messages", "4", "--format", "kv", "--key-separator", "="}, sortStdout: true},
			{args: []string{"consume", "orders", "--from", "earliest", "--idle-timeout", "2s", "--format", "json"}, sortStdout: true},
			cliSh("", "consume", "missing", "--max-messages", "1"),
		}},
		{name: "groups", steps: []cliStep{
			{args: []string{"consume", "orders", "--group", "billing", "--from", "earliest", "--max-messages", "4", "--format", "%k %h\\n"}, sortStdout: true},
			cliSh("", "groups", "list"),
			cliSh("", "groups", "list", "-o", "json"),
			cliSh("", "groups", "describe", "billing"),
			cliSh("", "groups", "describe", "billing", "--state"),
			cliSh("", "groups", "describe", "billing", "-o", "json"),
			cliSh("", "groups", "describe", "nobody"),
			cliSh("", "groups", "reset-offsets", "billing", "--all-topics", "--to-earliest"),
			cliSh("", "groups", "reset-offsets", "billing", "--topic", "orders", "--to-earliest", "--execute", "-o", "json"),
			cliSh("", "groups", "reset-offsets", "billing", "--topic", "orders", "--shift-by", "1", "--execute"),
			cliSh("", "groups", "reset-offsets", "billing", "--topic", "orders:0", "--to-offset", "99", "--execute"),
			cliSh("", "groups", "reset-offsets", "billing", "--topic", "orders", "--to-datetime", "2000-01-01T00:00:00Z"),
			cliSh("", "groups", "describe", "billing"),
			cliSh("", "groups", "delete", "billing", "--topic", "orders"),
			cliSh("", "groups", "describe", "billing"),
			cliSh("", "groups", "delete", "billing"),
			cliSh("", "groups", "delete", "billing"),
		}},
		{name: "groups-live", steps: []cliStep{
			cliSh("", "groups", "describe", "live", "--members"),
			cliSh("", "groups", "describe", "live", "--members", "-o", "json"),
			cliSh("", "groups", "reset-offsets", "live", "--all-topics", "--to-earliest", "--execute"),
			cliSh("", "groups", "delete", "live"),
		}},
		{name: "configs", steps: []cliStep{
			cliSh("", "configs", "describe", "--topic", "orders"),
			cliSh("", "configs", "alter", "--topic", "orders", "--set", "cleanup.policy=compact,delete", "--set", "max.message.bytes=2097152", "--delete", "retention.ms"),
			cliSh("", "configs", "describe", "--topic", "orders"),
			cliSh("", "configs", "describe", "--topic", "orders", "--topic", "payments", "-o", "json"),
			cliSh("", "configs", "alter", "--topic", "orders", "--set", "retention.ms=1000", "--dry-run", "-o", "json"),
			cliSh("", "configs", "alter", "--topic", "missing", "--set", "retention.ms=1000"),
			cliSh("", "configs", "describe", "--topic", "missing"),
		}},
		{name: "delete", steps: []cliStep{
			cliSh("", "topics", "delete", "payments"),
			cliSh("", "topics", "delete", "payments", "--if-exists", "-o", "json"),
			cliSh("", "topics", "delete", "payments"),
			cliSh("", "topics", "list"),
		}},
		{name: "usage", steps: []cliStep{
			cliSh("", "topics"),
			cliSh("", "topics", "frobnicate"),
			cliSh("", "topics", "create"),
			cliSh("", "topics", "create", "x", "--partitions", "0"),
			cliSh("", "topics", "list", "--output", "yaml"),
			cliSh("", "topics", "list", "--no-such-flag"),
			cliSh("", "configs", "describe"),
			cliSh("", "configs", "alter", "--topic", "orders"),
			cliSh("", "groups", "reset-offsets", "g", "--topic", "orders"),
			cliSh("", "groups", "reset-offsets", "g", "--topic", "orders", "--to-earliest", "--to-latest"),
			cliSh("", "consume", "orders", "--from", "yesterday"),
			cliSh("", "consume", "orders", "--format", "%z"),
			cliSh("", "produce"),
			cliSh("", "produce", "orders", "--acks", "2"),
			cliSh("", "cluster", "extra"),
			cliSh("", "topics", "list", "--brokers", closed),
		}},
	}

	var live *kgo.Client
	defer func() {
		if live != nil {
			live.Close()
		}
	}()
	for _, sc := range scripts {
		if sc.name == "groups-live" {
			live = startLiveConsumer(t, b.addr, "live", "orders")
		}
		var got strings.Builder
		for _, st := range sc.steps {
			code, stdout, stderr := runCLI(t, b.addr, st.stdin, st.args...)
			if st.sortStdout {
				lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
				sort.Strings(lines)
				stdout = strings.Join(lines, "\n") + "\n"
			}
			fmt.Fprintf(&got, "$ sluice %s\n", strings.Join(quoteArgs(st.args), " "))
			if st.stdin != "" {
				fmt.Fprintf(&got, "< %q\n", st.stdin)
			}
			fmt.Fprintf(&got, "exit %d\n", code)
			if stdout != "" {
				fmt.Fprintf(&got, "-- stdout --\n%s", stdout)
			}
			if stderr != "" {
				fmt.Fprintf(&got, "-- stderr --\n%s", stderr)
			}
			got.WriteString("\n")
		}
		compareGolden(t, filepath.Join("testdata", "cli", b.kind, sc.name+".golden"), m.mask(got.String()))
	}
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"\\%[]()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run with -update if the change is intended):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines that differ, enough to see what changed.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %q\n  got:  %q\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

func newTestAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// startLiveConsumer joins a group and keeps polling until the test ends, so
// the group has a member while the CLI looks at it.
func startLiveConsumer(t *testing.T, addr, group, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(addr, ",")...),
		kgo.ClientID("golden-consumer"),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.RangeBalancer()),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	adm := kadm.NewClient(cl)
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		gs, err := adm.DescribeGroups(context.Background(), group)
		if err != nil {
			return err
		}
		g := gs[group]
		if g.State != "Stable" || len(g.Members) != 1 {
			return fmt.Errorf("group %s: state %q, %d members", group, g.State, len(g.Members))
		}
		if a, ok := g.Members[0].Assigned.AsConsumer(); !ok || len(a.Topics) == 0 {
			return fmt.Errorf("group %s: no assignment yet", group)
		}
		return nil
	})
	return cl
}

// TestCLIJSONIsValid checks that every --output json answer is one valid JSON
// document, so scripts can pipe it to jq.
func TestCLIJSONIsValid(t *testing.T) {
	b := startTestBroker(t, testBrokerKinds(false)[0])
	waitForBroker(t, b.addr)
	if code, _, stderr := runCLI(t, b.addr, "", "topics", "create", "j", "--partitions", "2"); code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	for _, args := range [][]string{
		{"cluster", "-o", "json"},
		{"topics", "list", "-o", "json"},
		{"topics", "describe", "-o", "json"},
		{"groups", "list", "-o", "json"},
		{"configs", "describe", "--topic", "j", "--all", "-o", "json"},
	} {
		code, stdout, stderr := runCLI(t, b.addr, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var v any
		if err := json.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, stdout)
		}
	}
	// Every broker has a broker config listing; its ids come from cluster.
	code, stdout, _ := runCLI(t, b.addr, "", "cluster", "-o", "json")
	var c clusterJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &c) != nil || len(c.Brokers) == 0 {
		t.Fatalf("cluster: exit %d: %s", code, stdout)
	}
	id := fmt.Sprint(c.Brokers[0].ID)
	code, stdout, stderr := runCLI(t, b.addr, "", "configs", "describe", "--broker", id, "--all", "-o", "json")
	if code != 0 {
		t.Fatalf("configs describe --broker %s: %s", id, stderr)
	}
	var ents []configEntityJSON
	if err := json.Unmarshal([]byte(stdout), &ents); err != nil || len(ents) != 1 || len(ents[0].Configs) == 0 {
		t.Fatalf("broker configs: %v\n%s", err, stdout)
	}
}

// TestCLIBrokersFromEnv checks that $SLUICE_BROKERS is the default of
// --brokers and that --brokers wins over it.
func TestCLIBrokersFromEnv(t *testing.T) {
	b := startTestBroker(t, testBrokerKinds(false)[0])
	waitForBroker(t, b.addr)
	if code, _, stderr := runCLI(t, b.addr, "", "topics", "list"); code != 0 {
		t.Fatalf("with $SLUICE_BROKERS: exit %d: %s", code, stderr)
	}
	closed := testutil.FreeAddr(t)
	code, _, stderr := runCLI(t, closed, "", "topics", "list")
	if code != 1 || !strings.Contains(stderr, "cannot reach any broker at "+closed) {
		t.Fatalf("with a dead $SLUICE_BROKERS: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, closed, "", "topics", "list", "--brokers", b.addr); code != 0 {
		t.Fatalf("--brokers over $SLUICE_BROKERS: exit %d: %s", code, stderr)
	}
}

func TestParseArgsInterspersed(t *testing.T) {
	env := &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }}
	fs := newFlags(env, "x", "")
	n := fs.Int("n", 0, "")
	pos, err := parseArgs(fs, []string{"a", "-n", "3", "b", "--", "-n", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if *n != 3 || strings.Join(pos, " ") != "a b -n c" {
		t.Fatalf("n=%d pos=%q", *n, pos)
	}
}

// The shared prologue of the commands that talk to the cluster: the number
// of positional arguments is checked with the command's own message, then
// the shared flags are validated; every failure is a usage error (exit 2).
func TestClusterFlagsParse(t *testing.T) {
	env := &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }}
	cases := []struct {
		args    []string
		want    positional
		pos     string
		wantErr string
	}{
		{[]string{}, noArgs, "", ""},
		{[]string{"x", "y"}, noArgs, "", `unexpected argument "x"`},
		{[]string{"x"}, positional{many: "unexpected argument %q (topics are named with --topic)"}, "", `unexpected argument "x" (topics are named with --topic)`},
		{[]string{"a", "b"}, anyArgs, "a b", ""},
		{[]string{}, anyArgs, "", ""},
		{[]string{}, atLeastOne("topic"), "", "name at least one topic"},
		{[]string{"a", "--timeout", "1s", "b"}, atLeastOne("topic"), "a b", ""},
		{[]string{"g"}, exactlyOne("name exactly one group"), "g", ""},
		{[]string{}, exactlyOne("name exactly one group"), "", "name exactly one group"},
		{[]string{"g", "h"}, exactlyOne("name exactly one group"), "", "name exactly one group"},
		{[]string{"--output", "yaml"}, noArgs, "", `--output must be table or json, not "yaml"`},
		{[]string{"--brokers", " , "}, noArgs, "", "--brokers is empty"},
		{[]string{"a", "--timeout", "0s"}, atLeastOne("topic"), "", "--timeout must be positive"},
		{[]string{"a", "b", "--output", "yaml"}, exactlyOne("give one broker id"), "", "give one broker id"},
	}
	for _, c := range cases {
		fs, cf := clusterFlags(env, "x", "", true)
		pos, err := cf.parse(fs, c.args, c.want)
		var ue *usageError
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.wantErr != "" && (!errors.As(err, &ue) || err.Error() != c.wantErr):
			t.Errorf("%q: err %v, want usage error %q", c.args, err, c.wantErr)
		case c.wantErr == "" && strings.Join(pos, " ") != c.pos:
			t.Errorf("%q: positional %q, want %q", c.args, pos, c.pos)
		}
	}
}
