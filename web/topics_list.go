package web

import (
	"context"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /topics: search, sort and page through every topic. The list comes
// from one cached metadata snapshot (refreshed when older than 5 s), so
// filtering and sorting 10,000 topics is in-memory work; message counts and
// sizes are asked for the shown page only.

type topicLister interface {
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
	Stats(ctx context.Context, topics []string) (map[string]kafkaview.TopicStats, error)
}

type topicsList struct{ kc topicLister }

const defaultPerPage = 50

func (h topicsList) get(c *fiber.Ctx) error {
	start := time.Now()
	ctx := requestCtx(c)
	q := strings.TrimSpace(c.Query("q"))
	v := templates.TopicsView{
		Query:        q,
		ShowInternal: c.Query("internal") == "1" || c.Query("internal") == "on",
		Sort:         c.Query("sort", "name"),
		Desc:         c.Query("desc") == "1",
	}
	switch v.Sort {
	case "name", "partitions", "replication", "urp":
	default:
		v.Sort = "name"
	}
	perPage := c.QueryInt("per", defaultPerPage)
	if perPage < 10 || perPage > 500 {
		perPage = defaultPerPage
	}
	page := max(1, c.QueryInt("page", 1))

	snap, err := h.kc.Metadata(ctx, 5*time.Second)
	var rows []*kafkaview.TopicMeta
	if err != nil {
		v.Err = err.Error()
	} else {
		v.TotalTopics = len(snap.Topics)
		for i := range snap.Topics {
			if snap.Topics[i].Internal {
				v.InternalTopics++
			}
		}
		needle := strings.ToLower(q)
		rows = make([]*kafkaview.TopicMeta, 0, len(snap.Topics))
		for i := range snap.Topics {
			t := &snap.Topics[i]
			if t.Internal && !v.ShowInternal {
				continue
			}
			if needle != "" && !containsFold(t.Name, needle) {
				continue
			}
			rows = append(rows, t)
		}
		sortTopics(rows, v.Sort, v.Desc)
	}

	base := "/topics?" + listQuery(q, v.ShowInternal, v.Sort, v.Desc, perPage).Encode()
	pages := max(1, (len(rows)+perPage-1)/perPage)
	page = min(page, pages)
	v.BaseURL = base
	v.Pager = templates.Pager{Page: page, Pages: pages, Total: len(rows), PerPage: perPage, Label: "topics"}
	if page > 1 {
		v.Pager.PrevURL = templates.WithParam(base, "page", strconv.Itoa(page-1))
	}
	if page < pages {
		v.Pager.NextURL = templates.WithParam(base, "page", strconv.Itoa(page+1))
	}
	lo, hi := (page-1)*perPage, min(len(rows), page*perPage)
	shown := rows[lo:hi]
	names := make([]string, len(shown))
	for i, t := range shown {
		names[i] = t.Name
	}
	stats, serr := h.kc.Stats(ctx, names)
	if serr != nil {
		v.StatsErr = serr.Error()
	}
	v.Rows = make([]templates.TopicRow, len(shown))
	for i, t := range shown {
		st, ok := stats[t.Name]
		v.Rows[i] = templates.TopicRow{Meta: *t, Stats: st, HasStats: ok}
	}
	v.Elapsed = time.Since(start)
	if WantsJSON(c) {
		return JSON(c, topicsJSON(v))
	}
	if Fragment(c, "topics-table") {
		return Render(c, fiber.StatusOK, templates.TopicsTable(v))
	}
	return Render(c, fiber.StatusOK, templates.TopicsPage(PageFor(c, "Topics"), v))
}

func listQuery(q string, internal bool, sortKey string, desc bool, per int) url.Values {
	vals := url.Values{}
	if q != "" {
		vals.Set("q", q)
	}
	if internal {
		vals.Set("internal", "1")
	}
	if sortKey != "" && sortKey != "name" {
		vals.Set("sort", sortKey)
	}
	if desc {
		vals.Set("desc", "1")
	}
	if per != defaultPerPage {
		vals.Set("per", strconv.Itoa(per))
	}
	return vals
}

// containsFold reports whether s contains the lower-case needle, ignoring
// ASCII case (topic names are ASCII), without allocating.
func containsFold(s, needle string) bool {
	n := len(needle)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for ; j < n; j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != needle[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

func sortTopics(rows []*kafkaview.TopicMeta, key string, desc bool) {
	less := func(a, b *kafkaview.TopicMeta) bool { return a.Name < b.Name }
	switch key {
	case "partitions":
		less = func(a, b *kafkaview.TopicMeta) bool {
			if len(a.Partitions) != len(b.Partitions) {
				return len(a.Partitions) < len(b.Partitions)
			}
			return a.Name < b.Name
		}
	case "replication":
		less = func(a, b *kafkaview.TopicMeta) bool {
			if a.Replication != b.Replication {
				return a.Replication < b.Replication
			}
			return a.Name < b.Name
		}
	case "urp":
		less = func(a, b *kafkaview.TopicMeta) bool {
			ua, ub := a.UnderReplicated+a.Offline*1000000, b.UnderReplicated+b.Offline*1000000
			if ua != ub {
				return ua < ub
			}
			return a.Name < b.Name
		}
	}
	if key == "name" && !desc {
		return // the snapshot is sorted by name already
	}
	sort.Slice(rows, func(i, j int) bool {
		if desc {
			return less(rows[j], rows[i])
		}
		return less(rows[i], rows[j])
	})
}
