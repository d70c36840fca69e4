package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// etlWorkerEnv makes the test binary a consume-transform-produce worker
// (TestTxnETLWorker) instead of running tests: its value is the brokers
// (host:port[,host:port...]).
const etlWorkerEnv = "SLUICE_TXN_ETL_WORKER"

// TestTxnETLWorker is the worker process of TestTxnETLWithCrashes: a franz-go
// GroupTransactSession reading etl-in and writing each record to the same
// partition of etl-out, transactions of at most 50 records, until killed.
func TestTxnETLWorker(t *testing.T) {
	addr := os.Getenv(etlWorkerEnv)
	if addr == "" {
		t.Skip("the worker process of TestTxnETLWithCrashes")
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(addr, ",")...),
		kgo.TransactionalID("etl-worker"),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup("etl"),
		kgo.ConsumeTopics("etl-in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for {
		fs := sess.PollRecords(ctx, 50)
		if fs.IsClientClosed() {
			return
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: "etl-out", Partition: r.Partition, Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Fprintln(os.Stderr, "produce:", err)
				}
			})
		})
		if _, err := sess.End(ctx, kgo.TryCommit); err != nil {
			fmt.Fprintln(os.Stderr, "end:", err)
		}
	}
}

// A consume-transform-produce service (franz-go GroupTransactSession in its
// own process) is killed with SIGKILL several times mid-stream and
// restarted: a read_committed consumer sees every output exactly once, in
// input order per partition, and the group's committed offsets are the
// input's end offsets.
func TestTxnETLWithCrashes(t *testing.T) {
	testutil.Heavy(t, "worker processes killed and restarted, session timeouts")
	n := startNode(t, txnSettings...)
	testETLWithCrashes(t, n.Addr(), 1, n.Client, nil)
}

// The same on three brokers on ZooKeeper (every topic replicated on all
// three), where the broker coordinating the worker's transactional id is
// stopped while the second worker runs and started again while the third
// does.
func TestTxnETLWithCrashesZooKeeper(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper, three brokers, worker processes killed and restarted")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()),
		testcluster.Settings(append([]string{
			"transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
			"offsets.topic.replication.factor=3", "min.insync.replicas=2",
		}, txnSettings...)...))
	var stopped *testcluster.Node
	var stoppedID int32
	testETLWithCrashes(t, strings.Join(c.Addrs(), ","), 3, c.Client, func(ctx context.Context, kill int) {
		switch kill {
		case 1:
			fc := kadm.NewClient(c.Client()).FindTxnCoordinators(ctx, "etl-worker")
			co, ok := fc["etl-worker"]
			if !ok || co.Err != nil {
				t.Fatalf("the worker's coordinator: %+v", fc)
			}
			for _, n := range c.Nodes() {
				if n.ID() == co.NodeID {
					stopped = n
				}
			}
			if stopped == nil {
				t.Fatalf("coordinator %d is not a broker of the cluster", co.NodeID)
			}
			t.Logf("stopping the worker's transaction coordinator, broker %d", co.NodeID)
			stoppedID = co.NodeID
			stopped.Stop()
		case 2:
			t.Logf("starting broker %d again", stoppedID)
			stopped.Start()
		}
	})
}

