package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/record"
)

const pythonClient = `
import sys, json, time
from confluent_kafka import Producer, Consumer, TopicPartition, OFFSET_BEGINNING
bootstrap, topic, n, codec = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
errs = []
def cb(err, msg):
    if err is not None:
        errs.append(str(err))
p = Producer({'bootstrap.servers': bootstrap, 'compression.type': codec, 'enable.idempotence': True, 'linger.ms': 20})
for i in range(n):
    p.produce(topic, key=b'k%d' % i, value=b'python-%d' % i, headers=[('h', b'%d' % i)], callback=cb)
left = p.flush(30)
if left:
    errs.append('%d messages not delivered' % left)
c = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'e2e-python', 'enable.auto.commit': False})
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
got = []
deadline = time.time() + 30
while len(got) < n and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        errs.append(str(m.error()))
        continue
    got.append([m.offset(), m.key().decode(), m.value().decode(), m.headers()[0][1].decode()])
c.close()
print(json.dumps({"errors": errs, "records": got}))
`

// TestConfluentKafkaPython produces (idempotent, gzip) and consumes with
// confluent-kafka-python (librdkafka 1.7) from /usr/bin/python3.
func TestConfluentKafkaPython(t *testing.T) {
	testutil.Heavy(t, "confluent-kafka-python")
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		testutil.RequireBinary(t, "python3-confluent-kafka-at-/usr/bin/python3")
	}
	if out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skipf("confluent_kafka not importable: %s", out)
		}
		t.Fatalf("confluent_kafka is not installed for %s (run make test-deps): %s", py, out)
	}
	n := startNode(t)
	script := filepath.Join(t.TempDir(), "client.py")
	os.WriteFile(script, []byte(pythonClient), 0o644)
	const count = 500
	out := runTool(t, 90*time.Second, nil, py, script, n.Addr(), "python", "500", "gzip")
	var res struct {
		Errors  []string `json:"errors"`
		Records [][]any  `json:"records"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("client errors: %v", res.Errors)
	}
	if len(res.Records) != count {
		t.Fatalf("consumed %d records, produced %d", len(res.Records), count)
	}
	for i, r := range res.Records {
		if int(r[0].(float64)) != i || r[1] != "k"+itoa(i) || r[2] != "python-"+itoa(i) || r[3] != itoa(i) {
			t.Fatalf("record %d: %v", i, r)
		}
	}
	checkCompressed(t, "python gzip", storedCodecs(t, n.Addr(), "python"), record.CompressionGzip)
}

func itoa(i int) string { return jsonNumber(i) }

func jsonNumber(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
