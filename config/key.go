package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Type is a key's type, numbered as Kafka numbers them (ConfigDef.Type,
// DescribeConfigs config_type).
type Type int8

const (
	Boolean Type = 1
	String  Type = 2
	Int     Type = 3
	Short   Type = 4
	Long    Type = 5
	Double  Type = 6
	List    Type = 7
	// Password is a string that DescribeConfigs never shows (Kafka's
	// PASSWORD, config type 9): its value is reported as null and
	// sensitive.
	Password Type = 9
)

func (t Type) String() string {
	switch t {
	case Boolean:
		return "boolean"
	case String:
		return "string"
	case Int:
		return "int"
	case Short:
		return "short"
	case Long:
		return "long"
	case Double:
		return "double"
	case List:
		return "list"
	case Password:
		return "password"
	}
	return "unknown"
}

// Mode is how Kafka lets a broker key change while the broker runs (the
// "Update Mode" of Kafka's reference): read-only keys need a restart;
// per-broker keys change with AlterConfigs on one broker, cluster-wide keys
// on one broker or on the cluster default. Key.Dynamic says which of them
// Sluice changes at run time too (dynamic.go).
type Mode int8

const (
	ReadOnly Mode = iota
	PerBroker
	ClusterWide
)

func (m Mode) String() string {
	switch m {
	case PerBroker:
		return "per-broker"
	case ClusterWide:
		return "cluster-wide"
	}
	return "read-only"
}

// Group is a section of the reference and of the sample properties file.
type Group struct {
	Title string
	Intro string // a paragraph under the title in docs/configuration.md; "" for none
}

// Rule is what a key accepts beyond its type: a range, a set of values or
// a check of its own. Doc says it for the reference ("at least 1").
type Rule struct {
	Doc   string
	check func(v any) error // v is the parsed value as value() gives it
	words []string          // the values a key of words accepts (a form's choices)
}

// Key is one configuration key: a broker key of the properties file, or a
// topic config. Its exported fields are its documentation; the unexported
// ones say how its text becomes a typed field.
type Key struct {
	Name    string
	Type    Type
	Default string // Kafka's default as text, as the reference and DescribeConfigs show it; "" = none
	Mode    Mode   // broker keys only
	// Dynamic is set on the broker keys Sluice applies while it runs (a
	// dynamic broker config, dynamic.go): derived for the broker keys that
	// give a topic config's default, set in the table for the others the
	// broker reads at run time (the replication throttle rates). Mode says
	// what Kafka allows.
	Dynamic bool
	Group   *Group // broker keys only
	Doc     string
	// Synonyms are the keys of lower precedence that give the same
	// setting, in Kafka's order: log.retention.minutes and
	// log.retention.hours for log.retention.ms (broker keys only).
	Synonyms []string
	// Topic is, on a broker key, the topic config it gives the default
	// of (retention.ms for log.retention.ms); BrokerKey is the reverse, on
	// a topic config. Set on the topic config; the broker key's is derived.
	Topic     string
	BrokerKey string

	// synonymOf is, on a synonym, the key it stands in for (derived), and
	// scale how many of that key's units one of its own is (60000 for
	// minutes of milliseconds); 0 copies the text.
	synonymOf string
	scale     int64
	// fallback names the key whose value this one takes when neither it
	// nor a synonym is given and it has no default; unset is the value
	// then, when there is no fallback (log.flush.interval.ms: never).
	fallback string
	unset    string

	norm   func(string) string // applied to the text first (lower case, ...)
	syntax Rule                // checked on the normalised text: a value that is not one of the key's words
	rule   Rule                // checked on the parsed value: a value out of range
	// field returns a pointer to the Config field of a broker key, tfield
	// to the Topic field of a topic config; nil for a synonym.
	field  func(c *Config) any
	tfield func(t *Topic) any
	// replication marks a topic config the partition honours rather than
	// its log (min.insync.replicas): Log.Validate skips it.
	replication bool
	// perListener: the key may also be given per listener, as
	// listener.name.<listener>.<key> (security.go); perMechanism: per
	// listener and SASL mechanism, listener.name.<listener>.<mechanism>.<key>.
	// prefix marks the entry that documents a family of keys by their
	// prefix (listener.name.<listener>.<key>, console.kafka.<property>).
	perListener, perMechanism, prefix bool
}

