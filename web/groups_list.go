package web

import (
	"context"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/templates"
)

// GET /groups: every consumer group with its state, Burrow status (the
// alert evaluator's, when one runs), members, topics, total lag in records
// and time, and its lag over the last hour; filtered by name and state,
// sorted by any column, 100 a page. The table refreshes itself every 15 s
// (htmx, #groups-table).

type lagCollector interface {
	Lag(ctx context.Context, groups ...string) ([]lag.Group, error)
}

type lagTrends interface {
	LagTrends(ctx context.Context, groups []string, since time.Time) (map[string][]consoledb.LagPoint, error)
}

type groupsList struct {
	lag    lagCollector
	trends lagTrends
	status func() (map[string]templates.GroupHealth, time.Time, bool)
}

// groupSorts are the columns the list sorts by.
var groupSorts = map[string]bool{"name": true, "state": true, "status": true, "members": true, "topics": true, "lag": true, "time": true}

const groupsPerPage = 100

func (h groupsList) get(c *fiber.Ctx) error {
	ctx := requestCtx(c)
	v := templates.GroupsView{Query: strings.Clone(strings.TrimSpace(c.Query("q"))), State: strings.Clone(c.Query("state")),
		Sort: strings.Clone(c.Query("sort", "name")), Desc: c.Query("desc") == "1", At: time.Now()}
	if !groupSorts[v.Sort] {
		v.Sort = "name"
	}
	groups, err := h.lag.Lag(ctx)
	if err != nil {
		v.Err = err.Error()
	}
	v.Total = len(groups)
	if h.status != nil {
		v.Statuses, v.StatusAt, v.HasStatus = h.status()
	}
	needle := strings.ToLower(v.Query)
	var rows []templates.GroupRow
	for _, g := range groups {
		if needle != "" && !strings.Contains(strings.ToLower(g.Group), needle) {
			continue
		}
		switch v.State {
		case "":
		case "rebalancing":
			if g.State != "PreparingRebalance" && g.State != "CompletingRebalance" {
				continue
			}
		default:
			if g.State != v.State {
				continue
			}
		}
		rows = append(rows, templates.GroupRow{Group: g, Topics: groupTopics(g), Health: v.Statuses[g.Group]})
	}
	sortGroups(rows, v.Sort, v.Desc)

	base := "/groups?" + groupsQuery(v).Encode()
	v.BaseURL = base
	pages := max(1, (len(rows)+groupsPerPage-1)/groupsPerPage)
	page := min(max(1, c.QueryInt("page", 1)), pages)
	v.Pager = templates.Pager{Page: page, Pages: pages, Total: len(rows), PerPage: groupsPerPage, Label: "groups"}
	if page > 1 {
		v.Pager.PrevURL = templates.WithParam(base, "page", strconv.Itoa(page-1))
	}
	if page < pages {
		v.Pager.NextURL = templates.WithParam(base, "page", strconv.Itoa(page+1))
	}
	rows = rows[(page-1)*groupsPerPage : min(len(rows), page*groupsPerPage)]
	if h.trends != nil && len(rows) > 0 {
		names := make([]string, len(rows))
		for i, r := range rows {
			names[i] = r.Group.Group
		}
		if trends, err := h.trends.LagTrends(ctx, names, time.Now().Add(-time.Hour)); err == nil {
			for i := range rows {
				for _, p := range trends[rows[i].Group.Group] {
					rows[i].Trend = append(rows[i].Trend, templates.Point{At: p.At, V: float64(p.Lag)})
				}
			}
		}
	}
	v.Rows = rows
	if WantsJSON(c) {
		out := make([]groupJSON, 0, len(rows))
		for _, r := range rows {
			j := groupToJSON(r.Group)
			if v.HasStatus && r.Health.Status != "" {
				j.Status = r.Health.Status
			}
			out = append(out, j)
		}
		return JSON(c, out)
	}
	if Fragment(c, "groups-table") {
		return Render(c, fiber.StatusOK, templates.GroupsTable(v))
	}
	return Render(c, fiber.StatusOK, templates.GroupsPage(PageFor(c, "Consumer groups"), v))
}

