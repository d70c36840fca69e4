package reassign

// Throttled moves, as kafka-reassign-partitions.sh --throttle makes them:
// before the reassignments start, the topic configs
// leader.replication.throttled.replicas (the partitions' current replicas,
// which lead and serve the copy) and follower.replication.throttled.replicas
// (the replicas being added, which fetch it) name the moving replicas, and
// the dynamic broker configs leader.replication.throttled.rate and
// follower.replication.throttled.rate bound them on every broker involved.
// Once the moves completed, both are removed again (ClearThrottles; the
// CLI's --wait and `sluice reassign verify`, the console's background
// loop and its cancel).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/config"
)

// Throttles are the throttle configs of a plan.
type Throttles struct {
	Leader, Follower map[string]config.ThrottledReplicas // by topic
	Brokers          []int32                             // current and target replicas, sorted
}

// Topics are the throttled topics, sorted.
func (t Throttles) Topics() []string {
	var out []string
	for topic := range t.Leader {
		out = append(out, topic)
	}
	slices.Sort(out)
	return out
}

// PlanThrottles computes the throttled replicas of the plan's moves from
// the partitions' current replicas: the leader lists name the current
// replicas of every moving partition, the follower lists its replicas
// being added.
func PlanThrottles(plan Plan, current map[Part][]int32) Throttles {
	t := Throttles{Leader: map[string]config.ThrottledReplicas{}, Follower: map[string]config.ThrottledReplicas{}}
	involved := map[int32]bool{}
	for _, e := range plan.Partitions {
		cur := current[Part{e.Topic, e.Partition}]
		if SameSet(cur, e.Replicas) {
			continue // not moving
		}
		l, f := t.Leader[e.Topic], t.Follower[e.Topic]
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
		t.Leader[e.Topic] = l
		if len(f.Pairs) > 0 {
			t.Follower[e.Topic] = f
		}
	}
	for b := range involved {
		t.Brokers = append(t.Brokers, b)
	}
	slices.Sort(t.Brokers)
	return t
}

// SetThrottles writes the plan's throttle configs: the throttled-replica
// lists of each topic, then the rates on each broker involved.
func SetThrottles(ctx context.Context, adm *kadm.Client, t Throttles, rate int64) error {
	var failed []string
	for _, topic := range t.Topics() {
		leader := t.Leader[topic].String()
		alters := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: config.LeaderThrottledReplicas, Value: &leader}}
		if f, ok := t.Follower[topic]; ok {
			follower := f.String()
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: config.FollowerThrottledReplicas, Value: &follower})
		}
		resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err != nil {
			return fmt.Errorf("alter topic configs: %w", err)
		}
		failed = appendAlterFailure(failed, "topic "+topic, topic, resps)
	}
	v := strconv.FormatInt(rate, 10)
	for _, b := range t.Brokers {
		alters := []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: config.LeaderThrottledRate, Value: &v},
			{Op: kadm.SetConfig, Name: config.FollowerThrottledRate, Value: &v},
		}
		resps, err := adm.AlterBrokerConfigs(ctx, alters, b)
		if err != nil {
			return fmt.Errorf("alter configs of broker %d: %w", b, err)
		}
		failed = appendAlterFailure(failed, fmt.Sprintf("broker %d", b), strconv.Itoa(int(b)), resps)
	}
	return failures("set the throttle", failed)
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

// Cleared tells what ClearThrottles removed.
type Cleared struct {
	// Topics lost their throttled-replica lists.
	Topics []string
	// Brokers lost their throttle rates: every live broker, when no
	// reassignment was left in the cluster; none otherwise.
	Brokers []int32
	// Pending counts the reassignments left in the cluster (the brokers
	// keep their rates while there are any).
	Pending int
	// Gone are the topics ClearFinished was given that no longer exist
	// (nothing to remove).
	Gone []string
}

// ClearThrottles removes the throttled-replica lists of topics and, when no
// reassignment is left in progress in the cluster, the throttle rates of
// every live broker (kafka-reassign-partitions.sh --verify's clean-up).
func ClearThrottles(ctx context.Context, adm *kadm.Client, topics []string) (Cleared, error) {
	out := Cleared{Topics: topics}
	var failed []string
	for _, topic := range topics {
		alters := []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: config.LeaderThrottledReplicas},
			{Op: kadm.DeleteConfig, Name: config.FollowerThrottledReplicas},
		}
		resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err != nil {
			return out, fmt.Errorf("alter topic configs: %w", err)
		}
		failed = appendAlterFailure(failed, "topic "+topic, topic, resps)
	}
	moving, err := InProgress(ctx, adm, nil)
	if err != nil {
		return out, err
	}
	if out.Pending = len(moving); out.Pending > 0 {
		return out, failures("remove the throttle", failed)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return out, fmt.Errorf("metadata: %w", err)
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
			return out, fmt.Errorf("alter configs of broker %d: %w", b, err)
		}
		failed = appendAlterFailure(failed, fmt.Sprintf("broker %d", b), strconv.Itoa(int(b)), resps)
	}
	out.Brokers = brokers
	return out, failures("remove the throttle", failed)
}

// ClearFinished removes the throttle of those of topics that have no
// partition moving any more (ClearThrottles on them; with no topic given,
// the brokers' rates once nothing moves), and returns what was cleared.
// A topic with a partition still moving keeps its throttle. done tells whether the throttle is wholly gone: every topic
// cleared and the brokers' rates removed (no reassignment left in the
// cluster); until then the caller calls again later.
func ClearFinished(ctx context.Context, adm *kadm.Client, topics []string) (cl Cleared, done bool, err error) {
	moving, err := InProgress(ctx, adm, nil)
	if err != nil {
		return cl, false, err
	}
	busy := map[string]bool{}
	for _, m := range moving {
		busy[m.Topic] = true
	}
	// A topic deleted meanwhile has no throttle left to remove.
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return cl, false, fmt.Errorf("metadata: %w", err)
	}
	var finished, gone []string
	left := 0
	for _, t := range topics {
		switch {
		case md.Topics[t].Topic == "" || errors.Is(md.Topics[t].Err, kerr.UnknownTopicOrPartition):
			gone = append(gone, t)
		case busy[t]:
			left++
		default:
			finished = append(finished, t)
		}
	}
	if len(finished) == 0 && left > 0 {
		return Cleared{Pending: len(moving), Gone: gone}, false, nil
	}
	cl, err = ClearThrottles(ctx, adm, finished)
	cl.Gone = gone
	if err != nil {
		return cl, false, err
	}
	return cl, left == 0 && cl.Pending == 0, nil
}
