package securitytest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// pythonSASLClient produces n records and consumes them in a consumer
// group over SASL_SSL, printing {"errors": [...], "values": [...]}.
const pythonSASLClient = `
import sys, json, time
from confluent_kafka import Producer, Consumer
bootstrap, ca, mech, user, password, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])
conf = {'bootstrap.servers': bootstrap, 'security.protocol': 'SASL_SSL', 'ssl.ca.location': ca,
        'sasl.mechanisms': mech, 'sasl.username': user, 'sasl.password': password}
errs = []
def cb(err, msg):
    if err is not None:
        errs.append(str(err))
p = Producer(dict(conf, **{'enable.idempotence': True}))
for i in range(n):
    p.produce(topic, value=b'py-%d' % i, callback=cb)
left = p.flush(30)
if left:
    errs.append('%d messages not delivered' % left)
c = Consumer(dict(conf, **{'group.id': 'py-' + user, 'auto.offset.reset': 'earliest'}))
c.subscribe([topic])
got = []
deadline = time.time() + 45
while len(got) < n and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        errs.append(str(m.error()))
        continue
    got.append(m.value().decode())
c.commit(asynchronous=False)
c.close()
print(json.dumps({"errors": errs, "values": got}))
`

// TestConfluentKafkaPythonSASLSSL: confluent-kafka-python (librdkafka)
// from /usr/bin/python3 produces (idempotent) and consumes in a group
// over SASL_SSL with SCRAM-SHA-512, trusting the test CA.
func TestConfluentKafkaPythonSASLSSL(t *testing.T) {
	testutil.Heavy(t, "confluent-kafka-python")
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		testutil.RequireBinary(t, "python3-confluent-kafka-at-/usr/bin/python3")
	}
	if out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skipf("confluent_kafka not importable: %s", out)
		}
		t.Fatalf("confluent_kafka is not installed for %s (run make test-deps): %s", py, out)
	}
	s := startSecured(t)
	ctx := ctxFor(t, 120*time.Second)
	adm := kadm.NewClient(client(t, s.saslSSL, kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scramSHA512("alice", "alice-secret"))))
	const topic = "python-sasl"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(script, []byte(pythonSASLClient), 0o644); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	const n = 50
	out, err := exec.CommandContext(rctx, py, script, s.saslSSL, s.ca.TrustPath, "SCRAM-SHA-512", "alice", "alice-secret", topic, "50").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("python client: %v\n%s", err, stderr)
	}
	var res struct {
		Errors []string `json:"errors"`
		Values []string `json:"values"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("client errors: %v", res.Errors)
	}
	if len(res.Values) != n || res.Values[0] != "py-0" || res.Values[n-1] != "py-49" {
		t.Fatalf("consumed %d values (%v), want py-0..py-49", len(res.Values), res.Values)
	}
	// The group's offsets were committed as alice.
	offs, err := adm.FetchOffsets(ctx, "py-alice")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.At != n {
		t.Fatalf("committed offset %+v, want %d", o, n)
	}
}
