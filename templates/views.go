package templates

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/lag/sampler"
)

// OverviewView is the cluster at a glance.
type OverviewView struct {
	// Panels are the page groups' panels (alerts, comparisons): what needs
	// attention first.
	Panels          []templ.Component
	ClusterID       string
	Controller      int32
	ControllerAddr  string
	BrokersUp       int
	BrokersDown     []consoledb.KnownBroker
	Topics          int
	InternalTopics  int
	Partitions      int
	UnderReplicated int
	Offline         int
	Traffic         sampler.Traffic
	TopLag          []lag.Group // most lagging groups, most first
	Groups          int
	LagAt           time.Time // when TopLag was collected
	LagErr          string
	Err             string
	// PartitionIssues are the offline and under-replicated partitions
	// (offline first), at most 50.
	PartitionIssues []PartitionIssue
	// MessagesInHistory and BytesInHistory are the throughput over the
	// last hour (per second).
	MessagesInHistory []Point
	BytesInHistory    []Point
	// Statuses are the groups' health as the alert evaluator sees it
	// (nil without one).
	Statuses map[string]GroupHealth
}

// PartitionIssue is a partition without a leader or with replicas out of
// sync.
type PartitionIssue struct {
	Topic     string
	Partition int32
	Leader    int32
	Replicas  []int32
	ISR       []int32
	Offline   bool
}

// Point is one value of a series at one time (sparklines, charts).
type Point struct {
	At time.Time
	V  float64
}

// BrokersView is the brokers page.
type BrokersView struct {
	Brokers    []kafkaview.BrokerInfo
	Down       []consoledb.KnownBroker
	Controller int32
	ClusterID  string
	Err        string
}

// TopicRow is one row of the topics list.
type TopicRow struct {
	Meta     kafkaview.TopicMeta
	Stats    kafkaview.TopicStats
	HasStats bool
}

// TopicsView is the topics list.
type TopicsView struct {
	Query        string
	ShowInternal bool
	Sort         string // name, partitions, replication, urp
	Desc         bool
	Rows         []TopicRow
	Pager        Pager
	BaseURL      string // the list URL with the current filters, for sort links
	TotalTopics  int    // in the cluster, internal included
	// InternalTopics are the internal ones among them (__consumer_offsets).
	InternalTopics int
	StatsErr       string
	Err            string
	Elapsed        time.Duration
}

// TopicCreateView is the create-topic form.
type TopicCreateView struct {
	Form    Form
	Brokers int
}

// TopicView is a topic's page.
type TopicView struct {
	Detail       *kafkaview.TopicDetail
	ConfigForm   Form // errors from the last config change
	PartForm     Form
	DeleteForm   Form
	PurgeForm    Form
	ShowDefaults bool
	Groups       []string // consumer groups with commits on the topic
	// Subjects are the schema registry subjects the topic's records use.
	Subjects []TopicSubject
}

// TopicSubject is a schema subject a topic's records use: named after the
// topic (TopicNameStrategy: <topic>-key, <topic>-value), or the subject of
// a schema id seen in the topic's latest records (RecordNameStrategy and
// others).
type TopicSubject struct {
	Subject string
	Version int    // the version seen in the records; 0: the subject's latest
	ID      int    // the schema id seen; 0: none seen
	Type    string // AVRO, PROTOBUF, JSON when seen
	Field   string // key, value: where it was seen or what the name says
	ByTopic bool   // named after the topic
	Seen    bool   // seen in the latest records
}

// MessagesView is the messages page of a topic.
type MessagesView struct {
	Topic        string
	Partitions   []int32
	Q            MessageQuery
	Result       *kafkaview.Result
	Err          string
	ProduceForm  Form
	Produced     *kafkaview.Record
	ShowProduce  bool
	ExportJSON   string
	ExportCSV    string
	NextURL      string
	OlderURL     string // the next older page of a newest-first read
	LatestURL    string // back to the newest records, from an older page
	TailURL      string
	TotalRecords int64
	// ProducedTopic is where Produced was written (the form may name
	// another topic).
	ProducedTopic string
	// CopiedFrom says which record the produce form was filled from.
	CopiedFrom string
	// TopicNames are the cluster's topics, for the produce form's topic.
	TopicNames []string
	CanProduce bool
	// Decode decodes the shown records' keys and values in the Confluent
	// wire format (nil: no schema registry).
	Decode ValueDecoder
	// CanEncode: the produce form can encode a JSON value with a
	// registered schema.
	CanEncode bool
}

// MessageQuery is the messages form as submitted, echoed back into it.
type MessageQuery struct {
	Partition string // "" for all
	From      string
	Offset    string
	Timestamp string // datetime-local value in the viewer's zone
	Limit     string
	Format    Format
	Field     string
	Text      string
	Header    string
	Exact     bool
	MaxScan   string
	Timeout   string
	// Isolation is read_committed (the default: what a transactional
	// service's consumers see) or read_uncommitted (aborted and open
	// transactions' records and the markers too, each marked).
	Isolation string
}

