package web

import (
	"context"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/templates"
)

// GET /groups: every consumer group with state, members, protocol and
// total lag (records and time), filtered by name and state. The table
// refreshes itself every 15 s (htmx, #groups-table).

type lagCollector interface {
	Lag(ctx context.Context, groups ...string) ([]lag.Group, error)
}

type groupsList struct{ lag lagCollector }

func (h groupsList) get(c *fiber.Ctx) error {
	v := templates.GroupsView{Query: strings.TrimSpace(c.Query("q")), State: c.Query("state"), At: time.Now()}
	groups, err := h.lag.Lag(requestCtx(c))
	if err != nil {
		v.Err = err.Error()
	}
	v.Total = len(groups)
	needle := strings.ToLower(v.Query)
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
		v.Groups = append(v.Groups, g)
	}
	if WantsJSON(c) {
		return JSON(c, groupsJSON(v.Groups))
	}
	if Fragment(c, "groups-table") {
		return Render(c, fiber.StatusOK, templates.GroupsTable(v))
	}
	return Render(c, fiber.StatusOK, templates.GroupsPage(PageFor(c, "Consumer groups"), v))
}

// groupJSON is a group as JSON: errors as strings, durations in ms.
type groupJSON struct {
	Group      string          `json:"group"`
	State      string          `json:"state"`
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

func groupsJSON(gs []lag.Group) []groupJSON {
	out := make([]groupJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, groupToJSON(g))
	}
	return out
}
