package main

// sluice reassign and sluice broker: moving partition replicas between
// brokers (Kafka's kafka-reassign-partitions.sh), through the
// AlterPartitionReassignments and ListPartitionReassignments APIs, so they
// work against any broker of the cluster.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/reassign"
)

func init() {
	registerVerbs("reassign", "move partition replicas between brokers (KIP-455 reassignments)", []*cliAction{
		{name: "execute", args: "(--file plan.json | --topic T --partition P --replicas 1,2,3) [--throttle B/s]", summary: "start reassignments", run: reassignExecute},
		{name: "list", args: "[--topic T]", summary: "show the reassignments in progress", run: reassignList},
		{name: "verify", args: "(--file plan.json | --topics a,b)", summary: "check that moves completed and remove their throttle", run: reassignVerify},
		{name: "cancel", args: "(--file plan.json | --topic T --partition P)", summary: "cancel reassignments in progress (back to the original replicas)", run: reassignCancel},
	})
	registerVerbs("broker", "add a broker to the partitions' replicas, or drain one", []*cliAction{
		{name: "add", args: "<broker-id> [--topics a,b] [--throttle B/s]", summary: "move replicas onto a new broker until it holds its share", run: brokerAdd},
		{name: "drain", args: "<broker-id> [--topics a,b] [--throttle B/s]", summary: "move every replica off a broker (before removing it)", run: brokerDrain},
	})
}

func readPlan(path string) (reassign.Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return reassign.Plan{}, err
	}
	p, err := reassign.ParsePlan(b)
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func parseIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a broker id", f)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// planFlags reads --file, or --topic/--partition[/--replicas].
type planFlags struct {
	file      string
	topic     string
	partition int
	replicas  string
	wait      bool
	throttle  int64
}

// throttleUsage is the help of --throttle.
const throttleUsage = "bound the replication of the moving replicas to this many bytes per second (leader and follower throttles, as kafka-reassign-partitions.sh --throttle); removed once the moves completed (--wait, or `sluice reassign verify`)"

func checkThrottle(v int64) error {
	if v < 0 {
		return usagef("--throttle %d: give bytes per second, at least 1 (0: no throttle)", v)
	}
	return nil
}

func (pf *planFlags) plan(withReplicas bool) (reassign.Plan, error) {
	if pf.file != "" {
		if pf.topic != "" || pf.replicas != "" {
			return reassign.Plan{}, usagef("--file and --topic/--replicas exclude each other")
		}
		p, err := readPlan(pf.file)
		if err != nil {
			return p, usagef("%v", err)
		}
		return p, nil
	}
	if pf.topic == "" || pf.partition < 0 {
		return reassign.Plan{}, usagef("give --file, or --topic and --partition")
	}
	e := reassign.Entry{Topic: pf.topic, Partition: int32(pf.partition)}
	if withReplicas {
		ids, err := parseIDs(pf.replicas)
		if err != nil {
			return reassign.Plan{}, usagef("--replicas: %v", err)
		}
		if len(ids) == 0 {
			return reassign.Plan{}, usagef("--replicas is empty")
		}
		e.Replicas = ids
	}
	return reassign.Plan{Version: 1, Partitions: []reassign.Entry{e}}, nil
}

func reassignExecute(ctx context.Context, env *cliEnv, args []string) error {
	var pf planFlags
	fs, cf := clusterFlags(env, "reassign execute (--file plan.json | --topic T --partition P --replicas 1,2,3) [flags]",
		"Start moving partitions to new replica lists. The new replicas copy the data from\n"+
			"the leader while clients keep producing and consuming; the controller finishes\n"+
			"each move once its new replicas are in sync (leadership moves into the new list\n"+
			"and the replicas left out drop their copy). A list of another length changes the\n"+
			"replication factor. The plan file is Kafka's reassignment JSON:\n"+
			"  {\"version\":1,\"partitions\":[{\"topic\":\"orders\",\"partition\":0,\"replicas\":[2,3]}]}", false)
	fs.StringVar(&pf.file, "file", "", "reassignment plan (Kafka's JSON format)")
	fs.StringVar(&pf.topic, "topic", "", "topic of a single partition to move")
	fs.IntVar(&pf.partition, "partition", -1, "the partition to move")
	fs.StringVar(&pf.replicas, "replicas", "", "its new replicas, preferred leader first: 1,2,3")
	fs.BoolVar(&pf.wait, "wait", false, "wait until every move completed")
	fs.Int64Var(&pf.throttle, "throttle", 0, throttleUsage)
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	if err := checkThrottle(pf.throttle); err != nil {
		return err
	}
	plan, err := pf.plan(true)
	if err != nil {
		return err
	}
	for _, e := range plan.Partitions {
		if len(e.Replicas) == 0 {
			return usagef("%s-%d: no replicas (use `sluice reassign cancel` to cancel)", e.Topic, e.Partition)
		}
	}
	return submitPlan(ctx, env, cf, plan, pf.wait, pf.throttle)
}

