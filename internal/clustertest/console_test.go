package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestConsoleLeadership: every host runs the web console; exactly one of
// them does the cluster's background work — here, exporting consumer-group
// lag — the one whose ZooKeeper session holds the ephemeral
// /console_leader. Kill that host with kill -9: another console takes over
// within the session timeout, and the killed one, back, stands by.
func TestConsoleLeadership(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	ctx := ctxFor(t, 120*time.Second)
	createTopic(t, c, "console-lag", [][]int32{{1, 2, 3}}, nil)
	cl := c.client(t, kgo.DefaultProduceTopic("console-lag"))
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.AddOffset("console-lag", 0, 2, -1)
	adm := c.admin(t)
	// Offsets committed.
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		rs, err := adm.CommitOffsets(ctx, "g-console", offs)
		if err != nil {
			return err
		}
		return rs.Error()
	})
	zc := c.zkConn(t)

	// exporters returns the brokers whose console exports the group's lag,
	// among those running; the ZooKeeper node's holder must be the one.
	oneLeader := func(skip int32) (int32, error) {
		var exporting []int32
		for _, b := range c.brokers {
			if b.id == skip || !b.running() {
				continue
			}
			m, err := consoleMetrics(ctx, b)
			if err != nil {
				return -1, fmt.Errorf("broker %d console: %w", b.id, err)
			}
			if strings.Contains(m, `sluice_consumergroup_lag_records{group="g-console",partition="0",topic="console-lag"} 8`) {
				exporting = append(exporting, b.id)
			}
		}
		if len(exporting) != 1 {
			return -1, fmt.Errorf("consoles exporting the lag: %v, want exactly one", exporting)
		}
		data, _, err := zc.Get(zkChroot + "/console_leader")
		if err != nil {
			return -1, fmt.Errorf("/console_leader: %w", err)
		}
		var node struct {
			BrokerID int32  `json:"brokerid"`
			Console  string `json:"console"`
		}
		if err := json.Unmarshal(data, &node); err != nil {
			return -1, fmt.Errorf("/console_leader %q: %w", data, err)
		}
		if node.BrokerID != exporting[0] || node.Console != c.broker(node.BrokerID).console {
			return -1, fmt.Errorf("/console_leader names %+v, but broker %d's console exports", node, exporting[0])
		}
		return exporting[0], nil
	}

	var leader int32
	// Exactly one console leads.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() (err error) {
		leader, err = oneLeader(0)
		return err
	})
	t.Logf("broker %d's console leads", leader)

	c.broker(leader).kill()
	killed := time.Now()
	// Another console holds /console_leader.
	testutil.CheckFor(t, sessionTimeout+10*time.Second, 100*time.Millisecond, func() error {
		data, _, err := zc.Get(zkChroot + "/console_leader")
		if err != nil {
			return err
		}
		if strings.Contains(string(data), fmt.Sprintf(`"brokerid":%d,`, leader)) {
			return fmt.Errorf("still %s", data)
		}
		return nil
	})
	took := time.Since(killed)
	// The session timeout and a ZooKeeper tick (200 ms here), with room
	// for a busy machine.
	if took > sessionTimeout+2*time.Second {
		t.Fatalf("the takeover took %v (session timeout %v)", took, sessionTimeout)
	}
	var next int32
	// The new leader's console exports the lag.
	testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() (err error) {
		next, err = oneLeader(leader)
		return err
	})
	t.Logf("broker %d's console took over %v after broker %d was killed (exporting %v after)", next,
		took.Round(time.Millisecond), leader, time.Since(killed).Round(time.Millisecond))

	// The killed host returns: its console stands by.
	if err := c.broker(leader).start(); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if _, err := consoleMetrics(ctx, c.broker(leader)); err != nil {
			return fmt.Errorf("broker %d's console: %w", leader, err)
		}
		return nil
	})
	// Two lag export rounds of the returned console: still one leader.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		got, err := oneLeader(0)
		if err != nil {
			t.Fatal(err)
		}
		if got != next {
			t.Fatalf("leadership moved back to broker %d", got)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// consoleMetrics fetches a broker's console /metrics.
func consoleMetrics(ctx context.Context, b *brokerProc) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.console+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(body), nil
}
