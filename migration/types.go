package migration

import (
	"time"

	"github.com/sluice-io/sluice/migration/jsondiff"
)

// Kind is a kind of difference between the two topics.
type Kind string

// The kinds of difference. Every record read ends in exactly one outcome;
// see Counters for the identity that ties them together.
const (
	// KindMismatch: a pair whose values (or headers) differ.
	KindMismatch Kind = "mismatch"
	// KindMissingRight: a left record whose partner never came on the right
	// within the window.
	KindMissingRight Kind = "missing_right"
	// KindMissingLeft: a right record with no partner on the left within the
	// window (an extra record).
	KindMissingLeft Kind = "missing_left"
	// KindDuplicate: an unpaired record that repeats, with an equal value, an
	// earlier record of the same key on the same side within the window.
	KindDuplicate Kind = "duplicate"
	// KindOutOfOrder: a pair whose right record sits before the right record
	// of the previous pair from the same left partition.
	KindOutOfOrder Kind = "out_of_order"
	// KindUnkeyed: a record that cannot be paired: null record key, or (JSON
	// pairing) a value that is not JSON or lacks the key path.
	KindUnkeyed Kind = "unkeyed"
)

// Kinds lists every Kind in display order.
var Kinds = []Kind{KindMismatch, KindMissingRight, KindMissingLeft, KindDuplicate, KindOutOfOrder, KindUnkeyed}

const numKinds = 6

func (k Kind) index() int {
	switch k {
	case KindMismatch:
		return 0
	case KindMissingRight:
		return 1
	case KindMissingLeft:
		return 2
	case KindDuplicate:
		return 3
	case KindOutOfOrder:
		return 4
	case KindUnkeyed:
		return 5
	}
	return -1
}

// ParseKind returns the Kind named s.
func ParseKind(s string) (Kind, bool) {
	k := Kind(s)
	return k, k.index() >= 0
}

// Side names one of the two topics.
type Side string

// The two sides.
const (
	SideLeft  Side = "left"
	SideRight Side = "right"
)

// Difference is one recorded example of a difference, for display and
// export. Records are clipped (Value to 4 KiB).
type Difference struct {
	ID            int64       `json:"id,omitempty"` // row id in the store; 0 when not stored
	Kind          Kind        `json:"kind"`
	Seq           int64       `json:"seq"`            // this is the Seq-th difference of its kind
	Side          Side        `json:"side,omitempty"` // for duplicate and unkeyed: the side of the record
	Key           string      `json:"key,omitempty"`  // the pairing key
	Left          *RecordInfo `json:"left,omitempty"`
	Right         *RecordInfo `json:"right,omitempty"`
	Fields        []FieldDiff `json:"fields,omitempty"`         // mismatch: what differs
	FieldsOmitted int         `json:"fields_omitted,omitempty"` // mismatch: field diffs beyond the first 50
	SkewMs        int64       `json:"skew_ms,omitempty"`        // pairs: right timestamp - left timestamp
	Note          string      `json:"note,omitempty"`
}

// RecordInfo is where a record was and what it held.
type RecordInfo struct {
	Partition      int32     `json:"partition"`
	Offset         int64     `json:"offset"`
	Timestamp      time.Time `json:"timestamp"`
	Value          string    `json:"value,omitempty"`
	ValueNull      bool      `json:"value_null,omitempty"`
	ValueTruncated bool      `json:"value_truncated,omitempty"`
	Headers        []Header  `json:"headers,omitempty"`
}

