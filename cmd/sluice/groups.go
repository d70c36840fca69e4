package main

// sluice groups: what kafka-consumer-groups.sh gives a Kafka operator.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() {
	registerVerbs("groups", "list, describe, reset offsets of and delete consumer groups", groupsActions)
}

var groupsActions = []*cliAction{
	{"list", "", "list consumer groups with their state and member count", groupsList},
	{"describe", "GROUP...", "show committed offsets, log end offsets, lag and members", groupsDescribe},
	{"reset-offsets", "GROUP", "move a stopped group's committed offsets (dry run unless --execute)", groupsResetOffsets},
	{"delete", "GROUP...", "delete groups, or with --topic only their offsets for those topics", groupsDelete},
}

type groupListJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
	Members      int    `json:"members"`
}

func groupsList(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "groups list [flags]", "List the consumer groups of the cluster.", true)
	var states cliList
	fs.Var(&states, "state", "only groups in this state, e.g. Stable or Empty (repeatable)")
	ctx, adm, _, done, err := cf.parseAndConnect(ctx, fs, args, noArgs)
	if err != nil {
		return err
	}
	defer done()
	listed, err := adm.ListGroups(ctx, states...)
	if err != nil {
		return errKafka("list groups", err)
	}
	names := listed.Groups()
	sort.Strings(names)
	members := map[string]int{}
	if len(names) > 0 {
		described, err := adm.DescribeGroups(ctx, names...)
		if err != nil {
			return errKafka("describe groups", err)
		}
		for _, g := range described {
			members[g.Group] = len(g.Members)
		}
	}
	out := make([]groupListJSON, 0, len(names))
	for _, n := range names {
		g := listed[n]
		out = append(out, groupListJSON{Group: n, State: g.State, ProtocolType: g.ProtocolType,
			Coordinator: g.Coordinator, Members: members[n]})
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	tb := newCLITable(env.stdout, "GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR", "MEMBERS")
	for _, g := range out {
		tb.row(g.Group, g.State, g.ProtocolType, g.Coordinator, g.Members)
	}
	return tb.flush()
}

type groupJSON struct {
	Group        string            `json:"group"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol"`
	Coordinator  int32             `json:"coordinator"`
	TotalLag     int64             `json:"total_lag"`
	Members      []groupMemberJSON `json:"members"`
	Offsets      []groupOffsetJSON `json:"offsets"`
}

type groupMemberJSON struct {
	MemberID   string               `json:"member_id"`
	InstanceID string               `json:"instance_id,omitempty"`
	ClientID   string               `json:"client_id"`
	Host       string               `json:"host"`
	Assigned   []topicPartitionJSON `json:"assigned"`
}

type topicPartitionJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type groupOffsetJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"` // -1: nothing committed
	LogEndOffset  int64  `json:"log_end_offset"`
	Lag           int64  `json:"lag"` // -1: unknown
	MemberID      string `json:"member_id,omitempty"`
	Error         string `json:"error,omitempty"`
}

func groupsDescribe(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "groups describe GROUP... [flags]",
		"Show, for each partition a group consumes or has committed offsets for, the\n"+
			"committed offset, the log end offset, the lag and the member consuming it.\n"+
			"--members lists the members instead, --state one line per group.", true)
	members := fs.Bool("members", false, "list the members and their assignments")
	state := fs.Bool("state", false, "one summary line per group")
	names, err := cf.parse(fs, args, atLeastOne("group"))
	if err != nil {
		return err
	}
	if *members && *state {
		return usagef("--members and --state exclude each other")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return errKafka("describe groups", err)
	}
	var out []groupJSON
	for _, name := range names {
		l, ok := lags[name]
		if !ok {
			return fmt.Errorf("group %q: the broker did not answer for this group", name)
		}
		if err := l.Error(); err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				return fmt.Errorf("group %q does not exist", name)
			}
			return errKafka("group "+name, err)
		}
		if (l.State == "Dead" || l.State == "") && len(l.Members) == 0 && len(l.Lag) == 0 {
			return fmt.Errorf("group %q does not exist", name)
		}
		out = append(out, groupFromLag(l))
	}
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	switch {
	case *state:
		tb := newCLITable(env.stdout, "GROUP", "COORDINATOR", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "MEMBERS", "TOTAL-LAG")
		for _, g := range out {
			tb.row(g.Group, g.Coordinator, g.State, g.ProtocolType, g.Protocol, len(g.Members), g.TotalLag)
		}
		return tb.flush()
	case *members:
		tb := newCLITable(env.stdout, "GROUP", "MEMBER-ID", "INSTANCE-ID", "HOST", "CLIENT-ID", "ASSIGNED")
		for _, g := range out {
			for _, m := range g.Members {
				tb.row(g.Group, m.MemberID, m.InstanceID, m.Host, m.ClientID, formatAssigned(m.Assigned))
			}
		}
		return tb.flush()
	}
	tb := newCLITable(env.stdout, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "HOST", "CLIENT-ID")
	for _, g := range out {
		hosts := map[string]groupMemberJSON{}
		for _, m := range g.Members {
			hosts[m.MemberID] = m
		}
		if len(g.Offsets) == 0 {
			tb.row(g.Group, "", "", "", "", "", "", "", "")
		}
		for _, o := range g.Offsets {
			m := hosts[o.MemberID]
			tb.row(g.Group, o.Topic, o.Partition, offsetOrDash(o.CurrentOffset), offsetOrDash(o.LogEndOffset),
				offsetOrDash(o.Lag), o.MemberID, m.Host, m.ClientID)
		}
	}
	return tb.flush()
}