// submitPlan starts the plan's reassignments, throttled to throttle bytes
// per second when positive, and optionally waits for them (then removes
// the throttle).
func submitPlan(ctx context.Context, env *cliEnv, cf *clientFlags, plan reassign.Plan, wait bool, throttle int64) error {
	actx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	th, refused, err := reassign.Start(actx, adm, plan, throttle)
	if len(th.Brokers) > 0 {
		fmt.Fprintf(env.stdout, "throttle: %d B/s on brokers %s for the moving replicas of %s\n", throttle, int32List(th.Brokers), strings.Join(th.Topics(), ","))
	}
	if err != nil {
		return err
	}
	failed := refused
	fmt.Fprintf(env.stdout, "started %d of %d reassignments\n", len(plan.Partitions)-len(failed), len(plan.Partitions))
	if len(failed) > 0 {
		return fmt.Errorf("refused:\n  %s", strings.Join(failed, "\n  "))
	}
	if !wait {
		fmt.Fprintln(env.stdout, "follow them with `sluice reassign list`")
		if throttle > 0 {
			fmt.Fprintf(env.stdout, "the throttle stays until `sluice reassign verify --topics %s` finds the moves completed\n", strings.Join(plan.Topics(), ","))
		}
		return nil
	}
	if err := waitPlan(ctx, env, adm, plan); err != nil {
		if throttle > 0 {
			fmt.Fprintf(env.stdout, "the throttle stays: remove it with `sluice reassign verify --topics %s` once the moves completed\n", strings.Join(plan.Topics(), ","))
		}
		return err
	}
	if throttle > 0 {
		// The wait is not bounded by --timeout; the clean-up is.
		cctx, cancel := context.WithTimeout(ctx, cf.timeout)
		defer cancel()
		return clearThrottles(cctx, env, adm, plan.Topics())
	}
	return nil
}