// testETLWithCrashes runs the consume-transform-produce worker against the
// brokers at addrs (topics with replication factor rf), kills it three
// times mid-stream and lets a fourth finish, then checks the output.
// midRun, when set, runs while the worker of each kill (0, 1, 2) is
// producing, before it is killed.
func testETLWithCrashes(t *testing.T, addrs string, rf int16, newClient func(...kgo.Opt) *kgo.Client, midRun func(ctx context.Context, kill int)) {
	ctx := ctxFor(t, 4*time.Minute)
	adm := kadm.NewClient(newClient())
	if _, err := adm.CreateTopic(ctx, 3, rf, nil, "etl-in"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, rf, nil, "etl-out"); err != nil {
		t.Fatal(err)
	}
	const total = 3000
	in := newClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	var rs []*kgo.Record
	for i := range total {
		rs = append(rs, &kgo.Record{Topic: "etl-in", Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))})
	}
	if err := in.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTxnETLWorker$", "-test.v")
		cmd.Env = append(os.Environ(), etlWorkerEnv+"="+addrs)
		out := &testutil.LockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		return cmd
	}
	committedOut := func() int64 {
		lso, err := adm.ListCommittedOffsets(ctx, "etl-out")
		if err != nil {
			return -1
		}
		var sum int64
		for _, o := range lso["etl-out"] {
			sum += o.Offset
		}
		return sum
	}
	// inputDone: the group has committed the whole input (a fast worker
	// may get there while a broker restarts mid-run).
	inputDone := func() bool {
		offs, err := adm.FetchOffsets(ctx, "etl")
		if err != nil {
			return false
		}
		for p := range int32(3) {
			if o, ok := offs.Lookup("etl-in", p); !ok || o.At != total/3 {
				return false
			}
		}
		return true
	}
	// Three crashes, each once the output has grown past the previous one.
	last := int64(0)
	for kill := range 3 {
		w := start()
		testutil.CheckFor(t, 90*time.Second, 5*time.Millisecond, func() error {
			if c := committedOut(); c <= last+200 && !inputDone() {
				return fmt.Errorf("kill %d: output at %d (markers included), waiting past %d", kill, c, last+200)
			}
			return nil
		})
		if midRun != nil {
			midRun(ctx, kill)
			adm = kadm.NewClient(newClient())
			// The worker goes on past what it had written, or has
			// finished the input meanwhile.
			grown := committedOut()
			testutil.CheckFor(t, 90*time.Second, 5*time.Millisecond, func() error {
				if c := committedOut(); c <= grown+100 && !inputDone() {
					return fmt.Errorf("kill %d: output at %d (markers included), waiting past %d", kill, c, grown+100)
				}
				return nil
			})
		}
		if err := w.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		w.Wait()
		last = committedOut()
		t.Logf("killed worker %d with the output at %d offsets", kill, last)
	}
	// The last worker finishes the input.
	w := start()
	testutil.CheckFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
		offs, err := adm.FetchOffsets(ctx, "etl")
		if err != nil {
			return err
		}
		for p := range int32(3) {
			if o, ok := offs.Lookup("etl-in", p); !ok || o.At != total/3 {
				return fmt.Errorf("partition %d committed at %v", p, o.At)
			}
		}
		return nil
	})
	w.Process.Signal(syscall.SIGKILL)
	w.Wait()

	// Nothing is left open: the LSO is the end of every partition.
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		lso, _ := adm.ListCommittedOffsets(ctx, "etl-out")
		end, _ := adm.ListEndOffsets(ctx, "etl-out")
		for p, o := range end["etl-out"] {
			if lso["etl-out"][p].Offset != o.Offset {
				return fmt.Errorf("partition %d: LSO %d, end %d", p, lso["etl-out"][p].Offset, o.Offset)
			}
		}
		return nil
	})
	got := readAllRecordsWith(t, ctx, newClient, "etl-out")
	seen := map[string]bool{}
	next := map[int32]int{0: 0, 1: 1, 2: 2}
	for _, r := range got {
		v := string(r.Value)
		if seen[v] {
			t.Fatalf("output %s seen twice", v)
		}
		seen[v] = true
		i, _ := strconv.Atoi(v)
		if i != next[r.Partition] {
			t.Fatalf("partition %d: output %d where %d was due (input order)", r.Partition, i, next[r.Partition])
		}
		next[r.Partition] += 3
	}
	if len(seen) != total {
		t.Fatalf("read_committed saw %d distinct outputs, want %d", len(seen), total)
	}
}

// readAllRecords is readAll (read_committed) returning the records.
func readAllRecords(t *testing.T, ctx context.Context, n *node, topic string) []*kgo.Record {
	t.Helper()
	return readAllRecordsWith(t, ctx, n.Client, topic)
}

// readAllRecordsWith is readAllRecords with the clients newClient makes.
func readAllRecordsWith(t *testing.T, ctx context.Context, newClient func(...kgo.Opt) *kgo.Client, topic string) []*kgo.Record {
	t.Helper()
	ends, err := kadm.NewClient(newClient()).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	pos := map[int32]int64{}
	var out []*kgo.Record
	for {
		done := true
		for _, o := range ends[topic] {
			if pos[o.Partition] < o.Offset {
				done = false
			}
		}
		if done {
			return out
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s: %d records, positions %v", topic, len(out), pos)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = max(pos[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
}

// The broker restarts while a transaction is open: the transaction is
// still open afterwards (producer state and __transaction_state reloaded),
// its records stay invisible to read_committed, and the same producer
// commits it.
func TestTxnBrokerRestartMidTransaction(t *testing.T) {
	testutil.Heavy(t, "broker restart")
	n := startNode(t, txnSettings...)
	ctx := ctxFor(t, 90*time.Second)
	adm := n.Admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "rs"); err != nil {
		t.Fatal(err)
	}
	p := txnProducer(t, n, "restart")
	produceTxn(t, ctx, p, "rs", "first", 2, 1, kgo.TryCommit)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "rs", Value: fmt.Appendf(nil, "open-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	n.Restart()
	adm = n.Admin()
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		lso, err := adm.ListCommittedOffsets(ctx, "rs")
		if err != nil || lso.Error() != nil {
			return fmt.Errorf("%v %v", err, lso.Error())
		}
		if o := lso["rs"][0].Offset; o != 3 { // 2 records and the commit marker
			return fmt.Errorf("LSO after restart %d, want 3 (the open transaction's start)", o)
		}
		return nil
	})
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		dt, err := adm.DescribeTransactions(ctx, "restart")
		if err != nil {
			return err
		}
		if s := dt["restart"].State; s != "Ongoing" {
			return fmt.Errorf("state after restart %q", s)
		}
		return nil
	})
	if got := readAllRecords(t, ctx, n, "rs"); len(got) != 2 {
		t.Fatalf("read_committed saw %d records before the commit", len(got))
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the restart: %v", err)
	}
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if got := readAllRecords(t, ctx, n, "rs"); len(got) != 5 {
			return fmt.Errorf("read_committed saw %d records after the commit", len(got))
		}
		return nil
	})
}