func groupFromLag(l kadm.DescribedGroupLag) groupJSON {
	g := groupJSON{
		Group: l.Group, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
		Coordinator: l.Coordinator.NodeID, Members: []groupMemberJSON{}, Offsets: []groupOffsetJSON{},
	}
	for _, m := range l.Members {
		mj := groupMemberJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []topicPartitionJSON{}}
		if m.InstanceID != nil {
			mj.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				mj.Assigned = append(mj.Assigned, topicPartitionJSON{Topic: t.Topic, Partitions: sortedInt32(t.Partitions)})
			}
			sort.Slice(mj.Assigned, func(i, j int) bool { return mj.Assigned[i].Topic < mj.Assigned[j].Topic })
		}
		g.Members = append(g.Members, mj)
	}
	for _, ml := range l.Lag.Sorted() {
		o := groupOffsetJSON{Topic: ml.Topic, Partition: ml.Partition, CurrentOffset: ml.Commit.At,
			LogEndOffset: ml.End.Offset, Lag: ml.Lag}
		if ml.End.Err != nil {
			o.LogEndOffset = -1
		}
		if ml.Member != nil {
			o.MemberID = ml.Member.MemberID
		}
		if ml.Err != nil {
			o.Error = ml.Err.Error()
		}
		if o.Lag > 0 {
			g.TotalLag += o.Lag
		}
		g.Offsets = append(g.Offsets, o)
	}
	return g
}

func sortedPartitions(m map[int32]error) []int32 {
	ps := make([]int32, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	return sortedInt32(ps)
}

func formatAssigned(ts []topicPartitionJSON) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.Topic + ":" + int32List(t.Partitions)
	}
	return strings.Join(parts, " ")
}

type resetJSON struct {
	Group    string          `json:"group"`
	Executed bool            `json:"executed"`
	Offsets  []resetOffsetJS `json:"offsets"`
}

type resetOffsetJS struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"` // -1: nothing committed
	NewOffset     int64  `json:"new_offset"`
}

// resetSpec is the one --to-*/--shift-by/--by-duration a reset was asked for.
type resetSpec struct {
	earliest, latest, current bool
	offset, shift             int64
	offsetSet, shiftSet       bool
	datetime                  string
	duration                  time.Duration
}

