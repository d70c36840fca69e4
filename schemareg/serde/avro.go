package serde

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// maxDepth bounds nesting while decoding or encoding (recursive Avro
// records, nested JSON).
const maxDepth = 256

// maxItems bounds the array items and map entries of one record: an item
// of a zero-byte type (null, an empty record) costs no input, so the input
// length alone does not bound them.
const maxItems = 10_000_000

var errShort = errors.New("record ends early")

type avroReader struct {
	b     []byte
	out   []byte
	limit int
	items int
}

func avroToJSON(s avro.Schema, payload []byte, limit int) ([]byte, error) {
	if s == nil {
		return nil, errors.New("no avro schema")
	}
	r := &avroReader{b: payload, out: make([]byte, 0, min(len(payload)*2+16, limit)), limit: limit}
	if err := r.value(s, 0); err != nil {
		return nil, err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%d bytes left after the record", len(r.b))
	}
	return r.out, nil
}

func (r *avroReader) long() (int64, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		if n == 0 {
			return 0, errShort
		}
		return 0, errors.New("varint overflows 64 bits")
	}
	r.b = r.b[n:]
	return int64(v>>1) ^ -int64(v&1), nil
}

func (r *avroReader) take(n int64) ([]byte, error) {
	if n < 0 || n > int64(len(r.b)) {
		if n < 0 {
			return nil, fmt.Errorf("negative length %d", n)
		}
		return nil, errShort
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v, nil
}

func (r *avroReader) full() error {
	if len(r.out) > r.limit {
		return fmt.Errorf("decoded record larger than %d bytes", r.limit)
	}
	return nil
}

func (r *avroReader) value(s avro.Schema, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("schema nests deeper than %d", maxDepth)
	}
	if err := r.full(); err != nil {
		return err
	}
	switch s.Type() {
	case avro.Ref:
		return r.value(s.(*avro.RefSchema).Schema(), depth+1)
	case avro.Null:
		r.out = append(r.out, "null"...)
	case avro.Boolean:
		b, err := r.take(1)
		if err != nil {
			return err
		}
		if b[0] > 1 {
			return fmt.Errorf("boolean byte %d", b[0])
		}
		r.out = strconv.AppendBool(r.out, b[0] == 1)
	case avro.Int, avro.Long:
		v, err := r.long()
		if err != nil {
			return err
		}
		if s.Type() == avro.Int && (v > math.MaxInt32 || v < math.MinInt32) {
			return fmt.Errorf("int %d out of range", v)
		}
		r.out = strconv.AppendInt(r.out, v, 10)
	case avro.Float:
		b, err := r.take(4)
		if err != nil {
			return err
		}
		r.out = appendFloat(r.out, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 32)
	case avro.Double:
		b, err := r.take(8)
		if err != nil {
			return err
		}
		r.out = appendFloat(r.out, math.Float64frombits(binary.LittleEndian.Uint64(b)), 64)
	case avro.String, avro.Bytes:
		n, err := r.long()
		if err != nil {
			return err
		}
		b, err := r.take(n)
		if err != nil {
			return err
		}
		if ls, ok := s.(*avro.PrimitiveSchema); ok && s.Type() == avro.Bytes {
			if dec, ok := ls.Logical().(*avro.DecimalLogicalSchema); ok {
				r.out = appendDecimal(r.out, b, dec.Scale())
				return nil
			}
		}
		if s.Type() == avro.String {
			r.out = appendString(r.out, b)
		} else {
			r.out = appendBytes(r.out, b)
		}
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		b, err := r.take(int64(fs.Size()))
		if err != nil {
			return err
		}
		if dec, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
			r.out = appendDecimal(r.out, b, dec.Scale())
			return nil
		}
		r.out = appendBytes(r.out, b)
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		i, err := r.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(es.Symbols())) {
			return fmt.Errorf("enum %s index %d out of range", es.FullName(), i)
		}
		r.out = appendString(r.out, []byte(es.Symbols()[i]))
	case avro.Union:
		us := s.(*avro.UnionSchema)
		i, err := r.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(us.Types())) {
			return fmt.Errorf("union branch %d out of range", i)
		}
		return r.value(us.Types()[i], depth+1)
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		r.out = append(r.out, '{')
		for i, f := range rs.Fields() {
			if i > 0 {
				r.out = append(r.out, ',')
			}
			r.out = appendString(r.out, []byte(f.Name()))
			r.out = append(r.out, ':')
			if err := r.value(f.Type(), depth+1); err != nil {
				return err
			}
		}
		r.out = append(r.out, '}')
	case avro.Array, avro.Map:
		isMap := s.Type() == avro.Map
		var items avro.Schema
		if isMap {
			items = s.(*avro.MapSchema).Values()
			r.out = append(r.out, '{')
		} else {
			items = s.(*avro.ArraySchema).Items()
			r.out = append(r.out, '[')
		}
		first := true
		for {
			n, err := r.long()
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			if n < 0 {
				if n == math.MinInt64 {
					return errors.New("block count out of range")
				}
				n = -n
				if _, err := r.long(); err != nil { // the block's size in bytes
					return err
				}
			}
			if r.items += int(min(n, maxItems+1)); r.items > maxItems {
				return fmt.Errorf("more than %d array items and map entries", maxItems)
			}
			for ; n > 0; n-- {
				if !first {
					r.out = append(r.out, ',')
				}
				first = false
				if isMap {
					kl, err := r.long()
					if err != nil {
						return err
					}
					k, err := r.take(kl)
					if err != nil {
						return err
					}
					r.out = appendString(r.out, k)
					r.out = append(r.out, ':')
				}
				if err := r.value(items, depth+1); err != nil {
					return err
				}
			}
		}
		if isMap {
			r.out = append(r.out, '}')
		} else {
			r.out = append(r.out, ']')
		}
	default:
		return fmt.Errorf("unsupported avro type %s", s.Type())
	}
	return nil
}

