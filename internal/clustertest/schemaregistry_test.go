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

	"github.com/sluice-io/sluice/internal/testutil"
)

func registryDo(ctx context.Context, b *brokerProc, method, path, body string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.srAddr+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), err
}

func avroRecord(name string) string {
	s, _ := json.Marshal(map[string]string{"schema": fmt.Sprintf(`{"type":"record","name":%q,"fields":[{"name":"id","type":"string"}]}`, name)})
	return string(s)
}

// TestSchemaRegistryCluster: every host runs the registry; writes sent to
// any host go to the one leader (/schema_registry_leader) and are readable
// on the host that took them as soon as it answers (read-your-writes), and
// soon on every host, with the same ids everywhere; a delete sent to a
// host that does not lead is forwarded as well. Killing the leader's
// host: another takes over and ids continue from the largest written,
// none given twice.
func TestSchemaRegistryCluster(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	ctx := ctxFor(t, 180*time.Second)
	zc := c.zkConn(t)

	leaderID := func() (int32, error) {
		data, _, err := zc.Get(zkChroot + "/schema_registry_leader")
		if err != nil {
			return -1, fmt.Errorf("/schema_registry_leader: %w", err)
		}
		var node struct {
			BrokerID int32  `json:"brokerid"`
			URL      string `json:"url"`
		}
		if err := json.Unmarshal(data, &node); err != nil {
			return -1, err
		}
		if node.URL != "http://"+c.broker(node.BrokerID).srAddr {
			return -1, fmt.Errorf("leader node %s: url is not broker %d's registry", data, node.BrokerID)
		}
		return node.BrokerID, nil
	}
	var leader int32
	// A registry leader.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() (err error) {
		leader, err = leaderID()
		return err
	})
	t.Logf("broker %d leads the registry", leader)

	// register (with retries: the first write creates _schemas) on each
	// host in turn, the leader's and the others'
	ids := map[string]int{}
	for i, b := range c.brokers {
		subject := fmt.Sprintf("cluster-%d-value", i)
		var st int
		var body string
		testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() (err error) {
			st, body, err = registryDo(ctx, b, "POST", "/subjects/"+subject+"/versions", avroRecord(fmt.Sprintf("R%d", i)))
			if err == nil && st != 200 {
				err = fmt.Errorf("%d %s", st, body)
			}
			if err != nil {
				err = fmt.Errorf("register on broker %d: %w", b.id, err)
			}
			return err
		})
		var resp struct{ ID int }
		json.Unmarshal([]byte(body), &resp)
		ids[subject] = resp.ID
		// read-your-writes on the host that took the write
		st, body, err := registryDo(ctx, b, "GET", "/subjects/"+subject+"/versions/1", "")
		if err != nil || st != 200 || !strings.Contains(body, fmt.Sprintf(`"id":%d`, resp.ID)) {
			t.Fatalf("broker %d right after its write: %d %s %v", b.id, st, body, err)
		}
	}
	if fmt.Sprint(ids) != "map[cluster-0-value:1 cluster-1-value:2 cluster-2-value:3]" {
		t.Fatalf("ids %v", ids)
	}
	sameEverywhere := func(skip int32, want string) {
		t.Helper()
		// Every host answers the same ids.
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			for _, b := range c.brokers {
				if b.id == skip {
					continue
				}
				for subject, id := range ids {
					st, body, err := registryDo(ctx, b, "GET", "/subjects/"+subject+"/versions/latest", "")
					if err != nil {
						return err
					}
					if st != 200 || !strings.Contains(body, fmt.Sprintf(`"id":%d`, id)) {
						return fmt.Errorf("broker %d %s: %d %s", b.id, subject, st, body)
					}
				}
				_, body, err := registryDo(ctx, b, "GET", "/subjects", "")
				if err != nil {
					return err
				}
				if body != want {
					return fmt.Errorf("broker %d subjects %s, want %s", b.id, body, want)
				}
			}
			return nil
		})
	}
	sameEverywhere(0, `["cluster-0-value","cluster-1-value","cluster-2-value"]`)

	// A delete sent to a host that does not lead is forwarded too: a
	// subject registered through one follower and deleted through the
	// other is gone on every host, and its id is not given again.
	var followers []*brokerProc
	for _, b := range c.brokers {
		if b.id != leader {
			followers = append(followers, b)
		}
	}
	st, body, err := registryDo(ctx, followers[0], "POST", "/subjects/doomed-value/versions", avroRecord("Doomed"))
	if err != nil || st != 200 || body != `{"id":4}` {
		t.Fatalf("register through broker %d: %d %s %v", followers[0].id, st, body, err)
	}
	st, body, err = registryDo(ctx, followers[1], "DELETE", "/subjects/doomed-value", "")
	if err != nil || st != 200 || body != `[1]` {
		t.Fatalf("delete through broker %d: %d %s %v", followers[1].id, st, body, err)
	}
	sameEverywhere(0, `["cluster-0-value","cluster-1-value","cluster-2-value"]`)

	// lose the leader's host
	c.broker(leader).kill()
	// Another registry leads.
	testutil.CheckFor(t, sessionTimeout+20*time.Second, 100*time.Millisecond, func() error {
		id, err := leaderID()
		if err != nil {
			return err
		}
		if id == leader {
			return fmt.Errorf("still broker %d", id)
		}
		return nil
	})
	next, _ := leaderID()
	t.Logf("broker %d leads the registry after broker %d was killed", next, leader)
	var survivor *brokerProc
	for _, b := range c.brokers {
		if b.id != leader && b.id != next {
			survivor = b
		}
	}
	// Register after the failover.
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		st, body, err := registryDo(ctx, survivor, "POST", "/subjects/after-value/versions", avroRecord("After"))
		if err != nil {
			return err
		}
		if st != 200 {
			return fmt.Errorf("%d %s", st, body)
		}
		if body != `{"id":5}` {
			t.Fatalf("id after the failover: %s, want 5 (4 went to a deleted subject)", body)
		}
		return nil
	})
	ids["after-value"] = 5
	sameEverywhere(leader, `["after-value","cluster-0-value","cluster-1-value","cluster-2-value"]`)

	// the killed host returns and catches up
	if err := c.broker(leader).start(); err != nil {
		t.Fatal(err)
	}
	sameEverywhere(0, `["after-value","cluster-0-value","cluster-1-value","cluster-2-value"]`)
}
