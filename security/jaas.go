package security

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// JAAS is one login module entry of a sasl.jaas.config value (Kafka's
// JaasConfig): `<LoginModuleClass> <flag> key="value" ...;`.
type JAAS struct {
	Module  string
	Flag    string // required, requisite, sufficient or optional
	Options map[string]string
}

// The login modules Kafka's clients and brokers use for the mechanisms
// Sluice serves.
const (
	PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// ParseJAAS reads a sasl.jaas.config value holding exactly one login
// module. Comments (// and /* */) are allowed; values may be quoted
// ("...", with \" and \\ escapes) or bare words.
func ParseJAAS(s string) (JAAS, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return JAAS{}, err
	}
	punct := func(t jaasToken, p string) bool { return t.punct && t.text == p }
	if len(toks) < 3 || !punct(toks[len(toks)-1], ";") || toks[0].punct || toks[1].punct {
		return JAAS{}, errors.New("sasl.jaas.config: want `<LoginModule> required key=\"value\" ...;`")
	}
	j := JAAS{Module: toks[0].text, Flag: strings.ToLower(toks[1].text), Options: map[string]string{}}
	switch j.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return JAAS{}, fmt.Errorf("sasl.jaas.config: login module control flag %q (want required, requisite, sufficient or optional)", toks[1].text)
	}
	rest := toks[2 : len(toks)-1]
	for len(rest) > 0 {
		if punct(rest[0], ";") {
			return JAAS{}, errors.New("sasl.jaas.config: one login module only")
		}
		if len(rest) < 3 || rest[0].punct || !punct(rest[1], "=") || rest[2].punct {
			return JAAS{}, errors.New("sasl.jaas.config: options are key=value")
		}
		j.Options[rest[0].text] = rest[2].text
		rest = rest[3:]
	}
	return j, nil
}

type jaasToken struct {
	text  string
	punct bool // '=' or ';', not a word or a quoted value
}

// jaasTokens splits a JAAS text into words, quoted strings, '=' and ';'.
func jaasTokens(s string) ([]jaasToken, error) {
	var out []jaasToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(s[i:], "//"):
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(s)
			}
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, errors.New("sasl.jaas.config: unterminated comment")
			}
			i += j + 4
		case c == '=' || c == ';':
			out = append(out, jaasToken{string(c), true})
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, errors.New("sasl.jaas.config: unterminated quoted value")
			}
			out = append(out, jaasToken{text: b.String()})
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n=;\"'", rune(s[j])) {
				j++
			}
			out = append(out, jaasToken{text: s[i:j]})
			i = j
		}
	}
	return out, nil
}

// ResolveSecrets replaces every ${env:NAME}, ${file:PATH:KEY} and
// ${directory:DIR:FILE} in v (Kafka's EnvVarConfigProvider,
// FileConfigProvider and DirectoryConfigProvider syntax) with the value it
// names: an environment variable, a key of a properties file, or a whole
// file's content (its trailing newline dropped). So a password need not be
// written into a properties file that more people can read.
func ResolveSecrets(v string) (string, error) {
	if !strings.Contains(v, "${") {
		return v, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			b.WriteString(v)
			return b.String(), nil
		}
		j := strings.IndexByte(v[i:], '}')
		if j < 0 {
			b.WriteString(v)
			return b.String(), nil
		}
		ref := v[i+2 : i+j]
		provider, arg, _ := strings.Cut(ref, ":")
		var val string
		var err error
		switch provider {
		case "env":
			var ok bool
			if val, ok = os.LookupEnv(arg); !ok {
				err = fmt.Errorf("environment variable %s is not set", arg)
			}
		case "file":
			k := strings.LastIndexByte(arg, ':')
			if k < 0 {
				err = fmt.Errorf("${file:%s}: want ${file:PATH:KEY}", arg)
				break
			}
			val, err = propertiesValue(arg[:k], arg[k+1:])
		case "directory":
			k := strings.LastIndexByte(arg, ':')
			if k < 0 {
				err = fmt.Errorf("${directory:%s}: want ${directory:DIR:FILE}", arg)
				break
			}
			var data []byte
			data, err = os.ReadFile(filepath.Join(arg[:k], filepath.Base(arg[k+1:])))
			val = strings.TrimRight(string(data), "\r\n")
		default:
			// Not a reference: keep the text as it is.
			b.WriteString(v[:i+j+1])
			v = v[i+j+1:]
			continue
		}
		if err != nil {
			return "", err
		}
		b.WriteString(v[:i])
		b.WriteString(val)
		v = v[i+j+1:]
	}
}

// propertiesValue reads one key of a Java properties file (key=value or
// key: value lines, # and ! comments).
func propertiesValue(path, key string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			continue
		}
		if strings.TrimSpace(line[:i]) == key {
			return strings.TrimSpace(line[i+1:]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s has no key %s", path, key)
}
