package web

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// POST /brokers/:id/configs: change dynamic broker configs, the broker's
// own overrides (scope=broker) or the cluster-wide defaults
// (scope=default), with IncrementalAlterConfigs on the BROKER resource (the
// id, or the empty name). The form is the topic configs' (configFormChanges:
// "cfg.", "was.", "reset."), plus "newkey"/"newvalue" for a config the
// page does not list; an emptied value deletes the override. The first
// POST checks the change with the broker (validate_only: a refused key gets
// the broker's words beside it) and previews it: per config the override
// and the value in force on the broker before and after, with their
// sources. The preview posts again with apply=1. Both check that the
// overrides changed are still what the page showed ("was."), else 409.

type brokerConfigAlterer interface {
	brokerDetailSource
	DynamicOverrides(ctx context.Context, broker int32) (map[string]string, error)
	AlterBrokerConfigs(ctx context.Context, broker int32, changes []kafkaview.ConfigChange, validateOnly bool) error
}

type brokerConfigs struct {
	kc brokerConfigAlterer
}

func (h brokerConfigs) post(c *fiber.Ctx) error {
	id, err := brokerID(c)
	if err != nil {
		return err
	}
	scope := c.FormValue("scope")
	target := id
	switch scope {
	case templates.ScopeBroker:
	case templates.ScopeDefault:
		target = -1
	default:
		return BadRequest("scope must be broker or default")
	}
	show := brokerDetail{kc: h.kc}
	v, err := show.view(c, id)
	if err != nil {
		return err
	}
	f, changes := configFormChanges(c)
	if k := strings.TrimSpace(c.FormValue("newkey")); k != "" {
		f.Set("newkey", k)
		f.Set("newvalue", strings.TrimSpace(c.FormValue("newvalue")))
		kv, err := templates.ConfigValueFromForm(k, f.Get("newvalue"))
		switch {
		case err != nil:
			f.Fail("newvalue", err.Error())
		case kv == "":
			f.Fail("newvalue", "Enter the value for "+k+".")
		default:
			changes = append(changes, kafkaview.ConfigChange{Name: k, Value: kv})
		}
	}
	seen := map[string]bool{}
	for i := range changes {
		ch := &changes[i]
		if seen[ch.Name] {
			f.Fail(ch.Name, ch.Name+" is given twice.")
		}
		seen[ch.Name] = true
		if !ch.Reset && ch.Value == "" {
			ch.Reset = true // an emptied override: delete it
		}
	}
	fail := func(status int, f templates.Form) error {
		if scope == templates.ScopeDefault {
			v.DefaultForm = f
		} else {
			v.BrokerForm = f
		}
		return show.render(c, status, v)
	}
	if !f.OK() {
		f.Err = "Not saved: correct the values marked below."
		return fail(fiber.StatusUnprocessableEntity, f)
	}
	if len(changes) == 0 {
		Flash(c, "info", "Nothing changed.")
		return SeeOther(c, string(templates.BrokerURL(id))+"#dynamic-configs")
	}
	ctx := requestCtx(c)
	// The stale-edit check: an override changed by someone else since the
	// page was shown is not overwritten.
	cur, err := h.kc.DynamicOverrides(ctx, target)
	if err != nil {
		return Unavailable(err)
	}
	args := c.Request().PostArgs()
	for _, ch := range changes {
		if !args.Has("was." + ch.Name) {
			continue // a new key: whatever is there is shown in the preview
		}
		was := string(args.Peek("was." + ch.Name))
		if now, ok := cur[ch.Name]; now != was || (!ok && was != "") {
			what := "deleted"
			if ok {
				what = "set to " + strconv.Quote(now)
			}
			f.Fail(ch.Name, fmt.Sprintf("Changed meanwhile: the override was %s since the page was shown (it showed %q). Review it and save again.", what, was))
		}
	}
	if !f.OK() {
		f.Err = "Not saved: an override changed meanwhile."
		return fail(fiber.StatusConflict, f)
	}
	refused := func(err error) error {
		markRefusal(&f, changes, err)
		if k := f.Get("newkey"); k != "" && f.Error(k) != "" {
			f.Fail("newvalue", f.Error(k))
		}
		return fail(fiber.StatusUnprocessableEntity, f)
	}
	if c.FormValue("apply") != "1" {
		if err := h.kc.AlterBrokerConfigs(ctx, target, changes, true); err != nil {
			return refused(err)
		}
		p := templates.BrokerConfigsPreview{Broker: id, Scope: scope, Rows: previewBrokerConfigs(v.Detail, scope, cur, changes)}
		if WantsJSON(c) {
			return JSON(c, fiber.Map{"broker": id, "scope": scope, "changes": p.Rows})
		}
		page := PageFor(c, "Change dynamic configs", templates.Crumb{Label: "Brokers", Href: "/brokers"},
			templates.Crumb{Label: "Broker " + strconv.Itoa(int(id)), Href: string(templates.BrokerURL(id))})
		return Render(c, fiber.StatusOK, templates.BrokerConfigsPreviewPage(page, p))
	}
	var desc []string
	for _, ch := range changes {
		if ch.Reset {
			desc = append(desc, ch.Name+" override deleted")
		} else {
			desc = append(desc, ch.Name+"="+ch.Value)
		}
	}
	auditTarget := "broker " + strconv.Itoa(int(id))
	if target < 0 {
		auditTarget = "cluster default"
	}
	err = h.kc.AlterBrokerConfigs(ctx, target, changes, false)
	Audit(c, "broker.configs", auditTarget, strings.Join(desc, ", "), err)
	if err != nil {
		return refused(err)
	}
	Flash(c, "ok", "Saved ("+auditTarget+"): "+strings.Join(desc, ", ")+".")
	return SeeOther(c, string(templates.BrokerURL(id))+"#dynamic-configs")
}

