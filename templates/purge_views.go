package templates

import "github.com/sluice-io/sluice/kafkaview"

// PurgePreviewView is the preview of a topic purge: per partition, the
// records deleted and the new log start offset; applying it needs the
// topic's name typed in Confirm.
type PurgePreviewView struct {
	Topic   string
	Spec    kafkaview.PurgeSpec
	Rows    []kafkaview.PurgeRow
	Form    Form // the purge form values, posted again to apply
	Confirm Form // the typed confirmation
	Err     string
}

// Deleted is the number of records the purge deletes in all.
func (v PurgePreviewView) Deleted() int64 {
	var n int64
	for _, r := range v.Rows {
		n += r.Deleted()
	}
	return n
}

// GroupDropView is the preview of deleting a consumer group (Topic "") or
// its committed offsets for one topic.
type GroupDropView struct {
	Group   string
	Topic   string // "": the whole group
	State   string
	Members int
	// Rows are the committed offsets that go.
	Rows []GroupDropRow
	// Consumers are the members that consume Topic (or, for the whole
	// group, every member): while there are any, Kafka refuses.
	Consumers []string
	Err       string
}

// GroupDropRow is one committed offset a deletion removes.
type GroupDropRow struct {
	Topic     string
	Partition int32
	Committed int64
	End       int64
	Lag       int64
}

// Blocked reports whether Kafka will refuse the deletion now.
func (v GroupDropView) Blocked() bool {
	if v.Topic == "" {
		return v.Members > 0 || (v.State != "Empty" && v.State != "Dead" && v.State != "")
	}
	return len(v.Consumers) > 0
}
