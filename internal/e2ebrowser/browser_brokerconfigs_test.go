package e2ebrowser

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestBrowserBrokerConfigs changes a cluster-wide dynamic broker config
// from a broker's page in Chromium, as an operator does: typed in the
// defaults form ("2 MiB"), previewed (the value in force before and after,
// nothing changed on the broker yet), applied (the broker describes it as
// DYNAMIC_DEFAULT_BROKER_CONFIG, the admin's audit log lists it). A key the
// broker reads only at start (log.dirs), typed as another config, gets the
// broker's refusal beside the field and changes nothing. A viewer sees the
// values but no form, and its forged posts (with its session's valid CSRF
// token) get 403 and change nothing.
func TestBrowserBrokerConfigs(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	c := testcluster.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := c.Admin()
	id := c.Node(0).ID()
	page := "/brokers/" + strconv.Itoa(int(id))

	// inForce is the value and source broker id describes for name.
	inForce := func(name string) (string, kmsg.ConfigSource) {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe broker %d: %+v %v", id, rcs, err)
		}
		for _, cfg := range rcs[0].Configs {
			if cfg.Key == name {
				return cfg.MaybeValue(), cfg.Source
			}
		}
		t.Fatalf("broker %d does not describe %s", id, name)
		return "", 0
	}
	// defaults is the cluster-wide dynamic configs, "k=v" sorted.
	defaults := func() string {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe the cluster default: %+v %v", rcs, err)
		}
		var out []string
		for _, cfg := range rcs[0].Configs {
			out = append(out, cfg.Key+"="+cfg.MaybeValue())
		}
		return strings.Join(out, ",")
	}
	const key, typed, stored = "message.max.bytes", "2 MiB", "2097152"
	was, wasSource := inForce(key)
	dirs, dirsSource := inForce("log.dirs")
	if was == "" || was == stored || wasSource == kmsg.ConfigSourceDynamicDefaultBrokerConfig || defaults() != "" {
		t.Fatalf("before: %s=%q (%v), cluster defaults %q", key, was, wasSource, defaults())
	}
	unchanged := func(when string) {
		t.Helper()
		if v, src := inForce(key); v != was || src != wasSource {
			t.Fatalf("%s: %s is %q (%v), want %q (%v)", when, key, v, src, was, wasSource)
		}
		if d := defaults(); d != "" {
			t.Fatalf("%s: cluster defaults %q", when, d)
		}
	}
	applied := func(when string) {
		t.Helper()
		if v, src := inForce(key); v != stored || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			t.Fatalf("%s: %s is %q (%v), want %s from the cluster default", when, key, v, src, stored)
		}
		if d := defaults(); d != key+"="+stored {
			t.Fatalf("%s: cluster defaults %q", when, d)
		}
		if v, src := inForce("log.dirs"); v != dirs || src != dirsSource {
			t.Fatalf("%s: log.dirs is %q (%v), was %q (%v)", when, v, src, dirs, dirsSource)
		}
	}
	srv, b := browserConsole(t, c.Addrs())
	defer b.PublishScreenshots()
	noDuplicateIDs := func(where string) {
		t.Helper()
		if d := b.DuplicateIDs(); len(d) != 0 {
			t.Fatalf("%s: ids used twice: %v", where, d)
		}
	}
	field := `#dyn-default-form input[name="cfg.` + key + `"]`
	previewRow := `[id="dyn-preview-` + key + `"]`

	// An operator: type, preview, check nothing changed, apply.
	b.SignIn("olga", "password-1")
	visitUntil(t, b, page, "Cluster-wide defaults", 20*time.Second)
	noDuplicateIDs("the broker page")
	b.Do("type the cluster default and preview it",
		chromedp.WaitVisible(chromedp.CSS(field)),
		chromedp.SendKeys(chromedp.CSS(field), typed),
		chromedp.Click(chromedp.ID("dyn-default-preview")),
		chromedp.WaitVisible(chromedp.ID("dyn-preview")),
	)
	b.CheckCSP("the preview")
	noDuplicateIDs("the preview")
	b.Screenshot("broker-configs-preview")
	cells := browsertest.Eval[[]string](b, `[...document.querySelectorAll('`+previewRow+` td')].map(td => td.innerText)`)
	if len(cells) != 5 || cells[0] != key || cells[1] != "not set" || !strings.HasPrefix(cells[2], stored) ||
		!strings.HasPrefix(cells[3], was) || !strings.HasPrefix(cells[4], stored) ||
		!strings.Contains(cells[4], "cluster default") || !strings.Contains(cells[4], "Every broker without its own override takes it.") {
		t.Fatalf("the preview of %s (config, override now, after, in force now, after) shows %q; in force was %s", key, cells, was)
	}
	if n := b.Count(`#dyn-preview tbody tr`); n != 1 {
		t.Fatalf("the preview lists %d changes, want 1", n)
	}
	unchanged("after the preview")
	if es := auditOf(t, srv, "broker.configs"); len(es) != 0 {
		t.Fatalf("the preview was audited: %+v", es)
	}
	b.Do("apply", chromedp.Click(chromedp.ID("dyn-apply")))
	b.WaitText("Saved (cluster default): " + key + "=" + stored + ".")
	applied("after apply")
	if v := browsertest.Eval[string](b, `document.querySelector('`+field+`').value`); v != stored {
		t.Fatalf("the defaults form shows %s=%q after apply, want %s", key, v, stored)
	}

	// A key read at start, as another config: refused beside the field.
	b.Do("try log.dirs as another config",
		chromedp.SendKeys(chromedp.ID("dyn-default-newkey"), "log.dirs"),
		chromedp.SendKeys(chromedp.ID("dyn-default-newvalue"), "/elsewhere"),
		chromedp.Click(chromedp.ID("dyn-default-preview")),
		chromedp.WaitVisible(chromedp.CSS(`#dyn-default-form .field.invalid .error`)),
	)
	b.Screenshot("broker-configs-refused")
	if msg := b.Text(`#dyn-default-form .field.invalid .error`); !strings.Contains(msg, "log.dirs cannot be changed while the broker runs") ||
		!strings.Contains(msg, "restart the broker") {
		t.Fatalf("beside the field: %q", msg)
	}
	if msg := b.Text(`#dyn-default-form .note.bad`); !strings.Contains(msg, "Not saved: the broker refused the change") {
		t.Fatalf("the form's error: %q", msg)
	}
	if n := b.Count(`#dyn-preview, #dyn-apply`); n != 0 {
		t.Fatal("a refused change was offered to apply")
	}
	if k, v := browsertest.Eval[string](b, `document.getElementById("dyn-default-newkey").value`),
		browsertest.Eval[string](b, `document.getElementById("dyn-default-newvalue").value`); k != "log.dirs" || v != "/elsewhere" {
		t.Fatalf("the refused field lost what was typed: %q=%q", k, v)
	}
	applied("after the refused log.dirs")
	b.SignOut()

	// The admin's audit log.
	b.SignIn("root", "password-1")
	b.Visit("/audit?action=broker.configs")
	rows := browsertest.Eval[[]string](b, `[...document.querySelectorAll('tbody tr')].map(tr => tr.innerText)`)
	if len(rows) != 1 {
		t.Fatalf("the audit log lists %d broker.configs entries, want 1: %q", len(rows), rows)
	}
	for _, s := range []string{"olga", "broker.configs", "cluster default", key + "=" + stored, "ok"} {
		if !strings.Contains(rows[0], s) {
			t.Fatalf("the audit entry %q lacks %q", rows[0], s)
		}
	}
	b.SignOut()

	// A viewer: the values, no form; forged posts refused.
	b.SignIn("vic", "password-1")
	visitUntil(t, b, page, "Cluster-wide defaults", 20*time.Second)
	noDuplicateIDs("the viewer's broker page")
	if n := b.Count(`#dyn-broker-form, #dyn-default-form, #dyn-broker-preview, #dyn-default-preview, #dyn-broker input, #dyn-default input`); n != 0 {
		t.Fatalf("a viewer is offered %d edit controls of the dynamic configs", n)
	}
	if v := b.Text(`[id="dyn-default-` + key + `"]`); !strings.Contains(v, stored) {
		t.Fatalf("a viewer's row of %s: %q", key, v)
	}
	for _, f := range []map[string]string{
		{"scope": "default", "cfg." + key: "1024", "was." + key: stored},
		{"scope": "default", "apply": "1", "cfg." + key: "1024", "was." + key: stored},
		{"scope": "broker", "apply": "1", "cfg." + key: "1024", "was." + key: ""},
	} {
		if st := b.ForgedPost(page+"/configs", f); st != http.StatusForbidden {
			t.Fatalf("a viewer's post %v: status %d, want 403", f, st)
		}
	}
	applied("after the viewer's posts")
	if es := auditOf(t, srv, "broker.configs"); len(es) != 1 || es[0].User != "olga" || es[0].Target != "cluster default" ||
		es[0].Outcome != "ok" || es[0].Detail != fmt.Sprintf("%s=%s", key, stored) {
		t.Fatalf("audit: %+v", es)
	}
}
