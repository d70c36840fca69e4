package zkcoord

import (
	"testing"

	"github.com/sluice-io/sluice/cluster"
)

// FuzzZnodes feeds arbitrary bytes to every znode decoder: whatever
// ZooKeeper holds (written by another tool, or corrupt), decoding returns an
// error or a value, never a panic, and what decodes re-encodes to something
// that decodes the same.
func FuzzZnodes(f *testing.F) {
	for _, s := range []string{
		`{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,"port":9092,"host":"h","version":5,"timestamp":"1","rack":"r"}`,
		`{"version":3,"partitions":{"0":[1,2],"1":[2,1]},"adding_replicas":{"0":[2]},"removing_replicas":{},"topic_id":"p1-_aGdQRsmX7kcMaVkNqw"}`,
		`{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`,
		`{"version":1,"partitions":[{"topic":"t","topic_id":"p1-_aGdQRsmX7kcMaVkNqw","partition":0,"zk_version":3,"state":{"leader":1,"isr":[1]}}],"topics":["t"]}`,
		`{"version":1,"config":{"a":"b"}}`,
		`{"version":1,"broker":1,"block_start":"0","block_end":"999"}`,
		`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}`,
		`{"version":2,"brokerid":3,"timestamp":"1","kraftControllerEpoch":-1}`,
		`{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}`,
		`7`, ``, `{`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if br, err := decodeBroker(1, b); err == nil {
			if again, err := decodeBroker(1, encodeBroker(br)); err != nil || len(again.Endpoints) != len(br.Endpoints) {
				t.Fatalf("broker %+v re-encoded: %+v %v", br, again, err)
			}
		}
		if tp, err := decodeTopic("t", b); err == nil {
			again, err := decodeTopic("t", encodeTopic(tp))
			if err != nil || len(again.Replicas) != len(tp.Replicas) || again.ID != tp.ID {
				t.Fatalf("topic %+v re-encoded: %+v %v", tp, again, err)
			}
		}
		if st, err := decodeState(b, 0); err == nil {
			if again, err := decodeState(encodeState(st), 0); err != nil || again.Leader != st.Leader || len(again.ISR) != len(st.ISR) {
				t.Fatalf("state %+v re-encoded: %+v %v", st, again, err)
			}
		}
		if z, err := decodeStateChange(b); err == nil {
			for _, e := range z.Partitions {
				_, _ = cluster.ParseUUID(e.TopicID)
			}
		}
		decodeConfig(b)
		decodeProducerIDBlock(b)
		decodeReassignments(b)
		decodeController(b)
		decodeClusterID(b)
		decodeEpoch(b)
		ParseConnect(string(b))
	})
}
