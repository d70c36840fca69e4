package consolestate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/consoledb"
)

// TestKafkaLogRidesOutLeaderWindow: for a few seconds the state topic's
// partition answers as while its leadership moves (a controlled shutdown,
// a failover): ListOffsets NOT_LEADER_OR_FOLLOWER, then
// LEADER_NOT_AVAILABLE, produce NOT_ENOUGH_REPLICAS. End and Append wait
// it out within their context instead of failing (the console would
// refuse the change with 503), and the write lands once.
func TestKafkaLogRidesOutLeaderWindow(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, StateTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := NewKafkaLog(c.ListenAddrs(), StateTopicSpec(3), nil)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := l.Append(ctx, []consoledb.Record{{Key: []byte(`["t",1]`), Value: []byte(`{"id":1}`)}}); err != nil {
		t.Fatal(err)
	}

	const window = 2500 * time.Millisecond
	until := time.Now().Add(window)
	var listed, produced atomic.Int64
	c.ControlKey(kmsg.ListOffsets.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if time.Now().After(until) {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		code := kerr.NotLeaderForPartition.Code
		if listed.Add(1)%2 == 0 {
			code = kerr.LeaderNotAvailable.Code
		}
		req := kr.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.Produce.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if time.Now().After(until) {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		produced.Add(1)
		req := kr.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	defer wcancel()
	start := time.Now()
	type result struct {
		off int64
		err error
	}
	appended := make(chan result, 1)
	go func() {
		off, err := l.Append(wctx, []consoledb.Record{{Key: []byte(`["t",2]`), Value: []byte(`{"id":2}`)}})
		appended <- result{off, err}
	}()
	end, _, err := l.End(wctx)
	if err != nil {
		t.Fatalf("End during the leadership window (after %v, %d ListOffsets answered with an error): %v", time.Since(start).Round(time.Millisecond), listed.Load(), err)
	}
	if end != 1 && end != 2 {
		t.Fatalf("End %d, want 1 or 2", end)
	}
	r := <-appended
	if r.err != nil {
		t.Fatalf("Append during the leadership window (after %v): %v", time.Since(start).Round(time.Millisecond), r.err)
	}
	if r.off != 1 {
		t.Fatalf("the write landed at offset %d, want 1", r.off)
	}
	if listed.Load() == 0 || produced.Load() == 0 {
		t.Fatalf("%d ListOffsets and %d produce requests answered with an error: the window was not exercised", listed.Load(), produced.Load())
	}
	var keys []string
	for next := int64(0); next < 2; {
		recs, err := l.Fetch(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			keys = append(keys, string(r.Key))
			next = r.Offset + 1
		}
	}
	if end, _, err := l.End(ctx); err != nil || end != 2 || len(keys) != 2 || keys[1] != `["t",2]` {
		t.Fatalf("the topic holds %q, end %d (%v): want each write once", keys, end, err)
	}
}