const pythonTxnClient = `
import sys, json, time
from confluent_kafka import Producer, Consumer, TopicPartition, OFFSET_BEGINNING
bootstrap, topic = sys.argv[1], sys.argv[2]
errs = []
p = Producer({'bootstrap.servers': bootstrap, 'transactional.id': 'py-txn', 'transaction.timeout.ms': 20000})
p.init_transactions(30)
src = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'py-eos', 'enable.auto.commit': False,
                'isolation.level': 'read_committed'})
src.assign([TopicPartition(topic, 0, 0)])
p.begin_transaction()
for i in range(9):
    p.produce(topic, value=b'commit-%d' % i, partition=i % 3)
p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], src.consumer_group_metadata(), 30)
p.commit_transaction(30)
p.begin_transaction()
for i in range(6):
    p.produce(topic, value=b'abort-%d' % i, partition=i % 3)
p.flush(30)
p.abort_transaction(30)
src.close()

def read(iso):
    c = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'py-read-' + iso, 'isolation.level': iso,
                  'enable.auto.commit': False, 'auto.offset.reset': 'earliest', 'enable.partition.eof': True})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    got, eof = [], set()
    deadline = time.time() + 30
    while len(eof) < 3 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
            else:
                errs.append(str(m.error()))
            continue
        got.append(m.value().decode())
    c.close()
    return sorted(got)

committed = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'py-eos'}).committed([TopicPartition(topic, 0)], 30)
print(json.dumps({"errors": errs, "committed": read('read_committed'), "uncommitted": read('read_uncommitted'),
                  "offset": committed[0].offset}))
`

// confluent-kafka-python (librdkafka) as a transactional producer:
// init_transactions, a committed transaction over 3 partitions with
// send_offsets_to_transaction, an aborted one; read_committed consumers
// (librdkafka and kcat) see only the committed records, read_uncommitted
// ones see the aborted ones too.
func TestTxnConfluentKafkaPython(t *testing.T) {
	testutil.Heavy(t, "confluent-kafka-python")
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Skipf("confluent_kafka not importable from %s: %s", py, out)
	}
	n := startNode(t, txnSettings...)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := n.Admin().CreateTopic(ctx, 3, 1, nil, "pytx"); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "txn.py")
	os.WriteFile(script, []byte(pythonTxnClient), 0o644)
	out := runTool(t, 100*time.Second, nil, py, script, n.Addr(), "pytx")
	var res struct {
		Errors      []string `json:"errors"`
		Committed   []string `json:"committed"`
		Uncommitted []string `json:"uncommitted"`
		Offset      int64    `json:"offset"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("client errors: %v", res.Errors)
	}
	if len(res.Committed) != 9 || count(res.Committed, "abort") != 0 {
		t.Fatalf("read_committed saw %q", res.Committed)
	}
	if len(res.Uncommitted) != 15 || count(res.Uncommitted, "abort") != 6 {
		t.Fatalf("read_uncommitted saw %q", res.Uncommitted)
	}
	if res.Offset != 5 {
		t.Fatalf("offset committed in the transaction: %d, want 5", res.Offset)
	}
	if _, err := exec.LookPath("kcat"); err == nil {
		kc := runTool(t, 60*time.Second, nil, "kcat", "-b", n.Addr(), "-C", "-t", "pytx", "-e", "-q", "-f", "%s\n",
			"-X", "isolation.level=read_committed")
		if got := string(kc); count(splitLines(got), "abort") != 0 || len(splitLines(got)) != 9 {
			t.Fatalf("kcat read_committed saw %q", got)
		}
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
