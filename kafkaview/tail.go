package kafkaview

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tail follows a topic (or one partition) from its end offsets at the call,
// handing each batch of new records that pass filter to fn (at least once a
// second or so, with an empty batch when nothing arrived) until ctx ends or
// fn returns an error. At most maxPerSecond records per second reach fn; the
// ones over that are counted, not delivered, and the count is passed with the
// next delivery so the page can say so. Tail is how the console's live view
// works: long-polling Fetch requests (max wait 1s) to the partition leaders.
func (c *Client) Tail(ctx context.Context, topic string, partition int32, filter Filter, maxPerSecond int, fn func(recs []Record, dropped int64) error) error {
	c.tailMu.Lock()
	if c.tails >= c.maxTails {
		c.tailMu.Unlock()
		return ErrTooManyTails
	}
	c.tails++
	c.tailMu.Unlock()
	defer func() {
		c.tailMu.Lock()
		c.tails--
		c.tailMu.Unlock()
	}()
	if maxPerSecond <= 0 {
		maxPerSecond = 50
	}

	tm, parts, err := c.plan(ctx, Query{Topic: topic, Partition: partition, From: FromLatest, Limit: 1})
	if err != nil {
		return err
	}
	for _, ps := range parts {
		// Start at the end: plan's "latest" backs up Limit records.
		ps.pos = ps.stop
		ps.stop = 1<<63 - 1
		ps.done = false
	}
	var (
		windowStart = time.Now()
		inWindow    int
		dropped     int64
	)
	for ctx.Err() == nil {
		var batch []Record
		errs := c.tailRound(ctx, tm, parts, func(ps *partState, r *kgo.Record) verdict {
			if !filter.Match(r) {
				return take
			}
			if now := time.Now(); now.Sub(windowStart) >= time.Second {
				windowStart, inWindow = now, 0
			}
			if inWindow >= maxPerSecond {
				dropped++
				return take
			}
			inWindow++
			batch = append(batch, copyRecord(r))
			return take
		})
		if ctx.Err() != nil {
			return nil
		}
		// fn is called every round, with no records when none came, so the
		// caller can send keep-alives and notice a client that has gone.
		if err := fn(batch, dropped); err != nil {
			return err
		}
		dropped = 0
		if len(errs) > 0 {
			c.log.Debug("tail round", "topic", topic, "errs", fmt.Sprint(errs))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		for _, ps := range parts {
			ps.done, ps.stuck = false, 0 // a tail never gives up on a partition
		}
	}
	return nil
}

// tailRound is fetchRound with a long poll, so an idle topic costs one
// request per second per leader.
func (c *Client) tailRound(ctx context.Context, tm TopicMeta, parts []*partState, fn func(*partState, *kgo.Record) verdict) []error {
	// fetchRound sends MaxWait 0; for a tail we wait at the broker instead of
	// spinning. Run fetchRound and, when nothing arrived, pause: brokers that
	// honour MaxWait would have held the request anyway.
	got := false
	errs := c.fetchRound(ctx, tm, parts, false, false, func(ps *partState, r *kgo.Record) verdict {
		got = true
		return fn(ps, r)
	})
	if !got {
		c.waitForData(ctx, tm, parts)
	}
	return errs
}

// waitForData parks on one long-polling Fetch (max wait 1s) against the
// leader of the first partition, so an idle tail does not busy-loop.
func (c *Client) waitForData(ctx context.Context, tm TopicMeta, parts []*partState) {
	if len(parts) == 0 {
		return
	}
	byLeader := make(map[int32][]*partState)
	for _, ps := range parts {
		byLeader[ps.leader] = append(byLeader[ps.leader], ps)
	}
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // the other polls end as soon as wctx does
	}()
	done := make(chan struct{}, len(byLeader))
	for leader, pss := range byLeader {
		if leader < 0 {
			done <- struct{}{}
			continue
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 1000
		req.MinBytes = 1
		req.MaxBytes = 1 << 10
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = tm.Name, tm.ID
		for _, ps := range pss {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = ps.p, ps.pos, 1<<10
			rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			req.RequestWith(wctx, c.cl.Broker(int(leader)))
			done <- struct{}{}
		}()
	}
	// Return when any leader answers (data arrived or it waited its second).
	select {
	case <-done:
	case <-wctx.Done():
	}
}
