package templates

import (
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/lag/sampler"
)

// OverviewView is the cluster at a glance.
type OverviewView struct {
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
	StatsErr     string
	Err          string
	Elapsed      time.Duration
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
	ShowDefaults bool
	Groups       []string // consumer groups with commits on the topic
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
	TailURL      string
	TotalRecords int64
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
}

// GroupsView is the consumer groups list.
type GroupsView struct {
	Groups []lag.Group
	Query  string
	State  string
	Total  int
	Err    string
	At     time.Time
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
}

// ConsoleStatusView is /console/status: where this host's console stands
// in the cluster's replicated console state.
type ConsoleStatusView struct {
	Host         int32                     // this host's broker id
	Leader       bool                      // this console does the background work
	LeaderHolder string                    // the console leader's znode data, in a cluster
	Topics       []consoledb.ReplicaStatus // the state topic first, then the lag history topic
	Dirty        []string                  // tables committed here only while the state topic was away
	KeyFrom      string                    // where the cluster key is kept
	LockFrom     string                    // where the write lock is kept
	Tables       []string                  // the replicated tables
}
