// Package kclient turns Kafka client properties (the names of Kafka's
// Java client and librdkafka: security.protocol, sasl.mechanism,
// sasl.jaas.config or sasl.username/sasl.password, ssl.truststore.location,
// ssl.keystore.location, ...) into franz-go options. It is the one place
// Sluice's own clients get their security settings from: the CLI's
// --command-config FILE (as Kafka's tools take it), the console's
// console.kafka.<property> keys.
//
// Stores are PEM only (ssl.truststore.type / ssl.keystore.type PEM, the
// default here). A password may be written as ${env:NAME},
// ${file:/path/file.properties:key} or ${directory:/dir:file} (Kafka's
// config providers) instead of its text, in sasl.jaas.config,
// sasl.password and ssl.key.password alike.
package kclient

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/security"
)

// Settings are a client's security settings, read from properties.
type Settings struct {
	// Protocol is security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or
	// SASL_SSL.
	Protocol string
	// TLS is the client's TLS configuration (SSL, SASL_SSL); nil otherwise.
	TLS *tls.Config
	// SASL is the client's mechanism with its credentials (SASL_*); nil
	// otherwise.
	SASL sasl.Mechanism
	// User is the SASL user name ("" without SASL).
	User string
}

// Opts returns the franz-go options of the settings.
func (s *Settings) Opts() []kgo.Opt {
	var opts []kgo.Opt
	if s.TLS != nil {
		opts = append(opts, kgo.Dialer(dialTLS(s.TLS)))
	}
	if s.SASL != nil {
		opts = append(opts, kgo.SASL(s.SASL))
	}
	return opts
}

// ReadFile reads a properties file (Kafka's client.properties, the file of
// --command-config).
func ReadFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props, err := config.ReadProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[string]string, len(props))
	for _, p := range props {
		out[p.Key] = p.Value
	}
	return out, nil
}

// known are the properties Parse reads; other security properties are
// refused (so that a setting Sluice would ignore does not pass silently),
// and properties that do not concern security are left to the caller.
var known = map[string]bool{
	"security.protocol": true, "sasl.mechanism": true, "sasl.mechanisms": true,
	"sasl.jaas.config": true, "sasl.username": true, "sasl.password": true,
	"ssl.truststore.type": true, "ssl.truststore.location": true, "ssl.truststore.certificates": true, "ssl.ca.location": true,
	"ssl.keystore.type": true, "ssl.keystore.location": true, "ssl.keystore.key": true, "ssl.keystore.certificate.chain": true,
	"ssl.certificate.location": true, "ssl.key.location": true, "ssl.key.password": true,
	"ssl.endpoint.identification.algorithm": true, "ssl.enabled.protocols": true, "ssl.cipher.suites": true,
	// Kafka's own clients carry these; they change nothing here.
	"ssl.protocol": true, "ssl.truststore.password": true,
}

// Parse reads the security properties of a client. Empty or absent,
// the client connects with PLAINTEXT.
func Parse(props map[string]string) (*Settings, error) {
	get := func(k string) string { return strings.TrimSpace(props[k]) }
	var unknown []string
	for k := range props {
		if (strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl.")) && !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("client properties not supported: %s", strings.Join(unknown, ", "))
	}
	s := &Settings{Protocol: strings.ToUpper(get("security.protocol"))}
	if s.Protocol == "" {
		s.Protocol = config.ProtocolPlaintext
	}
	switch s.Protocol {
	case config.ProtocolPlaintext, config.ProtocolSSL, config.ProtocolSASLPlaintext, config.ProtocolSASLSSL:
	default:
		return nil, fmt.Errorf("security.protocol=%s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if config.IsTLS(s.Protocol) {
		cfg, err := tlsConfig(props, get)
		if err != nil {
			return nil, err
		}
		s.TLS = cfg
	}
	if config.IsSASL(s.Protocol) {
		if err := s.saslMechanism(get); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func tlsConfig(props map[string]string, get func(string) string) (*tls.Config, error) {
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if v := get(k); v != "" && !strings.EqualFold(v, "PEM") {
			return nil, fmt.Errorf("%s=%s: only PEM stores are read (convert: openssl pkcs12 -in store.p12 -nodes)", k, v)
		}
	}
	st := security.TLSSettings{
		TruststoreLocation:       firstOf(get("ssl.truststore.location"), get("ssl.ca.location")),
		TruststoreCertificates:   get("ssl.truststore.certificates"),
		KeystoreLocation:         get("ssl.keystore.location"),
		KeystoreKey:              get("ssl.keystore.key"),
		KeystoreCertificateChain: get("ssl.keystore.certificate.chain"),
		EndpointIdentification:   "https",
	}
	// Set empty: the certificate is checked against the CAs, not the host.
	if _, ok := props["ssl.endpoint.identification.algorithm"]; ok {
		st.EndpointIdentification = get("ssl.endpoint.identification.algorithm")
	}
	if v := get("ssl.enabled.protocols"); v != "" {
		st.EnabledProtocols = config.SplitList(v)
	}
	if v := get("ssl.cipher.suites"); v != "" {
		st.CipherSuites = config.SplitList(v)
	}
	// librdkafka's names: a certificate and its key in two files.
	if cert, key := get("ssl.certificate.location"), get("ssl.key.location"); cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, errors.New("ssl.certificate.location and ssl.key.location go together")
		}
		c, err := os.ReadFile(cert)
		if err != nil {
			return nil, fmt.Errorf("ssl.certificate.location: %w", err)
		}
		k, err := os.ReadFile(key)
		if err != nil {
			return nil, fmt.Errorf("ssl.key.location: %w", err)
		}
		st.KeystoreCertificateChain, st.KeystoreKey = string(c), string(k)
	}
	if pw := get("ssl.key.password"); pw != "" {
		var err error
		if st.KeyPassword, err = security.ResolveSecrets(pw); err != nil {
			return nil, fmt.Errorf("ssl.key.password: %w", err)
		}
	}
	cfg, err := security.ClientConfig(st)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func (s *Settings) saslMechanism(get func(string) string) error {
	mech := strings.ToUpper(firstOf(get("sasl.mechanism"), get("sasl.mechanisms")))
	if mech == "" {
		return fmt.Errorf("security.protocol=%s needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.Protocol)
	}
	user, pass := get("sasl.username"), get("sasl.password")
	if jaas := get("sasl.jaas.config"); jaas != "" {
		j, err := security.ParseJAAS(jaas)
		if err != nil {
			return err
		}
		want := security.ScramLoginModule
		if mech == "PLAIN" {
			want = security.PlainLoginModule
		}
		if j.Module != want {
			return fmt.Errorf("sasl.jaas.config: sasl.mechanism=%s takes %s, not %s", mech, want, j.Module)
		}
		user, pass = j.Options["username"], j.Options["password"]
	}
	pass, err := security.ResolveSecrets(pass)
	if err != nil {
		return fmt.Errorf("SASL password: %w", err)
	}
	if user == "" || pass == "" {
		return fmt.Errorf("sasl.mechanism=%s needs a user name and password: sasl.jaas.config (or sasl.username and sasl.password)", mech)
	}
	s.User = user
	switch mech {
	case "PLAIN":
		s.SASL = plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		s.SASL = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		s.SASL = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	default:
		return fmt.Errorf("sasl.mechanism=%s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", mech)
	}
	return nil
}
