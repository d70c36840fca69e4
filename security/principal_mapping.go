package security

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper is ssl.principal.mapping.rules (Kafka's
// SslPrincipalMapper): a client certificate's distinguished name becomes a
// user name by the first rule whose regular expression matches the whole
// DN. A rule is RULE:<regex>/<replacement>/[L|U] (L or U: lower or upper
// case the result) or DEFAULT (the DN unchanged); rules are separated by
// commas. When no rule matches, the connection is refused.
type PrincipalMapper struct {
	rules []mappingRule
	text  string
}

type mappingRule struct {
	def         bool
	re          *regexp.Regexp
	replacement string
	caseFold    byte // 0, 'L' or 'U'
}

// DefaultPrincipalMapper maps every DN to itself (Kafka's default).
var DefaultPrincipalMapper = &PrincipalMapper{rules: []mappingRule{{def: true}}, text: "DEFAULT"}

// ParsePrincipalMappingRules reads ssl.principal.mapping.rules; "" is
// DEFAULT.
func ParsePrincipalMappingRules(s string) (*PrincipalMapper, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "DEFAULT" {
		return DefaultPrincipalMapper, nil
	}
	m := &PrincipalMapper{text: s}
	rest := s
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			break
		}
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			m.rules = append(m.rules, mappingRule{def: true})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			rest = rest[len("RULE:"):]
			pat, after, ok := cutUnescaped(rest, '/')
			if !ok {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: %q: want RULE:pattern/replacement/[LU]", s)
			}
			repl, after, ok := cutUnescaped(after, '/')
			if !ok {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: %q: want RULE:pattern/replacement/[LU]", s)
			}
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: pattern %q: %w", pat, err)
			}
			r := mappingRule{re: re, replacement: javaReplacement(repl)}
			if after != "" && (after[0] == 'L' || after[0] == 'U') {
				r.caseFold = after[0]
				after = after[1:]
			}
			m.rules = append(m.rules, r)
			rest = after
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: %q: each rule is RULE:pattern/replacement/[LU] or DEFAULT", s)
		}
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: %q: rules are separated by commas", s)
		}
		rest = rest[1:]
	}
	if len(m.rules) == 0 {
		return DefaultPrincipalMapper, nil
	}
	return m, nil
}

// cutUnescaped splits s at the first sep not preceded by a backslash; the
// part before keeps its escapes (they are the regular expression's).
func cutUnescaped(s string, sep byte) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// javaReplacement turns Java's $1 group references into Go's ${1}, so that
// "$1x" keeps meaning group 1 followed by x, and drops the backslash of
// escaped characters (\/, \$).
func javaReplacement(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '\\' && i+1 < len(r):
			i++
			if r[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i])
			}
		case c == '$' && i+1 < len(r) && r[i+1] >= '0' && r[i+1] <= '9':
			j := i + 1
			for j < len(r) && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			b.WriteString("${" + r[i+1:j] + "}")
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Map applies the rules to a DN.
func (m *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if r.def {
			return dn, nil
		}
		idx := r.re.FindStringSubmatchIndex(dn)
		if idx == nil {
			continue
		}
		out := string(r.re.ExpandString(nil, r.replacement, dn, idx))
		switch r.caseFold {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		if out == "" {
			return "", fmt.Errorf("ssl.principal.mapping.rules map %q to an empty name", dn)
		}
		return out, nil
	}
	return "", fmt.Errorf("no rule of ssl.principal.mapping.rules (%s) applies to %q", m.text, dn)
}

// CertificatePrincipal is the principal of a client certificate: User:
// and its subject's DN in RFC 2253 form (as Java's
// X500Principal.getName() gives it: the last RDN first, no spaces), mapped
// by m.
func (m *PrincipalMapper) CertificatePrincipal(cert *x509.Certificate) (Principal, error) {
	dn, err := SubjectDN(cert)
	if err != nil {
		return Principal{}, err
	}
	name, err := m.Map(dn)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Type: "User", Name: name}, nil
}

// rfc2253Names are the attribute keywords Java's RFC 2253 form uses; every
// other attribute is written as its OID and #hex of its DER value.
var rfc2253Names = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// SubjectDN is a certificate subject in RFC 2253 form, as Kafka sees it:
// the RDNs of the encoding in reverse order, comma-separated, the
// attributes of a multi-valued RDN joined by '+'.
func SubjectDN(cert *x509.Certificate) (string, error) {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil {
		return "", fmt.Errorf("certificate subject: %w", err)
	} else if len(rest) > 0 {
		return "", errors.New("certificate subject: trailing data")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			oid := atv.Type.String()
			s, isString := atv.Value.(string)
			if name, ok := rfc2253Names[oid]; ok && isString {
				b.WriteString(name)
				b.WriteByte('=')
				b.WriteString(escapeDNValue(s))
				continue
			}
			der, err := asn1.Marshal(atv.Value)
			if err != nil {
				return "", fmt.Errorf("certificate subject attribute %s: %w", oid, err)
			}
			b.WriteString(oid)
			b.WriteString("=#")
			b.WriteString(hex.EncodeToString(der))
		}
	}
	return b.String(), nil
}

// escapeDNValue escapes an attribute value as RFC 2253 says: ,+"\<>; and a
// leading # or space and a trailing space get a backslash.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(",+\"\\<>;", c) >= 0,
			i == 0 && (c == '#' || c == ' '),
			i == len(s)-1 && c == ' ':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
