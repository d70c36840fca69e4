package templates

// PartitionsPreviewView is the preview of growing a topic: the partition
// count now and after, as the controller validated it (CreatePartitions
// with validate_only); applying posts the count again with the count it
// was previewed from.
type PartitionsPreviewView struct {
	Topic       string
	From, To    int
	Replication int
	Refused     string // the controller's refusal of the validation, or ""
	Err         string // why the apply failed, or ""
}

// ConfigsPreviewView is the preview of a topic config change: each
// changed key with its value and source now and the value after, as the
// broker validated them (IncrementalAlterConfigs with validate_only).
type ConfigsPreviewView struct {
	Topic   string
	Rows    []ConfigPreviewRow
	All     bool   // the form showed every config (kept for the way back)
	Refused string // the broker's refusal of the validation, or ""
	Err     string // why the apply failed, or ""
}

// ConfigPreviewRow is one changed config.
type ConfigPreviewRow struct {
	Name    string
	Old     string
	Source  string // where Old comes from: topic, broker, default
	New     string // the value sent; for a reset, the default it falls back to
	Reset   bool
	Form    string // the value as typed ("cfg.")
	Refused string // the broker's refusal naming this key, or ""
}
