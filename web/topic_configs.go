package web

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// POST /topics/:name/configs: save changed topic configs. The form carries
// each config's value as shown ("was.") next to the edited one ("cfg."),
// so only what the user changed is sent (IncrementalAlterConfigs), and a
// concurrent change to another config is not overwritten.

type topicConfigAlterer interface {
	AlterTopicConfigs(ctx context.Context, name string, changes []kafkaview.ConfigChange) error
}

type topicConfigs struct {
	kc   topicConfigAlterer
	show topicShow
}

func (h topicConfigs) post(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	f, changes := configFormChanges(c)
	v, err := h.show.view(c, name)
	if err != nil {
		return err
	}
	known := make(map[string]kafkaview.ConfigEntry, len(v.Detail.Configs))
	for _, e := range v.Detail.Configs {
		known[e.Name] = e
	}
	var bad []string
	for name := range f.Errors {
		bad = append(bad, name+": "+f.Errors[name])
	}
	sort.Strings(bad)
	for _, ch := range changes {
		e, ok := known[ch.Name]
		switch {
		case !ok:
			bad = append(bad, "the broker does not describe a config named "+ch.Name)
		case e.ReadOnly:
			f.Fail(ch.Name, ch.Name+" is read-only.")
			bad = append(bad, ch.Name+" is read-only")
		}
	}
	if len(bad) > 0 {
		f.Err = "Not saved: " + strings.Join(bad, "; ") + "."
		v.ConfigForm = f
		v.ShowDefaults = c.FormValue("all") == "1"
		return h.show.render(c, fiber.StatusUnprocessableEntity, v)
	}
	if len(changes) == 0 {
		Flash(c, "info", "Nothing changed.")
		return SeeOther(c, templates.TopicURL(name)+"#configs")
	}
	var desc []string
	for _, ch := range changes {
		if ch.Reset {
			desc = append(desc, ch.Name+" reset to default")
		} else {
			desc = append(desc, ch.Name+"="+ch.Value)
		}
	}
	err = h.kc.AlterTopicConfigs(requestCtx(c), name, changes)
	Audit(c, "topic.configs", name, strings.Join(desc, ", "), err)
	if err != nil {
		markRefusal(&f, changes, err)
		v.ConfigForm = f
		v.ShowDefaults = c.FormValue("all") == "1"
		return h.show.render(c, fiber.StatusUnprocessableEntity, v)
	}
	Flash(c, "ok", "Saved: "+strings.Join(desc, ", ")+".")
	return SeeOther(c, templates.TopicURL(name)+"#configs")
}

// GET /topics/:name/configs: the configs are on the topic's page (a reload
// after a refused change lands there, not on a 404).
func (h topicConfigs) get(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	return SeeOther(c, templates.TopicURL(name)+"#configs")
}

// configFormChanges reads a configs form (the topic's, the broker's): each
// config's edited value ("cfg.<name>") beside the value the page showed
// ("was.<name>"), and "reset.<name>" ticked to delete an override. Only
// what the user changed is returned, sorted by name, so that a concurrent
// change to another config is not overwritten; a value that does not parse
// (7d, 1GiB: the number Kafka takes) is an error on its field.
func configFormChanges(c *fiber.Ctx) (templates.Form, []kafkaview.ConfigChange) {
	f := templates.NewForm()
	var changes []kafkaview.ConfigChange
	args := c.Request().PostArgs()
	resets := map[string]bool{}
	args.VisitAll(func(k, v []byte) {
		key := string(k)
		if cfg, ok := strings.CutPrefix(key, "reset."); ok && string(v) != "" {
			resets[cfg] = true
		}
	})
	args.VisitAll(func(k, v []byte) {
		key := string(k)
		cfg, ok := strings.CutPrefix(key, "cfg.")
		if !ok {
			return
		}
		val := strings.TrimSpace(string(v))
		f.Set(key, val)
		if resets[cfg] {
			return
		}
		was := string(args.Peek("was." + cfg))
		if val == was {
			return
		}
		kv, err := templates.ConfigValueFromForm(cfg, val)
		if err != nil {
			f.Fail(cfg, err.Error())
			return
		}
		if kv != was {
			changes = append(changes, kafkaview.ConfigChange{Name: cfg, Value: kv})
		}
	})
	for cfg := range resets {
		changes = append(changes, kafkaview.ConfigChange{Name: cfg, Reset: true})
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Name < changes[j].Name })
	return f, changes
}

// markRefusal puts the broker's refusal of changes on a configs form: its
// own words as the form's error and beside the values they are about (the
// ones it names, or the only one sent).
func markRefusal(f *templates.Form, changes []kafkaview.ConfigChange, err error) {
	msg := err.Error()
	var ke *kafkaview.KafkaError
	if errors.As(err, &ke) && ke.Message != "" {
		msg = ke.Message
	}
	f.Err = "Not saved: the broker refused the change: " + msg
	marked := false
	for _, ch := range changes {
		if strings.Contains(msg, ch.Name) {
			f.Fail(ch.Name, "Refused: "+msg)
			marked = true
		}
	}
	if !marked && len(changes) == 1 {
		f.Fail(changes[0].Name, "Refused: "+msg)
	}
}
