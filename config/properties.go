package config

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Property is one key=value read from a properties file, with its line for
// error messages.
type Property struct {
	Key, Value string
	Line       int
}

// ReadProperties reads Java's properties format, the format of Kafka's
// server.properties: one key and value per logical line, separated by the
// first unescaped '=', ':' or whitespace; '#' and '!' start comment lines; a
// line ending in an odd number of backslashes continues on the next line;
// the escapes \t \n \r \f \\ \uXXXX and a backslash before any other
// character (the character itself) are decoded.
func ReadProperties(r io.Reader) ([]Property, error) {
	var (
		out    []Property
		sc     = bufio.NewScanner(r)
		lineNo int
	)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lineNo++
		start := lineNo
		line := strings.TrimLeft(strings.TrimRight(sc.Text(), "\r"), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continues(line) {
			line = line[:len(line)-1]
			if !sc.Scan() {
				break
			}
			lineNo++
			line += strings.TrimLeft(strings.TrimRight(sc.Text(), "\r"), " \t\f")
		}
		key, value, err := splitProperty(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		out = append(out, Property{Key: key, Value: value, Line: start})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// continues reports whether line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitProperty(line string) (key, value string, err error) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line))
	rawKey, rest := line[:i], line[i:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	if key, err = unescape(rawKey); err != nil {
		return "", "", err
	}
	if value, err = unescape(rest); err != nil {
		return "", "", err
	}
	return key, value, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "\\") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i == len(s)-1 {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("truncated \\u escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// trailingComment reports whether a value holds what looks like a comment
// after it: a '#' after a space or tab. The properties format has comment
// lines only, so `broker.rack=eu-west-1a  # optional` sets the rack to the
// whole text, as Java's Properties would.
func trailingComment(value string) bool {
	return strings.Contains(value, " #") || strings.Contains(value, "\t#")
}
