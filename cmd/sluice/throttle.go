package main

// Throttled moves, as kafka-reassign-partitions.sh --throttle makes them:
// before the reassignments start, the topic configs
// leader.replication.throttled.replicas (the partitions' current replicas,
// which lead and serve the copy) and follower.replication.throttled.replicas
// (the replicas being added, which fetch it) name the moving replicas, and
// the dynamic broker configs leader.replication.throttled.rate and
// follower.replication.throttled.rate bound them on every broker involved.
// Once the moves completed (--wait, or `sluice reassign verify`), both are
// removed again.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/config"
)

// moveThrottles are the throttle configs of a plan.
type moveThrottles struct {
	leader, follower map[string]config.ThrottledReplicas // by topic
	brokers          []int32                             // current and target replicas, sorted
}

// planThrottles computes the throttled replicas of the plan's moves from
// the partitions' current replicas: the leader lists name the current
// replicas of every moving partition, the follower lists its replicas
// being added.
func planThrottles(plan reassignmentPlan, current map[partKey][]int32) moveThrottles {
	t := moveThrottles{leader: map[string]config.ThrottledReplicas{}, follower: map[string]config.ThrottledReplicas{}}
	involved := map[int32]bool{}
	for _, e := range plan.Partitions {
		cur := current[partKey{e.Topic, e.Partition}]
		if sameSet(cur, e.Replicas) {
			continue // not moving
		}
		l, f := t.leader[e.Topic], t.follower[e.Topic]
		for _, r := range cur {
			l.Pairs = append(l.Pairs, config.ReplicaRef{Partition: e.Partition, Broker: r})
			involved[r] = true
		}
		for _, r := range e.Replicas {
			involved[r] = true
			if !slices.Contains(cur, r) {
				f.Pairs = append(f.Pairs, config.ReplicaRef{Partition: e.Partition, Broker: r})
			}
		}
		t.leader[e.Topic] = l
		if len(f.Pairs) > 0 {
			t.follower[e.Topic] = f
		}
	}
	for b := range involved {
		t.brokers = append(t.brokers, b)
	}
	slices.Sort(t.brokers)
	return t
}

// currentReplicas reads the replicas of the plan's partitions.
func currentReplicas(ctx context.Context, adm *kadm.Client, plan reassignmentPlan) (map[partKey][]int32, error) {
	var topics []string
	for _, e := range plan.Partitions {
		if !slices.Contains(topics, e.Topic) {
			topics = append(topics, e.Topic)
		}
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, errKafka("metadata", err)
	}
	out := map[partKey][]int32{}
	for _, e := range plan.Partitions {
		t, ok := md.Topics[e.Topic]
		if !ok || t.Err != nil {
			return nil, fmt.Errorf("topic %s: %v", e.Topic, t.Err)
		}
		p, ok := t.Partitions[e.Partition]
		if !ok {
			return nil, fmt.Errorf("%s-%d: no such partition", e.Topic, e.Partition)
		}
		out[partKey{e.Topic, e.Partition}] = slices.Clone(p.Replicas)
	}
	return out, nil
}

// setThrottles writes the plan's throttle configs: the throttled-replica
// lists of each topic, then the rates on each broker involved.
func setThrottles(ctx context.Context, env *cliEnv, adm *kadm.Client, t moveThrottles, rate int64) error {
	var topics []string
	for topic := range t.leader {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	var failed []string
	for _, topic := range topics {
		alters := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: config.LeaderThrottledReplicas, Value: ptr(t.leader[topic].String())}}
		if f, ok := t.follower[topic]; ok {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: config.FollowerThrottledReplicas, Value: ptr(f.String())})
		}
		resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err != nil {
			return errKafka("alter topic configs", err)
		}
		failed = appendAlterFailure(failed, "topic "+topic, topic, resps)
	}
	v := strconv.FormatInt(rate, 10)
	for _, b := range t.brokers {
		alters := []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: config.LeaderThrottledRate, Value: &v},
			{Op: kadm.SetConfig, Name: config.FollowerThrottledRate, Value: &v},
		}
		resps, err := adm.AlterBrokerConfigs(ctx, alters, b)
		if err != nil {
			return errKafka(fmt.Sprintf("alter configs of broker %d", b), err)
		}
		failed = appendAlterFailure(failed, fmt.Sprintf("broker %d", b), strconv.Itoa(int(b)), resps)
	}
	if err := failures("set the throttle", failed); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "throttle: %d B/s on brokers %s for the moving replicas of %s\n", rate, int32List(t.brokers), strings.Join(topics, ","))
	return nil
}