// previewBrokerConfigs tells, for each change at scope, the override and
// the value in force on broker d before and after, with their sources
// (from the synonyms the broker describes: deleting an override falls back
// to the next level).
func previewBrokerConfigs(d *kafkaview.BrokerDetail, scope string, cur map[string]string, changes []kafkaview.ConfigChange) []templates.BrokerConfigChange {
	described := make(map[string]kafkaview.BrokerConfig, len(d.Configs))
	for _, c := range d.Configs {
		described[c.Name] = c
	}
	const (
		dynBroker  = kmsg.ConfigSourceDynamicBrokerConfig
		dynDefault = kmsg.ConfigSourceDynamicDefaultBrokerConfig
	)
	out := make([]templates.BrokerConfigChange, 0, len(changes))
	for _, ch := range changes {
		r := templates.BrokerConfigChange{Name: ch.Name, Delete: ch.Reset, New: ch.Value}
		r.Was, r.HadOverride = cur[ch.Name]
		c, ok := described[ch.Name]
		r.Known = ok
		if !ok {
			r.NewSource = "broker (dynamic)"
			if scope == templates.ScopeDefault {
				r.NewSource = "cluster default"
			}
			r.NewInForce = ch.Value
			out = append(out, r)
			continue
		}
		r.InForce, r.Source = c.Value, c.Source
		if c.Sensitive {
			r.InForce = "(hidden)"
		}
		brokerOverride := c.Kafka == dynBroker
		for _, s := range c.Synonyms {
			if s.Kafka == dynBroker {
				brokerOverride = true
			}
		}
		switch {
		case scope == templates.ScopeBroker && !ch.Reset:
			r.NewInForce, r.NewSource = ch.Value, "broker (dynamic)"
		case scope == templates.ScopeBroker:
			if s, ok := c.Below(dynBroker); ok {
				r.NewInForce, r.NewSource = s.Value, s.Source
			}
		case brokerOverride:
			r.NewInForce, r.NewSource = r.InForce, r.Source
			r.Note = "This broker's own override stays in force; brokers without one take the change."
		case !ch.Reset:
			r.NewInForce, r.NewSource = ch.Value, "cluster default"
			r.Note = "Every broker without its own override takes it."
		default:
			if s, ok := c.Below(dynBroker, dynDefault); ok {
				r.NewInForce, r.NewSource = s.Value, s.Source
			}
			r.Note = "Every broker without its own override falls back to its own config."
		}
		out = append(out, r)
	}
	return out
}
