package templates

import (
	"net/url"
	"strconv"
)

// Page is what the layout needs besides the body: the title and the nav.
type Page struct {
	Title  string
	Nav    []NavItem
	Flash  []Flash
	Crumbs []Crumb
	// Wide lets tables use the whole window (messages).
	Wide bool
	// Banner, when set, is shown above every page: this console cannot
	// reach its replicated state (what it shows may be stale, changes are
	// refused).
	Banner string
}

// NavItem is one entry of the main navigation.
type NavItem struct {
	Label  string
	Href   string
	Active bool
	// Admin entries (the console's and the cluster's administration) are
	// folded under one "Admin" menu, so the nav stays on one line.
	Admin bool
	// HasBadge: the entry carries a count (Badge, shown when not 0, in
	// BadgeKind's colour) that the page refreshes every 15 s.
	HasBadge  bool
	Badge     int
	BadgeKind string
}

// BadgeID is the element id of the entry's count, for the refresh.
func (n NavItem) BadgeID() string { return NavBadgeID(n.Href) }

// NavBadgeID is the element id of the count of the nav entry at path.
func NavBadgeID(path string) string {
	var b []byte
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		case len(b) > 0 && b[len(b)-1] != '-':
			b = append(b, '-')
		}
	}
	return "navbadge-" + string(b)
}

// HasBadges reports whether some entry carries a count.
func (p Page) HasBadges() bool {
	for _, n := range p.Nav {
		if n.HasBadge {
			return true
		}
	}
	return false
}

// Crumb is one step of the breadcrumb above a page title.
type Crumb struct {
	Label string
	Href  string
}

// Flash is a one-line note at the top of a page: Kind is ok, info, warn or bad.
type Flash struct {
	Kind string
	Text string
}

// Form carries submitted values and validation errors back into a form, so
// a rejected form shows what was typed and what is wrong with it.
type Form struct {
	Values map[string]string
	Errors map[string]string
	Err    string // an error about the whole form
}

// NewForm returns an empty form with the given initial values.
func NewForm(kv ...string) Form {
	f := Form{Values: map[string]string{}, Errors: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Values[kv[i]] = kv[i+1]
	}
	return f
}

// Get is the value of field k.
func (f Form) Get(k string) string { return f.Values[k] }

// Set sets the value of field k.
func (f *Form) Set(k, v string) {
	if f.Values == nil {
		f.Values = map[string]string{}
	}
	f.Values[k] = v
}

// Error is the error of field k, "" when none.
func (f Form) Error(k string) string { return f.Errors[k] }

// Fail records an error on field k (the first one wins). The message is
// shown as a sentence: its first letter is capitalised (Go error texts are
// not).
func (f *Form) Fail(k, msg string) {
	if f.Errors == nil {
		f.Errors = map[string]string{}
	}
	if _, ok := f.Errors[k]; !ok {
		f.Errors[k] = Sentence(msg)
	}
}

// Sentence capitalises the first letter of an ASCII message.
func Sentence(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// OK reports whether the form has no errors.
func (f Form) OK() bool { return len(f.Errors) == 0 && f.Err == "" }

// Checked reports whether checkbox k was ticked.
func (f Form) Checked(k string) bool { v := f.Values[k]; return v == "on" || v == "1" || v == "true" }

// Option is one choice of a select.
type Option struct {
	Value string
	Label string
}

// Pager describes a paged list.
type Pager struct {
	Page    int // 1-based
	Pages   int
	Total   int
	PerPage int
	PrevURL string
	NextURL string
	Label   string // what is counted, plural: "topics"
}

// First and Last are the 1-based positions of the page's first and last rows.
func (p Pager) First() int {
	if p.Total == 0 {
		return 0
	}
	return (p.Page-1)*p.PerPage + 1
}

func (p Pager) Last() int { return min(p.Total, p.Page*p.PerPage) }

// WithParam returns base with query parameter k set to v (removed when v is "").
func WithParam(base string, k, v string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	if v == "" {
		q.Del(k)
	} else {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// PathEscape escapes a path segment (topic and group names).
func PathEscape(s string) string { return url.PathEscape(s) }

// TopicURL is the URL of a topic's page.
func TopicURL(name string) string { return "/topics/" + url.PathEscape(name) }

// TxnAbortURL is the Abort confirmation of a transactional id.
func TxnAbortURL(id string) string { return "/transactions/" + url.PathEscape(id) + "/abort" }

// MessagesURL is the URL of a topic's messages page.
func MessagesURL(name string) string { return "/topics/" + url.PathEscape(name) + "/messages" }

// GroupURL is the URL of a consumer group's page.
func GroupURL(name string) string { return "/groups/" + url.PathEscape(name) }

// PartitionMessagesURL is the messages page filtered to one partition from
// an offset.
func PartitionMessagesURL(topic string, p int32, offset int64) string {
	v := url.Values{}
	v.Set("partition", strconv.Itoa(int(p)))
	if offset >= 0 {
		v.Set("from", "offset")
		v.Set("offset", strconv.FormatInt(offset, 10))
	}
	return MessagesURL(topic) + "?" + v.Encode()
}