// GroupsView is the consumer groups list.
type GroupsView struct {
	Rows    []GroupRow // the page's groups, filtered and sorted
	Query   string
	State   string
	Sort    string // name, state, status, members, topics, lag, time
	Desc    bool
	BaseURL string // the list URL with the filters, for sort links
	Pager   Pager
	Total   int // groups in the cluster
	Err     string
	At      time.Time
	// HasStatus: an alert evaluator runs on this console and Statuses are
	// its Burrow statuses as of StatusAt.
	HasStatus bool
	Statuses  map[string]GroupHealth
	StatusAt  time.Time
}

// GroupRow is one group of the list.
type GroupRow struct {
	Group  lag.Group
	Topics []string
	Health GroupHealth
	Trend  []Point // total lag over the last hour
}

// GroupView is one consumer group's page.
type GroupView struct {
	Detail    *kafkaview.GroupDetail
	History   []consoledb.LagPoint
	Range     string // 1h, 6h, 24h, 7d
	Ranges    []string
	Since     time.Time
	Until     time.Time
	Sampling  time.Duration
	ResetForm Form
	Topics    []string // topics the group has commits on, for the reset form
	// DeleteForm and OffsetsForm are the delete-group and
	// delete-offsets forms.
	DeleteForm, OffsetsForm Form
	// Topic is the topic the chart shows alone ("" every topic).
	Topic string
	// Events are the markers of the chart: alerts fired, acknowledged and
	// resolved about the group, offset resets.
	Events []ChartEvent
	// Rate is the group's consumption and production over the last few
	// samples; Rates the same per partition (by "topic/partition").
	Rate  GroupRate
	Rates map[string]GroupRate
	// Status is the group's health as the alert evaluator sees it
	// (HasStatus false without one).
	Status    GroupHealth
	HasStatus bool
}

// GroupRate is how fast a group (or one of its partitions) consumes and
// its records arrive, and when its lag would be gone at that pace.
type GroupRate struct {
	Known    bool
	Consumed float64 // records per second
	Produced float64
	Over     time.Duration
	Drain    time.Duration // with State "draining"
	State    string        // draining, growing, stopped, caught up, unknown
	Lags     []Point       // the last few lags (a sparkline)
}

// ResetPreviewView shows what a reset would commit.
type ResetPreviewView struct {
	Group   string
	State   string
	Spec    kafkaview.ResetSpec
	Rows    []kafkaview.ResetRow
	Form    Form // the reset form values, posted again to apply
	Err     string
	Applied bool
}

// UsersView is the user administration page.
type UsersView struct {
	Users []consoledb.User
	Form  Form // add-user form
	Me    string
}

// AccountView is the signed-in user's own page.
type AccountView struct {
	User consoledb.User
	Form Form
}

// AuditView is the audit log page.
type AuditView struct {
	Entries []consoledb.AuditEntry
	Filter  consoledb.AuditFilter
	NextURL string
	// ExportCSV and ExportJSON download what the filter selects.
	ExportCSV, ExportJSON string
}

// GroupHealth is a consumer group's health as the alert evaluator computes
// it (Burrow's status: OK, WARN, ERR), for the groups list.
type GroupHealth struct {
	Status string // OK, WARN, ERR (NOTFOUND: no partition to judge)
	// Partitions counts the group's partitions by Burrow status (OK, WARN,
	// STOP, STALL, REWIND).
	Partitions map[string]int
}

// ChartEvent is a marker on a timeline: an alert fired, acknowledged or
// resolved, an offset reset.
type ChartEvent struct {
	At    time.Time
	Kind  string // fired, resolved, acknowledged, reset
	Label string // what happened, for the marker's tooltip
	Href  string // where to read more
}

// healthTitle explains a status: its partitions by Burrow status.
func healthTitle(h GroupHealth) string {
	var parts []string
	for _, st := range []string{"STOP", "STALL", "REWIND", "WARN", "OK"} {
		if n := h.Partitions[st]; n > 0 {
			parts = append(parts, Plural(n, "partition", "partitions")+" "+st)
		}
	}
	return strings.Join(parts, ", ")
}

// RowOptions say how record rows are shown.
type RowOptions struct {
	Topic      string
	Format     Format
	Fresh      bool   // rows just arrived (the live tail)
	Field      string // key, value, header: where Needle was searched
	Header     string // the header searched
	Needle     string // the text searched, highlighted
	CanProduce bool   // show "copy to produce"
	// Decode, when set, decodes keys and values in the Confluent wire
	// format; they are shown as JSON with their schema.
	Decode ValueDecoder
}

func (o RowOptions) needle(field string) string {
	if o.Field == field {
		return o.Needle
	}
	return ""
}

// Rows is how the page's records are shown.
func (v MessagesView) Rows() RowOptions {
	return RowOptions{Topic: v.Topic, Format: v.Q.Format, Field: v.Q.Field, Header: v.Q.Header, Needle: v.Q.Text, CanProduce: v.CanProduce, Decode: v.Decode}
}

// jsonOf is b as coloured JSON spans when the format is JSON and b is JSON.
func jsonOf(b []byte, f Format) ([]Span, bool) {
	if f != FormatJSON || len(b) > maxShown {
		return nil, false
	}
	return JSONSpans(b)
}

