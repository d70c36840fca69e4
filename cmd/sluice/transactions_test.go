package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/record"
)

// produceHanging writes, as an idempotent producer that no transaction
// coordinator knows, one transactional batch of n records to
// topic-partition, timestamped age ago: an open transaction nobody will
// end, as a producer that skipped AddPartitionsToTxn or a lost
// __transaction_state leaves behind. It returns the producer id.
func produceHanging(t *testing.T, cl *kgo.Client, topic string, partition int32, n int, age time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ipr, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || ipr.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(ipr.ErrorCode))
	}
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: []byte("hanging")}
	}
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: ipr.ProducerID, ProducerEpoch: ipr.ProducerEpoch,
		BaseSequence: 0, Transactional: true, BaseTimestamp: time.Now().Add(-age).UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	id := "hanging"
	req.TransactionID = &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce the hanging batch: %v", kerr.ErrorForCode(code))
	}
	return ipr.ProducerID
}

// TestTransactionsCLI: sluice transactions against a broker with a
// transactional franz-go producer and a hanging transaction: list and
// describe show the producer's transaction as its coordinator holds it,
// describe-producers the partition's open transactions, find-hanging
// reports the hanging one and not the producer's, abort ends it (the
// partition's last stable offset passes it and read_committed consumers
// never see its records), and bad command lines are usage errors.
func TestTransactionsCLI(t *testing.T) {
	c := testcluster.New(t, testcluster.LogLevel(slog.LevelWarn), testcluster.Settings(
		"broker.id=1", "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=3",
		"transaction.state.log.num.partitions=3"))
	waitForBroker(t, c.Addr())
	c.CreateTopic("orders", 2, 1, nil)
	run := func(wantCode int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, c.Addr(), "", args...)
		if code != wantCode {
			t.Fatalf("sluice %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, out, errOut)
		}
		return out + errOut
	}
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := run(0, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	p := c.Client(kgo.TransactionalID("orders-writer"), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var listed []txnListJSON
	jsonOf(&listed, "transactions", "list")
	if len(listed) != 1 || listed[0].TransactionalID != "orders-writer" || listed[0].State != "Ongoing" || listed[0].Coordinator != 1 {
		t.Fatalf("list: %+v", listed)
	}
	writerPID := listed[0].ProducerID
	if out := run(0, "transactions", "list"); !strings.Contains(out, "TRANSACTIONAL-ID") || !strings.Contains(out, "orders-writer") {
		t.Fatalf("list table:\n%s", out)
	}
	jsonOf(&listed, "transactions", "list", "--state", "CompleteCommit")
	if len(listed) != 0 {
		t.Fatalf("list --state CompleteCommit: %+v", listed)
	}
	jsonOf(&listed, "transactions", "list", "--producer-id", "999999")
	if len(listed) != 0 {
		t.Fatalf("list --producer-id 999999: %+v", listed)
	}

	var described []txnJSON
	jsonOf(&described, "transactions", "describe", "--transactional-id", "orders-writer")
	if len(described) != 1 {
		t.Fatalf("describe: %+v", described)
	}
	d := described[0]
	if d.State != "Ongoing" || d.ProducerID != writerPID || d.TimeoutMs != 60000 || d.StartTimeMs <= 0 || d.DurationMs < 0 ||
		len(d.Partitions) != 1 || d.Partitions[0].Topic != "orders" || len(d.Partitions[0].Partitions) != 1 || d.Partitions[0].Partitions[0] != 0 {
		t.Fatalf("describe: %+v", d)
	}
	if out := run(0, "transactions", "describe", "--transactional-id", "orders-writer"); !strings.Contains(out, "orders:0") {
		t.Fatalf("describe table:\n%s", out)
	}
	if out := run(1, "transactions", "describe", "--transactional-id", "nobody"); !strings.Contains(out, `"nobody" does not exist`) {
		t.Fatalf("describe of an unknown id:\n%s", out)
	}

	// A hanging transaction on partition 1, after one plain record.
	if err := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	hangPID := produceHanging(t, c.Client(), "orders", 1, 4, time.Hour)

	var producers []producerJSON
	jsonOf(&producers, "transactions", "describe-producers", "--topic", "orders", "--partition", "1")
	open := 0
	for _, pr := range producers {
		if pr.ProducerID == hangPID {
			open++
			if pr.CurrentTxnStartOffset != 1 || pr.LastSequence != 3 || pr.Leader != 1 {
				t.Fatalf("the hanging producer: %+v", pr)
			}
		}
	}
	if open != 1 {
		t.Fatalf("describe-producers orders-1: %+v", producers)
	}

	var hanging []hangingJSON
	jsonOf(&hanging, "transactions", "find-hanging", "--topic", "orders")
	if len(hanging) != 1 || hanging[0].ProducerID != hangPID || hanging[0].Partition != 1 || hanging[0].CurrentTxnStartOffset != 1 ||
		hanging[0].TransactionalID != "" || hanging[0].DurationMs < time.Hour.Milliseconds() {
		t.Fatalf("find-hanging --topic orders: %+v", hanging)
	}
	jsonOf(&hanging, "transactions", "find-hanging", "--broker-id", "1")
	if len(hanging) != 1 || hanging[0].ProducerID != hangPID {
		t.Fatalf("find-hanging --broker-id 1: %+v", hanging)
	}
	// The producer's own open transaction is not hanging, however short
	// the timeout: its coordinator knows it.
	jsonOf(&hanging, "transactions", "find-hanging", "--topic", "orders", "--partition", "0", "--max-transaction-timeout", "1ms")
	if len(hanging) != 0 {
		t.Fatalf("find-hanging on the producer's partition: %+v", hanging)
	}

	lso := func(partition int32) int64 {
		t.Helper()
		offs, err := c.Admin().ListCommittedOffsets(ctx, "orders")
		if err != nil || offs.Error() != nil {
			t.Fatalf("list offsets: %v %v", err, offs.Error())
		}
		o, _ := offs.Lookup("orders", partition)
		return o.Offset
	}
	if got := lso(1); got != 1 {
		t.Fatalf("LSO of orders-1 before the abort: %d, want 1", got)
	}
	out := run(2, "transactions", "abort", "--topic", "orders", "--partition", "1")
	if !strings.Contains(out, "--start-offset or --producer-id") {
		t.Fatalf("abort without a transaction:\n%s", out)
	}
	if out := run(1, "transactions", "abort", "--topic", "orders", "--partition", "1", "--start-offset", "3"); !strings.Contains(out, "the open ones start at 1") {
		t.Fatalf("abort at the wrong offset:\n%s", out)
	}
	out = run(0, "transactions", "abort", "--topic", "orders", "--partition", "1", "--start-offset", "1")
	if !strings.Contains(out, "Aborted the transaction of producer") {
		t.Fatalf("abort:\n%s", out)
	}
	if got := lso(1); got != 6 { // 1 plain record, 4 aborted, the marker
		t.Fatalf("LSO of orders-1 after the abort: %d, want 6", got)
	}
	jsonOf(&hanging, "transactions", "find-hanging", "--topic", "orders")
	if len(hanging) != 0 {
		t.Fatalf("find-hanging after the abort: %+v", hanging)
	}
	// Another one, aborted by producer id, epoch and coordinator epoch
	// (kafka-transactions.sh abort's other form), as find-hanging gives them.
	hang2 := produceHanging(t, c.Client(), "orders", 1, 2, time.Hour) // offsets 6, 7
	jsonOf(&hanging, "transactions", "find-hanging", "--topic", "orders", "--partition", "1")
	if len(hanging) != 1 || hanging[0].ProducerID != hang2 || hanging[0].CurrentTxnStartOffset != 6 {
		t.Fatalf("find-hanging, the second: %+v", hanging)
	}
	var aborted abortJSON
	jsonOf(&aborted, "transactions", "abort", "--topic", "orders", "--partition", "1", "--producer-id", fmt.Sprint(hang2),
		"--producer-epoch", fmt.Sprint(hanging[0].ProducerEpoch), "--coordinator-epoch", fmt.Sprint(hanging[0].CoordinatorEpoch))
	if aborted.ProducerID != hang2 || aborted.Leader != 1 {
		t.Fatalf("abort --producer-id: %+v", aborted)
	}
	if got := lso(1); got != 9 {
		t.Fatalf("LSO of orders-1 after the second abort: %d, want 9", got)
	}
	rc := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {1: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	var seen []string
	for pos := int64(0); pos < 9; {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read orders-1 to %d: %v", pos, seen)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos = r.Offset + 1
			if !r.Attrs.IsControl() {
				seen = append(seen, string(r.Value))
			}
		})
	}
	if len(seen) != 1 || seen[0] != "plain" {
		t.Fatalf("read_committed saw %q after the abort", seen)
	}

	// The producer's transaction is untouched and commits.
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		jsonOf(&listed, "transactions", "list", "--state", "CompleteCommit")
		if len(listed) != 1 || listed[0].ProducerID != writerPID {
			return &cliMismatch{what: "list --state CompleteCommit", got: listed}
		}
		return nil
	})

	for _, bad := range [][]string{
		{"transactions", "describe"},
		{"transactions", "find-hanging"},
		{"transactions", "find-hanging", "--broker-id", "1", "--topic", "orders"},
		{"transactions", "find-hanging", "--partition", "1"},
		{"transactions", "abort", "--topic", "orders", "--partition", "1", "--producer-id", "5"},
		{"transactions", "abort", "--topic", "orders", "--partition", "1", "--start-offset", "1", "--producer-epoch", "0"},
		{"transactions", "list", "--producer-id", "x"},
	} {
		run(2, bad...)
	}
	if out := run(1, "transactions", "find-hanging", "--broker-id", "7"); !strings.Contains(out, "broker 7 is not a broker") {
		t.Fatalf("find-hanging on an unknown broker:\n%s", out)
	}
}