func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.AppendQuote(b, strconv.FormatFloat(f, 'g', -1, bits))
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// appendDecimal writes a two's-complement big-endian unscaled value with
// scale as an exact JSON number.
func appendDecimal(b, raw []byte, scale int) []byte {
	n := new(big.Int).SetBytes(raw)
	if len(raw) > 0 && raw[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(raw)*8)))
	}
	s := n.String()
	if scale <= 0 {
		return append(b, s...)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for len(s) <= scale {
		s = "0" + s
	}
	if neg {
		b = append(b, '-')
	}
	b = append(b, s[:len(s)-scale]...)
	b = append(b, '.')
	return append(b, s[len(s)-scale:]...)
}

// appendString writes b as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(dst, b []byte) []byte {
	dst = append(dst, '"')
	for len(b) > 0 {
		c := b[0]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, `\u00`...)
				dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
			default:
				dst = append(dst, c)
			}
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return append(dst, '"')
}

// appendBytes writes bytes as Avro's JSON encoding does: one code point
// U+0000..U+00FF per byte.
func appendBytes(dst, b []byte) []byte {
	s := make([]byte, 0, len(b)*2)
	for _, c := range b {
		s = utf8.AppendRune(s, rune(c))
	}
	return appendString(dst, s)
}

// jsonToAvro encodes a JSON document with an Avro schema.
func jsonToAvro(dst []byte, s avro.Schema, doc []byte) ([]byte, error) {
	if s == nil {
		return nil, errors.New("no avro schema")
	}
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the document is not JSON: %w", err)
	}
	return encodeAvro(dst, s, v, "$", 0)
}

func appendLong(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func toInt(v any, path string) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: want an integer, got %s", path, kindOf(v))
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %s is not an integer", path, n)
	}
	return i, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func decodeCodePoints(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return nil, false
		}
		out = append(out, byte(r))
	}
	return out, true
}

