package lag

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A group whose coordinator does not answer is not listed by any broker:
// a collection of every group then returns it with its Err set (its lag
// unknown, not gone), and its lag again once a coordinator answers; a
// group deleted meanwhile is dropped and forgotten.
func TestCollectGroupWhoseCoordinatorIsDown(t *testing.T) {
	fc, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(fc.ListenAddrs()...), kgo.RequestRetries(2),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce(t, fc.ListenAddrs(), "orders", 0, 0, 10, kgo.NoCompression())
	for _, g := range []string{"billing", "shipping"} {
		var os kadm.Offsets
		os.AddOffset("orders", 0, 4, -1)
		if err := adm.CommitAllOffsets(ctx, g, os); err != nil {
			t.Fatal(err)
		}
	}

	c := NewCollector(cl)
	byName := func() map[string]Group {
		t.Helper()
		gs, err := c.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]Group{}
		for _, g := range gs {
			m[g.Group] = g
		}
		return m
	}
	gs := byName()
	if g := gs["billing"]; g.Err != nil || g.TotalLag != 6 || len(gs) != 2 {
		t.Fatalf("before: %+v", gs)
	}

	// billing's coordinator is down: no broker lists it, describing it
	// answers COORDINATOR_NOT_AVAILABLE.
	var down atomic.Bool
	down.Store(true)
	fc.ControlKey(kmsg.ListGroups.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fc.KeepControl()
		if !down.Load() {
			return nil, nil, false
		}
		resp := req.(*kmsg.ListGroupsRequest).ResponseKind().(*kmsg.ListGroupsResponse)
		// Everything but billing, as a broker that is up lists it.
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState = "shipping", "", "Empty"
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	fc.ControlKey(kmsg.DescribeGroups.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fc.KeepControl()
		r := req.(*kmsg.DescribeGroupsRequest)
		if !down.Load() || len(r.Groups) != 1 || r.Groups[0] != "billing" {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.ErrorCode = "billing", kerr.CoordinatorNotAvailable.Code
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	gs = byName()
	if g, ok := gs["billing"]; !ok || g.Err == nil {
		t.Fatalf("billing while its coordinator is down: %+v (present %v)", g, ok)
	}
	if g := gs["shipping"]; g.Err != nil || g.TotalLag != 6 {
		t.Fatalf("shipping while billing's coordinator is down: %+v", g)
	}

	// A coordinator answers again: billing's lag is read again.
	down.Store(false)
	gs = byName()
	if g := gs["billing"]; g.Err != nil || g.TotalLag != 6 {
		t.Fatalf("billing after its coordinator is back: %+v", gs)
	}

	// A deleted group is gone, and forgotten.
	if _, err := adm.DeleteGroups(ctx, "shipping"); err != nil {
		t.Fatal(err)
	}
	gs = byName()
	if _, ok := gs["shipping"]; ok || len(gs) != 1 {
		t.Fatalf("after deleting shipping: %+v", gs)
	}
	c.kmu.Lock()
	_, known := c.known["shipping"]
	c.kmu.Unlock()
	if known {
		t.Fatal("the deleted group is still probed")
	}
}
