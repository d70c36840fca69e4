package comparisons

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web"
)

// GET /comparisons/:id/export?format=json|csv[&kind=KIND]: every stored
// difference of the comparison (of one kind, or all) as a download, in the
// engine's export format (migration.WriteDifferencesJSON/CSV, whose CSV
// cells are safe to open in a spreadsheet). Each export is an
// "access.comparison.export" audit entry.

type exporter interface {
	getter
	Export(ctx context.Context, id int64, kind migration.Kind, format string, w io.Writer) error
}

type exportHandler struct{ eng exporter }

func (h exportHandler) get(c *fiber.Ctx) error {
	st, err := load(c, h.eng)
	if err != nil {
		return err
	}
	format := c.Query("format", "json")
	if format != "json" && format != "csv" {
		return web.BadRequest("Export format " + strconv.Quote(format) + " is not offered; use format=json or format=csv.")
	}
	kind := migration.Kind(c.Query("kind"))
	if _, ok := migration.ParseKind(string(kind)); kind != "" && !ok {
		return web.BadRequest("There is no kind of difference " + strconv.Quote(string(kind)) + ".")
	}
	var buf bytes.Buffer
	if err := h.eng.Export(c.UserContext(), st.ID, kind, format, &buf); err != nil {
		return engineError(st.ID, err)
	}
	what := "all"
	if kind != "" {
		what = string(kind)
	}
	web.AuditAccess(c, "comparison.export", st.Name, "id="+strconv.FormatInt(st.ID, 10)+" kind="+what+" format="+format)
	name := "comparison-" + strconv.FormatInt(st.ID, 10) + "-" + what + "-" + time.Now().UTC().Format("20060102-150405") + "." + format
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	if format == "csv" {
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	} else {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	}
	return c.Send(buf.Bytes())
}
