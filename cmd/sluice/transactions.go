package main

// sluice transactions: what kafka-transactions.sh gives a Kafka operator
// (KIP-664): list and describe transactional ids, describe the producers
// of a partition, find hanging transactions and abort one.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/kafkaview"
)

func init() {
	registerVerbs("transactions", "list, describe, find hanging and abort transactions", transactionsActions)
}

var transactionsActions = []*cliAction{
	{"list", "", "list transactional ids with their coordinator, producer id and state", txnList},
	{"describe", "--transactional-id ID...", "show a transaction: state, producer, timeout, start and partitions", txnDescribe},
	{"describe-producers", "--topic T --partition P", "show the producers of a partition and their open transactions", txnDescribeProducers},
	{"find-hanging", "--broker-id N | --topic T [--partition P]", "find open transactions no coordinator will finish", txnFindHanging},
	{"abort", "--topic T --partition P --start-offset O | --producer-id ...", "abort a hanging transaction on one partition", txnAbort},
}

// defaultMaxTxnTimeout is kafka-transactions.sh find-hanging's
// --max-transaction-timeout default (the broker's transaction.max.timeout.ms
// default).
const defaultMaxTxnTimeout = 15 * time.Minute

type txnListJSON struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
}

func txnList(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "transactions list [--state S]... [--producer-id N]... [flags]",
		"List the transactional ids every broker coordinates (ListTransactions, asked of\n"+
			"every broker), optionally only those in a state (Empty, Ongoing, PrepareCommit,\n"+
			"PrepareAbort, CompleteCommit, CompleteAbort) or of a producer id.", true)
	var states cliList
	var pids cliInt64List
	fs.Var(&states, "state", "only transactions in this `STATE` (repeatable)")
	fs.Var(&pids, "producer-id", "only transactions of this producer `ID` (repeatable)")
	ctx, adm, _, done, err := cf.parseAndConnect(ctx, fs, args, noArgs)
	if err != nil {
		return err
	}
	defer done()
	listed, err := adm.ListTransactions(ctx, pids, states)
	if err != nil {
		return errKafka("list transactions", err)
	}
	out := make([]txnListJSON, 0, len(listed))
	for _, l := range listed.Sorted() {
		// An old broker may ignore the filters: apply them here too.
		if len(states) > 0 && !slices.Contains(states, l.State) || len(pids) > 0 && !slices.Contains(pids, l.ProducerID) {
			continue
		}
		out = append(out, txnListJSON{TransactionalID: l.TxnID, Coordinator: l.Coordinator, ProducerID: l.ProducerID, State: l.State})
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	tb := newCLITable(env.stdout, "TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")
	for _, l := range out {
		tb.row(l.TransactionalID, l.Coordinator, l.ProducerID, l.State)
	}
	return tb.flush()
}

type txnJSON struct {
	TransactionalID string               `json:"transactional_id"`
	Coordinator     int32                `json:"coordinator"`
	State           string               `json:"state"`
	ProducerID      int64                `json:"producer_id"`
	ProducerEpoch   int16                `json:"producer_epoch"`
	TimeoutMs       int32                `json:"timeout_ms"`
	StartTimeMs     int64                `json:"start_time_ms"` // -1: no transaction
	DurationMs      int64                `json:"duration_ms"`   // -1: no transaction
	Partitions      []topicPartitionJSON `json:"partitions"`
}

