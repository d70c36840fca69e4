package group_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

const pythonGroupConsumer = `
import sys, signal
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1], sys.argv[2], sys.argv[3]
running = True
def stop(*_):
    global running
    running = False
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
c = Consumer({'bootstrap.servers': bootstrap, 'group.id': group, 'client.id': 'python',
              'auto.offset.reset': 'earliest', 'session.timeout.ms': 6000,
              'heartbeat.interval.ms': 500, 'enable.auto.commit': True,
              'auto.commit.interval.ms': 200})
def on_assign(consumer, partitions):
    print('assigned', ' '.join(str(p.partition) for p in partitions), flush=True)
c.subscribe([topic], on_assign=on_assign)
while running:
    m = c.poll(0.2)
    if m is None:
        continue
    if m.error():
        print('error', m.error(), flush=True)
        continue
    print('record', m.partition(), m.offset(), flush=True)
c.close()
`

// proc is an external consumer whose stdout lines are collected.
type proc struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(args[0], args[1:]...)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testutil.LockedBuffer{}
	p.cmd.Stderr = stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		// SIGTERM: the consumer leaves its group and exits.
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		p.cmd.Wait()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s stdout (%d lines, last ones): %q", name, len(p.lines), tail(p.lines, 20))
			p.mu.Unlock()
			t.Logf("%s stderr: %s", name, stderr.String())
		}
	})
	return p
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// records returns the (partition, offset) pairs the consumer printed.
func (p *proc) records() map[[2]int64]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[[2]int64]bool)
	for _, line := range p.lines {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "record" {
			continue
		}
		part, _ := strconv.ParseInt(f[1], 10, 32)
		off, _ := strconv.ParseInt(f[2], 10, 64)
		out[[2]int64{part, off}] = true
	}
	return out
}

func requirePython(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		testutil.RequireBinary(t, "python3-confluent-kafka-at-/usr/bin/python3")
	}
	if out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skipf("confluent_kafka not importable: %s", out)
		}
		t.Fatalf("confluent_kafka is not installed for %s (run make test-deps): %s", py, out)
	}
	return py
}

// TestLibrdkafkaGroup: kcat -G (librdkafka's balanced consumer) and a
// confluent-kafka-python consumer in one group split a six-partition topic
// between them, and every record is consumed by the member that owns its
// partition.
func TestLibrdkafkaGroup(t *testing.T) {
	testutil.Heavy(t, "kcat and librdkafka")
	kcat := testutil.RequireBinary(t, "kcat")
	py := requirePython(t)
	t.Parallel()
	n := startNode(t)
	const parts = 6
	topic, group := "rdk", "rdk-group"
	n.createTopic(topic, parts)
	prod := &producer{cl: n.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), topic: topic, end: map[int32]int64{}}
	prod.produce(t, parts, 10)

	script := filepath.Join(t.TempDir(), "consumer.py")
	if err := os.WriteFile(script, []byte(pythonGroupConsumer), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := startProc(t, "kcat", kcat, "-b", n.addr, "-G", group, "-u", "-q",
		"-X", "client.id=kcat", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200",
		"-f", "record %p %o\n", topic)
	pc := startProc(t, "python", py, script, n.addr, group, topic)

	owners := waitAssignment(t, n.admin(), group, parts, "kcat", "python")
	t.Logf("assignment: %v", owners)

	// Everything produced before the split is consumed by one or the other.
	all := func() map[[2]int64]bool {
		out := kc.records()
		for k := range pc.records() {
			out[k] = true
		}
		return out
	}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		got := all()
		for p := int32(0); p < parts; p++ {
			for o := int64(0); o < prod.end[p]; o++ {
				if !got[[2]int64{int64(p), o}] {
					return fmt.Errorf("partition %d offset %d not consumed", p, o)
				}
			}
		}
		return nil
	})

	// Records produced now go to each partition's owner only.
	start := map[int32]int64{}
	for p, e := range prod.end {
		start[p] = e
	}
	prod.produce(t, parts, 10)
	byName := map[string]*proc{"kcat": kc, "python": pc}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		for name, ps := range owners {
			got := byName[name].records()
			for _, p := range ps {
				for o := start[p]; o < prod.end[p]; o++ {
					if !got[[2]int64{int64(p), o}] {
						return fmt.Errorf("%s did not consume partition %d offset %d", name, p, o)
					}
				}
			}
		}
		return nil
	})
	for name, ps := range owners {
		for other, pr := range byName {
			if other == name {
				continue
			}
			got := pr.records()
			for _, p := range ps {
				for o := start[p]; o < prod.end[p]; o++ {
					if got[[2]int64{int64(p), o}] {
						t.Errorf("%s consumed partition %d offset %d, owned by %s", other, p, o, name)
					}
				}
			}
		}
	}
}
