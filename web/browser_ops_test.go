package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestBrowserTopicAndGroupOperations does in Chromium, on one console and
// one cluster, what an operator does with a topic and a group: edit a
// topic's config, add partitions (after the warning about key order),
// delete a topic (its button stays disabled until the name is typed),
// delete a group's committed offsets of one topic and reset a group's
// offsets (each after its preview). Each change is checked on the broker
// and in the audit log. Then a viewer finds none of these controls, and
// the same operations posted from the viewer's session, with its valid
// CSRF token, are refused with 403 and change nothing.
func TestBrowserTopicAndGroupOperations(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts := newTestServer(t)
	ctx := context.Background()
	createTopic(t, ts, "doomed", 1)
	createTopic(t, ts, "grow", 2)
	createTopic(t, ts, "events", 2)
	createTopic(t, ts, "other", 1)
	produceRecords(t, ts.brokers, "events", 20)
	produceRecords(t, ts.brokers, "other", 5)
	adm := kadm.NewClient(kgoClient(t, ts.brokers))
	commit := func(group string, at map[string]map[int32]int64) {
		t.Helper()
		var os kadm.Offsets
		for topic, ps := range at {
			for p, o := range ps {
				os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
			}
		}
		if rs, err := adm.CommitOffsets(ctx, group, os); err != nil || rs.Error() != nil {
			t.Fatalf("commit %s: %v %v", group, err, rs.Error())
		}
	}
	// committed is the group's committed offsets as topic/partition=offset.
	committed := func(group string) string {
		t.Helper()
		r, err := adm.FetchOffsets(ctx, group)
		if err != nil || r.Error() != nil {
			t.Fatalf("fetch offsets of %s: %v %v", group, err, r.Error())
		}
		var out []string
		r.Each(func(o kadm.OffsetResponse) { out = append(out, fmt.Sprintf("%s/%d=%d", o.Topic, o.Partition, o.At)) })
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	topicConfig := func(topic, key string) string {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c.MaybeValue()
			}
		}
		return ""
	}
	partitions := func(topic string) int {
		t.Helper()
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if !td.Has(topic) {
			return -1
		}
		return len(td[topic].Partitions)
	}
	commit("replay", map[string]map[int32]int64{"events": {0: 7, 1: 9}})
	commit("dropper", map[string]map[int32]int64{"events": {0: 3}, "other": {0: 4}})
	if err := ts.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ts.user(t, "olga", RoleOperator)
	ts.user(t, "vic", RoleViewer)
	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()
	okAudit := func(action, target, detail string) {
		t.Helper()
		es := auditOf(t, ts, action)
		if len(es) != 1 || es[0].User != "olga" || es[0].Target != target || es[0].Outcome != "ok" || !strings.Contains(es[0].Detail, detail) {
			t.Fatalf("audit of %s: %+v, want one ok entry by olga on %s with %q", action, es, target, detail)
		}
	}

	b.SignIn("olga", "password-1")

	// Topic config: every config is editable in the "all" view; save one.
	b.Visit("/topics/grow?configs=all")
	b.Do("set retention.ms to 2d",
		chromedp.SetValue(chromedp.CSS(`input[name="cfg.retention.ms"]`), "2d"),
		chromedp.Click(chromedp.CSS(`.configs-form button[type="submit"]`)),
	)
	// The preview: the one change, old -> new, checked by the broker;
	// nothing is saved yet.
	b.WaitText("Change configs of grow")
	if row := b.Text(`#configs-preview tbody tr`); !strings.Contains(row, "retention.ms") || !strings.Contains(row, "604800000") || !strings.Contains(row, "172800000") {
		t.Fatalf("the configs preview row: %q", row)
	}
	if got := topicConfig("grow", "retention.ms"); got == "172800000" {
		t.Fatal("the preview saved retention.ms")
	}
	b.Do("apply the config change", chromedp.Click(chromedp.CSS(`form[action="/topics/grow/configs"] button[type="submit"]`)))
	b.WaitText("Saved: retention.ms=172800000")
	if got := topicConfig("grow", "retention.ms"); got != "172800000" {
		t.Fatalf("retention.ms of grow on the broker: %q", got)
	}
	okAudit("topic.configs", "grow", "retention.ms=172800000")

	// Add partitions, below the warning about keys.
	b.Visit("/topics/grow")
	if d := b.DuplicateIDs(); len(d) != 0 {
		t.Fatalf("ids used twice on the topic page: %v", d)
	}
	if w := b.Text(`section[aria-labelledby="add-partitions"] p`); !strings.Contains(w, "breaks per-key order") {
		t.Fatalf("the add-partitions form does not warn about key order: %q", w)
	}
	b.Do("grow to 4 partitions",
		chromedp.SendKeys(chromedp.CSS(`section[aria-labelledby="add-partitions"] input[name="count"]`), "4"),
		chromedp.Click(chromedp.CSS(`section[aria-labelledby="add-partitions"] button[type="submit"]`)),
	)
	// The preview: 2 -> 4, the new partitions, the key-order warning.
	b.WaitText("Add partitions to grow")
	if p := b.Text(`#partitions-preview`); !strings.Contains(p, "partitions 2 to 3") {
		t.Fatalf("the partitions preview: %q", p)
	}
	if w := b.Text(`main .note`); !strings.Contains(w, "breaks per-key order") {
		t.Fatalf("the partitions preview does not warn about key order: %q", w)
	}
	if n := partitions("grow"); n != 2 {
		t.Fatalf("the preview grew the topic to %d partitions", n)
	}
	b.Do("apply: add 2 partitions", chromedp.Click(chromedp.CSS(`form[action="/topics/grow/partitions"] button[type="submit"]`)))
	b.WaitText("Topic grow now has 4 partitions.")
	// Polled: the admin client caches metadata for a few seconds, and it
	// read the topic during the preview.
	testutil.CheckFor(t, 15*time.Second, 200*time.Millisecond, func() error {
		if n := partitions("grow"); n != 4 {
			return fmt.Errorf("grow has %d partitions on the broker", n)
		}
		return nil
	})
	okAudit("topic.add-partitions", "grow", "2 -> 4")

	// Delete a topic: the button waits for its name.
	b.Visit("/topics/doomed")
	deleteButton := `section[aria-labelledby="delete-topic"] [data-confirm-button]`
	if !browsertest.Eval[bool](b, `document.querySelector('`+deleteButton+`').disabled`) {
		t.Fatal("the delete button is enabled before the topic's name is typed")
	}
	b.Do("type a wrong name", chromedp.SendKeys(chromedp.CSS(`section[aria-labelledby="delete-topic"] input[name="confirm"]`), "doome"))
	if !browsertest.Eval[bool](b, `document.querySelector('`+deleteButton+`').disabled`) {
		t.Fatal("the delete button is enabled by a prefix of the name")
	}
	b.Do("finish the name", chromedp.SendKeys(chromedp.CSS(`section[aria-labelledby="delete-topic"] input[name="confirm"]`), "d"))
	b.Do("delete the topic", chromedp.Click(chromedp.CSS(deleteButton)))
	b.WaitText("Topic doomed deleted.")
	testutil.CheckFor(t, browsertest.ActionTimeout, 100*time.Millisecond, func() error {
		if n := partitions("doomed"); n != -1 {
			return fmt.Errorf("doomed still has %d partitions on the broker", n)
		}
		return nil
	})
	okAudit("topic.delete", "doomed", "")

	// Delete a group's offsets of one topic, after the preview.
	b.Visit("/groups/dropper")
	b.Do("preview deleting the offsets of other",
		chromedp.SetValue(chromedp.CSS(`#delete-offsets select[name="topic"]`), "other"),
		chromedp.Click(chromedp.CSS(`#delete-offsets button[type="submit"]`)),
	)
	b.WaitText("Delete 1 committed offset of other")
	b.Screenshot("group-offsets-delete-preview")
	if row := b.Text("main table tbody"); !strings.Contains(row, "other") || strings.Contains(row, "events") {
		t.Fatalf("the preview lists %q, want the offset of other only", row)
	}
	b.Do("delete them", chromedp.Click(chromedp.CSS(`form[action="/groups/dropper/offsets/delete"] button`)))
	b.WaitText("Deleted the 1 committed offset of dropper for other.")
	if got := committed("dropper"); got != "events/0=3" {
		t.Fatalf("dropper's offsets on the broker: %s", got)
	}
	okAudit("group.delete-offsets", "dropper", "other")

	// Reset a group's offsets: preview, then apply.
	b.Visit("/groups/replay")
	if d := b.DuplicateIDs(); len(d) != 0 {
		t.Fatalf("ids used twice on the group page: %v", d)
	}
	b.Do("preview a reset to the earliest offsets",
		chromedp.SetValue(chromedp.CSS(`#reset select[name="topic"]`), "events"),
		chromedp.SetValue(chromedp.CSS(`#reset select[name="mode"]`), "earliest"),
		chromedp.Click(chromedp.CSS(`#reset button[type="submit"]`)),
	)
	b.WaitText("Apply: commit")
	b.Screenshot("group-reset-preview")
	if got := committed("replay"); got != "events/0=7 events/1=9" {
		t.Fatalf("the preview changed replay's offsets: %s", got)
	}
	b.Do("apply the reset", chromedp.Click(chromedp.CSS(`form[action="/groups/replay/reset"] button.danger`)))
	b.WaitText("Committed new offsets for 2 partitions of replay.")
	if got := committed("replay"); got != "events/0=0 events/1=0" {
		t.Fatalf("replay's offsets on the broker after the reset: %s", got)
	}
	okAudit("group.reset-offsets", "replay", "")

	// A viewer: no control on the pages, and the same posts refused.
	b.SignOut()
	b.SignIn("vic", "password-1")
	b.Visit("/topics/grow?configs=all")
	b.WaitText("retention.ms")
	for _, sel := range []string{
		`.configs-form input[name^="cfg."]`, `.configs-form select`, `.configs-form button`,
		`section[aria-labelledby="add-partitions"]`, `section[aria-labelledby="delete-topic"]`, `#purge`,
		`a[href="/topics/grow/elect"]`,
	} {
		if n := b.Count(sel); n != 0 {
			t.Fatalf("a viewer sees %d of %s on the topic page", n, sel)
		}
	}
	b.Visit("/groups/dropper")
	b.WaitText("Partitions")
	for _, sel := range []string{`#reset`, `#delete-offsets`, `#delete-group`} {
		if n := b.Count(sel); n != 0 {
			t.Fatalf("a viewer sees %d of %s on the group page", n, sel)
		}
	}
	refusedBefore := len(auditOf(t, ts, "auth.role-refused"))
	forged := []struct {
		path   string
		fields map[string]string
	}{
		{"/topics/grow/configs", map[string]string{"cfg.retention.ms": "1000", "was.retention.ms": "172800000"}},
		{"/topics/grow/partitions", map[string]string{"count": "8"}},
		{"/topics/grow/configs", map[string]string{"cfg.retention.ms": "1000", "was.retention.ms": "172800000", "apply": "1"}},
		{"/topics/grow/partitions", map[string]string{"count": "8", "from": "4", "apply": "1"}},
		{"/topics/events/delete", map[string]string{"confirm": "events"}},
		{"/topics/events/purge", map[string]string{"mode": "all", "apply": "1", "to:0": "10", "to:1": "10", "confirm": "events"}},
		{"/topics/grow/elect", map[string]string{"type": "preferred"}},
		{"/groups/replay/reset", map[string]string{"topic": "events", "mode": "latest", "apply": "1", "off:events:0": "10", "off:events:1": "10"}},
		{"/groups/dropper/offsets/delete", map[string]string{"topic": "events", "apply": "1"}},
		{"/groups/dropper/delete", map[string]string{"apply": "1"}},
	}
	for _, f := range forged {
		if st := b.ForgedPost(f.path, f.fields); st != http.StatusForbidden {
			t.Fatalf("a viewer's POST %s: status %d, want 403", f.path, st)
		}
	}
	b.Visit("/topics/grow/elect")
	b.WaitText("this needs operator")
	if got := len(auditOf(t, ts, "auth.role-refused")) - refusedBefore; got != len(forged)+1 {
		t.Fatalf("%d refusals audited, want %d", got, len(forged)+1)
	}

	// Nothing changed.
	if got := topicConfig("grow", "retention.ms"); got != "172800000" {
		t.Fatalf("retention.ms of grow after the viewer's post: %q", got)
	}
	if n := partitions("grow"); n != 4 {
		t.Fatalf("grow has %d partitions after the viewer's post", n)
	}
	if n := partitions("events"); n != 2 {
		t.Fatalf("events has %d partitions after the viewer's post", n)
	}
	if got := logStarts(t, adm, "events"); got[0] != 0 || got[1] != 0 {
		t.Fatalf("events was purged by the viewer's post: log starts %v", got)
	}
	if got := committed("replay"); got != "events/0=0 events/1=0" {
		t.Fatalf("replay's offsets after the viewer's post: %s", got)
	}
	if got := committed("dropper"); got != "events/0=3" {
		t.Fatalf("dropper's offsets after the viewer's post: %s", got)
	}
	for _, action := range []string{"topic.configs", "topic.add-partitions", "topic.delete", "topic.purge", "topic.elect-preferred", "group.reset-offsets", "group.delete-offsets", "group.delete"} {
		for _, e := range auditOf(t, ts, action) {
			if e.User == "vic" {
				t.Fatalf("the viewer's refused post was audited as done: %+v", e)
			}
		}
	}
}