func txnDescribe(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "transactions describe --transactional-id ID... [flags]",
		"Show the transaction of each transactional id as its coordinator holds it\n"+
			"(DescribeTransactions): state, producer id and epoch, timeout, when the\n"+
			"current transaction started and the partitions in it.", true)
	var ids cliList
	fs.Var(&ids, "transactional-id", "the transactional `ID` (repeatable)")
	pos, err := cf.parse(fs, args, anyArgs)
	if err != nil {
		return err
	}
	ids = append(ids, pos...)
	if len(ids) == 0 {
		return usagef("name a transaction: --transactional-id ID")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return errKafka("describe transactions", err)
	}
	now := time.Now().UnixMilli()
	var out []txnJSON
	for _, id := range ids {
		d, ok := described[id]
		if !ok {
			return unanswered("transaction "+id, err)
		}
		if d.Err != nil {
			if errors.Is(d.Err, kerr.TransactionalIDNotFound) {
				return fmt.Errorf("transactional id %q does not exist", id)
			}
			return errKafka("transaction "+id, d.Err)
		}
		j := txnJSON{TransactionalID: id, Coordinator: d.Coordinator, State: d.State, ProducerID: d.ProducerID,
			ProducerEpoch: d.ProducerEpoch, TimeoutMs: d.TimeoutMillis, StartTimeMs: d.StartTimestamp, DurationMs: -1,
			Partitions: []topicPartitionJSON{}}
		if d.StartTimestamp >= 0 {
			j.DurationMs = max(0, now-d.StartTimestamp)
		}
		for _, t := range d.Topics.Sorted() {
			j.Partitions = append(j.Partitions, topicPartitionJSON{Topic: t.Topic, Partitions: sortedInt32(t.Partitions)})
		}
		out = append(out, j)
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	tb := newCLITable(env.stdout, "COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
		"TIMEOUT-MS", "START-TIME", "DURATION", "PARTITIONS")
	for _, j := range out {
		start, dur := "", ""
		if j.StartTimeMs >= 0 {
			start = time.UnixMilli(j.StartTimeMs).UTC().Format(time.RFC3339)
			dur = (time.Duration(j.DurationMs) * time.Millisecond).Round(time.Second).String()
		}
		tb.row(j.Coordinator, j.TransactionalID, j.ProducerID, j.ProducerEpoch, j.State, j.TimeoutMs, start, dur,
			formatAssigned(j.Partitions))
	}
	return tb.flush()
}

type producerJSON struct {
	Topic                 string `json:"topic"`
	Partition             int32  `json:"partition"`
	Leader                int32  `json:"leader"`
	ProducerID            int64  `json:"producer_id"`
	ProducerEpoch         int16  `json:"producer_epoch"`
	CoordinatorEpoch      int32  `json:"coordinator_epoch"`
	LastSequence          int32  `json:"last_sequence"`
	LastTimestampMs       int64  `json:"last_timestamp_ms"`
	CurrentTxnStartOffset int64  `json:"current_txn_start_offset"` // -1: no open transaction
}

// describeProducers asks the leaders of the partitions in set for their
// producers (DescribeProducers), sorted by partition and producer id.
func describeProducers(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) ([]producerJSON, error) {
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil && len(described) == 0 {
		return nil, errKafka("describe producers", err)
	}
	var out []producerJSON
	for _, t := range set.Sorted() {
		dt, ok := described[t.Topic]
		for _, p := range sortedInt32(t.Partitions) {
			if !ok {
				return nil, unanswered(fmt.Sprintf("partition %s-%d", t.Topic, p), err)
			}
			dp, ok := dt.Partitions[p]
			if !ok {
				return nil, unanswered(fmt.Sprintf("partition %s-%d", t.Topic, p), err)
			}
			if dp.Err != nil {
				if errors.Is(dp.Err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("partition %s-%d does not exist", t.Topic, p)
				}
				return nil, errKafka(fmt.Sprintf("partition %s-%d", t.Topic, p), dp.Err)
			}
			for _, ap := range dp.ActiveProducers.Sorted() {
				out = append(out, producerJSON{Topic: t.Topic, Partition: p, Leader: dp.Leader, ProducerID: ap.ProducerID,
					ProducerEpoch: ap.ProducerEpoch, CoordinatorEpoch: ap.CoordinatorEpoch, LastSequence: ap.LastSequence,
					LastTimestampMs: ap.LastTimestamp, CurrentTxnStartOffset: ap.CurrentTxnStartOffset})
			}
		}
	}
	return out, nil
}