// waitPlan waits until no partition of the plan is being reassigned and each
// has its target replicas, all in sync.
func waitPlan(ctx context.Context, env *cliEnv, adm *kadm.Client, plan reassign.Plan) error {
	topics := map[string]bool{}
	set := kadm.TopicsSet{}
	for _, e := range plan.Partitions {
		topics[e.Topic] = true
		set.Add(e.Topic, e.Partition)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for t := range topics {
			if !yield(t) {
				return
			}
		}
	})
	start := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		pending := 0
		lr, err := adm.ListPartitionReassignments(ctx, set)
		if err == nil {
			for _, ps := range lr {
				pending += len(ps)
			}
		}
		if err == nil && pending == 0 {
			md, merr := adm.Metadata(ctx, names...)
			if merr == nil {
				for _, e := range plan.Partitions {
					p, ok := md.Topics[e.Topic].Partitions[e.Partition]
					if !ok || !reassign.SameSet(p.Replicas, e.Replicas) || len(p.ISR) != len(p.Replicas) {
						pending++
					}
				}
				if pending == 0 {
					fmt.Fprintf(env.stdout, "all %d reassignments completed in %v\n", len(plan.Partitions), time.Since(start).Round(time.Millisecond))
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func reassignList(ctx context.Context, env *cliEnv, args []string) error {
	var topic string
	fs, cf := clusterFlags(env, "reassign list [--topic T] [flags]", "Show the partitions being reassigned: their replicas (target and original),\nthe replicas being added and those being removed.", true)
	fs.StringVar(&topic, "topic", "", "only this topic")
	ctx, adm, _, done, err := cf.parseAndConnect(ctx, fs, args, noArgs)
	if err != nil {
		return err
	}
	defer done()
	var set kadm.TopicsSet
	if topic != "" {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return errKafka("metadata", err)
		}
		set = kadm.TopicsSet{}
		for p := range md.Topics[topic].Partitions {
			set.Add(topic, p)
		}
	} else if set, err = reassign.AllPartitions(ctx, adm); err != nil {
		return err
	}
	rows, err := reassign.InProgress(ctx, adm, set)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []reassign.Moving{}
	}
	if cf.json() {
		return writeJSON(env.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(env.stdout, "no reassignment in progress")
		return nil
	}
	tb := newCLITable(env.stdout, "TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING")
	for _, r := range rows {
		tb.row(r.Topic, r.Partition, int32List(r.Replicas), int32List(r.Adding), int32List(r.Removing))
	}
	return tb.flush()
}

func reassignCancel(ctx context.Context, env *cliEnv, args []string) error {
	var pf planFlags
	fs, cf := clusterFlags(env, "reassign cancel (--file plan.json | --topic T --partition P) [flags]",
		"Cancel reassignments in progress: each partition goes back to its original\nreplicas (the replica lists of a plan file are ignored).", false)
	fs.StringVar(&pf.file, "file", "", "the plan whose partitions to cancel")
	fs.StringVar(&pf.topic, "topic", "", "topic of a single partition")
	fs.IntVar(&pf.partition, "partition", -1, "the partition")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	plan, err := pf.plan(false)
	if err != nil {
		return err
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	var parts []reassign.Part
	for _, e := range plan.Partitions {
		parts = append(parts, reassign.Part{Topic: e.Topic, Partition: e.Partition})
	}
	failed, err := reassign.Cancel(ctx, adm, parts)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "cancelled %d of %d reassignments\n", len(plan.Partitions)-len(failed), len(plan.Partitions))
	// The throttle a --throttle move set goes with it, from the topics with
	// no partition moving any more (and the brokers' rates once nothing
	// moves in the cluster), as after a completed move.
	cerr := clearFinished(ctx, env, adm, plan.Topics())
	if len(failed) > 0 {
		return fmt.Errorf("not cancelled:\n  %s", strings.Join(failed, "\n  "))
	}
	return cerr
}

// ---- sluice broker add / drain ----

// brokerCommand parses `broker add|drain <id>` and loads the assignment.
func brokerCommand(ctx context.Context, env *cliEnv, args []string, verb, description string,
	fn func(a reassign.Assignment, id int32, live []int32) (reassign.Plan, []reassign.Part)) error {
	var topics cliList
	var wait, dryRun bool
	var throttle int64
	fs, cf := clusterFlags(env, "broker "+verb+" <broker-id> [flags]", description, false)
	fs.Var(&topics, "topics", "only these topics (comma-separated; default: every topic)")
	fs.BoolVar(&wait, "wait", false, "wait until every move completed")
	fs.BoolVar(&dryRun, "dry-run", false, "print the plan (Kafka's reassignment JSON) and change nothing")
	fs.Int64Var(&throttle, "throttle", 0, throttleUsage)
	pos, err := cf.parse(fs, args, exactlyOne("give one broker id"))
	if err != nil {
		return err
	}
	if err := checkThrottle(throttle); err != nil {
		return err
	}
	ids, err := parseIDs(pos[0])
	if err != nil || len(ids) != 1 {
		return usagef("%q is not a broker id", pos[0])
	}
	id := ids[0]
	actx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	a, live, err := reassign.LoadAssignment(actx, adm, topics...)
	done()
	if err != nil {
		return err
	}
	if verb == "add" && !slices.Contains(live, id) {
		return fmt.Errorf("broker %d is not live: start it (with broker.id=%d and this cluster's zookeeper.connect) first", id, id)
	}
	plan, stuck := fn(a, id, live)
	if len(stuck) > 0 {
		var names []string
		for _, k := range stuck {
			names = append(names, k.String())
		}
		return fmt.Errorf("%d partitions cannot move off broker %d: every other live broker already holds a replica (%s); add a broker or lower their replication factor first",
			len(stuck), id, strings.Join(names[:min(len(names), 10)], ","))
	}
	if dryRun {
		return writeJSON(env.stdout, plan)
	}
	if len(plan.Partitions) == 0 {
		fmt.Fprintf(env.stdout, "nothing to move\n")
		return nil
	}
	return submitPlan(ctx, env, cf, plan, wait, throttle)
}

func brokerDrain(ctx context.Context, env *cliEnv, args []string) error {
	return brokerCommand(ctx, env, args, "drain",
		"Move every replica off the broker, to the live brokers holding the fewest\n"+
			"replicas, while clients keep working (before decommissioning it). Each replica\n"+
			"keeps its place in the replica list, so leadership moves with it.", reassign.Drain)
}

func brokerAdd(ctx context.Context, env *cliEnv, args []string) error {
	return brokerCommand(ctx, env, args, "add",
		"Move replicas from the most loaded brokers onto a broker (a new one, started\n"+
			"with this cluster's zookeeper.connect) until it holds its share of replicas.",
		func(a reassign.Assignment, id int32, live []int32) (reassign.Plan, []reassign.Part) {
			return reassign.Add(a, id, live), nil
		})
}