// Choices are the values of a key that takes one of a few words
// (compression.type, cleanup.policy), for a form's select; nil otherwise.
func (k *Key) Choices() []string {
	if k.Type == Boolean {
		return []string{"true", "false"}
	}
	return append([]string(nil), k.syntax.words...)
}

// IsPrefix reports whether the entry documents a family of keys named by a
// prefix rather than one key (it has no value of its own).
func (k *Key) IsPrefix() bool { return k.prefix }

// ValidValues says what the key accepts beyond its type, for the reference.
func (k *Key) ValidValues() string {
	switch {
	case k.syntax.Doc != "" && k.rule.Doc != "":
		return k.syntax.Doc + "; " + k.rule.Doc
	case k.syntax.Doc != "":
		return k.syntax.Doc
	}
	return k.rule.Doc
}

// Documentation is Doc followed by what the table says of the key's
// relations: its synonyms and their order, the topic config it is the
// default of, the key it falls back to.
func (k *Key) Documentation() string {
	var b strings.Builder
	b.WriteString(k.Doc)
	note := func(format string, args ...any) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, format, args...)
	}
	if len(k.Synonyms) > 0 {
		note("Precedence: %s > %s.", k.Name, strings.Join(k.Synonyms, " > "))
	}
	if k.synonymOf != "" {
		note("Used when %s is not set.", k.synonymOf)
	}
	if k.fallback != "" {
		note("Unset: the value of %s.", k.fallback)
	}
	if k.Topic != "" {
		note("Default of the topic config %s.", k.Topic)
	}
	if k.BrokerKey != "" {
		note("Default: the broker key %s.", k.BrokerKey)
	}
	return b.String()
}

// set parses v into the key's field of c.
func (k *Key) set(c *Config, v string) error { return k.store(k.field(c), v) }

// store parses v into the field p points to.
func (k *Key) store(p any, v string) error {
	if k.norm != nil {
		v = k.norm(v)
	}
	if k.syntax.check != nil {
		if err := k.syntax.check(v); err != nil {
			return err
		}
	}
	return parseInto(p, v)
}

// parseInto parses text into the typed field p points to.
func parseInto(p any, v string) error {
	switch p := p.(type) {
	case *string:
		*p = v
	case *bool:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			*p = true
		case "false":
			*p = false
		default:
			return errors.New("must be true or false")
		}
	case *int16:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 16)
		if err != nil {
			return errors.New("not a 16-bit integer")
		}
		*p = int16(n)
	case *int32:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return errors.New("not a 32-bit integer")
		}
		*p = int32(n)
	case *int64:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return errors.New("not an integer")
		}
		*p = n
	case *time.Duration: // every duration key is in milliseconds
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return errors.New("not an integer")
		}
		if n > math.MaxInt64/int64(time.Millisecond) || n < math.MinInt64/int64(time.Millisecond) {
			return errors.New("too large")
		}
		*p = time.Duration(n) * time.Millisecond
	case *float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return errors.New("not a number")
		}
		*p = f
	case *[]string:
		*p = SplitList(v)
	case *[]Listener:
		l, err := parseListeners(v)
		if err != nil {
			return err
		}
		*p = l
	case *map[string]int:
		m, err := parseConnectionOverrides(v)
		if err != nil {
			return err
		}
		*p = m
	case *map[string]string:
		m, err := parseProtocolMap(v)
		if err != nil {
			return err
		}
		*p = m
	default:
		panic(fmt.Sprintf("config: no parser for %T", p))
	}
	return nil
}

// value is the field p points to as the rules see it: integers and
// durations (in milliseconds) as int64, the rest as they are.
func value(p any) any {
	switch p := p.(type) {
	case *int16:
		return int64(*p)
	case *int32:
		return int64(*p)
	case *int64:
		return *p
	case *time.Duration:
		return p.Milliseconds()
	}
	return reflect.ValueOf(p).Elem().Interface()
}