func txnDescribeProducers(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "transactions describe-producers --topic T --partition P [flags]",
		"Show the producers the leader of a partition keeps state for (DescribeProducers):\n"+
			"epoch, coordinator epoch, last sequence and timestamp, and the first offset of\n"+
			"the transaction each has open there (-1: none).", true)
	topic := fs.String("topic", "", "the `TOPIC`")
	partition := fs.Int("partition", -1, "the `PARTITION`")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	if *topic == "" || *partition < 0 {
		return usagef("name a partition: --topic T --partition P")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	out, err := describeProducers(ctx, adm, kadm.TopicsSet{*topic: {int32(*partition): {}}})
	if err != nil {
		return err
	}
	if out == nil {
		out = []producerJSON{}
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	tb := newCLITable(env.stdout, "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "CURRENT-TXN-START-OFFSET")
	for _, p := range out {
		tb.row(p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, p.LastSequence, formatMs(p.LastTimestampMs), p.CurrentTxnStartOffset)
	}
	return tb.flush()
}

// formatMs formats a Kafka timestamp in milliseconds; -1 (none) is empty.
func formatMs(ms int64) string {
	if ms < 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

type hangingJSON struct {
	producerJSON
	DurationMs      int64  `json:"duration_ms"`      // since the producer last wrote
	TransactionalID string `json:"transactional_id"` // "" when no coordinator knows the producer
	Reason          string `json:"reason"`
}

func txnFindHanging(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "transactions find-hanging --broker-id N | --topic T [--partition P] [flags]",
		"Find hanging transactions, as kafka-transactions.sh find-hanging does: open\n"+
			"transactions (DescribeProducers) whose producer has not written for longer than\n"+
			"--max-transaction-timeout and that no coordinator will finish: no transactional\n"+
			"id has the producer (ListTransactions on every broker), or its coordinator's\n"+
			"transaction (DescribeTransactions) is another producer's, is not open, or does\n"+
			"not include the partition. Abort them with 'sluice transactions abort'.", true)
	brokerID := fs.Int("broker-id", -1, "search the partitions this broker `ID` leads")
	topic := fs.String("topic", "", "search the partitions of this `TOPIC`")
	partition := fs.Int("partition", -1, "with --topic: only this `PARTITION`")
	maxTimeout := fs.Duration("max-transaction-timeout", defaultMaxTxnTimeout,
		"the brokers' transaction.max.timeout.ms: a transaction whose producer wrote more recently is not hanging")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	switch {
	case (*brokerID >= 0) == (*topic != ""):
		return usagef("name either --broker-id or --topic")
	case *partition >= 0 && *topic == "":
		return usagef("--partition needs --topic")
	case *maxTimeout <= 0:
		return usagef("--max-transaction-timeout must be positive")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	set, err := partitionsToSearch(ctx, adm, int32(*brokerID), *topic, int32(*partition))
	if err != nil {
		return err
	}
	out := []hangingJSON{}
	if len(set) > 0 {
		producers, err := describeProducers(ctx, adm, set)
		if err != nil {
			return err
		}
		if out, err = findHanging(ctx, adm, producers, time.Now(), *maxTimeout); err != nil {
			return err
		}
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	tb := newCLITable(env.stdout, "TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH",
		"START-OFFSET", "LAST-TIMESTAMP", "DURATION", "TRANSACTIONAL-ID", "REASON")
	for _, h := range out {
		tb.row(h.Topic, h.Partition, h.ProducerID, h.ProducerEpoch, h.CoordinatorEpoch, h.CurrentTxnStartOffset,
			formatMs(h.LastTimestampMs), (time.Duration(h.DurationMs) * time.Millisecond).Round(time.Second).String(),
			h.TransactionalID, h.Reason)
	}
	return tb.flush()
}

// partitionsToSearch is find-hanging's set of partitions: those broker
// leads, or those of topic (only partition when >= 0).
func partitionsToSearch(ctx context.Context, adm *kadm.Client, broker int32, topic string, partition int32) (kadm.TopicsSet, error) {
	var topics []string
	if topic != "" {
		topics = []string{topic}
	}
	meta, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, errKafka("metadata", err)
	}
	if broker >= 0 && !slices.Contains(meta.Brokers.NodeIDs(), broker) {
		return nil, fmt.Errorf("broker %d is not a broker of this cluster (its brokers: %s)", broker, int32List(sortedInt32(meta.Brokers.NodeIDs())))
	}
	set := kadm.TopicsSet{}
	for _, t := range meta.Topics {
		if t.Err != nil {
			if errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("topic %q does not exist", t.Topic)
			}
			return nil, errKafka("topic "+t.Topic, t.Err)
		}
		for _, p := range t.Partitions {
			switch {
			case topic != "" && (partition < 0 || p.Partition == partition),
				topic == "" && p.Leader == broker:
				set.Add(t.Topic, p.Partition)
			}
		}
	}
	if topic != "" && partition >= 0 && len(set) == 0 {
		return nil, fmt.Errorf("partition %s-%d does not exist", topic, partition)
	}
	return set, nil
}

// findHanging keeps, of the producers with an open transaction that last
// wrote more than maxTimeout before now, those no coordinator will finish
// (kafka-transactions.sh's TransactionsCommand.FindHangingTransactionsCommand).
func findHanging(ctx context.Context, adm *kadm.Client, producers []producerJSON, now time.Time, maxTimeout time.Duration) ([]hangingJSON, error) {
	var candidates []hangingJSON
	var pids []int64
	for _, p := range producers {
		d := now.UnixMilli() - p.LastTimestampMs
		if p.CurrentTxnStartOffset < 0 || d <= maxTimeout.Milliseconds() {
			continue
		}
		candidates = append(candidates, hangingJSON{producerJSON: p, DurationMs: d})
		if !slices.Contains(pids, p.ProducerID) {
			pids = append(pids, p.ProducerID)
		}
	}
	out := []hangingJSON{}
	if len(candidates) == 0 {
		return out, nil
	}
	listed, err := adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		return nil, errKafka("list transactions", err)
	}
	idOf := map[int64]string{}
	var ids []string
	for _, l := range listed.Sorted() {
		if slices.Contains(pids, l.ProducerID) {
			idOf[l.ProducerID] = l.TxnID
			ids = append(ids, l.TxnID)
		}
	}
	described := kadm.DescribedTransactions{}
	if len(ids) > 0 {
		if described, err = adm.DescribeTransactions(ctx, ids...); err != nil && len(described) == 0 {
			return nil, errKafka("describe transactions", err)
		}
	}
	for _, c := range candidates {
		id, ok := idOf[c.ProducerID]
		if !ok {
			c.Reason = "no transactional id has this producer"
			out = append(out, c)
			continue
		}
		c.TransactionalID = id
		d, ok := described[id]
		switch {
		case !ok || d.Err != nil && !errors.Is(d.Err, kerr.TransactionalIDNotFound):
			// Not known either way: do not call it hanging.
			continue
		case d.Err != nil:
			c.Reason = "the transactional id is gone"
		case d.ProducerID != c.ProducerID:
			c.Reason = fmt.Sprintf("the transactional id now has producer %d", d.ProducerID)
		case d.State != "Ongoing" && d.State != "PrepareCommit" && d.State != "PrepareAbort":
			c.Reason = "the coordinator's transaction is " + d.State
		case !d.Topics.Lookup(c.Topic, c.Partition):
			c.Reason = "the coordinator's transaction does not include the partition"
		default:
			continue // open and known: its coordinator will end it
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

type abortJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	Leader           int32  `json:"leader"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	StartOffset      int64  `json:"start_offset"` // -1: not looked up (--producer-id)
}

func txnAbort(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "transactions abort --topic T --partition P (--start-offset O | --producer-id N --producer-epoch E --coordinator-epoch C) [flags]",
		"Abort a hanging transaction on one partition, as kafka-transactions.sh abort\n"+
			"does: write an ABORT marker (WriteTxnMarkers) for its producer to the\n"+
			"partition's leader. With --start-offset the producer, its epoch and coordinator\n"+
			"epoch are those of the transaction open there from that offset\n"+
			"(DescribeProducers). The principal needs ClusterAction on the cluster.\n"+
			"Abort only what find-hanging reports: a transaction its coordinator still\n"+
			"knows would be torn (aborted here, maybe committed elsewhere).", true)
	topic := fs.String("topic", "", "the `TOPIC` of the transaction's partition")
	partition := fs.Int("partition", -1, "the `PARTITION`")
	startOffset := fs.Int64("start-offset", -1, "the first `OFFSET` of the open transaction (find-hanging's START-OFFSET)")
	pid := fs.Int64("producer-id", -1, "the producer `ID` (instead of --start-offset)")
	epoch := fs.Int("producer-epoch", -1, "with --producer-id: the producer's `EPOCH`")
	coordEpoch := fs.Int("coordinator-epoch", -1, "with --producer-id: the coordinator `EPOCH` of the marker (-1: the producer never had one)")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *topic == "" || *partition < 0:
		return usagef("name the partition: --topic T --partition P")
	case (*startOffset >= 0) == (*pid >= 0):
		return usagef("give either --start-offset or --producer-id")
	case *pid >= 0 && (*epoch < 0 || *epoch > 32767 || !set["coordinator-epoch"] || *coordEpoch < -1):
		return usagef("--producer-id needs --producer-epoch (0-32767) and --coordinator-epoch (-1 or more, describe-producers' COORDINATOR-EPOCH)")
	case *startOffset >= 0 && (set["producer-epoch"] || set["coordinator-epoch"]):
		return usagef("--producer-epoch and --coordinator-epoch go with --producer-id, not --start-offset")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	a := abortJSON{Topic: *topic, Partition: int32(*partition), Leader: -1, ProducerID: *pid,
		ProducerEpoch: int16(*epoch), CoordinatorEpoch: int32(*coordEpoch), StartOffset: -1}
	if *startOffset >= 0 {
		producers, err := describeProducers(ctx, adm, kadm.TopicsSet{*topic: {int32(*partition): {}}})
		if err != nil {
			return err
		}
		var open []string
		found := false
		for _, p := range producers {
			if p.CurrentTxnStartOffset == *startOffset {
				a.ProducerID, a.ProducerEpoch, a.CoordinatorEpoch, a.StartOffset, a.Leader = p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, p.CurrentTxnStartOffset, p.Leader
				found = true
			} else if p.CurrentTxnStartOffset >= 0 {
				open = append(open, fmt.Sprint(p.CurrentTxnStartOffset))
			}
		}
		if !found {
			msg := "none is open"
			if len(open) > 0 {
				msg = "the open ones start at " + strings.Join(open, ", ")
			}
			return fmt.Errorf("no transaction of %s-%d starts at offset %d (%s)", *topic, *partition, *startOffset, msg)
		}
	}
	leader, err := kafkaview.WriteAbortMarker(ctx, adm, kafkaview.AbortMarker{Topic: *topic, Partition: a.Partition,
		ProducerID: a.ProducerID, ProducerEpoch: a.ProducerEpoch, CoordinatorEpoch: a.CoordinatorEpoch})
	switch {
	case errors.Is(err, kafkaview.ErrMarkerUnanswered):
		return fmt.Errorf("write the abort marker: the leader of %s-%d did not answer for it", *topic, a.Partition)
	case err != nil && leader < 0:
		return errKafka("write the abort marker", err)
	case err != nil:
		return errKafka(fmt.Sprintf("write the abort marker to %s-%d", *topic, a.Partition), err)
	}
	a.Leader = leader
	if cf.json() {
		return writeJSON(env.stdout, a)
	}
	fmt.Fprintf(env.stdout, "Aborted the transaction of producer %d (epoch %d) on %s-%d: ABORT marker written by broker %d.\n",
		a.ProducerID, a.ProducerEpoch, a.Topic, a.Partition, a.Leader)
	return nil
}

// unanswered is the error for what a request split over brokers got no
// answer for: the brokers' errors when there were some.
func unanswered(what string, err error) error {
	if err != nil {
		return errKafka(what, err)
	}
	return fmt.Errorf("%s: no broker answered for it", what)
}

// cliInt64List collects a repeatable integer flag; each use may also be
// comma-separated.
type cliInt64List []int64

func (l *cliInt64List) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func (l *cliInt64List) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		var v int64
		if _, err := fmt.Sscan(p, &v); err != nil || fmt.Sprint(v) != p {
			return fmt.Errorf("%q is not an integer", p)
		}
		*l = append(*l, v)
	}
	return nil
}
