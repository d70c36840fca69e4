package web

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /topics/:name: partitions with leaders, replicas, ISR, offsets and
// sizes; configs with their defaults (editable by operators); add
// partitions; delete behind a typed confirmation.

type topicDescriber interface {
	Topic(ctx context.Context, name string) (*kafkaview.TopicDetail, error)
}

type topicShow struct {
	kc      topicDescriber
	lag     recentLag
	schemas topicSchemas
}

func (h topicShow) get(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	v, err := h.view(c, name)
	if err != nil {
		return err
	}
	v.ShowDefaults = c.Query("configs") == "all"
	if WantsJSON(c) {
		return JSON(c, topicDetailJSON(v.Detail))
	}
	return h.render(c, fiber.StatusOK, v)
}

// view describes the topic; a missing topic is a 404.
func (h topicShow) view(c *fiber.Ctx, name string) (templates.TopicView, error) {
	d, err := h.kc.Topic(requestCtx(c), name)
	if err != nil {
		if errors.Is(err, kafkaview.ErrUnknownTopic) || isUnknownTopic(err) {
			return templates.TopicView{}, NotFound("topic "+name, "It may have been deleted. The Topics page lists the ones that exist.")
		}
		return templates.TopicView{}, Unavailable(err)
	}
	v := templates.TopicView{Detail: d, ConfigForm: templates.NewForm(), PartForm: templates.NewForm(), DeleteForm: templates.NewForm()}
	v.Subjects = h.schemas.of(requestCtx(c), name)
	if h.lag != nil {
		if groups, _, ok := h.lag.LatestLag(10 * time.Minute); ok {
			for _, g := range groups {
				for _, p := range g.Partitions {
					if p.Topic == name {
						v.Groups = append(v.Groups, g.Group)
						break
					}
				}
			}
			sort.Strings(v.Groups)
		}
	}
	return v, nil
}

func (h topicShow) render(c *fiber.Ctx, status int, v templates.TopicView) error {
	p := PageFor(c, v.Detail.Meta.Name, templates.Crumb{Label: "Topics", Href: "/topics"})
	return Render(c, status, templates.TopicPage(p, v))
}
