package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The security protocols of Kafka's listeners.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// The key prefixes of per-listener overrides and of the console's client
// settings.
const (
	ListenerPrefix     = "listener.name."
	ConsoleKafkaPrefix = "console.kafka."
)

// SASLMechanisms are the mechanisms Sluice serves (sasl.enabled.mechanisms).
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// IsTLS reports whether a security protocol runs over TLS.
func IsTLS(protocol string) bool { return protocol == ProtocolSSL || protocol == ProtocolSASLSSL }

// IsSASL reports whether a security protocol authenticates with SASL.
func IsSASL(protocol string) bool {
	return protocol == ProtocolSASLPlaintext || protocol == ProtocolSASLSSL
}

func validProtocol(p string) bool {
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return true
	}
	return false
}

var listenerNameRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

func upperTrimmed(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }

var protocolRule = Rule{Doc: "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or empty", check: func(v any) error {
	if s := v.(string); s != "" && !validProtocol(s) {
		return errors.New("want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
	}
	return nil
}}

func checkMechanism(m string) error {
	switch {
	case slices.Contains(SASLMechanisms, m):
		return nil
	case m == "GSSAPI" || m == "OAUTHBEARER":
		return fmt.Errorf("%s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", m)
	}
	return fmt.Errorf("unknown SASL mechanism %q (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", m)
}

var mechanismRule = Rule{Doc: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", check: func(v any) error { return checkMechanism(v.(string)) }}

var mechanismsRule = Rule{Doc: "a list of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", check: func(v any) error {
	for _, m := range v.([]string) {
		if err := checkMechanism(m); err != nil {
			return err
		}
	}
	return nil
}}

var pemRule = Rule{Doc: "PEM", check: func(v any) error {
	if s := v.(string); s != "" && s != "PEM" {
		return fmt.Errorf("%s stores are not read: convert the store to PEM (openssl pkcs12 -in store.p12 -nodes)", s)
	}
	return nil
}}

var clientAuthRule = Rule{Doc: "none, requested or required", check: func(v any) error {
	switch v.(string) {
	case "", "none", "requested", "required":
		return nil
	}
	return errors.New("want none, requested or required")
}}

var protocolsRule = Rule{Doc: "TLSv1.2, TLSv1.3", check: func(v any) error {
	for _, p := range v.([]string) {
		if p != "TLSv1.2" && p != "TLSv1.3" {
			return fmt.Errorf("%q is not supported (TLSv1.2, TLSv1.3)", p)
		}
	}
	if len(v.([]string)) == 0 {
		return errors.New("at least one protocol is needed")
	}
	return nil
}}

var endpointRule = Rule{Doc: "https or empty", check: func(v any) error {
	if s := v.(string); s != "" && s != "https" {
		return errors.New("want https or empty")
	}
	return nil
}}

// parseProtocolMap reads listener.security.protocol.map.
func parseProtocolMap(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range SplitList(v) {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || !listenerNameRE.MatchString(name) {
			return nil, fmt.Errorf("%q: want NAME:PROTOCOL", item)
		}
		if !validProtocol(proto) {
			return nil, fmt.Errorf("%q: %s is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", item, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener %s is mapped twice", name)
		}
		out[name] = proto
	}
	return out, nil
}

// lookupPrefixed resolves the keys named by a prefix: a per-listener
// override to the key it overrides, console.kafka.<property> to the entry
// documenting it.
func lookupPrefixed(name string) (*Key, bool) {
	if rest, ok := strings.CutPrefix(name, ListenerPrefix); ok {
		listener, key, ok := strings.Cut(rest, ".")
		if !ok || !listenerNameRE.MatchString(listener) {
			return nil, false
		}
		if k := keyIndex[key]; k != nil && (k.perListener || k.perMechanism) {
			return k, true
		}
		mech, key, ok := strings.Cut(key, ".")
		if !ok || checkMechanism(strings.ToUpper(mech)) != nil {
			return nil, false
		}
		if k := keyIndex[key]; k != nil && k.perMechanism {
			return k, true
		}
		return nil, false
	}
	if rest, ok := strings.CutPrefix(name, ConsoleKafkaPrefix); ok && rest != "" {
		return keyIndex["console.kafka.<property>"], true
	}
	return nil, false
}

// ListenerProtocol is the security protocol of a listener name, from
// listener.security.protocol.map.
func (c *Config) ListenerProtocol(name string) (string, bool) {
	p, ok := c.ListenerSecurityProtocolMap[strings.ToUpper(name)]
	return p, ok
}

// InterBrokerListener is the listener brokers talk to each other on:
// inter.broker.listener.name, else the listener named after
// security.inter.broker.protocol, else the first listener.
func (c *Config) InterBrokerListener() string {
	switch {
	case c.InterBrokerListenerName != "":
		return c.InterBrokerListenerName
	case c.SecurityInterBrokerProtocol != "":
		return c.SecurityInterBrokerProtocol
	case len(c.Listeners) > 0:
		return c.Listeners[0].Name
	}
	return ""
}

// ForListener returns the configuration as one listener sees it: the
// per-listener overrides (listener.name.<listener>.<key>) applied over the
// bare keys; with mechanism set, then the per-mechanism ones
// (listener.name.<listener>.<mechanism>.<key>).
func (c *Config) ForListener(listener, mechanism string) (*Config, error) {
	out := *c
	lp := ListenerPrefix + strings.ToLower(listener) + "."
	mp := lp + strings.ToLower(mechanism) + "."
	apply := func(prefix string, perMech bool) error {
		for name, v := range c.Given {
			rest, ok := strings.CutPrefix(name, prefix)
			if !ok {
				continue
			}
			k := keyIndex[rest]
			if k == nil || !k.perMechanism && (perMech || !k.perListener) {
				continue
			}
			if err := k.set(&out, v); err != nil {
				return fmt.Errorf("config: %s=%q: %w", name, v, err)
			}
		}
		return nil
	}
	if err := apply(lp, false); err != nil {
		return nil, err
	}
	if mechanism != "" {
		if err := apply(mp, true); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// validateSecurity checks the listeners' protocols, the inter-broker
// settings and the per-listener overrides.
func (c *Config) validateSecurity() []error {
	var errs []error
	bad := func(key string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	names := map[string]bool{}
	for _, l := range c.Listeners {
		names[strings.ToLower(l.Name)] = true
		if _, ok := c.ListenerProtocol(l.Name); !ok {
			bad("listeners", "listener %s has no security protocol: name one (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or map it in listener.security.protocol.map", l.Name)
		}
	}
	if c.InterBrokerListenerName != "" && c.SecurityInterBrokerProtocol != "" {
		bad("security.inter.broker.protocol", "set inter.broker.listener.name or security.inter.broker.protocol, not both")
	}
	if p := c.SecurityInterBrokerProtocol; p != "" && c.InterBrokerListenerName == "" && !names[strings.ToLower(p)] {
		bad("security.inter.broker.protocol", "no listener is named %s", p)
	}
	ib := c.InterBrokerListener()
	if p, ok := c.ListenerProtocol(ib); ok && IsSASL(p) {
		lc, err := c.ForListener(ib, "")
		if err == nil && !slices.Contains(lc.SaslEnabledMechanisms, c.SaslMechanismInterBrokerProtocol) {
			bad("sasl.mechanism.inter.broker.protocol", "%s is not in sasl.enabled.mechanisms of the inter-broker listener %s", c.SaslMechanismInterBrokerProtocol, ib)
		}
	}
	for name, v := range c.Given {
		rest, ok := strings.CutPrefix(name, ListenerPrefix)
		if !ok {
			continue
		}
		listener, _, _ := strings.Cut(rest, ".")
		if !names[strings.ToLower(listener)] {
			bad(name, "names no listener in listeners")
			continue
		}
		k, _ := Lookup(name)
		var scratch Config
		if err := k.set(&scratch, v); err != nil {
			bad(name, "%q: %v", v, err)
			continue
		}
		if err := k.check(k.field(&scratch)); err != nil {
			errs = append(errs, fmt.Errorf("config: %s: %w", name, err))
		}
	}
	return errs
}

// consoleKafka collects the console.kafka.<property> keys given.
func consoleKafka(given map[string]string) map[string]string {
	var out map[string]string
	for k, v := range given {
		if p, ok := strings.CutPrefix(k, ConsoleKafkaPrefix); ok && p != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[p] = v
		}
	}
	return out
}