func encodeAvro(dst []byte, s avro.Schema, v any, path string, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: nests deeper than %d", path, maxDepth)
	}
	switch s.Type() {
	case avro.Ref:
		return encodeAvro(dst, s.(*avro.RefSchema).Schema(), v, path, depth+1)
	case avro.Null:
		if v != nil {
			return nil, fmt.Errorf("%s: want null, got %s", path, kindOf(v))
		}
		return dst, nil
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%s: want a boolean, got %s", path, kindOf(v))
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case avro.Int, avro.Long:
		i, err := toInt(v, path)
		if err != nil {
			return nil, err
		}
		if s.Type() == avro.Int && (i > math.MaxInt32 || i < math.MinInt32) {
			return nil, fmt.Errorf("%s: %d does not fit an int", path, i)
		}
		return appendLong(dst, i), nil
	case avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: want a number, got %s", path, kindOf(v))
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if s.Type() == avro.Float {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a string, got %s", path, kindOf(v))
		}
		dst = appendLong(dst, int64(len(str)))
		return append(dst, str...), nil
	case avro.Bytes, avro.Fixed:
		var raw []byte
		var scale int
		var isDec bool
		if ps, ok := s.(*avro.PrimitiveSchema); ok {
			if d, ok := ps.Logical().(*avro.DecimalLogicalSchema); ok {
				scale, isDec = d.Scale(), true
			}
		}
		if fs, ok := s.(*avro.FixedSchema); ok {
			if d, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
				scale, isDec = d.Scale(), true
			}
		}
		if isDec {
			var text string
			switch n := v.(type) {
			case json.Number:
				text = string(n)
			case string:
				text = n
			default:
				return nil, fmt.Errorf("%s: want a decimal number, got %s", path, kindOf(v))
			}
			r, ok := new(big.Rat).SetString(text)
			if !ok {
				return nil, fmt.Errorf("%s: %q is not a decimal", path, text)
			}
			r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
			if !r.IsInt() {
				return nil, fmt.Errorf("%s: %s has more than %d decimals", path, text, scale)
			}
			raw = twosComplement(r.Num())
		} else {
			str, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s: want a string of bytes, got %s", path, kindOf(v))
			}
			if raw, ok = decodeCodePoints(str); !ok {
				return nil, fmt.Errorf("%s: bytes are written as code points U+0000..U+00FF", path)
			}
		}
		if fs, ok := s.(*avro.FixedSchema); ok {
			if isDec && len(raw) < fs.Size() {
				pad := byte(0)
				if len(raw) > 0 && raw[0]&0x80 != 0 {
					pad = 0xff
				}
				for len(raw) < fs.Size() {
					raw = append([]byte{pad}, raw...)
				}
			}
			if len(raw) != fs.Size() {
				return nil, fmt.Errorf("%s: want %d bytes, got %d", path, fs.Size(), len(raw))
			}
			return append(dst, raw...), nil
		}
		dst = appendLong(dst, int64(len(raw)))
		return append(dst, raw...), nil
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want an enum symbol, got %s", path, kindOf(v))
		}
		for i, sym := range es.Symbols() {
			if sym == str {
				return appendLong(dst, int64(i)), nil
			}
		}
		return nil, fmt.Errorf("%s: %q is not a symbol of %s", path, str, es.FullName())
	case avro.Union:
		us := s.(*avro.UnionSchema)
		// {"branch": value}, Avro's JSON encoding of a union, first.
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for k, inner := range m {
				for i, t := range us.Types() {
					if branchName(t) == k {
						if out, err := encodeAvro(appendLong(dst, int64(i)), t, inner, path, depth+1); err == nil {
							return out, nil
						}
					}
				}
			}
		}
		var firstErr error
		for i, t := range us.Types() {
			out, err := encodeAvro(appendLong(dst, int64(i)), t, v, path, depth+1)
			if err == nil {
				return out, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		return nil, fmt.Errorf("%s: the value matches no branch of the union (%v)", path, firstErr)
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an object for record %s, got %s", path, rs.FullName(), kindOf(v))
		}
		for _, f := range rs.Fields() {
			fv, present := m[f.Name()]
			if !present {
				if !f.HasDefault() {
					return nil, fmt.Errorf("%s.%s: missing (no default)", path, f.Name())
				}
				fv = normalizeDefault(f.Default())
			}
			var err error
			if dst, err = encodeAvro(dst, f.Type(), fv, path+"."+f.Name(), depth+1); err != nil {
				return nil, err
			}
		}
		return dst, nil
	case avro.Array:
		a, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an array, got %s", path, kindOf(v))
		}
		items := s.(*avro.ArraySchema).Items()
		if len(a) > 0 {
			dst = appendLong(dst, int64(len(a)))
			for i, it := range a {
				var err error
				if dst, err = encodeAvro(dst, items, it, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
					return nil, err
				}
			}
		}
		return appendLong(dst, 0), nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an object for a map, got %s", path, kindOf(v))
		}
		vals := s.(*avro.MapSchema).Values()
		if len(m) > 0 {
			dst = appendLong(dst, int64(len(m)))
			for k, it := range m {
				dst = appendLong(dst, int64(len(k)))
				dst = append(dst, k...)
				var err error
				if dst, err = encodeAvro(dst, vals, it, path+"."+k, depth+1); err != nil {
					return nil, err
				}
			}
		}
		return appendLong(dst, 0), nil
	}
	return nil, fmt.Errorf("%s: unsupported avro type %s", path, s.Type())
}

// branchName is how Avro's JSON encoding names a union branch.
func branchName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

// normalizeDefault turns a hamba default (Go numbers, avro.NoDefault's
// null) into the JSON-decoded form encodeAvro takes.
func normalizeDefault(v any) any {
	switch x := v.(type) {
	case int:
		return json.Number(strconv.Itoa(x))
	case int32:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case float32:
		return json.Number(strconv.FormatFloat(float64(x), 'g', -1, 32))
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	case []byte:
		return string(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeDefault(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeDefault(e)
		}
		return out
	}
	if v == avro.NoDefault {
		return nil
	}
	return v
}

func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n in two's complement over enough bytes
	l := (n.BitLen() + 8) / 8
	m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(l*8)), n)
	b := m.Bytes()
	for len(b) < l {
		b = append([]byte{0xff}, b...)
	}
	return b
}
