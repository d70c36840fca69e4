package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
)

// produceAt writes n records to topic/partition with timestamp at.
func produceAt(t *testing.T, cl *kgo.Client, topic string, partition int32, n int, at time.Time) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: []byte("v"), Timestamp: at}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// logStarts returns topic's log start offsets by partition.
func logStarts(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	l, err := adm.ListStartOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

type purgePreview struct {
	Deleted int64
	Rows    []struct {
		Partition   int32
		Deleted     int64
		NewLogStart int64 `json:"new_log_start"`
	}
}

// previewPurge posts the purge form as JSON and returns the preview.
func previewPurge(t *testing.T, c *client, topic string, form url.Values) purgePreview {
	t.Helper()
	page := "/topics/" + topic
	f := url.Values{"_csrf": {c.CSRF(page)}}
	for k, v := range form {
		f[k] = v
	}
	c.Accept = "application/json"
	r := c.Do(http.MethodPost, page+"/purge", f)
	c.Accept = ""
	expectStatus(t, r, http.StatusOK)
	var p purgePreview
	if err := json.Unmarshal([]byte(r.Text), &p); err != nil {
		t.Fatalf("preview json: %v: %s", err, snippet(r.Text))
	}
	return p
}

func TestTopicPurge(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "events", 2)
	cl := kgoClient(t, ts.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	now := time.Now().Truncate(time.Millisecond)
	produceAt(t, cl, "events", 0, 10, old)
	produceAt(t, cl, "events", 0, 20, now)
	produceAt(t, cl, "events", 1, 10, old)
	produceAt(t, cl, "events", 1, 10, now)
	page := "/topics/events"

	// A viewer sees no purge form, and a purge posted anyway is refused.
	v := ts.signedIn(t, "vic", RoleViewer)
	if r := v.Get(page); strings.Contains(r.Text, "Preview purge") {
		t.Fatal("a viewer is offered the purge form")
	}
	r := v.Post(page, page+"/purge", url.Values{"mode": {"all"}, "apply": {"1"}, "to:0": {"30"}, "confirm": {"events"}})
	expectStatus(t, r, http.StatusForbidden)
	if got := logStarts(t, adm, "events"); got[0] != 0 || got[1] != 0 {
		t.Fatalf("a viewer's purge deleted records: %v", got)
	}

	op := ts.signedIn(t, "olga", RoleOperator)
	expectContains(t, op.Get(page), "Preview purge")
	// Mistakes come back beside the field.
	r = op.Post(page, page+"/purge", url.Values{"mode": {"offset"}, "offset": {"-1"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Enter an offset of 0 or more")
	r = op.Post(page, page+"/purge", url.Values{"mode": {"timestamp"}, "ts": {""}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Enter the time: records older than it are deleted.")
	r = op.Post(page, page+"/purge", url.Values{"mode": {"all"}, "partition": {"7"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "has no partition 7")

	// By offset, one partition: the preview says what goes.
	form := url.Values{"mode": {"offset"}, "offset": {"5"}, "partition": {"0"}}
	p := previewPurge(t, op, "events", form)
	if p.Deleted != 5 || len(p.Rows) != 1 || p.Rows[0].Partition != 0 || p.Rows[0].NewLogStart != 5 {
		t.Fatalf("preview by offset: %+v", p)
	}
	r = op.Post(page, page+"/purge", form)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Deletes 5 records from 1 partition", "New log start", "Type the topic name to confirm", `name="to:0" value="5"`)
	// Applying without the typed name is refused and deletes nothing.
	apply := url.Values{"mode": {"offset"}, "offset": {"5"}, "partition": {"0"}, "apply": {"1"}, "to:0": {"5"}, "confirm": {"event"}}
	r = op.Post(page, page+"/purge", apply)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Type the topic name exactly (events) to confirm.")
	if got := logStarts(t, adm, "events"); got[0] != 0 {
		t.Fatalf("purged without confirmation: %v", got)
	}
	// A partition the topic does not have is refused, and nothing is deleted.
	r = op.Post(page, page+"/purge", url.Values{"mode": {"all"}, "apply": {"1"}, "confirm": {"events"}, "to:0": {"5"}, "to:9": {"1"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Not purged: topic events has no partition 9")
	r = op.Post(page, page+"/purge", url.Values{"mode": {"all"}, "apply": {"1"}, "confirm": {"events"}, "to:x": {"5"}})
	expectStatus(t, r, http.StatusBadRequest)
	if got := logStarts(t, adm, "events"); got[0] != 0 {
		t.Fatalf("purged by a refused request: %v", got)
	}
	apply.Set("confirm", "events")
	r = op.Post(page, page+"/purge", apply)
	expectStatus(t, r, http.StatusSeeOther)
	expectContains(t, op.Get(page), "Purged 1 partition of events: new log start offsets 0: 5.")
	if got := logStarts(t, adm, "events"); got[0] != 5 || got[1] != 0 {
		t.Fatalf("log starts after the purge by offset: %v", got)
	}

	// By timestamp, every partition: the records older than an hour go.
	cut := strconvMillis(time.Now().Add(-time.Hour))
	form = url.Values{"mode": {"timestamp"}, "ts": {cut}}
	p = previewPurge(t, op, "events", form)
	if p.Deleted != 15 || len(p.Rows) != 2 || p.Rows[0].Deleted != 5 || p.Rows[0].NewLogStart != 10 || p.Rows[1].Deleted != 10 || p.Rows[1].NewLogStart != 10 {
		t.Fatalf("preview by timestamp: %+v", p)
	}
	form.Set("apply", "1")
	form.Set("confirm", "events")
	form.Set("to:0", "10")
	form.Set("to:1", "10")
	expectStatus(t, op.Post(page, page+"/purge", form), http.StatusSeeOther)
	if got := logStarts(t, adm, "events"); got[0] != 10 || got[1] != 10 {
		t.Fatalf("log starts after the purge by time: %v", got)
	}

	// All: up to the high watermark.
	p = previewPurge(t, op, "events", url.Values{"mode": {"all"}})
	if p.Deleted != 30 || p.Rows[0].NewLogStart != 30 || p.Rows[1].NewLogStart != 20 {
		t.Fatalf("preview of all: %+v", p)
	}
	r = op.Post(page, page+"/purge", url.Values{"mode": {"all"}, "apply": {"1"}, "confirm": {"events"}, "to:0": {"30"}, "to:1": {"20"}})
	expectStatus(t, r, http.StatusSeeOther)
	if got := logStarts(t, adm, "events"); got[0] != 30 || got[1] != 20 {
		t.Fatalf("log starts after purging all: %v", got)
	}
	// Nothing left: the preview says so and offers no button.
	r = op.Post(page, page+"/purge", url.Values{"mode": {"all"}})
	expectContains(t, r, "Nothing to delete")
	if strings.Contains(r.Text, `name="apply"`) {
		t.Fatal("a purge of nothing is offered")
	}

	entries, _, err := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "topic.purge"})
	if err != nil {
		t.Fatal(err)
	}
	// Newest first: three purges, and the refused one before them.
	if len(entries) != 4 || !strings.Contains(entries[3].Outcome, "has no partition 9") {
		t.Fatalf("audit of purges: %+v", entries)
	}
	for _, e := range entries[:3] {
		if e.Outcome != "ok" || e.Target != "events" || e.User != "olga" {
			t.Fatalf("audit entry: %+v", e)
		}
	}
	testutil.CheckFor(t, 5*time.Second, 50*time.Millisecond, func() error {
		es, _, err := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "auth.role-refused"})
		if err == nil && len(es) == 0 {
			err = fmt.Errorf("the viewer's refused purge is not in the audit log")
		}
		return err
	})
}

func strconvMillis(t time.Time) string { return itoa64(t.UnixMilli()) }
