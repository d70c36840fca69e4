package web

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

var idAttrRe = regexp.MustCompile(`\sid="([^"]+)"`)

// TestOperatorPagesHaveUniqueIDs: the topic and group pages an operator
// sees carry several forms; no id is used twice (a label's for would
// focus the other form's field, and an error's aria reference would name
// the wrong one).
func TestOperatorPagesHaveUniqueIDs(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "events", 2)
	produceRecords(t, ts.brokers, "events", 4)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "events", Partition: 0, At: 1, LeaderEpoch: -1})
	adm := kadm.NewClient(kgoClient(t, ts.brokers))
	if rs, err := adm.CommitOffsets(context.Background(), "readers", os); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	op := ts.signedIn(t, "olga", RoleOperator)
	for _, path := range []string{"/topics/events", "/topics/events?configs=all", "/groups/readers"} {
		r := op.Get(path)
		expectStatus(t, r, http.StatusOK)
		seen := map[string]bool{}
		for _, m := range idAttrRe.FindAllStringSubmatch(r.Text, -1) {
			if seen[m[1]] {
				t.Fatalf("%s uses id %q twice", path, m[1])
			}
			seen[m[1]] = true
		}
	}
}
