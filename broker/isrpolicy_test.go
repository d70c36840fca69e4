package broker

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

var rewriteISR = flag.Bool("rewrite", false, "rewrite the golden files under testdata/isr with what the tests produce")

// TestISRPolicyGolden runs the leader's ISR rules (isrpolicy.go) through the
// scripts in testdata/isr/: each command is followed by its input lines (if
// any), "----", and the output it must produce (go test ./broker -run
// TestISRPolicyGolden -rewrite writes the output back). The commands act on
// one model partition led by this broker, as Partition applies them:
//
//	leader self=S replicas=R,R isr=R,R leo=N [hw=N] [epochstart=N] lagmax=D
//	                       this broker becomes leader at the current time
//	at D                   the clock moves to D after the start (1s, 1500ms)
//	append N               the leader's log end grows by N records
//	hw N                   the high watermark (what acks and the ISR allow)
//	fetch R OFFSET         follower R fetches at OFFSET (observeFetch; says
//	                       whether it asks to join, as UpdateFollower does)
//	check                  the periodic check (shrinkDue) and, if due or a
//	                       join was asked, the decision (decideISR)
//	decide                 the decision alone
//	store isr=R,R          the coordinator now holds this ISR (a written change)
//	followers              what the leader knows of each follower
func TestISRPolicyGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "isr", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/isr: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runISRScript(t, file)
		})
	}
}

// isrModel is the part of a Partition the ISR rules read.
type isrModel struct {
	start, now          time.Time
	self                int32
	replicas, isr       []int32
	leo, hw, epochStart int64
	lagMax              time.Duration
	followers           map[int32]*replicaState
	joinAsked           bool
}

func (m *isrModel) input() isrInput {
	return isrInput{self: m.self, replicas: m.replicas, isr: m.isr, hw: m.hw, epochStart: m.epochStart,
		followers: m.followers, now: m.now, lagMax: m.lagMax}
}

func (m *isrModel) since(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(m.start).String()
}

func (m *isrModel) run(cmd string) ([]string, error) {
	f := strings.Fields(cmd)
	kv := map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		}
	}
	switch f[0] {
	case "leader":
		m.start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		m.now = m.start
		self, err := strconv.Atoi(kv["self"])
		if err != nil {
			return nil, fmt.Errorf("self: %v", err)
		}
		m.self = int32(self)
		if m.replicas, err = ids(kv["replicas"]); err != nil {
			return nil, err
		}
		if m.isr, err = ids(kv["isr"]); err != nil {
			return nil, err
		}
		m.leo, _ = strconv.ParseInt(kv["leo"], 10, 64)
		m.hw, m.epochStart = m.leo, m.leo
		if v, ok := kv["hw"]; ok {
			m.hw, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := kv["epochstart"]; ok {
			m.epochStart, _ = strconv.ParseInt(v, 10, 64)
		}
		if m.lagMax, err = time.ParseDuration(kv["lagmax"]); err != nil {
			return nil, fmt.Errorf("lagmax: %v", err)
		}
		m.followers = map[int32]*replicaState{}
		for _, r := range m.replicas {
			if r != m.self {
				m.followers[r] = newFollower(m.now)
			}
		}
		return []string{"ok"}, nil
	case "at":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return nil, err
		}
		if m.start.Add(d).Before(m.now) {
			return nil, fmt.Errorf("time goes forward only")
		}
		m.now = m.start.Add(d)
		return []string{"ok"}, nil
	case "append":
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, err
		}
		m.leo += n
		return []string{fmt.Sprintf("leo %d", m.leo)}, nil
	case "hw":
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, err
		}
		m.hw = n
		return []string{"ok"}, nil
	case "fetch":
		r, err1 := strconv.Atoi(f[1])
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("fetch R OFFSET")
		}
		fs, ok := m.followers[int32(r)]
		if !ok {
			return []string{fmt.Sprintf("refused: %d is not a follower", r)}, nil
		}
		*fs = observeFetch(*fs, off, m.leo, m.now)
		out := fmt.Sprintf("follower %d: leo %d, caught up at %s", r, fs.leo, m.since(fs.lastCaughtUp))
		if !slices.Contains(m.isr, int32(r)) && canJoin(off, m.hw, m.epochStart) {
			m.joinAsked = true
			out += ", asks to join"
		}
		return []string{out}, nil
	case "check", "decide":
		var out []string
		if f[0] == "check" {
			due := shrinkDue(m.isr, m.followers, m.now, m.lagMax)
			out = append(out, fmt.Sprintf("shrink due: %v, join asked: %v", due, m.joinAsked))
			if !due && !m.joinAsked {
				return out, nil
			}
		}
		m.joinAsked = false
		isr, change := decideISR(m.input())
		if !change {
			return append(out, fmt.Sprintf("keep isr %v", m.isr)), nil
		}
		return append(out, fmt.Sprintf("want isr %v (was %v)", isr, m.isr)), nil
	case "store":
		isr, err := ids(kv["isr"])
		if err != nil {
			return nil, err
		}
		m.isr = isr
		return []string{"ok"}, nil
	case "followers":
		var out []string
		for _, r := range m.replicas {
			if fs, ok := m.followers[r]; ok {
				out = append(out, fmt.Sprintf("%d: leo %d, last fetch %s, caught up at %s", r, fs.leo, m.since(fs.lastFetch), m.since(fs.lastCaughtUp)))
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown command %q", f[0])
}

func ids(s string) ([]int32, error) {
	var out []int32
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("broker id %q: %v", p, err)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func runISRScript(t *testing.T, file string) {
	var m isrModel
	testutil.RunScript(t, file, *rewriteISR, func(c *testutil.ScriptCase) []string {
		out, err := m.run(c.Cmd)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", file, c.Line, c.Cmd, err)
		}
		return out
	})
}

// TestISRIntervals: the check runs several times per lag period within
// bounds, and a failed write is retried with a doubling wait up to 5 s.
func TestISRIntervals(t *testing.T) {
	for lag, want := range map[time.Duration]time.Duration{
		30 * time.Second: 5 * time.Second, 10 * time.Second: 2500 * time.Millisecond, 100 * time.Millisecond: 50 * time.Millisecond,
	} {
		if got := isrCheckInterval(lag); got != want {
			t.Errorf("isrCheckInterval(%v) = %v, want %v", lag, got, want)
		}
	}
	var waits []time.Duration
	for d := time.Duration(0); len(waits) < 7; {
		d = isrRetryBackoff(d)
		waits = append(waits, d)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(waits, want) {
		t.Errorf("retry waits %v, want %v", waits, want)
	}
}
