package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/templates"
	"github.com/sluice-io/sluice/web/webtest"
)

// groupsListRows reads the consumer groups table: each row's cells as text
// (tags dropped, spaces folded), in the page's order.
func groupsListRows(t *testing.T, html string) [][]string {
	t.Helper()
	i := strings.Index(html, `<table id="groups">`)
	if i < 0 {
		return nil
	}
	body := html[i:]
	body = body[strings.Index(body, "<tbody>"):strings.Index(body, "</tbody>")]
	var rows [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
		var cells []string
		for _, td := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, cellText(td[1]))
		}
		rows = append(rows, cells)
	}
	return rows
}

var cellText = webtest.CellText

func groupNames(rows [][]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[0])
	}
	return out
}

// TestGroupsList: the consumer groups list over real groups (franz-go
// consumers against kfake): each group's state, Burrow status (from the
// page group that evaluates it), members, topics and total lag with its
// unit; the search and the state filter; sorting by lag, status and name
// both ways; the same rows as JSON; the empty states.
func TestGroupsList(t *testing.T) {
	statuses := map[string]templates.GroupHealth{
		"billing": {Status: "WARN"},
		"archive": {Status: "OK"},
		"reports": {Status: "ERR"},
	}
	ts := newTestServer(t, func(c *Config) {
		c.Extra = append(c.Extra, PageGroup{Name: "status", GroupStatus: func() (map[string]templates.GroupHealth, time.Time, bool) {
			return statuses, time.Now(), true
		}})
	})
	v := ts.signedIn(t, "vic", RoleViewer)
	r := v.Get("/groups")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "No consumer groups", "kcat -G")

	createTopic(t, ts, "orders", 1)
	createTopic(t, ts, "payments", 2)
	produceRecords(t, ts.brokers, "orders", 100)
	produceRecords(t, ts.brokers, "payments", 50)
	billing := consume(t, ts.brokers, "billing", "orders", 40) // stays: Stable, 60 behind
	defer billing.Close()
	consume(t, ts.brokers, "archive", "orders", 100).Close() // left: Empty, caught up
	consume(t, ts.brokers, "reports", "payments", 10).Close()
	testutil.CheckFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		for _, g := range []string{"archive", "reports"} {
			d, err := ts.kc.Group(context.Background(), g)
			if err != nil {
				return err
			}
			if d.Lag.State != "Empty" {
				return fmt.Errorf("group %s is %s, want Empty", g, d.Lag.State)
			}
		}
		return nil
	})

	r = v.Get("/groups")
	expectStatus(t, r, http.StatusOK)
	rows := groupsListRows(t, r.Text)
	if got := groupNames(rows); strings.Join(got, ",") != "archive,billing,reports" {
		t.Fatalf("groups by name: %v", got)
	}
	// Group, State, Status, Members, Topics, Lag, Last hour, Lag in time.
	want := map[string][]string{
		"archive": {"archive", "Empty", "OK", "0 members", "orders", "0 msgs"},
		"billing": {"billing", "Stable", "WARN", "1 member", "orders", "60 msgs"},
		"reports": {"reports", "Empty", "ERR", "0 members", "payments", "40 msgs"},
	}
	for _, row := range rows {
		w := want[row[0]]
		if len(row) != 8 {
			t.Fatalf("row %v: %d cells, want 8", row, len(row))
		}
		for i, cell := range w {
			if row[i] != cell {
				t.Fatalf("row %s cell %d: %q, want %q (row %v)", row[0], i, row[i], cell, row)
			}
		}
	}
	expectContains(t, r, "3 groups", "refreshed every 15 s", "Burrow")

	// The search and the state filter, alone and together.
	for _, c := range []struct{ q, want string }{
		{"?q=BILL", "billing"},
		{"?q=r", "archive,reports"},
		{"?state=Stable", "billing"},
		{"?state=Empty", "archive,reports"},
		{"?state=Empty&q=rep", "reports"},
	} {
		got := strings.Join(groupNames(groupsListRows(t, v.Get("/groups"+c.q).Text)), ",")
		if got != c.want {
			t.Fatalf("/groups%s lists %q, want %q", c.q, got, c.want)
		}
	}
	r = v.Get("/groups?state=Dead")
	expectContains(t, r, "No group matches", "Show all groups")
	expectStatus(t, v.Get("/groups?state=Stable&q=arch"), http.StatusOK)

	// Sorting, both ways; unknown columns fall back to the name.
	for _, c := range []struct{ q, want string }{
		{"?sort=lag", "archive,reports,billing"},
		{"?sort=lag&desc=1", "billing,reports,archive"},
		{"?sort=status&desc=1", "reports,billing,archive"},
		{"?sort=status", "archive,billing,reports"},
		{"?sort=members&desc=1", "billing,archive,reports"},
		{"?sort=name&desc=1", "reports,billing,archive"},
		{"?sort=nonsense", "archive,billing,reports"},
		{"?sort=lag&desc=1&state=Empty", "reports,archive"},
	} {
		got := strings.Join(groupNames(groupsListRows(t, v.Get("/groups"+c.q).Text)), ",")
		if got != c.want {
			t.Fatalf("/groups%s lists %q, want %q", c.q, got, c.want)
		}
	}
	// The headers link to the other direction and keep the filter.
	r = v.Get("/groups?sort=lag&state=Empty")
	expectContains(t, r, `href="/groups?desc=1&amp;sort=lag&amp;state=Empty"`)

	// The htmx refresh answers the table alone, filtered the same way.
	v.Headers = map[string]string{"HX-Request": "true", "HX-Target": "groups-table"}
	r = v.Get("/groups?state=Stable")
	v.Headers = map[string]string{}
	if strings.Contains(r.Text, "<html") || strings.Join(groupNames(groupsListRows(t, r.Text)), ",") != "billing" {
		t.Fatalf("table refresh: %s", snippet(r.Text))
	}

	// JSON: the same rows, with the status and the lag in records.
	v.Accept = "application/json"
	r = v.Get("/groups?sort=lag&desc=1")
	v.Accept = ""
	var js []struct {
		Group    string `json:"group"`
		State    string `json:"state"`
		Status   string `json:"status"`
		Members  int    `json:"members"`
		TotalLag int64  `json:"total_lag"`
	}
	if err := json.Unmarshal([]byte(r.Text), &js); err != nil {
		t.Fatalf("groups JSON: %v %s", err, snippet(r.Text))
	}
	got := fmt.Sprint(js)
	if got != "[{billing Stable WARN 1 60} {reports Empty ERR 0 40} {archive Empty OK 0 0}]" {
		t.Fatalf("groups JSON: %s", got)
	}
}