func groupsResetOffsets(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "groups reset-offsets GROUP (--topic T[:P,...]... | --all-topics) <target> [--execute] [flags]",
		"Move the committed offsets of a group whose consumers are stopped. Without\n"+
			"--execute it only prints the plan. New offsets are clamped to the partition's\n"+
			"log start and end. Exactly one target:\n"+
			"  --to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N\n"+
			"  | --to-datetime 2006-01-02T15:04:05Z | --by-duration 1h (now minus the duration)", true)
	var topics cliList
	fs.Func("topic", "topic, or topic:partition[,partition...], to reset (repeatable)", func(s string) error {
		topics = append(topics, s)
		return nil
	})
	all := fs.Bool("all-topics", false, "every topic the group has committed offsets for")
	var spec resetSpec
	fs.BoolVar(&spec.earliest, "to-earliest", false, "the log start offset")
	fs.BoolVar(&spec.latest, "to-latest", false, "the log end offset")
	fs.BoolVar(&spec.current, "to-current", false, "the committed offset (rewrites it unchanged; also clamps it)")
	fs.Func("to-offset", "an absolute offset", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		spec.offset, spec.offsetSet = n, true
		return err
	})
	fs.Func("shift-by", "move the committed offset by N (negative: back)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		spec.shift, spec.shiftSet = n, true
		return err
	})
	fs.StringVar(&spec.datetime, "to-datetime", "", "the first offset at or after this RFC 3339 time")
	fs.DurationVar(&spec.duration, "by-duration", 0, "the first offset at or after now minus this duration")
	execute := fs.Bool("execute", false, "commit the new offsets (default: dry run)")
	pos, err := cf.parse(fs, args, exactlyOne("name exactly one group"))
	if err != nil {
		return err
	}
	group := pos[0]
	n := 0
	for _, b := range []bool{spec.earliest, spec.latest, spec.current, spec.offsetSet, spec.shiftSet, spec.datetime != "", spec.duration != 0} {
		if b {
			n++
		}
	}
	if n != 1 {
		return usagef("give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime, --by-duration")
	}
	if spec.offsetSet && spec.offset < 0 {
		return usagef("--to-offset must not be negative")
	}
	if spec.duration < 0 {
		return usagef("--by-duration must be positive")
	}
	var atMillis int64
	switch {
	case spec.datetime != "":
		t, err := time.Parse(time.RFC3339, spec.datetime)
		if err != nil {
			return usagef("--to-datetime %q: want RFC 3339, e.g. 2024-05-01T12:00:00Z", spec.datetime)
		}
		atMillis = t.UnixMilli()
	case spec.duration != 0:
		atMillis = time.Now().Add(-spec.duration).UnixMilli()
	}
	if (*all) == (len(topics) > 0) {
		return usagef("give --topic (one or more) or --all-topics")
	}
	selection := map[string][]int32{} // topic -> partitions (nil: all)
	for _, s := range topics {
		name, parts, hasParts := strings.Cut(s, ":")
		if name == "" {
			return usagef("--topic %q: empty topic name", s)
		}
		if !hasParts {
			selection[name] = nil
			continue
		}
		for _, p := range strings.Split(parts, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || n < 0 {
				return usagef("--topic %q: partitions must be numbers, e.g. orders:0,1", s)
			}
			selection[name] = append(selection[name], int32(n))
		}
	}

	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()

	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return errKafka("describe group", err)
	}
	if g, ok := described[group]; ok {
		if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
			return errKafka("describe group "+group, g.Err)
		}
		if len(g.Members) > 0 || (g.State != "" && g.State != "Empty" && g.State != "Dead") {
			return fmt.Errorf("group %q is active (state %s, %d members): stop its consumers before resetting offsets", group, g.State, len(g.Members))
		}
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return errKafka("fetch committed offsets", err)
	}
	if *all {
		for t := range committed {
			selection[t] = nil
		}
		if len(selection) == 0 {
			return fmt.Errorf("group %q has no committed offsets; name the topics with --topic", group)
		}
	}
	names := make([]string, 0, len(selection))
	for t := range selection {
		names = append(names, t)
	}
	sort.Strings(names)
	meta, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return errKafka("describe topics", err)
	}
	type tp struct {
		topic string
		part  int32
	}
	var targets []tp
	for _, t := range names {
		d, ok := meta[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("topic %q does not exist", t)
		}
		if d.Err != nil {
			return errKafka("topic "+t, d.Err)
		}
		parts := selection[t]
		if parts == nil {
			for _, p := range d.Partitions.Numbers() {
				parts = append(parts, p)
			}
		}
		for _, p := range sortedInt32(parts) {
			if _, ok := d.Partitions[p]; !ok {
				return fmt.Errorf("topic %q has no partition %d", t, p)
			}
			targets = append(targets, tp{t, p})
		}
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return errKafka("list start offsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return errKafka("list end offsets", err)
	}
	var byTime kadm.ListedOffsets
	if atMillis != 0 {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, atMillis, names...); err != nil {
			return errKafka("list offsets by time", err)
		}
	}

	plan := resetJSON{Group: group, Executed: *execute, Offsets: []resetOffsetJS{}}
	commit := kadm.Offsets{}
	for _, x := range targets {
		start, ok1 := starts.Lookup(x.topic, x.part)
		end, ok2 := ends.Lookup(x.topic, x.part)
		if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
			return fmt.Errorf("%s[%d]: cannot read the log start and end offsets", x.topic, x.part)
		}
		cur := int64(-1)
		if c, ok := committed.Lookup(x.topic, x.part); ok && c.Err == nil {
			cur = c.At
		}
		var next int64
		switch {
		case spec.earliest:
			next = start.Offset
		case spec.latest:
			next = end.Offset
		case spec.current:
			if cur < 0 {
				return fmt.Errorf("%s[%d]: the group has no committed offset to keep", x.topic, x.part)
			}
			next = cur
		case spec.offsetSet:
			next = spec.offset
		case spec.shiftSet:
			if cur < 0 {
				return fmt.Errorf("%s[%d]: the group has no committed offset to shift", x.topic, x.part)
			}
			next = cur + spec.shift
		default: // by time
			o, ok := byTime.Lookup(x.topic, x.part)
			if !ok || o.Err != nil {
				return fmt.Errorf("%s[%d]: cannot look up the offset for that time", x.topic, x.part)
			}
			next = o.Offset
			if next < 0 { // no record at or after that time
				next = end.Offset
			}
		}
		next = max(start.Offset, min(next, end.Offset))
		plan.Offsets = append(plan.Offsets, resetOffsetJS{Topic: x.topic, Partition: x.part, CurrentOffset: cur, NewOffset: next})
		commit.Add(kadm.Offset{Topic: x.topic, Partition: x.part, At: next, LeaderEpoch: -1})
	}

	if *execute {
		resps, err := adm.CommitOffsets(ctx, group, commit)
		if err != nil {
			return errKafka("commit offsets", err)
		}
		if err := resps.Error(); err != nil {
			if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.IllegalGeneration) {
				return fmt.Errorf("group %q became active while resetting: %w", group, err)
			}
			return errKafka("commit offsets", err)
		}
	}
	if cf.json() {
		return writeJSON(env.stdout, plan)
	}
	tb := newCLITable(env.stdout, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
	for _, o := range plan.Offsets {
		tb.row(group, o.Topic, o.Partition, offsetOrDash(o.CurrentOffset), o.NewOffset)
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if !*execute {
		fmt.Fprintln(env.stderr, "dry run: nothing was committed; add --execute to apply")
	}
	return nil
}

func groupsDelete(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "groups delete GROUP... [--topic T]... [flags]",
		"Delete consumer groups with no active members, and their committed offsets.\n"+
			"With --topic, delete only the group's committed offsets for those topics.", true)
	var topics cliList
	fs.Var(&topics, "topic", "delete only the offsets of this topic (repeatable)")
	names, err := cf.parse(fs, args, atLeastOne("group"))
	if err != nil {
		return err
	}
	if len(topics) > 0 && len(names) != 1 {
		return usagef("--topic works on exactly one group")
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()

	var results []resultJSON
	var failed []string
	if len(topics) > 0 {
		group := names[0]
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return errKafka("fetch committed offsets", err)
		}
		set := kadm.TopicsSet{}
		for _, t := range topics {
			for p := range committed[t] {
				set.Add(t, p)
			}
		}
		if len(set) == 0 {
			return fmt.Errorf("group %q has no committed offsets for %s", group, strings.Join(topics, ", "))
		}
		resps, err := adm.DeleteOffsets(ctx, group, set)
		if err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				return fmt.Errorf("group %q does not exist", group)
			}
			return errKafka("delete offsets", err)
		}
		type offsetsDeleted struct {
			Group  string `json:"group"`
			Topic  string `json:"topic"`
			Status string `json:"status"`
		}
		var deleted []offsetsDeleted
		for _, t := range topics {
			status := "offsets deleted"
			if _, ok := resps[t]; !ok {
				status = "no offsets"
			}
			for _, p := range sortedPartitions(resps[t]) {
				perr := resps[t][p]
				if perr == nil {
					continue
				}
				status = "failed"
				if errors.Is(perr, kerr.GroupSubscribedToTopic) {
					failed = append(failed, fmt.Sprintf("%s[%d]: the group's active members consume this topic", t, p))
				} else {
					failed = append(failed, fmt.Sprintf("%s[%d]: %v", t, p, perr))
				}
			}
			deleted = append(deleted, offsetsDeleted{group, t, status})
		}
		if cf.json() {
			if err := writeJSON(env.stdout, deleted); err != nil {
				return err
			}
		} else {
			tb := newCLITable(env.stdout, "GROUP", "TOPIC", "STATUS")
			for _, d := range deleted {
				tb.row(d.Group, d.Topic, d.Status)
			}
			if err := tb.flush(); err != nil {
				return err
			}
		}
		return failures("delete offsets", failed)
	}

	resps, err := adm.DeleteGroups(ctx, names...)
	if err != nil {
		return errKafka("delete groups", err)
	}
	for _, name := range names {
		r, ok := resps[name]
		res := resultJSON{Name: name, Status: "deleted"}
		switch {
		case !ok:
			res.Status = "failed"
			failed = append(failed, name+": the broker did not answer for this group")
		case r.Err == nil:
		case errors.Is(r.Err, kerr.GroupIDNotFound):
			res.Status = "failed"
			failed = append(failed, name+": group does not exist")
		case errors.Is(r.Err, kerr.NonEmptyGroup):
			res.Status = "failed"
			failed = append(failed, name+": group has active members; stop its consumers first")
		default:
			res.Status = "failed"
			failed = append(failed, name+": "+kafkaMessage(r.Err, r.ErrMessage))
		}
		results = append(results, res)
	}
	if err := writeResults(env, cf, "group", results); err != nil {
		return err
	}
	return failures("delete", failed)
}