func appendAlterFailure(failed []string, label, name string, resps kadm.AlterConfigsResponses) []string {
	r, err := resps.On(name, nil)
	switch {
	case err != nil:
		return append(failed, label+": the broker did not answer")
	case r.Err != nil:
		return append(failed, label+": "+kafkaMessage(r.Err, r.ErrMessage))
	}
	return failed
}

// clearThrottles removes the throttled-replica lists of topics and, when no
// reassignment is left in progress in the cluster, the throttle rates of
// every live broker (kafka-reassign-partitions.sh --verify's clean-up).
func clearThrottles(ctx context.Context, env *cliEnv, adm *kadm.Client, topics []string) error {
	var failed []string
	for _, topic := range topics {
		alters := []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: config.LeaderThrottledReplicas},
			{Op: kadm.DeleteConfig, Name: config.FollowerThrottledReplicas},
		}
		resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err != nil {
			return errKafka("alter topic configs", err)
		}
		failed = appendAlterFailure(failed, "topic "+topic, topic, resps)
	}
	all, err := allPartitions(ctx, adm)
	if err != nil {
		return err
	}
	lr, err := adm.ListPartitionReassignments(ctx, all)
	if err != nil {
		return errKafka("list partition reassignments", err)
	}
	pending := 0
	for _, ps := range lr {
		pending += len(ps)
	}
	if pending > 0 {
		fmt.Fprintf(env.stdout, "throttle: removed from the topics %s; %d other reassignments are in progress, so the brokers keep their throttle rates (run `sluice reassign verify` again once they completed)\n",
			strings.Join(topics, ","), pending)
		return failures("remove the throttle", failed)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return errKafka("metadata", err)
	}
	var brokers []int32
	for _, b := range md.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	slices.Sort(brokers)
	for _, b := range brokers {
		alters := []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: config.LeaderThrottledRate},
			{Op: kadm.DeleteConfig, Name: config.FollowerThrottledRate},
		}
		resps, err := adm.AlterBrokerConfigs(ctx, alters, b)
		if err != nil {
			return errKafka(fmt.Sprintf("alter configs of broker %d", b), err)
		}
		failed = appendAlterFailure(failed, fmt.Sprintf("broker %d", b), strconv.Itoa(int(b)), resps)
	}
	if err := failures("remove the throttle", failed); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "throttle: removed from the topics %s and the brokers %s\n", strings.Join(topics, ","), int32List(brokers))
	return nil
}

func ptr[T any](v T) *T { return &v }

// allPartitions is every partition of the cluster (kadm lists the
// reassignments of the partitions it is given only, never all).
func allPartitions(ctx context.Context, adm *kadm.Client) (kadm.TopicsSet, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, errKafka("metadata", err)
	}
	set := kadm.TopicsSet{}
	for _, t := range md.Topics {
		for p := range t.Partitions {
			set.Add(t.Topic, p)
		}
	}
	return set, nil
}

// planTopics are the plan's topics, sorted.
func planTopics(plan reassignmentPlan) []string {
	var out []string
	for _, e := range plan.Partitions {
		if !slices.Contains(out, e.Topic) {
			out = append(out, e.Topic)
		}
	}
	slices.Sort(out)
	return out
}

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
	var plan reassignmentPlan
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
				plan.Partitions = append(plan.Partitions, reassignmentPlanEntry{Topic: t.Topic, Partition: p.Partition})
			}
		}
	}
	set := kadm.TopicsSet{}
	for _, e := range plan.Partitions {
		set.Add(e.Topic, e.Partition)
	}
	lr, err := adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return errKafka("list partition reassignments", err)
	}
	cur, err := currentReplicas(ctx, adm, plan)
	if err != nil {
		return err
	}
	var moving, differ []string
	for _, e := range plan.Partitions {
		name := fmt.Sprintf("%s-%d", e.Topic, e.Partition)
		if _, ok := lr[e.Topic][e.Partition]; ok {
			moving = append(moving, name)
			continue
		}
		if r := cur[partKey{e.Topic, e.Partition}]; !sameSet(r, e.Replicas) {
			differ = append(differ, fmt.Sprintf("%s: replicas %s, not %s as planned", name, int32List(r), int32List(e.Replicas)))
		}
	}
	if len(moving) > 0 {
		fmt.Fprintf(env.stdout, "%d of %d partitions are still moving: %s\n", len(moving), len(plan.Partitions), strings.Join(moving[:min(len(moving), 20)], ","))
		return fmt.Errorf("reassignments in progress; the throttle stays")
	}
	fmt.Fprintf(env.stdout, "no partition of the %d is moving\n", len(plan.Partitions))
	if err := clearThrottles(ctx, env, adm, planTopics(plan)); err != nil {
		return err
	}
	if len(differ) > 0 {
		return fmt.Errorf("%d partitions are not as planned:\n  %s", len(differ), strings.Join(differ, "\n  "))
	}
	return nil
}
