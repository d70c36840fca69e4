package main

// Throttled moves, as kafka-reassign-partitions.sh --throttle makes them:
// before the reassignments start, the topic configs
// leader.replication.throttled.replicas (the partitions' current replicas,
// which lead and serve the copy) and follower.replication.throttled.replicas
// (the replicas being added, which fetch it) name the moving replicas, and
// the dynamic broker configs leader.replication.throttled.rate and
// follower.replication.throttled.rate bound them on every broker involved.
// Once the moves completed (--wait, or `sluice reassign verify`), or were
// cancelled, both are removed again. The rules live in package reassign,
// shared with the console's partition moves page.

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/reassign"
)

// clearThrottles removes the throttle of topics (reassign.ClearThrottles)
// and says what it removed.
func clearThrottles(ctx context.Context, env *cliEnv, adm *kadm.Client, topics []string) error {
	cl, err := reassign.ClearThrottles(ctx, adm, topics)
	reportCleared(env, cl, err)
	return err
}

// clearFinished removes the throttle of those of topics with no partition
// moving (reassign.ClearFinished) and says what it removed.
func clearFinished(ctx context.Context, env *cliEnv, adm *kadm.Client, topics []string) error {
	cl, _, err := reassign.ClearFinished(ctx, adm, topics)
	if err == nil && len(cl.Topics) == 0 {
		if cl.Pending > 0 {
			fmt.Fprintf(env.stdout, "throttle: kept on %s, whose other partitions are still moving\n", strings.Join(topics, ","))
		}
		return nil
	}
	reportCleared(env, cl, err)
	return err
}

func reportCleared(env *cliEnv, cl reassign.Cleared, err error) {
	if err != nil || len(cl.Topics) == 0 && len(cl.Brokers) == 0 {
		return
	}
	if cl.Pending > 0 {
		fmt.Fprintf(env.stdout, "throttle: removed from the topics %s; %d other reassignments are in progress, so the brokers keep their throttle rates (run `sluice reassign verify` again once they completed)\n",
			strings.Join(cl.Topics, ","), cl.Pending)
		return
	}
	fmt.Fprintf(env.stdout, "throttle: removed from the topics %s and the brokers %s\n", strings.Join(cl.Topics, ","), int32List(cl.Brokers))
}

func ptr[T any](v T) *T { return &v }

func reassignVerify(ctx context.Context, env *cliEnv, args []string) error {
	var file string
	var topics cliList
	fs, cf := clusterFlags(env, "reassign verify (--file plan.json | --topics a,b) [flags]",
		"Check whether reassignments completed (kafka-reassign-partitions.sh --verify): the\n"+
			"partitions of the plan, or of the topics, that are still moving, and those whose\n"+
			"replicas differ from the plan. Once none of them is moving, remove the throttle\n"+
			"that --throttle set: the topics' throttled-replica lists and, when no\n"+
			"reassignment is left in the cluster, the brokers' throttle rates.", false)
	fs.StringVar(&file, "file", "", "the reassignment plan (Kafka's JSON format)")
	fs.Var(&topics, "topics", "every partition of these topics (comma-separated)")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	if (file == "") == (len(topics) == 0) {
		return usagef("give --file or --topics")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	var plan reassign.Plan
	if file != "" {
		if plan, err = readPlan(file); err != nil {
			return usagef("%v", err)
		}
	} else {
		md, err := adm.Metadata(ctx, topics...)
		if err != nil {
			return errKafka("metadata", err)
		}
		for _, t := range md.Topics.Sorted() {
			if t.Err != nil {
				return fmt.Errorf("topic %s: %w", t.Topic, t.Err)
			}
			for _, p := range t.Partitions.Sorted() {
				plan.Partitions = append(plan.Partitions, reassign.Entry{Topic: t.Topic, Partition: p.Partition})
			}
		}
	}
	set := kadm.TopicsSet{}
	for _, e := range plan.Partitions {
		set.Add(e.Topic, e.Partition)
	}
	moving, err := reassign.InProgress(ctx, adm, set)
	if err != nil {
		return err
	}
	lr := map[reassign.Part]bool{}
	for _, m := range moving {
		lr[reassign.Part{Topic: m.Topic, Partition: m.Partition}] = true
	}
	cur, err := reassign.CurrentReplicas(ctx, adm, plan)
	if err != nil {
		return err
	}
	var still, differ []string
	for _, e := range plan.Partitions {
		k := reassign.Part{Topic: e.Topic, Partition: e.Partition}
		name := k.String()
		if lr[k] {
			still = append(still, name)
			continue
		}
		if r := cur[k]; !reassign.SameSet(r, e.Replicas) {
			differ = append(differ, fmt.Sprintf("%s: replicas %s, not %s as planned", name, int32List(r), int32List(e.Replicas)))
		}
	}
	if len(still) > 0 {
		fmt.Fprintf(env.stdout, "%d of %d partitions are still moving: %s\n", len(still), len(plan.Partitions), strings.Join(still[:min(len(still), 20)], ","))
		return fmt.Errorf("reassignments in progress; the throttle stays")
	}
	fmt.Fprintf(env.stdout, "no partition of the %d is moving\n", len(plan.Partitions))
	if err := clearThrottles(ctx, env, adm, plan.Topics()); err != nil {
		return err
	}
	if len(differ) > 0 {
		return fmt.Errorf("%d partitions are not as planned:\n  %s", len(differ), strings.Join(differ, "\n  "))
	}
	return nil
}
