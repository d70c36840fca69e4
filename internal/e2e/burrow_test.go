package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// burrowConfig is a Burrow 1.2 configuration for one cluster named
// "sluice": Burrow keeps its own state in ZooKeeper (zk), reads the
// committed offsets from __consumer_offsets and serves its HTTP API on
// httpAddr.
const burrowConfig = `[general]
pidfile="%[1]s/burrow.pid"

[logging]
level="debug"

[zookeeper]
servers=["%[2]s"]
timeout=6
root-path="/burrow"

[client-profile.sluice]
client-id="burrow-e2e"
kafka-version="2.0.0"

[cluster.sluice]
class-name="kafka"
servers=["%[3]s"]
client-profile="sluice"
topic-refresh=2
offset-refresh=1

[consumer.sluice]
class-name="kafka"
cluster="sluice"
servers=["%[3]s"]
client-profile="sluice"
offsets-topic="__consumer_offsets"
start-latest=false

[httpserver.default]
address="%[4]s"

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
`

// burrowLag is the part of Burrow's /v3/kafka/<cluster>/consumer/<group>/lag
// answer the test reads.
type burrowLag struct {
	Error  bool   `json:"error"`
	Msg    string `json:"message"`
	Status struct {
		Status   string `json:"status"`
		TotalLag int64  `json:"totallag"`
	} `json:"status"`
}

// TestBurrowOnFreshBroker runs LinkedIn's Burrow (Debian's burrow, sarama
// inside) against a broker on which no consumer group has ever existed, so
// __consumer_offsets does not exist when Burrow starts: Burrow's Metadata
// request for it must create it (as Kafka does) rather than make Burrow
// give up at start. Once a consumer commits, Burrow reports its lag.
func TestBurrowOnFreshBroker(t *testing.T) {
	testutil.Heavy(t, "Burrow and ZooKeeper")
	burrow := testutil.RequireBinary(t, "Burrow")
	zk := zktest.Start(t, zktest.Options{})
	n := startNode(t)
	ctx := ctxFor(t, 2*time.Minute)

	const topic, group = "burrow-orders", "burrow-group"
	adm := n.Admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := n.Client(kgo.DefaultProduceTopic(topic))
	for i := range 100 {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("order ", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if topics, err := adm.ListTopicsWithInternal(ctx); err != nil {
		t.Fatal(err)
	} else if topics.Has("__consumer_offsets") {
		t.Fatal("__consumer_offsets exists before any group did: the test would not show anything")
	}

	dir := t.TempDir()
	httpAddr := testutil.FreeAddr(t)
	cfg := fmt.Sprintf(burrowConfig, dir, zk.Addr(), n.Addr(), httpAddr)
	if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &testutil.LockedBuffer{}
	bctx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(bctx, burrow, "--config-dir", dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stop()
		<-exited
		if t.Failed() {
			t.Logf("Burrow output:\n%s", out.String())
		}
	})

	get := func(path string, v any) error {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("Burrow exited: %v", err)
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+httpAddr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		}
		return json.Unmarshal(body, v)
	}

	// Burrow is up and has the topic: its start (where it asks for
	// __consumer_offsets) is behind it.
	testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		var topics struct {
			Topics []string `json:"topics"`
		}
		if err := get("/v3/kafka/sluice/topic", &topics); err != nil {
			return err
		}
		for _, name := range topics.Topics {
			if name == topic {
				return nil
			}
		}
		return fmt.Errorf("topics %v", topics.Topics)
	})
	// Burrow's consumer asked for __consumer_offsets, which made it.
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		var dummy any
		if err := get("/v3/kafka/sluice", &dummy); err != nil { // Burrow still up
			return err
		}
		topics, err := adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return err
		}
		d, ok := topics["__consumer_offsets"]
		if !ok || d.Err != nil || len(d.Partitions) != 50 || !d.IsInternal {
			return fmt.Errorf("__consumer_offsets: exists %v, err %v, %d partitions (want offsets.topic.num.partitions = 50), internal %v",
				ok, d.Err, len(d.Partitions), d.IsInternal)
		}
		return nil
	})

	// A consumer commits offset 40 of 100: a lag of 60.
	cons := n.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 40 {
		fs := cons.PollRecords(ctx, 40-got)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	for i := range 3 {
		// Commits a second apart: Burrow evaluates a window of them.
		if i > 0 {
			time.Sleep(time.Second)
		}
		var commitErr error
		cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 40}}},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				commitErr = err
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if commitErr == nil {
							commitErr = kerr.ErrorForCode(rp.ErrorCode)
						}
					}
				}
			})
		if commitErr != nil {
			t.Fatal(commitErr)
		}
	}

	testutil.CheckFor(t, 60*time.Second, 500*time.Millisecond, func() error {
		var lag burrowLag
		if err := get("/v3/kafka/sluice/consumer/"+group+"/lag", &lag); err != nil {
			return err
		}
		if lag.Error || lag.Status.TotalLag != 60 {
			return fmt.Errorf("lag answer %+v", lag)
		}
		return nil
	})
}
