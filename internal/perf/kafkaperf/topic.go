package kafkaperf

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// withAdmin runs fn with an admin client on c's brokers, bounded by the
// setup timeout.
func withAdmin(ctx context.Context, c *Common, fn func(context.Context, *kgo.Client, *kadm.Client) error) error {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return fmt.Errorf("creating admin client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.SetupTimeout)
	defer cancel()
	err = fn(ctx, cl, kadm.NewClient(cl))
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("setup with brokers %v did not finish within %v: %w", c.Brokers, c.SetupTimeout, err)
	}
	return err
}

// ensureTopic creates the topic with the given partitions and replication
// factor unless it exists, waits until every partition has a leader, and
// returns the partition count it has.
func ensureTopic(ctx context.Context, c *Common, partitions int32, rf int16) (int32, error) {
	n, err := ensureTopics(ctx, c, []string{c.Topic}, partitions, rf)
	if err != nil {
		return 0, err
	}
	return n[c.Topic], nil
}

// ensureTopics is ensureTopic for several topics at once (one CreateTopics
// request for those missing); it returns each topic's partition count.
func ensureTopics(ctx context.Context, c *Common, topics []string, partitions int32, rf int16) (map[string]int32, error) {
	counts := make(map[string]int32, len(topics))
	err := withAdmin(ctx, c, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		var missing []string
		for _, t := range topics {
			got, err := describe(ctx, cl, t)
			switch {
			case err == nil:
				counts[t] = got
				if got != partitions {
					c.note("topic %q exists with %d partitions (asked for %d); using it as it is", t, got, partitions)
				}
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				missing = append(missing, t)
			case !errors.Is(err, errNoLeader):
				return err
			}
		}
		if len(missing) > 0 {
			resp, err := adm.CreateTopics(ctx, partitions, rf, nil, missing...)
			if err != nil {
				return fmt.Errorf("creating topics %v (%d partitions, replication factor %d): %w", missing, partitions, rf, err)
			}
			for _, t := range missing {
				if r, ok := resp[t]; ok && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
					return fmt.Errorf("creating topic %q (%d partitions, replication factor %d): %w", t, partitions, rf, r.Err)
				}
			}
		}
		// Creation is asynchronous on a real cluster: wait until metadata
		// shows every partition with a leader, so the first produce does
		// not race the controller.
		for _, t := range topics {
			if _, ok := counts[t]; ok {
				continue
			}
			for {
				got, err := describe(ctx, cl, t)
				if err == nil {
					counts[t] = got
					break
				}
				if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, errNoLeader) {
					return err
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("topic %q not ready (%v): %w", t, err, ctx.Err())
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		return nil
	})
	return counts, err
}

// topicPartitions returns the partition count of an existing topic.
func topicPartitions(ctx context.Context, c *Common) (int32, error) {
	var n int32
	err := withAdmin(ctx, c, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
		var err error
		n, err = describe(ctx, cl, c.Topic)
		return err
	})
	return n, err
}

// endOffsets returns the current end offset of each partition of the topic.
func endOffsets(ctx context.Context, c *Common) (map[int32]int64, error) {
	out := make(map[int32]int64)
	err := withAdmin(ctx, c, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		lo, err := adm.ListEndOffsets(ctx, c.Topic)
		if err != nil {
			return fmt.Errorf("listing end offsets of %q: %w", c.Topic, err)
		}
		var first error
		lo.Each(func(o kadm.ListedOffset) {
			if o.Err != nil && first == nil {
				first = fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err)
			}
			out[o.Partition] = o.Offset
		})
		return first
	})
	return out, err
}

// errNoLeader is a partition without a leader, which a new topic has for a
// moment.
var errNoLeader = errors.New("partition has no leader yet")

// describe returns the partition count of topic once every partition has a
// leader. It asks the brokers directly: kadm's metadata goes through the
// client's metadata cache, which would keep answering "unknown topic" for
// seconds after the topic was created.
func describe(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("reading metadata of %q: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, fmt.Errorf("topic %q: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil || p.Leader < 0 {
				return 0, fmt.Errorf("topic %q partition %d (%v): %w", topic, p.Partition, err, errNoLeader)
			}
		}
		return int32(len(t.Partitions)), nil
	}
	return 0, fmt.Errorf("topic %q: %w", topic, kerr.UnknownTopicOrPartition)
}
