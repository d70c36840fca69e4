package migration

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/migration/jsondiff"
)

// Spec defines one comparison. It is what the console's create form and the
// CLI's flags fill in, and it is stored as JSON with the comparison, so its
// fields are plain strings and numbers.
type Spec struct {
	Left  string `json:"left"`  // the reference topic (e.g. ORDER)
	Right string `json:"right"` // the candidate topic (e.g. ORDERNEW)

	// Key says how records are paired: "key" (the record key, the default)
	// or "json:<path>" (a field of the JSON value, e.g. "json:order.id").
	// Records with the same key are paired in order of arrival.
	Key string `json:"key"`

	// Values says how the values of a pair are compared: "bytes" (exact
	// bytes, the default) or "json" (JSON equality: member order ignored,
	// numbers by value, Ignore paths skipped, Tolerance applied).
	Values    string   `json:"values"`
	Ignore    []string `json:"ignore,omitempty"`    // JSON paths, or "header:<name>" to skip a header
	Tolerance float64  `json:"tolerance,omitempty"` // absolute, for numbers in JSON mode

	Headers bool `json:"headers,omitempty"` // compare record headers too

	// Decode turns values in the Confluent wire format (Avro, Protobuf,
	// JSON Schema with a registry id) into JSON before pairing and
	// comparing, with schemas from Options.Schemas, so records written with
	// different writer-schema versions compare by their fields. Values not
	// in the wire format are compared as they are.
	Decode bool `json:"decode,omitempty"`

	// Start is where both topics are read from: "earliest" (the default),
	// "latest" (records produced from now on), or a time (RFC 3339, or Unix
	// milliseconds): the first records at or after it.
	Start string `json:"start"`

	// Window is how long, in record time, a record waits for its partner
	// before it counts as missing. Default 30s.
	Window Duration `json:"window"`

	// Bounded comparisons stop at the end offsets the topics had when the
	// comparison started; others run until stopped.
	Bounded bool `json:"bounded"`

	Criteria Criteria `json:"criteria"`
}

// Criteria decide the verdict. The zero value is strict: at least one pair,
// and nothing missing, duplicated, out of order or unkeyed. A negative Max*
// means "no limit".
type Criteria struct {
	MinRecords    int64    `json:"min_records"`      // compared pairs needed (matched + mismatched); 0 means 1
	MinSpan       Duration `json:"min_span"`         // record-time span the compared pairs must cover
	MaxMissing    int64    `json:"max_missing"`      // missing on the right + missing on the left
	MaxDuplicates int64    `json:"max_duplicates"`   // duplicates on both sides
	MaxOutOfOrder int64    `json:"max_out_of_order"` // pairs out of order
	MaxUnkeyed    int64    `json:"max_unkeyed"`      // records that could not be paired (no key)
}

// DefaultSpec returns a Spec with the defaults the CLI and the console form
// start from: key pairing, exact bytes, earliest, 30s window, bounded, and
// out-of-order pairs not held against the verdict.
func DefaultSpec() Spec {
	return Spec{
		Key:      "key",
		Values:   "bytes",
		Start:    "earliest",
		Window:   Duration(30 * time.Second),
		Bounded:  true,
		Criteria: Criteria{MinRecords: 1, MaxOutOfOrder: -1},
	}
}

// Duration is a time.Duration that reads and writes JSON as "30s".
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: want a string like \"30s\": %w", err)
	}
	*d = Duration(n)
	return nil
}

// Limits bound the memory of one comparison. When a limit is reached, the
// oldest pending records are given up early (counted as missing, and in
// Counters.Evicted) or, for keys, duplicate detection forgets the oldest
// idle keys (Counters.KeysForgotten).
type Limits struct {
	MaxPendingRecords int   // default 500,000
	MaxPendingBytes   int64 // default 128 MiB (keys, values and headers of pending records)
	MaxKeys           int   // distinct keys remembered; default 1,000,000
}

func (l *Limits) setDefaults() {
	if l.MaxPendingRecords <= 0 {
		l.MaxPendingRecords = 500_000
	}
	if l.MaxPendingBytes <= 0 {
		l.MaxPendingBytes = 128 << 20
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = 1_000_000
	}
}

const (
	startEarliest = iota
	startLatest
	startTime
)