func groupsQuery(v templates.GroupsView) url.Values {
	q := url.Values{}
	if v.Query != "" {
		q.Set("q", v.Query)
	}
	if v.State != "" {
		q.Set("state", v.State)
	}
	if v.Sort != "name" {
		q.Set("sort", v.Sort)
	}
	if v.Desc {
		q.Set("desc", "1")
	}
	return q
}

// groupTopics lists the topics a group has commits on, in order.
func groupTopics(g lag.Group) []string {
	var out []string
	for _, p := range g.Partitions {
		if len(out) == 0 || out[len(out)-1] != p.Topic {
			out = append(out, p.Topic)
		}
	}
	return out
}

// statusRank orders statuses worst first when sorting descending.
func statusRank(s string) int {
	switch s {
	case "OK":
		return 1
	case "WARN":
		return 2
	case "ERR":
		return 3
	}
	return 0
}

func sortGroups(rows []templates.GroupRow, by string, desc bool) {
	less := func(a, b *templates.GroupRow) int {
		switch by {
		case "name":
			return strings.Compare(a.Group.Group, b.Group.Group)
		case "state":
			return strings.Compare(a.Group.State, b.Group.State)
		case "status":
			return statusRank(a.Health.Status) - statusRank(b.Health.Status)
		case "members":
			return a.Group.Members - b.Group.Members
		case "topics":
			return len(a.Topics) - len(b.Topics)
		case "lag":
			return cmp64(a.Group.TotalLag, b.Group.TotalLag)
		case "time":
			return cmp64(int64(a.Group.MaxLagTime), int64(b.Group.MaxLagTime))
		}
		return 0
	}
	sort.SliceStable(rows, func(i, j int) bool {
		c := less(&rows[i], &rows[j])
		if c == 0 {
			return rows[i].Group.Group < rows[j].Group.Group // ties by name, always ascending
		}
		if desc {
			return c > 0
		}
		return c < 0
	})
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// groupJSON is a group as JSON: errors as strings, durations in ms.
type groupJSON struct {
	Group      string          `json:"group"`
	State      string          `json:"state"`
	Status     string          `json:"status,omitempty"` // Burrow's, when the alert evaluator runs here
	Protocol   string          `json:"protocol"`
	Members    int             `json:"members"`
	TotalLag   int64           `json:"total_lag"`
	MaxLagMS   int64           `json:"max_lag_ms"`
	Error      string          `json:"error,omitempty"`
	Partitions []partitionJSON `json:"partitions"`
}

type partitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	LogEnd    int64  `json:"log_end"`
	Lag       int64  `json:"lag"`
	LagMS     int64  `json:"lag_ms"`
	ClientID  string `json:"client_id,omitempty"`
	Host      string `json:"host,omitempty"`
	Error     string `json:"error,omitempty"`
}

func groupToJSON(g lag.Group) groupJSON {
	j := groupJSON{Group: g.Group, State: g.State, Protocol: g.Protocol, Members: g.Members, TotalLag: g.TotalLag,
		MaxLagMS: g.MaxLagTime.Milliseconds(), Partitions: []partitionJSON{}}
	if g.Err != nil {
		j.Error = g.Err.Error()
	}
	for _, p := range g.Partitions {
		pj := partitionJSON{Topic: p.Topic, Partition: p.Partition, Committed: p.Committed, LogEnd: p.LogEnd, Lag: p.Lag,
			LagMS: p.LagTime.Milliseconds(), ClientID: p.ClientID, Host: p.Host}
		if p.Err != nil {
			pj.Error = p.Err.Error()
		}
		j.Partitions = append(j.Partitions, pj)
	}
	return j
}
