package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/appliance"
)

// TestAdminAPIs covers the admin APIs kadm (and the console) use beyond the
// main test: explicit assignments and validate_only, DeleteRecords,
// DescribeLogDirs, OffsetForLeaderEpoch, max-timestamp offsets,
// DescribeCluster and broker configs.
func TestAdminAPIs(t *testing.T) {
	n := startNode(t, "log.retention.hours=48")
	adm := n.Admin()
	ctx := ctxFor(t, 30*time.Second)

	// validate_only creates nothing; an explicit assignment is honoured.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned", -1, -1
	for p := range 3 {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), []int32{n.App().BrokerID()}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(ctx, n.Client())
	if err != nil || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 3 {
		t.Fatalf("validate_only: %v %+v", err, resp)
	}
	if md, _ := adm.Metadata(ctx, "assigned"); md.Topics["assigned"].Err == nil {
		t.Fatal("validate_only created the topic")
	}
	req.ValidateOnly = false
	resp, err = req.RequestWith(ctx, n.Client())
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create with assignment: %v %+v", err, resp)
	}
	adm = n.Admin() // a fresh client: kgo caches metadata (the topic as unknown) briefly
	td, err := adm.ListTopics(ctx, "assigned")
	if err != nil || len(td["assigned"].Partitions) != 3 {
		t.Fatalf("assigned topic: %v %+v", err, td)
	}

	// Records with increasing timestamps, then DeleteRecords.
	cl := n.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour)
	for i := range 10 {
		r := &kgo.Record{Topic: "assigned", Partition: 0, Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)}
		if i == 4 {
			r.Timestamp = base.Add(time.Hour / 2) // the largest timestamp
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	mx, err := adm.ListMaxTimestampOffsets(ctx, "assigned")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := mx.Lookup("assigned", 0); o.Err != nil || o.Offset != 4 || o.Timestamp != base.Add(time.Hour/2).UnixMilli() {
		t.Fatalf("max timestamp offset %+v", o)
	}
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{"assigned": {0: {At: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("assigned", 0); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("delete records: %+v", r)
	}
	if starts, _ := adm.ListStartOffsets(ctx, "assigned"); starts["assigned"][0].Offset != 6 {
		t.Fatalf("start offset after DeleteRecords: %+v", starts["assigned"][0])
	}
	dr, _ = adm.DeleteRecords(ctx, kadm.Offsets{"assigned": {0: {At: 99}}})
	if r, _ := dr.Lookup("assigned", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete beyond the high watermark: %+v", r)
	}
	// Reading below the new start is out of range; from it works.
	c := dialRaw(t, n.Addr())
	f := fetchReq("assigned", 0, 2, 0, 0)
	if p := c.recv(f, c.send(f)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 6 {
		t.Fatalf("fetch below the log start: %+v", p)
	}

	// OffsetForLeaderEpoch: epoch 0 ends at the log end.
	ep, err := adm.OffsetForLeaderEpoch(ctx, kadm.OffsetForLeaderEpochRequest{"assigned": {0: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if o := ep["assigned"][0]; o.Err != nil || o.LeaderEpoch != 0 || o.EndOffset != 10 {
		t.Fatalf("offset for leader epoch %+v", o)
	}

	// DescribeLogDirs: the directory with the partitions and their sizes.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Fatalf("log dir %s: %v", d.Dir, d.Err)
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "assigned" && p.Partition == 0 {
				found = p.Size > 0
			}
		})
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 {
			t.Fatalf("log dir %s: total %d usable %d", d.Dir, d.TotalBytes, d.UsableBytes)
		}
	})
	if !found {
		t.Fatal("DescribeLogDirs does not show assigned-0 with a size")
	}

	// DescribeCluster and broker configs.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, n.Client())
	if err != nil || dcr.ErrorCode != 0 || dcr.ClusterID != n.App().ClusterID() || len(dcr.Brokers) != 1 || dcr.ControllerID != n.App().BrokerID() {
		t.Fatalf("describe cluster %v %+v", err, dcr)
	}
	bc, err := adm.DescribeBrokerConfigs(ctx, n.App().BrokerID())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := bc.On(itoa(int(n.App().BrokerID())), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, rc, "log.retention.hours", "48", kmsg.ConfigSource(4))
	checkConfig(t, rc, "num.partitions", "1", kmsg.ConfigSource(5))
	// The topic-level view of the same setting is a static broker config.
	tc, _ := adm.DescribeTopicConfigs(ctx, "assigned")
	trc, _ := tc.On("assigned", nil)
	checkConfig(t, trc, "retention.ms", "172800000", kmsg.ConfigSource(4))
	// Broker configs are static.
	alt, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: kadm.StringPtr("3")}}, n.App().BrokerID())
	if err == nil && alt[0].Err == nil {
		t.Fatal("altering a broker config succeeded; they are static")
	}
}

// TestLostMetadata: a single node whose metadata file is lost refuses to
// start on log dirs of "another cluster"; once meta.properties is removed
// too, it adopts the logs on disk as topics and serves their data.
func TestLostMetadata(t *testing.T) {
	n := startNode(t)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 2, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	cl := n.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kept", Partition: int32(i % 2), Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	n.Stop()
	dir := filepath.Join(n.Dir(), "kafka")
	if err := os.Remove(filepath.Join(dir, "sluice-metadata.json")); err != nil {
		t.Fatal(err)
	}
	cfg, _ := appliance.Load("", []string{"listeners=PLAINTEXT://" + n.Addr(), "log.dirs=" + dir, "console.listen="})
	app, _ := appliance.New(cfg, nil)
	if err := app.Start(ctx); err == nil || !strings.Contains(err.Error(), "meta.properties") {
		app.Close()
		t.Fatalf("start with lost metadata: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "meta.properties")); err != nil {
		t.Fatal(err)
	}
	n.Start()
	ends, err := n.Admin().ListEndOffsets(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, _ := ends.Lookup("kept", p); o.Err != nil || o.Offset != 10 {
			t.Fatalf("adopted kept-%d: %+v", p, o)
		}
	}
}