// format is the field p points to as text, the inverse of parseInto.
func format(p any) string {
	switch v := value(p).(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case string:
		return v
	case []string:
		return strings.Join(v, ",")
	case []Listener:
		s := make([]string, len(v))
		for i, l := range v {
			s[i] = l.String()
		}
		return strings.Join(s, ",")
	case map[string]int:
		s := make([]string, 0, len(v))
		for host, n := range v {
			s = append(s, net.JoinHostPort(host, strconv.Itoa(n)))
		}
		slices.Sort(s)
		return strings.Join(s, ",")
	case map[string]string:
		s := make([]string, 0, len(v))
		for k, val := range v {
			s = append(s, k+":"+val)
		}
		slices.Sort(s)
		return strings.Join(s, ",")
	}
	panic(fmt.Sprintf("config: cannot format %T", p))
}

func isZero(p any) bool { return reflect.ValueOf(p).Elem().IsZero() }

// typeOf is the Kafka type of the field p points to.
func typeOf(p any) Type {
	switch p.(type) {
	case *bool:
		return Boolean
	case *int16:
		return Short
	case *int32:
		return Int
	case *int64, *time.Duration:
		return Long
	case *float64:
		return Double
	case *[]string:
		return List
	}
	return String
}

// check runs the key's rules on the value p points to; the error names
// the key ("segment.bytes: 10: must be between 14 and 2147483647").
func (k *Key) check(p any) error {
	v := value(p)
	if s, ok := v.(string); ok && k.syntax.check != nil {
		if err := k.syntax.check(s); err != nil {
			return fmt.Errorf("%s: %q: %w", k.Name, s, err)
		}
	}
	if k.rule.check != nil {
		if err := k.rule.check(v); err != nil {
			if s, ok := v.(string); ok {
				return fmt.Errorf("%s: %q: %w", k.Name, s, err)
			}
			return fmt.Errorf("%s: %s: %w", k.Name, format(p), err)
		}
	}
	return nil
}

// Check runs the rules of the broker key name on v, a value of the key's
// Go type (durations as time.Duration); the error names the key. Packages
// with a configuration of their own (group.Config) validate it with the
// table's rules this way.
func Check(name string, v any) error {
	k, ok := Lookup(name)
	if !ok {
		panic("config: Check of unknown key " + name)
	}
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	if err := k.check(p.Interface()); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// Rules used by the tables.

func atLeast(n int64) Rule {
	doc := fmt.Sprintf("at least %d", n)
	if n == 0 {
		doc = "not negative"
	}
	return Rule{Doc: doc, check: func(v any) error {
		if v.(int64) < n {
			return fmt.Errorf("must be %s", doc)
		}
		return nil
	}}
}

func between(lo, hi int64) Rule {
	doc := fmt.Sprintf("%d to %d", lo, hi)
	return Rule{Doc: doc, check: func(v any) error {
		if n := v.(int64); n < lo || n > hi {
			return fmt.Errorf("must be between %d and %d", lo, hi)
		}
		return nil
	}}
}

// neverOrAtLeast accepts -1 (never, unbounded) or n and more.
func neverOrAtLeast(n int64, never string) Rule {
	doc := fmt.Sprintf("-1 (%s) or at least %d", never, n)
	return Rule{Doc: doc, check: func(v any) error {
		if m := v.(int64); m != -1 && m < n {
			return fmt.Errorf("must be %s", doc)
		}
		return nil
	}}
}

func ratio() Rule {
	return Rule{Doc: "0 to 1", check: func(v any) error {
		if f := v.(float64); f < 0 || f > 1 {
			return errors.New("must be between 0 and 1")
		}
		return nil
	}}
}

// oneOf accepts the words given, exactly.
func oneOf(words ...string) Rule {
	doc := strings.Join(words, ", ")
	return Rule{Doc: "one of " + doc, words: words, check: func(v any) error {
		for _, w := range words {
			if v.(string) == w {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", doc)
	}}
}

func nonEmptyList(what string) Rule {
	return Rule{Doc: "at least one " + what, check: func(v any) error {
		if len(v.([]string)) == 0 {
			return fmt.Errorf("at least one %s is needed", what)
		}
		return nil
	}}
}

func lower(s string) string         { return strings.ToLower(s) }
func lowerTrimmed(s string) string  { return strings.ToLower(strings.TrimSpace(s)) }
func withoutSpaces(s string) string { return strings.ReplaceAll(s, " ", "") }