// Header is a record header.
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Counters are the numbers of a comparison. Every record read (control
// records aside) ends in exactly one outcome, so at any moment
//
//	LeftRecords  = Matched + Mismatched + MissingRight + DuplicatesLeft  + UnkeyedLeft  + PendingLeft
//	RightRecords = Matched + Mismatched + MissingLeft  + DuplicatesRight + UnkeyedRight + PendingRight
//
// (a pair counts once in Matched or Mismatched and holds one record of each
// side). OutOfOrder counts pairs, which are also counted in Matched or
// Mismatched; it is an attribute of pairs, not an outcome.
type Counters struct {
	LeftRecords     int64 `json:"left_records"`
	RightRecords    int64 `json:"right_records"`
	Matched         int64 `json:"matched"`
	Mismatched      int64 `json:"mismatched"`
	MissingRight    int64 `json:"missing_right"`
	MissingLeft     int64 `json:"missing_left"`
	DuplicatesLeft  int64 `json:"duplicates_left"`
	DuplicatesRight int64 `json:"duplicates_right"`
	OutOfOrder      int64 `json:"out_of_order"`
	UnkeyedLeft     int64 `json:"unkeyed_left"`
	UnkeyedRight    int64 `json:"unkeyed_right"`
	PendingLeft     int64 `json:"pending_left"`
	PendingRight    int64 `json:"pending_right"`
	// Evicted counts pending records given up before their window ended
	// because a memory limit was reached; each is also counted as missing
	// or duplicate.
	Evicted int64 `json:"evicted"`
	// KeysForgotten counts keys dropped from duplicate detection early
	// because of the key limit.
	KeysForgotten int64 `json:"keys_forgotten"`
	// FirstPairMs and LastPairMs are the smallest and largest left record
	// timestamps (Unix ms) among compared pairs; 0 before the first pair.
	FirstPairMs int64 `json:"first_pair_ms"`
	LastPairMs  int64 `json:"last_pair_ms"`
}

// Compared is the number of pairs compared (matched + mismatched).
func (c Counters) Compared() int64 { return c.Matched + c.Mismatched }

// Missing is missing on the right plus missing on the left.
func (c Counters) Missing() int64 { return c.MissingRight + c.MissingLeft }

// Duplicates is the duplicates of both sides.
func (c Counters) Duplicates() int64 { return c.DuplicatesLeft + c.DuplicatesRight }

// Unkeyed is the unkeyed records of both sides.
func (c Counters) Unkeyed() int64 { return c.UnkeyedLeft + c.UnkeyedRight }

// Span is the record-time span covered by the compared pairs.
func (c Counters) Span() time.Duration {
	if c.Compared() == 0 {
		return 0
	}
	return time.Duration(c.LastPairMs-c.FirstPairMs) * time.Millisecond
}

// countOf returns the running count of kind k.
func (c *Counters) countOf(k Kind) int64 {
	switch k {
	case KindMismatch:
		return c.Mismatched
	case KindMissingRight:
		return c.MissingRight
	case KindMissingLeft:
		return c.MissingLeft
	case KindDuplicate:
		return c.Duplicates()
	case KindOutOfOrder:
		return c.OutOfOrder
	case KindUnkeyed:
		return c.Unkeyed()
	}
	return 0
}

// Skew is the distribution of latency skew: for each compared pair, the
// right record's timestamp minus its left partner's. Positive means the
// right (new) side is later.
type Skew struct {
	Count int64         `json:"count"`
	Min   time.Duration `json:"min"`
	P50   time.Duration `json:"p50"`
	P99   time.Duration `json:"p99"`
	Max   time.Duration `json:"max"`
}

// PartitionProgress is how far one partition has been read.
type PartitionProgress struct {
	Partition int32 `json:"partition"`
	Next      int64 `json:"next"`          // next offset to read
	End       int64 `json:"end,omitempty"` // bounded: stop here; -1 when continuous
	High      int64 `json:"high"`          // last known high watermark
}

// Lag is how many records remain below the end (bounded) or high watermark.
func (p PartitionProgress) Lag() int64 {
	target := p.High
	if p.End >= 0 {
		target = p.End
	}
	if target > p.Next {
		return target - p.Next
	}
	return 0
}

// Snapshot is a consistent view of a comparison's numbers at one moment.
type Snapshot struct {
	Counters Counters              `json:"counters"`
	Skew     Skew                  `json:"skew"`
	Left     []PartitionProgress   `json:"left_progress"`
	Right    []PartitionProgress   `json:"right_progress"`
	Examples map[Kind][]Difference `json:"examples,omitempty"` // the first few of each kind
	Done     bool                  `json:"done"`               // a bounded comparison that reached its end
	Taken    time.Time             `json:"taken"`

	// Schemas: with Spec.Decode, the writer schemas each side's records
	// used, with the records decoded with each.
	Schemas []SchemaUse `json:"schemas,omitempty"`
	// DecodeFailures: wire-format values that could not be decoded (unknown
	// id, corrupt record), compared as raw bytes.
	DecodeFailures [2]int64 `json:"decode_failures,omitempty"`
}

// Remaining is the records left to read (bounded) or the lag (continuous).
func (s Snapshot) Remaining() int64 {
	var n int64
	for _, p := range s.Left {
		n += p.Lag()
	}
	for _, p := range s.Right {
		n += p.Lag()
	}
	return n
}

// FieldDiff is one difference between the JSON values of a pair: the path
// ("$" for the whole value, "header:NAME" for a header) and the raw JSON
// text on each side, empty when the field is absent on that side.
type FieldDiff = jsondiff.FieldDiff
