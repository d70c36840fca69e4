package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/rules/preview: the rule form (new or edited, with its id in
// "id") evaluated against the cluster now, before it is saved: each
// subject in scope with its current value and whether the rule would fire.
// Nothing is stored. With htmx the answer is the #rule-preview fragment;
// without, the form comes back with the preview below it.

type rulePreviewer interface {
	PreviewRule(ctx context.Context, r alerting.Rule) (alerting.RulePreview, error)
	Rule(ctx context.Context, id int64) (alerting.Rule, error)
}

type rulePreview struct {
	eng  rulePreviewer
	form ruleForm
}

func (h rulePreview) post(c *fiber.Ctx) error {
	r, f, sel := h.form.parse(c)
	if id := queryOrForm(c, "id"); id > 0 {
		stored, err := h.eng.Rule(c.UserContext(), id)
		if err != nil {
			return engineError(err, "alert rule")
		}
		r.ID, r.CreatedAt, r.UpdatedAt = stored.ID, stored.CreatedAt, stored.UpdatedAt
	}
	pv := views.PreviewView{Rule: r}
	if f.OK() {
		res, err := h.eng.PreviewRule(c.UserContext(), r)
		switch {
		case err == nil:
			pv.Result = &res
		case !applyValidation(&f, err):
			return engineError(err, "rule preview")
		}
	}
	pv.FormErr = !f.OK()
	if web.WantsJSON(c) {
		if pv.Result == nil {
			return jsonFormError(c, fiber.StatusUnprocessableEntity, f)
		}
		return web.JSON(c, pv.Result)
	}
	if web.Fragment(c, "rule-preview") {
		return web.Render(c, fiber.StatusOK, views.RulePreview(pv))
	}
	v, err := h.form.view(c, r, f, sel)
	if err != nil {
		return err
	}
	v.Preview = &pv
	title := "New alert rule"
	if r.ID != 0 {
		title = r.Name
	}
	status := fiber.StatusOK
	if !f.OK() {
		status = fiber.StatusUnprocessableEntity
	}
	return renderRule(c, status, title, v)
}

// queryOrForm reads a numeric field (0 when absent or malformed).
func queryOrForm(c *fiber.Ctx, key string) int64 {
	if id := queryID(c, key); id > 0 {
		return id
	}
	v := formValue(c, key)
	var n int64
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' || n > 1e15 {
			return 0
		}
		n = n*10 + int64(v[i]-'0')
	}
	return n
}