// compiledSpec is a validated Spec in the form the engine uses.
type compiledSpec struct {
	Spec
	keyJSON       bool
	keyPath       jsondiff.Path
	jsonValues    bool
	ignore        []jsondiff.Path
	ignoreHeaders []string
	window        int64 // milliseconds
	startMode     int
	startMilli    int64
}

// Validate checks s and reports the first problem in words a form can show.
func (s Spec) Validate() error {
	_, err := compile(s)
	return err
}

func compile(s Spec) (*compiledSpec, error) {
	c := &compiledSpec{Spec: s}
	c.Left, c.Right = strings.TrimSpace(s.Left), strings.TrimSpace(s.Right)
	if c.Left == "" || c.Right == "" {
		return nil, errors.New("both a left and a right topic are needed")
	}
	if c.Left == c.Right {
		return nil, errors.New("the left and right topics are the same topic")
	}
	switch key := strings.TrimSpace(s.Key); {
	case key == "" || key == "key":
		c.Key = "key"
	case strings.HasPrefix(key, "json:"):
		p, err := jsondiff.ParsePath(strings.TrimPrefix(key, "json:"))
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		if p.HasWildcard() {
			return nil, fmt.Errorf("key: path %q has a wildcard; a key path names one field", p.String())
		}
		c.keyJSON, c.keyPath, c.Key = true, p, key
	default:
		return nil, fmt.Errorf("key %q: want \"key\" or \"json:<path>\" (e.g. json:order.id)", s.Key)
	}
	switch s.Values {
	case "", "bytes":
		c.Values = "bytes"
	case "json":
		c.jsonValues = true
	default:
		return nil, fmt.Errorf("values %q: want \"bytes\" or \"json\"", s.Values)
	}
	for _, ig := range s.Ignore {
		ig = strings.TrimSpace(ig)
		if ig == "" {
			continue
		}
		if name, ok := strings.CutPrefix(ig, "header:"); ok {
			if name == "" {
				return nil, errors.New("ignore: header: needs a header name")
			}
			c.ignoreHeaders = append(c.ignoreHeaders, name)
			continue
		}
		if !c.jsonValues {
			return nil, fmt.Errorf("ignore %q: ignoring JSON paths needs JSON value comparison (values \"json\")", ig)
		}
		p, err := jsondiff.ParsePath(ig)
		if err != nil {
			return nil, fmt.Errorf("ignore: %w", err)
		}
		c.ignore = append(c.ignore, p)
	}
	if len(c.ignore) > jsondiff.MaxIgnorePaths {
		return nil, fmt.Errorf("ignore: at most %d paths", jsondiff.MaxIgnorePaths)
	}
	if len(c.ignoreHeaders) > 0 && !s.Headers {
		return nil, errors.New("ignore: header: entries need header comparison turned on")
	}
	if s.Tolerance < 0 || math.IsNaN(s.Tolerance) || math.IsInf(s.Tolerance, 0) {
		return nil, fmt.Errorf("tolerance %v: want a finite number >= 0", s.Tolerance)
	}
	if s.Tolerance > 0 && !c.jsonValues {
		return nil, errors.New("tolerance needs JSON value comparison (values \"json\")")
	}
	switch st := strings.TrimSpace(s.Start); st {
	case "", "earliest":
		c.Start, c.startMode = "earliest", startEarliest
	case "latest", "now":
		c.Start, c.startMode = "latest", startLatest
	default:
		ms, err := parseStartTime(st)
		if err != nil {
			return nil, err
		}
		c.startMode, c.startMilli = startTime, ms
	}
	if s.Window == 0 {
		c.Window = Duration(30 * time.Second)
	}
	w := time.Duration(c.Window)
	if w < time.Millisecond || w > 7*24*time.Hour {
		return nil, fmt.Errorf("window %v: want between 1ms and 168h", w)
	}
	c.window = w.Milliseconds()
	if c.Criteria.MinRecords <= 0 {
		c.Criteria.MinRecords = 1
	}
	if c.Criteria.MinSpan < 0 {
		return nil, errors.New("min span must not be negative")
	}
	return c, nil
}

func parseStartTime(s string) (int64, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	return 0, fmt.Errorf("start %q: want earliest, latest, an RFC 3339 time or Unix milliseconds", s)
}
