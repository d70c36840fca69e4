package securitytest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/testutil"
)

// kafkaPythonSASLClient produces n records with kafka-python and consumes
// them in a consumer group over SASL_PLAINTEXT with SCRAM-SHA-256,
// committing the group's offsets, and prints {"errors": [...], "values":
// [...]}. A client that cannot connect prints {"refused": "<Error>: ..."}.
const kafkaPythonSASLClient = `
import sys, json, time, logging
logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
from kafka import KafkaProducer, KafkaConsumer
from kafka.errors import KafkaError
bootstrap, user, password, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
conf = dict(bootstrap_servers=bootstrap, security_protocol='SASL_PLAINTEXT', sasl_mechanism='SCRAM-SHA-256',
            sasl_plain_username=user, sasl_plain_password=password, request_timeout_ms=20000)
errs = []
try:
    p = KafkaProducer(acks='all', **conf)
except KafkaError as e:
    print(json.dumps({"refused": "%s: %s" % (type(e).__name__, e)}))
    sys.exit(0)
futures = [p.send(topic, value=b'kp-%d' % i) for i in range(n)]
for f in futures:
    try:
        f.get(timeout=30)
    except KafkaError as e:
        errs.append(str(e))
p.close(timeout=10)
c = KafkaConsumer(topic, group_id='kp-' + user, auto_offset_reset='earliest', enable_auto_commit=False, **conf)
got = []
deadline = time.time() + 45
while len(got) < n and time.time() < deadline:
    for recs in c.poll(timeout_ms=500).values():
        got.extend(r.value.decode() for r in recs)
c.commit()
c.close()
print(json.dumps({"errors": errs, "values": got}))
`

// kafkaPythonResult is what kafkaPythonSASLClient prints.
type kafkaPythonResult struct {
	Refused string   `json:"refused"`
	Errors  []string `json:"errors"`
	Values  []string `json:"values"`
	Stderr  string   `json:"-"` // kafka-python's log
}

// TestKafkaPythonSASLPlaintext: kafka-python (2.0.2, SaslHandshake v0 and
// raw SASL frames) from /usr/bin/python3 produces and consumes in a group
// over SASL_PLAINTEXT with SCRAM-SHA-256 and commits the group's offsets;
// with a wrong password it is refused and nothing is written.
func TestKafkaPythonSASLPlaintext(t *testing.T) {
	testutil.Heavy(t, "kafka-python")
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		testutil.RequireBinary(t, "python3-kafka-at-/usr/bin/python3")
	}
	if out, err := exec.Command(py, "-c", "import kafka").CombinedOutput(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skipf("kafka (kafka-python) not importable: %s", out)
		}
		t.Fatalf("kafka-python is not installed for %s (run make test-deps): %s", py, out)
	}
	s := startSecured(t)
	ctx := ctxFor(t, 150*time.Second)
	adm := kadm.NewClient(client(t, s.saslPlain, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())))
	script := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(script, []byte(kafkaPythonSASLClient), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, user, password, topic string, n int) kafkaPythonResult {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(rctx, py, script, s.saslPlain, user, password, topic, strconv.Itoa(n))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kafka-python client: %v\n%s", err, stderr.String())
		}
		var res kafkaPythonResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("kafka-python output %q: %v\n%s", out, err, stderr.String())
		}
		res.Stderr = stderr.String()
		return res
	}

	t.Run("SCRAM-SHA-256", func(t *testing.T) {
		const topic, n = "kafka-python-sasl", 30
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		res := run(t, "alice", "alice-secret", topic, n)
		if res.Refused != "" || len(res.Errors) > 0 {
			t.Fatalf("client refused %q, errors %v", res.Refused, res.Errors)
		}
		if len(res.Values) != n || res.Values[0] != "kp-0" || res.Values[n-1] != "kp-29" {
			t.Fatalf("consumed %d values (%v), want kp-0..kp-29", len(res.Values), res.Values)
		}
		offs, err := adm.FetchOffsets(ctx, "kp-alice")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup(topic, 0); !ok || o.At != n {
			t.Fatalf("committed offset %+v, want %d", o, n)
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		const topic = "kafka-python-refused"
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		res := run(t, "alice", "guess", topic, 3)
		if res.Refused == "" {
			t.Fatalf("a wrong password was served: %+v", res)
		}
		// kafka-python speaks raw SASL frames after SaslHandshake v0, so
		// the broker refuses by closing the connection, as Kafka does: the
		// client logs the failure while authenticating and finds no broker.
		if !strings.Contains(res.Refused, "NoBrokersAvailable") || !strings.Contains(res.Stderr, "<authenticating>") {
			t.Fatalf("kafka-python with a wrong password: %s\n%s", res.Refused, res.Stderr)
		}
		logged := false
		for _, line := range strings.Split(s.c.Log(), "\n") {
			if strings.Contains(line, "authentication failed") && strings.Contains(line, "listener=SASL_PLAINTEXT") &&
				strings.Contains(line, "mechanism=SCRAM-SHA-256") && strings.Contains(line, `\"alice\"`) {
				logged = true
			}
		}
		if !logged {
			t.Fatalf("the broker did not log the failed SCRAM-SHA-256 authentication of alice on SASL_PLAINTEXT:\n%s", s.c.Log())
		}
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := offs.Lookup(topic, 0); o.Offset != 0 {
			t.Fatalf("end offset %d after a refused producer, want 0", o.Offset)
		}
	})
}
