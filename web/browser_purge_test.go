package web

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestBrowserPurgeAndGroupDelete does in Chromium what an operator does:
// purge a topic from its page (the preview's button stays disabled until
// the topic's name is typed) and delete an empty group from its page; a
// viewer is offered neither.
func TestBrowserPurgeAndGroupDelete(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts := newTestServer(t)
	createTopic(t, ts, "clicks", 1)
	produceRecords(t, ts.brokers, "clicks", 12)
	adm := kadm.NewClient(kgoClient(t, ts.brokers))
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "clicks", Partition: 0, At: 4, LeaderEpoch: -1})
	if rs, err := adm.CommitOffsets(context.Background(), "stale", os); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	if rs, err := adm.CommitOffsets(context.Background(), "kept", os); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.user(t, "olga", RoleOperator)
	ts.user(t, "vic", RoleViewer)
	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()
	signIn := func(name string) {
		b.Visit("/login")
		b.Do("sign in as "+name,
			chromedp.SendKeys(chromedp.ID("f-username"), name),
			chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
			chromedp.Submit(chromedp.ID("f-password")),
		)
		b.WaitText("Brokers up")
	}

	signIn("olga")
	b.Visit("/topics/clicks")
	b.Do("preview a purge of every record",
		chromedp.SetValue(chromedp.ID("f-mode"), "all"),
		chromedp.Click(chromedp.CSS(`#purge button[type="submit"]`)),
	)
	b.WaitText("Deletes 12 records from 1 partition")
	b.Screenshot("purge-preview")
	disabled := func() bool {
		t.Helper()
		d, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`document.querySelector("[data-confirm-button]").disabled`))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if !disabled() {
		t.Fatal("the purge button is enabled before the topic's name is typed")
	}
	b.Do("type the topic's name", chromedp.SendKeys(chromedp.ID("f-confirm"), "clicks"))
	if disabled() {
		t.Fatal("the purge button stays disabled once the name is typed")
	}
	b.Do("purge", chromedp.Click(chromedp.CSS("[data-confirm-button]")))
	b.WaitText("Purged 1 partition of clicks: new log start offsets 0: 12.")
	b.CheckCSP("/topics/clicks")

	b.Visit("/groups/stale")
	b.Do("preview the group's deletion", chromedp.Click(chromedp.CSS(`#delete-group button`)))
	b.WaitText("These committed offsets go with the group")
	b.Screenshot("group-delete-preview")
	b.Do("delete the group", chromedp.Click(chromedp.CSS(`form[action="/groups/stale/delete"] button`)))
	b.WaitText("Consumer group stale deleted, with its 1 committed offset.")

	b.Do("sign out", chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)))
	b.WaitText("Sign in")
	signIn("vic")
	for page, sel := range map[string]string{"/topics/clicks": "#purge", "/groups/kept": "#delete-group, #delete-offsets"} {
		b.Visit(page)
		b.WaitText("Partitions")
		n, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("`+sel+`").length`))
		if err != nil || n != 0 {
			t.Fatalf("a viewer sees %s on %s (%d, %v)", sel, page, n, err)
		}
	}
}
