package clustertest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// sluice runs the sluice binary against the cluster and returns its output.
func sluice(t *testing.T, c *testCluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(append(args, "--brokers", strings.Join(c.seeds(), ","), "--timeout", "90s"), c.cliArgs()...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestBrokerDrainAndAdd: `sluice broker drain 3` moves every replica of the
// given topics off broker 3 while a producer writes (leadership included),
// `sluice broker add 3` gives it its share back, `sluice reassign` moves and
// lists, and no acknowledged record is lost.
func TestBrokerDrainAndAdd(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	t.Parallel() // with the other tests that stop no broker, after the ones that do
	c := healthy(t)
	createTopic(t, c, "drain-a", [][]int32{{3, 1}, {1, 3}, {2, 3}}, nil)
	createTopic(t, c, "drain-b", [][]int32{{3}}, nil)
	p := startProducer(t, c, "drain-a")
	p.waitAcks(t, 200, 60*time.Second)

	out := sluice(t, c, "broker", "drain", "3", "--topics", "drain-a,drain-b", "--wait")
	if !strings.Contains(out, "completed") {
		t.Fatalf("drain output:\n%s", out)
	}
	ctx := ctxFor(t, 60*time.Second)
	// The controller has written the final states; a broker's metadata
	// shows them once its view has caught up (the assignment and the state
	// are separate znodes, read as their watches fire).
	testutil.CheckFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		for _, topic := range []string{"drain-a", "drain-b"} {
			ps, err := partitionsFrom(ctx, c.broker(1), topic)
			if err != nil {
				return err
			}
			for part, pi := range ps {
				if slices.Contains(pi.Replicas, 3) || pi.Leader == 3 || len(pi.ISR) != len(pi.Replicas) {
					return fmt.Errorf("%s-%d after drain: %+v", topic, part, pi)
				}
			}
		}
		return nil
	})
	p.waitAcks(t, 100, 30*time.Second)

	out = sluice(t, c, "broker", "add", "3", "--topics", "drain-a,drain-b", "--wait")
	if !strings.Contains(out, "completed") {
		t.Fatalf("add output:\n%s", out)
	}
	held := 0
	for _, topic := range []string{"drain-a", "drain-b"} {
		ps, err := partitionsFrom(ctx, c.broker(1), topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, pi := range ps {
			if slices.Contains(pi.Replicas, 3) {
				held++
			}
		}
	}
	if held < 2 {
		t.Fatalf("broker 3 holds %d of 7 replicas after `broker add`", held)
	}

	out = sluice(t, c, "reassign", "execute", "--topic", "drain-b", "--partition", "0", "--replicas", "2,1", "--wait")
	if !strings.Contains(out, "completed") {
		t.Fatalf("reassign output:\n%s", out)
	}
	waitISR(t, c, "drain-b", func(_ int32, pi partitionInfo) error {
		if !slices.Equal(pi.Replicas, []int32{2, 1}) || len(pi.ISR) != 2 {
			return fmt.Errorf("%+v", pi)
		}
		return nil
	})
	// (Per topic: the other tests of its parallel group reassign their own.)
	for _, topic := range []string{"drain-a", "drain-b"} {
		if out := sluice(t, c, "reassign", "list", "--topic", topic); !strings.Contains(out, "no reassignment in progress") {
			t.Fatalf("reassign list --topic %s:\n%s", topic, out)
		}
	}
	p.halt()
	checkExactlyOnceInOrder(t, readAll(t, c, "drain-a", 0), p.snapshot())
}
