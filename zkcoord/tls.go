package zkcoord

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// TLSOptions are Kafka's zookeeper.ssl.* keys (KafkaConfig's ZooKeeper
// client TLS settings), for an ensemble with a secureClientPort.
type TLSOptions struct {
	// KeystoreLocation is zookeeper.ssl.keystore.location: a PEM file
	// holding the client's private key (PKCS#8 or PKCS#1/SEC 1, not
	// encrypted) and its certificate chain. Optional: without it the
	// client presents no certificate.
	KeystoreLocation string
	// KeystoreType is zookeeper.ssl.keystore.type: PEM (or empty).
	KeystoreType string
	// TruststoreLocation is zookeeper.ssl.truststore.location: PEM CA
	// certificates the servers' certificates must chain to; empty = the
	// system's roots.
	TruststoreLocation string
	// TruststoreType is zookeeper.ssl.truststore.type: PEM (or empty).
	TruststoreType string
	// Protocol is zookeeper.ssl.protocol (TLSv1.2 or TLSv1.3): the
	// version used when EnabledProtocols is empty.
	Protocol string
	// EnabledProtocols is zookeeper.ssl.enabled.protocols.
	EnabledProtocols []string
	// CipherSuites is zookeeper.ssl.cipher.suites (IANA names; TLS 1.2
	// only: Go does not let TLS 1.3 suites be chosen).
	CipherSuites []string
	// EndpointIdentification is
	// zookeeper.ssl.endpoint.identification.algorithm: HTTPS checks that
	// the server's certificate names the host dialled; empty does not
	// (the chain is still verified).
	EndpointIdentification string
}

// TLSConfig builds the client's TLS configuration from o.
func (o TLSOptions) TLSConfig() (*tls.Config, error) {
	for _, t := range []struct{ key, v string }{{"zookeeper.ssl.keystore.type", o.KeystoreType}, {"zookeeper.ssl.truststore.type", o.TruststoreType}} {
		if t.v != "" && !strings.EqualFold(t.v, "PEM") {
			return nil, fmt.Errorf("%s=%s: only PEM files are read (convert a JKS or PKCS12 store with keytool -exportcert -rfc and openssl pkcs12 -nodes)", t.key, t.v)
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.KeystoreLocation != "" {
		b, err := os.ReadFile(o.KeystoreLocation)
		if err != nil {
			return nil, fmt.Errorf("zookeeper.ssl.keystore.location: %w", err)
		}
		if bytesHavePEM(b, "ENCRYPTED PRIVATE KEY") {
			return nil, fmt.Errorf("zookeeper.ssl.keystore.location %s: the private key is encrypted; store it unencrypted (openssl pkcs8 -nocrypt) in a file only Sluice's user can read", o.KeystoreLocation)
		}
		cert, err := tls.X509KeyPair(b, b)
		if err != nil {
			return nil, fmt.Errorf("zookeeper.ssl.keystore.location %s: want a PEM private key and certificate chain: %w", o.KeystoreLocation, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.TruststoreLocation != "" {
		b, err := os.ReadFile(o.TruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("zookeeper.ssl.truststore.location: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("zookeeper.ssl.truststore.location %s: no PEM certificate in it", o.TruststoreLocation)
		}
		cfg.RootCAs = pool
	}
	protocols := o.EnabledProtocols
	if len(protocols) == 0 && o.Protocol != "" {
		protocols = []string{o.Protocol}
	}
	if len(protocols) > 0 {
		cfg.MinVersion, cfg.MaxVersion = 0, 0
		for _, p := range protocols {
			v, ok := map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}[strings.TrimSpace(p)]
			if !ok {
				return nil, fmt.Errorf("zookeeper.ssl.enabled.protocols: %q is not TLSv1.2 or TLSv1.3", p)
			}
			if cfg.MinVersion == 0 || v < cfg.MinVersion {
				cfg.MinVersion = v
			}
			cfg.MaxVersion = max(cfg.MaxVersion, v)
		}
	}
	if len(o.CipherSuites) > 0 {
		byName := map[string]uint16{}
		for _, s := range tls.CipherSuites() {
			byName[s.Name] = s.ID
		}
		for _, n := range o.CipherSuites {
			id, ok := byName[strings.TrimSpace(n)]
			if !ok {
				return nil, fmt.Errorf("zookeeper.ssl.cipher.suites: %q is not a secure cipher suite Go offers", n)
			}
			cfg.CipherSuites = append(cfg.CipherSuites, id)
		}
	}
	switch strings.ToUpper(o.EndpointIdentification) {
	case "HTTPS":
	case "":
		// Verify the chain, not the name (Kafka's empty algorithm).
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("zookeeper: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		return nil, fmt.Errorf("zookeeper.ssl.endpoint.identification.algorithm=%s: want HTTPS or empty", o.EndpointIdentification)
	}
	return cfg, nil
}

func bytesHavePEM(b []byte, typ string) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}

// dialTLS connects to a ZooKeeper secureClientPort and completes the TLS
// handshake within timeout.
func dialTLS(network, address string, timeout time.Duration, cfg *tls.Config) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName = host
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: c}
	conn, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("zookeeper TLS %s: %w", address, err)
	}
	return conn, nil
}
