package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

const pythonRegistryClient = `
import sys, json, time
from confluent_kafka import SerializingProducer, DeserializingConsumer
from confluent_kafka.serialization import StringSerializer, StringDeserializer
from confluent_kafka.schema_registry import SchemaRegistryClient, Schema
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONSerializer, JSONDeserializer
bootstrap, registry, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
out = {"errors": []}
sr = SchemaRegistryClient({'url': registry})
schema_v1 = json.dumps({"title": "Order", "type": "object", "properties": {"id": {"type": "string"}, "amount": {"type": "number"}},
                        "required": ["id", "amount"]})
# the client's own calls
sid = sr.register_schema('manual-value', Schema(schema_v1, 'JSON'))
out["registered_id"] = sid
out["again_id"] = sr.register_schema('manual-value', Schema(schema_v1, 'JSON'))
latest = sr.get_latest_version('manual-value')
out["latest"] = [latest.subject, latest.version, latest.schema_id, latest.schema.schema_type]
out["by_id"] = sr.get_schema(sid).schema_str == schema_v1
out["lookup_version"] = sr.lookup_schema('manual-value', Schema(schema_v1, 'JSON')).version
out["set_compat"] = sr.set_compatibility('manual-value', 'FULL')
out["get_compat"] = sr.get_compatibility('manual-value')
narrowed = json.dumps({"title": "Order", "type": "object", "properties": {"id": {"type": "string"}, "amount": {"type": "integer"}},
                       "required": ["id", "amount"]})
out["compatible"] = sr.test_compatibility('manual-value', Schema(narrowed, 'JSON'))
try:
    sr.register_schema('manual-value', Schema(narrowed, 'JSON'))
    out["errors"].append("an incompatible schema was registered")
except SchemaRegistryError as e:
    out["incompatible"] = [e.http_status_code, e.error_code]
out["subjects"] = sr.get_subjects()
out["deleted"] = sr.delete_subject('manual-value')
# serialize, produce, consume, deserialize through the registry
ser = JSONSerializer(schema_v1, sr)
p = SerializingProducer({'bootstrap.servers': bootstrap, 'key.serializer': StringSerializer('utf_8'), 'value.serializer': ser})
def cb(err, msg):
    if err is not None:
        out["errors"].append(str(err))
for i in range(n):
    p.produce(topic, key='k%d' % i, value={"id": "o-%d" % i, "amount": i * 1.5}, on_delivery=cb)
left = p.flush(30)
if left:
    out["errors"].append('%d messages not delivered' % left)
c = DeserializingConsumer({'bootstrap.servers': bootstrap, 'group.id': 'e2e-registry', 'auto.offset.reset': 'earliest',
                           'key.deserializer': StringDeserializer('utf_8'), 'value.deserializer': JSONDeserializer(schema_v1)})
c.subscribe([topic])
got = []
deadline = time.time() + 30
while len(got) < n and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        out["errors"].append(str(m.error()))
        continue
    got.append([m.key(), m.value()])
c.close()
out["records"] = got
out["value_subject"] = sr.get_latest_version(topic + '-value').schema_id
print(json.dumps(out))
`

// TestConfluentKafkaPythonSchemaRegistry: confluent-kafka-python's
// SchemaRegistryClient against the built-in registry, and its JSON Schema
// serializer and deserializer around a produce and a consume.
func TestConfluentKafkaPythonSchemaRegistry(t *testing.T) {
	testutil.Heavy(t, "confluent-kafka-python")
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		testutil.RequireBinary(t, "python3-confluent-kafka-at-/usr/bin/python3")
	}
	if out, err := exec.Command(py, "-c", "import confluent_kafka.schema_registry.json_schema").CombinedOutput(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skipf("confluent_kafka's schema registry client not importable: %s", out)
		}
		t.Fatalf("confluent_kafka's schema registry client (python3-requests, python3-jsonschema) is not installed for %s (run make test-deps): %s", py, out)
	}
	regAddr := testutil.FreeAddr(t)
	n := startNode(t, "schema.registry.listen="+regAddr)
	script := filepath.Join(t.TempDir(), "registry.py")
	os.WriteFile(script, []byte(pythonRegistryClient), 0o644)
	out := runTool(t, 90*time.Second, nil, py, script, n.Addr(), "http://"+regAddr, "orders", "50")
	var res struct {
		Errors        []string            `json:"errors"`
		RegisteredID  int                 `json:"registered_id"`
		AgainID       int                 `json:"again_id"`
		Latest        []any               `json:"latest"`
		ByID          bool                `json:"by_id"`
		LookupVersion int                 `json:"lookup_version"`
		SetCompat     map[string]any      `json:"set_compat"`
		GetCompat     string              `json:"get_compat"`
		Compatible    bool                `json:"compatible"`
		Incompatible  []int               `json:"incompatible"`
		Subjects      []string            `json:"subjects"`
		Deleted       []int               `json:"deleted"`
		Records       [][]json.RawMessage `json:"records"`
		ValueSubject  int                 `json:"value_subject"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("client errors: %v", res.Errors)
	}
	if res.RegisteredID != 1 || res.AgainID != 1 || res.LookupVersion != 1 || !res.ByID {
		t.Fatalf("register/lookup: %s", out)
	}
	if len(res.Latest) != 4 || res.Latest[0] != "manual-value" || res.Latest[1] != 1.0 || res.Latest[3] != "JSON" {
		t.Fatalf("latest: %v", res.Latest)
	}
	if res.GetCompat != "FULL" || res.Compatible || len(res.Incompatible) != 2 || res.Incompatible[0] != 409 {
		t.Fatalf("compatibility: %s", out)
	}
	if len(res.Subjects) != 1 || len(res.Deleted) != 1 || res.Deleted[0] != 1 {
		t.Fatalf("subjects %v deleted %v", res.Subjects, res.Deleted)
	}
	if len(res.Records) != 50 || res.ValueSubject != 1 {
		t.Fatalf("records: %d, orders-value id %d", len(res.Records), res.ValueSubject)
	}
	var v struct {
		ID     string  `json:"id"`
		Amount float64 `json:"amount"`
	}
	if err := json.Unmarshal(res.Records[7][1], &v); err != nil || v.ID != "o-7" || v.Amount != 10.5 {
		t.Fatalf("record 7: %s %v", res.Records[7][1], err)
	}
}
