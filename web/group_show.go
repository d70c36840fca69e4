package web

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /groups/:name: one group's lag per partition (records and time),
// members and assignments, the lag history chart, and the reset form.

type groupDescriber interface {
	Group(ctx context.Context, name string) (*kafkaview.GroupDetail, error)
}

type lagHistory interface {
	LagHistory(ctx context.Context, group, topic string, since, until time.Time) ([]consoledb.LagPoint, error)
}

type groupShow struct {
	kc       groupDescriber
	history  lagHistory
	interval time.Duration
}

var historyRanges = []string{"1h", "6h", "24h", "7d"}

func rangeDuration(r string) (time.Duration, bool) {
	switch r {
	case "1h":
		return time.Hour, true
	case "6h":
		return 6 * time.Hour, true
	case "24h":
		return 24 * time.Hour, true
	case "7d":
		return 7 * 24 * time.Hour, true
	}
	return 0, false
}

func (h groupShow) get(c *fiber.Ctx) error {
	name, err := param(c, "name")
	if err != nil {
		return err
	}
	v, err := h.view(c, name)
	if err != nil {
		return err
	}
	if WantsJSON(c) {
		hist := make([]fiber.Map, 0, len(v.History))
		for _, p := range v.History {
			hist = append(hist, fiber.Map{"at": p.At, "lag": p.Lag, "lag_ms": p.LagTime.Milliseconds()})
		}
		return JSON(c, fiber.Map{"group": groupToJSON(v.Detail.Lag), "members": v.Detail.Members, "history": hist})
	}
	return h.render(c, fiber.StatusOK, v)
}

func (h groupShow) view(c *fiber.Ctx, name string) (templates.GroupView, error) {
	ctx := requestCtx(c)
	d, err := h.kc.Group(ctx, name)
	if err != nil {
		if errors.Is(err, kafkaview.ErrUnknownGroup) {
			return templates.GroupView{}, NotFound("consumer group "+name, "Groups appear when a consumer joins them or commits offsets; the Consumer groups page lists them.")
		}
		return templates.GroupView{}, Unavailable(err)
	}
	r := c.Query("range", "6h")
	span, ok := rangeDuration(r)
	if !ok {
		r, span = "6h", 6*time.Hour
	}
	until := time.Now()
	since := until.Add(-span)
	hist, err := h.history.LagHistory(ctx, name, "", since, until)
	if err != nil {
		return templates.GroupView{}, err
	}
	v := templates.GroupView{Detail: d, History: hist, Range: r, Ranges: historyRanges, Since: since, Until: until,
		Sampling: h.interval, ResetForm: templates.NewForm("mode", "earliest")}
	seen := map[string]bool{}
	for _, p := range d.Lag.Partitions {
		if !seen[p.Topic] {
			seen[p.Topic] = true
			v.Topics = append(v.Topics, p.Topic)
		}
	}
	sort.Strings(v.Topics)
	return v, nil
}

func (h groupShow) render(c *fiber.Ctx, status int, v templates.GroupView) error {
	p := PageFor(c, v.Detail.Lag.Group, templates.Crumb{Label: "Consumer groups", Href: "/groups"})
	return Render(c, status, templates.GroupPage(p, v))
}
