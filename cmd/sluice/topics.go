package main

// sluice topics: what kafka-topics.sh gives a Kafka operator.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	registerVerbs("topics", "list, describe, create, delete and alter topics", topicsActions)
}

var topicsActions = []*cliAction{
	{"list", "", "list topics with their partition count and replication factor", topicsList},
	{"describe", "[TOPIC...]", "show partitions (leader, replicas, ISR, offsets) and non-default configs", topicsDescribe},
	{"create", "TOPIC...", "create topics", topicsCreate},
	{"delete", "TOPIC...", "delete topics and their data", topicsDelete},
	{"alter", "TOPIC...", "add partitions or change topic configs", topicsAlter},
}

// topicJSON is one topic in `topics list` and `topics describe` JSON output.
type topicJSON struct {
	Name              string            `json:"name"`
	ID                string            `json:"id"`
	Internal          bool              `json:"internal"`
	Partitions        int               `json:"partitions"`
	ReplicationFactor int               `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
	PartitionDetails  []partitionJSON   `json:"partition_details,omitempty"`
}

type partitionJSON struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	LogStartOffset  int64   `json:"log_start_offset"`
	LogEndOffset    int64   `json:"log_end_offset"`
	Error           string  `json:"error,omitempty"`
}

func replicationFactor(t kadm.TopicDetail) int {
	for _, p := range t.Partitions {
		return len(p.Replicas)
	}
	return 0
}

// topicID formats a topic id the way Kafka's tools print it: URL-safe
// base64 without padding.
func topicID(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func topicsList(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "topics list [flags]", "List the topics of the cluster.", true)
	internal := fs.Bool("internal", false, "include internal topics such as __consumer_offsets")
	ctx, adm, _, done, err := cf.parseAndConnect(ctx, fs, args, noArgs)
	if err != nil {
		return err
	}
	defer done()
	topics, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return errKafka("list topics", err)
	}
	if !*internal {
		topics.FilterInternal()
	}
	out := make([]topicJSON, 0, len(topics))
	for _, t := range topics.Sorted() {
		if t.Err != nil {
			return errKafka("topic "+t.Topic, t.Err)
		}
		out = append(out, topicJSON{
			Name: t.Topic, ID: topicID(t.ID), Internal: t.IsInternal,
			Partitions: len(t.Partitions), ReplicationFactor: replicationFactor(t),
		})
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	tb := newCLITable(env.stdout, "TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL")
	for _, t := range out {
		tb.row(t.Name, t.Partitions, t.ReplicationFactor, t.Internal)
	}
	return tb.flush()
}

func topicsDescribe(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "topics describe [TOPIC...] [flags]",
		"Show each partition of the named topics (all topics when none is named): leader,\n"+
			"leader epoch, replicas, in-sync replicas, offline replicas and the log start and\n"+
			"end offsets, and the topic configs that differ from the broker defaults.", true)
	internal := fs.Bool("internal", false, "include internal topics when no topic is named")
	underReplicated := fs.Bool("under-replicated-partitions", false, "only partitions whose ISR is smaller than the replica set")
	unavailable := fs.Bool("unavailable-partitions", false, "only partitions without a live leader")
	ctx, adm, names, done, err := cf.parseAndConnect(ctx, fs, args, anyArgs)
	if err != nil {
		return err
	}
	defer done()

	topics, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return errKafka("describe topics", err)
	}
	if len(names) == 0 && !*internal {
		topics.FilterInternal()
	}
	for _, t := range topics.Sorted() {
		if t.Err != nil {
			if errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("topic %q does not exist", t.Topic)
			}
			return errKafka("topic "+t.Topic, t.Err)
		}
	}
	list := topics.Names()
	sort.Strings(list)
	var starts, ends kadm.ListedOffsets
	var configs kadm.ResourceConfigs
	if len(list) > 0 {
		if starts, err = adm.ListStartOffsets(ctx, list...); err != nil {
			return errKafka("list start offsets", err)
		}
		if ends, err = adm.ListEndOffsets(ctx, list...); err != nil {
			return errKafka("list end offsets", err)
		}
		if configs, err = adm.DescribeTopicConfigs(ctx, list...); err != nil {
			return errKafka("describe topic configs", err)
		}
	}

	out := make([]topicJSON, 0, len(list))
	for _, t := range topics.Sorted() {
		tj := topicJSON{
			Name: t.Topic, ID: topicID(t.ID), Internal: t.IsInternal,
			Partitions: len(t.Partitions), ReplicationFactor: replicationFactor(t),
			Configs: map[string]string{}, PartitionDetails: []partitionJSON{},
		}
		if rc, err := configs.On(t.Topic, nil); err == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					tj.Configs[c.Key] = c.MaybeValue()
				}
			}
		}
		for _, p := range t.Partitions.Sorted() {
			if *underReplicated && len(p.ISR) >= len(p.Replicas) {
				continue
			}
			if *unavailable && p.Leader >= 0 && p.Err == nil {
				continue
			}
			pj := partitionJSON{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: append([]int32{}, p.Replicas...), ISR: sortedInt32(p.ISR),
				OfflineReplicas: sortedInt32(p.OfflineReplicas), LogStartOffset: -1, LogEndOffset: -1,
			}
			if p.Err != nil {
				pj.Error = p.Err.Error()
			}
			if o, ok := starts.Lookup(t.Topic, p.Partition); ok && o.Err == nil {
				pj.LogStartOffset = o.Offset
			}
			if o, ok := ends.Lookup(t.Topic, p.Partition); ok && o.Err == nil {
				pj.LogEndOffset = o.Offset
			}
			tj.PartitionDetails = append(tj.PartitionDetails, pj)
		}
		out = append(out, tj)
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}

	tb := newCLITable(env.stdout, "TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS")
	for _, t := range out {
		tb.row(t.Name, t.Partitions, t.ReplicationFactor, formatConfigs(t.Configs))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout)
	tb = newCLITable(env.stdout, "TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "LOG-END")
	for _, t := range out {
		for _, p := range t.PartitionDetails {
			leader := fmt.Sprint(p.Leader)
			if p.Leader < 0 {
				leader = "none"
			}
			tb.row(t.Name, p.Partition, leader, p.LeaderEpoch, int32List(p.Replicas), int32List(p.ISR),
				int32List(p.OfflineReplicas), offsetOrDash(p.LogStartOffset), offsetOrDash(p.LogEndOffset))
		}
	}
	return tb.flush()
}

func offsetOrDash(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

func formatConfigs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

// resultJSON reports what a create, delete or alter did to one resource.
type resultJSON struct {
	Name              string `json:"name"`
	Status            string `json:"status"`
	Partitions        int32  `json:"partitions,omitempty"`
	ReplicationFactor int16  `json:"replication_factor,omitempty"`
}

func writeResults(env *cliEnv, cf *clientFlags, kind string, results []resultJSON) error {
	if cf.json() {
		return writeJSON(env.stdout, results)
	}
	tb := newCLITable(env.stdout, strings.ToUpper(kind), "STATUS")
	for _, r := range results {
		tb.row(r.Name, r.Status)
	}
	return tb.flush()
}

func topicsCreate(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "topics create TOPIC... [flags]",
		"Create topics. Without --partitions or --replication-factor the broker's\n"+
			"num.partitions and default.replication.factor apply.", true)
	partitions := fs.Int("partitions", -1, "number of partitions (-1: the broker default)")
	rf := fs.Int("replication-factor", -1, "replicas per partition (-1: the broker default)")
	var cfgs cliKeyValues
	fs.Var(&cfgs, "config", "topic config key=value (repeatable), e.g. --config retention.ms=86400000")
	ifNotExists := fs.Bool("if-not-exists", false, "succeed when the topic already exists")
	dryRun := fs.Bool("dry-run", false, "only validate the request on the broker")
	names, err := cf.parse(fs, args, atLeastOne("topic"))
	if err != nil {
		return err
	}
	if *partitions == 0 || *partitions < -1 {
		return usagef("--partitions must be positive (or -1 for the broker default)")
	}
	if *rf == 0 || *rf < -1 || *rf > 32767 {
		return usagef("--replication-factor must be positive (or -1 for the broker default)")
	}
	pairs, err := cfgs.pairs("config")
	if err != nil {
		return err
	}
	configs := map[string]*string{}
	for _, p := range pairs {
		v := p[1]
		configs[p[0]] = &v
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	create := adm.CreateTopics
	if *dryRun {
		create = adm.ValidateCreateTopics
	}
	resps, err := create(ctx, int32(*partitions), int16(*rf), configs, names...)
	if err != nil {
		return errKafka("create topics", err)
	}
	var results []resultJSON
	var failed []string
	for _, name := range names {
		r, ok := resps[name]
		res := resultJSON{Name: name, Partitions: r.NumPartitions, ReplicationFactor: r.ReplicationFactor}
		switch {
		case !ok:
			res.Status = "no response"
			failed = append(failed, name+": the broker did not answer for this topic")
		case r.Err == nil && *dryRun:
			res.Status = "valid"
		case r.Err == nil:
			res.Status = "created"
		case errors.Is(r.Err, kerr.TopicAlreadyExists) && *ifNotExists:
			res.Status = "exists"
			res.Partitions, res.ReplicationFactor = 0, 0
		default:
			res.Status = "failed"
			res.Partitions, res.ReplicationFactor = 0, 0
			failed = append(failed, name+": "+kafkaMessage(r.Err, r.ErrMessage))
		}
		results = append(results, res)
	}
	if err := writeResults(env, cf, "topic", results); err != nil {
		return err
	}
	return failures("create", failed)
}

func topicsDelete(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "topics delete TOPIC... [flags]", "Delete topics and all their data.", true)
	ifExists := fs.Bool("if-exists", false, "succeed when a topic does not exist")
	ctx, adm, names, done, err := cf.parseAndConnect(ctx, fs, args, atLeastOne("topic"))
	if err != nil {
		return err
	}
	defer done()
	resps, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return errKafka("delete topics", err)
	}
	var results []resultJSON
	var failed []string
	for _, name := range names {
		r, ok := resps[name]
		res := resultJSON{Name: name}
		switch {
		case !ok:
			res.Status = "no response"
			failed = append(failed, name+": the broker did not answer for this topic")
		case r.Err == nil:
			res.Status = "deleted"
		case errors.Is(r.Err, kerr.UnknownTopicOrPartition) && *ifExists:
			res.Status = "absent"
		case errors.Is(r.Err, kerr.UnknownTopicOrPartition):
			res.Status = "failed"
			failed = append(failed, fmt.Sprintf("%s: topic does not exist", name))
		default:
			res.Status = "failed"
			failed = append(failed, name+": "+kafkaMessage(r.Err, r.ErrMessage))
		}
		results = append(results, res)
	}
	if err := writeResults(env, cf, "topic", results); err != nil {
		return err
	}
	return failures("delete", failed)
}

func topicsAlter(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "topics alter TOPIC... [flags]",
		"Raise the partition count of topics (it can never shrink) and/or set or remove\n"+
			"topic configs (the same as `sluice configs alter --topic`).", true)
	partitions := fs.Int("partitions", 0, "new total number of partitions")
	var set cliKeyValues
	var del cliList
	fs.Var(&set, "config", "set topic config key=value (repeatable)")
	fs.Var(&del, "delete-config", "remove a topic config override, back to the default (repeatable)")
	names, err := cf.parse(fs, args, atLeastOne("topic"))
	if err != nil {
		return err
	}
	if *partitions < 0 {
		return usagef("--partitions must be positive")
	}
	pairs, err := set.pairs("config")
	if err != nil {
		return err
	}
	if *partitions == 0 && len(pairs) == 0 && len(del) == 0 {
		return usagef("nothing to alter: give --partitions, --config or --delete-config")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()

	topics, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return errKafka("describe topics", err)
	}
	status := map[string][]string{}
	var failed []string
	var grow []string
	for _, name := range names {
		t, ok := topics[name]
		switch {
		case !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition):
			return fmt.Errorf("topic %q does not exist", name)
		case t.Err != nil:
			return errKafka("topic "+name, t.Err)
		case *partitions == 0:
		case len(t.Partitions) > *partitions:
			failed = append(failed, fmt.Sprintf("%s: has %d partitions; partitions can be added, never removed", name, len(t.Partitions)))
		case len(t.Partitions) == *partitions:
			status[name] = append(status[name], fmt.Sprintf("already %d partitions", *partitions))
		default:
			grow = append(grow, name)
		}
	}
	if len(failed) > 0 {
		return failures("alter", failed)
	}
	if len(grow) > 0 {
		resps, err := adm.UpdatePartitions(ctx, *partitions, grow...)
		if err != nil {
			return errKafka("create partitions", err)
		}
		for _, name := range grow {
			r, ok := resps[name]
			switch {
			case !ok:
				failed = append(failed, name+": the broker did not answer for this topic")
			case r.Err != nil:
				failed = append(failed, name+": "+kafkaMessage(r.Err, r.ErrMessage))
			default:
				status[name] = append(status[name], fmt.Sprintf("partitions now %d", *partitions))
			}
		}
	}
	if len(pairs) > 0 || len(del) > 0 {
		alters := buildAlters(pairs, del)
		resps, err := adm.AlterTopicConfigs(ctx, alters, names...)
		if err != nil {
			return errKafka("alter topic configs", err)
		}
		for _, name := range names {
			r, err := resps.On(name, nil)
			switch {
			case err != nil:
				failed = append(failed, name+": the broker did not answer for this topic")
			case r.Err != nil:
				failed = append(failed, name+": "+kafkaMessage(r.Err, r.ErrMessage))
			default:
				status[name] = append(status[name], "configs altered")
			}
		}
	}
	var results []resultJSON
	for _, name := range names {
		s := strings.Join(status[name], ", ")
		if s == "" {
			s = "failed"
		}
		results = append(results, resultJSON{Name: name, Status: s})
	}
	if err := writeResults(env, cf, "topic", results); err != nil {
		return err
	}
	return failures("alter", failed)
}

// buildAlters turns --config/--set and --delete-config flags into
// incremental alter operations.
func buildAlters(set [][2]string, del []string) []kadm.AlterConfig {
	var alters []kadm.AlterConfig
	for _, p := range set {
		v := p[1]
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: p[0], Value: &v})
	}
	for _, k := range del {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return alters
}

// kafkaMessage prefers the broker's own error message, when it gave one, to
// the generic text of the error code.
func kafkaMessage(err error, msg string) string {
	var ke *kerr.Error
	if msg != "" && errors.As(err, &ke) {
		return ke.Message + ": " + msg
	}
	return err.Error()
}

func failures(verb string, failed []string) error {
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s failed: %s", verb, failed[0])
	default:
		return fmt.Errorf("%s failed for %d resources:\n  %s", verb, len(failed), strings.Join(failed, "\n  "))
	}
}
