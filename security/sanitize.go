package security

import (
	"fmt"
	"strings"
)

// SanitizeUser is Kafka's Sanitizer.sanitize: the name of a user's znode
// under /config/users. Java's URLEncoder (UTF-8) keeps letters, digits and
// ".-*_", turns a space into '+' and everything else into %XX; Kafka then
// replaces '*' by %2A and '+' by %20. So: letters, digits and ".-_" stay,
// every other byte is %XX in upper case.
func SanitizeUser(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// DesanitizeUser is Kafka's Sanitizer.desanitize (URLDecoder): %XX
// sequences decoded, '+' a space.
func DesanitizeUser(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	unhex := func(c byte) (byte, bool) {
		switch {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10, true
		case c >= 'A' && c <= 'F':
			return c - 'A' + 10, true
		}
		return 0, false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b.WriteByte(' ')
		case '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