// RecordID is the element id of a record's row.
func RecordID(p int32, offset int64) string {
	return "r-" + strconv.Itoa(int(p)) + "-" + strconv.FormatInt(offset, 10)
}

// RecordURL is a record's permalink: its partition's messages from its
// offset, one record.
func RecordURL(topic string, p int32, offset int64, f Format) string {
	v := url.Values{}
	v.Set("partition", strconv.Itoa(int(p)))
	v.Set("from", "offset")
	v.Set("offset", strconv.FormatInt(offset, 10))
	v.Set("limit", "1")
	if f != FormatText && f != "" {
		v.Set("format", string(f))
	}
	return MessagesURL(topic) + "?" + v.Encode() + "#" + RecordID(p, offset)
}

// CopyURL opens the produce form filled with a record.
func CopyURL(topic string, p int32, offset int64) string {
	return MessagesURL(topic) + "?produce=1&copy=" + strconv.Itoa(int(p)) + ":" + strconv.FormatInt(offset, 10) + "#produce"
}

// headerHTML is a record header as "name: value", escaped, the value's
// matches highlighted when the search is on that header.
func headerHTML(h kafkaview.Header, o RowOptions) string {
	hv, _ := Payload(h.Value, h.Value == nil, FormatText)
	needle := ""
	if o.Field == "header" && h.Key == o.Header {
		needle = o.Needle
	}
	return MarkedHTML(h.Key+": ", "") + MarkedHTML(hv, needle)
}

// ConsoleStatusView is /console/status: where this host's console stands
// in the cluster's replicated console state.
// Its JSON (Accept: application/json) has snake_case names, as the
// console's other JSON.
type ConsoleStatusView struct {
	Host         int32                     `json:"host"`          // this host's broker id
	Leader       bool                      `json:"leader"`        // this console does the background work
	LeaderHolder string                    `json:"leader_holder"` // the console leader's znode data, in a cluster
	Topics       []consoledb.ReplicaStatus `json:"topics"`        // the state topic first, then the lag history topic
	Dirty        []string                  `json:"dirty"`         // tables committed here only while the state topic was away
	KeyFrom      string                    `json:"key_from"`      // where the cluster key is kept
	LockFrom     string                    `json:"lock_from"`     // where the write lock is kept
	Tables       []string                  `json:"tables"`        // the replicated tables
}

// BrokerView is the broker page: one broker's configs, log dirs and
// partitions.
type BrokerView struct {
	Detail *kafkaview.BrokerDetail
	// Dynamic are the configs the broker applies at run time
	// (config.DynamicKeys), each with its overrides, for the edit forms.
	Dynamic []DynamicConfig
	// BrokerForm and DefaultForm are the edit forms of this broker's
	// overrides and of the cluster-wide defaults, as posted (values,
	// errors) when a change was refused.
	BrokerForm, DefaultForm Form
}

// DynamicConfig is one dynamic broker config on the broker page.
type DynamicConfig struct {
	Name       string
	InForce    string // the value in force on this broker
	Source     string // where InForce comes from
	Sensitive  bool
	Broker     string // this broker's own override ("" when none)
	HasBroker  bool
	Default    string // the cluster-wide default override ("" when none)
	HasDefault bool
}

// Override is the override of c at scope ("broker" or "default").
func (c DynamicConfig) Override(scope string) (string, bool) {
	if scope == ScopeDefault {
		return c.Default, c.HasDefault
	}
	return c.Broker, c.HasBroker
}

// The scopes of a dynamic broker config change.
const (
	ScopeBroker  = "broker"  // the broker's own override (DYNAMIC_BROKER_CONFIG)
	ScopeDefault = "default" // the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG)
)

// BrokerConfigsPreview is the preview of a change to dynamic broker
// configs: per config, the override before and after, and the value in
// force on the broker before and after with its source.
type BrokerConfigsPreview struct {
	Broker int32
	Scope  string // ScopeBroker or ScopeDefault
	Rows   []BrokerConfigChange
	Err    string
}

// BrokerConfigChange is one row of a BrokerConfigsPreview.
type BrokerConfigChange struct {
	Name                  string
	Delete                bool
	Was                   string // the override shown on the page ("" when none)
	HadOverride           bool
	New                   string // the new override (not when Delete)
	InForce, Source       string // on the broker, now
	NewInForce, NewSource string // on the broker, after the change
	Known                 bool   // the broker describes the config
	Note                  string // e.g. "this broker's own override stays in force"
}

// TransactionsView is the transactions page: the transactional ids, the
// filter, and the counts over every id listed.
type TransactionsView struct {
	Rows         []kafkaview.Transaction // filtered, hanging first then oldest open
	State        string                  // the state filter ("" for any)
	Hanging      bool                    // only the hanging ones
	States       []string                // the filter's choices
	OpenCount    int
	HangingCount int
	At           time.Time
	Err          string
	CanAbort     bool // operators and admins: hanging rows link to the Abort confirmation
}

// TxnAbortView is the confirmation page of aborting a hanging transaction.
type TxnAbortView struct {
	Txn kafkaview.Transaction
	At  time.Time
	Err string // the abort failed, or the transaction changed
}
