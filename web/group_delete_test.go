package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
)

func TestGroupDeleteAndDeleteOffsets(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "orders", 1)
	createTopic(t, ts, "audit", 2)
	produceRecords(t, ts.brokers, "orders", 100)
	produceRecords(t, ts.brokers, "audit", 10)
	adm := kadm.NewClient(kgoClient(t, ts.brokers))
	ctx := context.Background()
	// Offsets on "audit" committed while the group is empty; then a member
	// consumes "orders".
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "audit", Partition: 0, At: 3, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "audit", Partition: 1, At: 2, LeaderEpoch: -1})
	if rs, err := adm.CommitOffsets(ctx, "billing", os); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	member := consume(t, ts.brokers, "billing", "orders", 40)
	defer member.Close()
	page := "/groups/billing"

	v := ts.signedIn(t, "vic", RoleViewer)
	if r := v.Get(page); strings.Contains(r.Text, "Preview deletion") || strings.Contains(r.Text, "/offsets/delete") {
		t.Fatal("a viewer is offered the delete forms")
	}
	expectStatus(t, v.Post(page, page+"/delete", url.Values{"apply": {"1"}}), http.StatusForbidden)
	expectStatus(t, v.Post(page, page+"/offsets/delete", url.Values{"topic": {"audit"}, "apply": {"1"}}), http.StatusForbidden)

	op := ts.signedIn(t, "olga", RoleOperator)
	expectContains(t, op.Get(page), "Preview deletion", "Delete committed offsets of a topic")
	// The group has a member: the preview says Kafka refuses, offers no
	// button, and a forced delete is refused in plain words.
	r := op.Post(page, page+"/delete", nil)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "NON_EMPTY_GROUP", "1 active member", ">40<", "audit")
	if strings.Contains(r.Text, `name="apply"`) {
		t.Fatal("delete offered for a group with members")
	}
	r = op.Post(page, page+"/delete", url.Values{"apply": {"1"}})
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "Not deleted", "Kafka refuses to delete group billing while consumers are in it", "stop them first")
	expectStatus(t, op.Get(page), http.StatusOK)

	// Offsets of the topic a member consumes: refused the same way.
	r = op.Post(page, page+"/offsets/delete", url.Values{"topic": {"orders"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "GROUP_SUBSCRIBED_TO_TOPIC", "lag-test")
	if strings.Contains(r.Text, `name="apply"`) {
		t.Fatal("offsets delete offered for a consumed topic")
	}
	r = op.Post(page, page+"/offsets/delete", url.Values{"topic": {"orders"}, "apply": {"1"}})
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "Kafka refuses to delete the offsets of group billing for orders while a member consumes the topic")
	// No topic chosen, or one without commits: said beside the field.
	r = op.Post(page, page+"/offsets/delete", url.Values{"topic": {""}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Choose the topic whose offsets go.")
	r = op.Post(page, page+"/offsets/delete", url.Values{"topic": {"nothing-here"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "The group has no committed offsets for nothing-here.")

	// Offsets of a topic no member consumes: previewed, then deleted.
	r = op.Post(page, page+"/offsets/delete", url.Values{"topic": {"audit"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Delete 2 committed offsets of audit", "the group keeps its offsets for other topics")
	if strings.Contains(r.Text, ">orders<") {
		t.Fatal("the offsets preview lists another topic")
	}
	r = op.Post(page, page+"/offsets/delete", url.Values{"topic": {"audit"}, "apply": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	expectContains(t, op.Get(page), "Deleted the 2 committed offsets of billing for audit.")
	fo, err := adm.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fo.Lookup("audit", 0); ok {
		t.Fatalf("audit offsets still committed: %+v", fo)
	}
	if o, ok := fo.Lookup("orders", 0); !ok || o.At != 40 {
		t.Fatalf("orders offset after deleting audit's: %+v", fo)
	}

	// Once the member leaves, the group is deleted.
	member.Close()
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		d, err := ts.kc.Group(ctx, "billing")
		if err == nil && d.Lag.State != "Empty" {
			err = fmt.Errorf("group billing is %s, want Empty", d.Lag.State)
		}
		return err
	})
	r = op.Post(page, page+"/delete", nil)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "These committed offsets go with the group", "Delete group billing")
	r = op.Post(page, page+"/delete", url.Values{"apply": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/groups" {
		t.Fatalf("redirect to %q after the delete", loc)
	}
	expectContains(t, op.Get("/groups"), "Consumer group billing deleted, with its 1 committed offset.")
	expectStatus(t, op.Get(page), http.StatusNotFound)
	ls, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ls["billing"]; ok {
		t.Fatal("group billing still listed after the delete")
	}

	for action, want := range map[string][]bool{"group.delete": {false, true}, "group.delete-offsets": {false, true}} {
		es, _, err := ts.store.Audit(ctx, consoledb.AuditFilter{Action: action})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != len(want) {
			t.Fatalf("%s audit: %+v", action, es)
		}
		// Newest first.
		for i, e := range es {
			if ok := e.Outcome == "ok"; ok != want[len(want)-1-i] || e.Target != "billing" || e.User != "olga" {
				t.Fatalf("%s audit entry %d: %+v", action, i, e)
			}
		}
	}
}
