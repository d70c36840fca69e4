package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/record"
)

// kafkajsVersion is the kafkajs release the test installs from the npm
// registry (into the user cache, once) when it is not there yet.
const kafkajsVersion = "2.2.4"

const kafkajsClient = `
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
const [bootstrap, topic, nStr] = process.argv.slice(2);
const n = parseInt(nStr, 10);
const kafka = new Kafka({ clientId: 'e2e-kafkajs', brokers: [bootstrap], logLevel: logLevel.ERROR, retry: { retries: 5 } });
(async () => {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < n; i++) {
    messages.push({ key: 'k' + i, value: 'kafkajs-' + i, headers: { h: String(i) }, partition: i % 3 });
  }
  // Half uncompressed, half gzip (kafkajs' built-in codec).
  await producer.send({ topic, messages: messages.slice(0, n / 2), acks: -1 });
  await producer.send({ topic, messages: messages.slice(n / 2), acks: -1, compression: CompressionTypes.GZIP });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: 'e2e-kafkajs', sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out after ' + got.length + ' records')), 60000);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push([partition, Number(message.offset), message.key.toString(), message.value.toString(), message.headers.h.toString()]);
        if (got.length === n) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.commitOffsets([]).catch(() => {});
  await consumer.disconnect();
  console.log(JSON.stringify({ partitions: meta.topics[0].partitions.length, records: got }));
})().catch((e) => { console.error(e && e.stack || String(e)); process.exit(1); });
`

// kafkajsDir returns the directory holding node_modules/kafkajs. `make
// test-deps` puts kafkajs there (from the npm registry, before the tests run:
// the tests themselves touch nothing but loopback); SLUICE_KAFKAJS_DIR
// overrides the place.
func kafkajsDir(t *testing.T) string {
	t.Helper()
	testutil.RequireBinary(t, "node")
	dir := os.Getenv("SLUICE_KAFKAJS_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("no cache directory for kafkajs: %v", err)
		}
		dir = filepath.Join(cache, "sluice-test", "kafkajs-"+kafkajsVersion)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skipf("kafkajs %s not installed in %s", kafkajsVersion, dir)
		}
		t.Fatalf("kafkajs %s is not installed in %s (run make test-deps): %v", kafkajsVersion, dir, err)
	}
	return dir
}

// TestKafkaJS drives the broker with kafkajs, which sends no flexible
// versions at all (Produce v7, Fetch v11, Metadata v6, ApiVersions v2): admin
// topic creation, an idempotent producer with and without gzip, and a group
// consumer that reads everything back.
func TestKafkaJS(t *testing.T) {
	testutil.Heavy(t, "kafkajs on node")
	dir := kafkajsDir(t)
	n := startNode(t)
	script := filepath.Join(dir, "client.js")
	if err := os.WriteFile(script, []byte(kafkajsClient), 0o644); err != nil {
		t.Fatal(err)
	}
	const count = 300
	out := runTool(t, 120*time.Second, nil, "node", script, n.Addr(), "kafkajs", "300")
	var res struct {
		Partitions int     `json:"partitions"`
		Records    [][]any `json:"records"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("kafkajs output %q: %v", out, err)
	}
	if res.Partitions != 3 {
		t.Fatalf("metadata shows %d partitions, want 3", res.Partitions)
	}
	if len(res.Records) != count {
		t.Fatalf("consumed %d records, produced %d", len(res.Records), count)
	}
	seen := map[string]bool{}
	nextOffset := map[int]int{}
	for _, r := range res.Records {
		p, off, key, val, hdr := int(r[0].(float64)), int(r[1].(float64)), r[2].(string), r[3].(string), r[4].(string)
		if off != nextOffset[p] {
			t.Fatalf("partition %d: offset %d, want %d (out of order or gap)", p, off, nextOffset[p])
		}
		nextOffset[p]++
		i := key[1:]
		if val != "kafkajs-"+i || hdr != i || seen[key] {
			t.Fatalf("record %v: wrong value/header or duplicate", r)
		}
		seen[key] = true
	}
	batches := storedCodecs(t, n.Addr(), "kafkajs")
	var gz, plain int
	for _, b := range batches {
		switch b.codec {
		case record.CompressionGzip:
			gz++
		case record.CompressionNone:
			plain++
		}
	}
	if gz == 0 || plain == 0 {
		t.Fatalf("stored batches: %d gzip, %d uncompressed; want both", gz, plain)
	}
}
