package appliance

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/security"
)

// tlsSettings are the ssl.* keys of a listener's configuration
// (Config.ForListener).
func tlsSettings(lc *config.Config) security.TLSSettings {
	return security.TLSSettings{
		KeystoreType:             lc.SSLKeystoreType,
		KeystoreLocation:         lc.SSLKeystoreLocation,
		KeystoreKey:              lc.SSLKeystoreKey,
		KeystoreCertificateChain: lc.SSLKeystoreCertificateChain,
		KeyPassword:              lc.SSLKeyPassword,
		TruststoreType:           lc.SSLTruststoreType,
		TruststoreLocation:       lc.SSLTruststoreLocation,
		TruststoreCertificates:   lc.SSLTruststoreCertificates,
		ClientAuth:               lc.SSLClientAuth,
		EnabledProtocols:         lc.SSLEnabledProtocols,
		CipherSuites:             lc.SSLCipherSuites,
		EndpointIdentification:   lc.SSLEndpointIdentificationAlgorithm,
	}
}

// protocolListeners are the protocol server's listeners: each named
// listener with its security protocol (listener.security.protocol.map), its
// TLS configuration (ssl.*, with listener.name.<l>. overrides), principal
// mapping, SASL mechanisms and session lifetimes.
func protocolListeners(cfg *config.Config, logger *slog.Logger) ([]protocol.Listener, error) {
	out := make([]protocol.Listener, 0, len(cfg.Listeners))
	for _, l := range cfg.Listeners {
		proto, _ := cfg.ListenerProtocol(l.Name)
		pl := protocol.Listener{Name: l.Name, Addr: l.Addr(), SecurityProtocol: proto}
		lc, err := cfg.ForListener(l.Name, "")
		if err != nil {
			return nil, err
		}
		if config.IsTLS(proto) {
			st, err := security.NewServerTLS(tlsSettings(lc))
			if err != nil {
				return nil, fmt.Errorf("listener %s (%s): %w", l.Name, proto, err)
			}
			name := l.Name
			st.OnReload = func(err error) {
				if err != nil {
					logger.Error("TLS key or trust store changed but does not read: the previous one is still served", "listener", name, "err", err)
				} else {
					logger.Info("TLS key or trust store reloaded", "listener", name)
				}
			}
			pl.TLS = st
			if pl.PrincipalMapper, err = security.ParsePrincipalMappingRules(lc.SSLPrincipalMappingRules); err != nil {
				return nil, fmt.Errorf("config: listener %s: ssl.principal.mapping.rules: %w", l.Name, err)
			}
		}
		if config.IsSASL(proto) {
			pl.Mechanisms = lc.SaslEnabledMechanisms
			pl.MaxReceiveSize = lc.SaslServerMaxReceiveSize
			pl.Reauth = map[string]time.Duration{}
			for _, m := range pl.Mechanisms {
				mc, err := cfg.ForListener(l.Name, m)
				if err != nil {
					return nil, err
				}
				if mc.ConnectionsMaxReauthMs > 0 {
					pl.Reauth[m] = time.Duration(mc.ConnectionsMaxReauthMs) * time.Millisecond
				}
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

// interBrokerAuth is how this broker authenticates to the others on the
// inter-broker listener: its TLS client configuration (the listener's
// ssl.* keys: the broker's certificate, the CAs it trusts) and its SASL
// credentials (sasl.mechanism.inter.broker.protocol with the login module
// of listener.name.<l>.<mechanism>.sasl.jaas.config or sasl.jaas.config).
// nil for a PLAINTEXT inter-broker listener.
func interBrokerAuth(cfg *config.Config) (*broker.InterBrokerAuth, error) {
	name := cfg.InterBrokerListener()
	proto, _ := cfg.ListenerProtocol(name)
	if proto == "" || proto == config.ProtocolPlaintext {
		return nil, nil
	}
	auth := &broker.InterBrokerAuth{}
	if config.IsTLS(proto) {
		lc, err := cfg.ForListener(name, "")
		if err != nil {
			return nil, err
		}
		if auth.TLS, err = security.ClientConfig(tlsSettings(lc)); err != nil {
			return nil, fmt.Errorf("inter-broker listener %s: %w", name, err)
		}
	}
	if config.IsSASL(proto) {
		mech := cfg.SaslMechanismInterBrokerProtocol
		mc, err := cfg.ForListener(name, mech)
		if err != nil {
			return nil, err
		}
		if auth.SASL, err = saslMechanism(mech, mc.SaslJaasConfig); err != nil {
			return nil, fmt.Errorf("inter-broker listener %s: %w", name, err)
		}
	}
	return auth, nil
}

// saslMechanism is a franz-go client mechanism with the username and
// password of a sasl.jaas.config value (secret references resolved).
func saslMechanism(mechanism, jaas string) (sasl.Mechanism, error) {
	if jaas == "" {
		return nil, fmt.Errorf("SASL %s needs the broker's own credentials: set listener.name.<listener>.%s.sasl.jaas.config (or sasl.jaas.config) to a login module with username and password", mechanism, lowerMech(mechanism))
	}
	j, err := security.ParseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	user, pass := j.Options["username"], j.Options["password"]
	if pass, err = security.ResolveSecrets(pass); err != nil {
		return nil, fmt.Errorf("sasl.jaas.config password: %w", err)
	}
	if user == "" || pass == "" {
		return nil, fmt.Errorf("sasl.jaas.config: the login module needs username and password")
	}
	want := security.ScramLoginModule
	if mechanism == "PLAIN" {
		want = security.PlainLoginModule
	}
	if j.Module != want {
		return nil, fmt.Errorf("sasl.jaas.config: SASL %s takes %s, not %s", mechanism, want, j.Module)
	}
	a := scram.Auth{User: user, Pass: pass}
	switch mechanism {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return a.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return a.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("SASL mechanism %q is not supported", mechanism)
}

func lowerMech(m string) string {
	b := []byte(m)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