type cliMismatch struct {
	what string
	got  any
}

func (m *cliMismatch) Error() string { return m.what + ": " + strings.TrimSpace(jsonString(m.got)) }

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTransactionsCLIAuthorized: with Kafka's authorizer, sluice
// transactions sees what the principal may see, as kafka-transactions.sh:
// list leaves out the transactional ids it may not Describe, describe of
// one fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, describe-producers
// needs Read on the topic and abort ClusterAction on the cluster.
func TestTransactionsCLIAuthorized(t *testing.T) {
	c := testcluster.New(t, testcluster.LogLevel(slog.LevelWarn), testcluster.Settings(
		"broker.id=1", "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=3",
		"transaction.state.log.num.partitions=3",
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found=true"))
	waitForBroker(t, c.Addr())
	c.CreateTopic("orders", 2, 1, nil)
	run := func(wantCode int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, c.Addr(), "", args...)
		if code != wantCode {
			t.Fatalf("sluice %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, out, errOut)
		}
		return out + errOut
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, id := range []string{"visible", "hidden"} {
		p := c.Client(kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute))
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(id)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Someone else's ACLs take the transactional id "hidden", Read on
	// orders and the cluster away from User:ANONYMOUS (the CLI's
	// principal on a PLAINTEXT listener); it keeps Describe and Write on
	// orders. The cluster's ACL goes last: it also takes away Alter.
	run(0, "acls", "add", "--allow-principal", "User:other", "--operation", "Write", "--transactional-id", "hidden")
	run(0, "acls", "add", "--allow-principal", "User:ANONYMOUS", "--operation", "Describe", "--operation", "Write", "--topic", "orders")
	run(0, "acls", "add", "--allow-principal", "User:other", "--operation", "ClusterAction", "--cluster")

	var listed []txnListJSON
	out := run(0, "transactions", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0].TransactionalID != "visible" {
		t.Fatalf("list: %+v %v\n%s", listed, err, out)
	}
	if out := run(1, "transactions", "describe", "--transactional-id", "hidden"); !strings.Contains(out, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") {
		t.Fatalf("describe hidden:\n%s", out)
	}
	run(0, "transactions", "describe", "--transactional-id", "visible")
	if out := run(1, "transactions", "describe-producers", "--topic", "orders", "--partition", "0"); !strings.Contains(out, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("describe-producers without Read on the topic:\n%s", out)
	}
	out = run(1, "transactions", "abort", "--topic", "orders", "--partition", "0", "--producer-id", "0", "--producer-epoch", "0", "--coordinator-epoch", "0")
	if !strings.Contains(out, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("abort without ClusterAction:\n%s", out)
	}
}
