package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TLSSettings are Kafka's ssl.* keys of one listener, or of one client.
// Only PEM key and trust stores are read (KIP-651); JKS and PKCS12 stores
// are refused with a message saying how to convert them.
type TLSSettings struct {
	KeystoreType             string   // ssl.keystore.type: PEM ("" = PEM)
	KeystoreLocation         string   // ssl.keystore.location: one PEM file with the private key and the certificate chain
	KeystoreKey              string   // ssl.keystore.key: the private key, inline PEM
	KeystoreCertificateChain string   // ssl.keystore.certificate.chain: the chain, inline PEM
	KeyPassword              string   // ssl.key.password: encrypted keys are refused
	TruststoreType           string   // ssl.truststore.type: PEM ("" = PEM)
	TruststoreLocation       string   // ssl.truststore.location: PEM file of CA certificates
	TruststoreCertificates   string   // ssl.truststore.certificates: inline PEM CA certificates
	ClientAuth               string   // ssl.client.auth: none, requested, required (servers)
	EnabledProtocols         []string // ssl.enabled.protocols: TLSv1.2, TLSv1.3
	CipherSuites             []string // ssl.cipher.suites: IANA names of TLS 1.2 suites; empty = Go's defaults
	// EndpointIdentification is ssl.endpoint.identification.algorithm
	// (clients): "https" checks that the server's certificate names the
	// host dialed; "" checks only that a trusted CA signed it.
	EndpointIdentification string
}

// HasKeystore reports whether a certificate and key are configured.
func (s TLSSettings) HasKeystore() bool {
	return s.KeystoreLocation != "" || s.KeystoreKey != "" || s.KeystoreCertificateChain != ""
}

func checkPEMType(key, v string) error {
	if v == "" || strings.EqualFold(v, "PEM") {
		return nil
	}
	return fmt.Errorf("%s=%s is not supported: only PEM stores are read (convert with `openssl pkcs12 -in store.p12 -nodes` or keytool -importkeystore to PKCS12 first)", key, v)
}

// keyPair reads the certificate chain and private key.
func (s TLSSettings) keyPair() (tls.Certificate, error) {
	if err := checkPEMType("ssl.keystore.type", s.KeystoreType); err != nil {
		return tls.Certificate{}, err
	}
	var certPEM, keyPEM []byte
	switch {
	case s.KeystoreLocation != "" && (s.KeystoreKey != "" || s.KeystoreCertificateChain != ""):
		return tls.Certificate{}, errors.New("ssl.keystore.location and ssl.keystore.key/ssl.keystore.certificate.chain are exclusive")
	case s.KeystoreLocation != "":
		b, err := os.ReadFile(s.KeystoreLocation)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		certPEM, keyPEM = b, b
	case s.KeystoreKey != "" && s.KeystoreCertificateChain != "":
		certPEM, keyPEM = []byte(s.KeystoreCertificateChain), []byte(s.KeystoreKey)
	default:
		return tls.Certificate{}, errors.New("ssl.keystore.key and ssl.keystore.certificate.chain must be set together")
	}
	for rest := keyPEM; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type == "ENCRYPTED PRIVATE KEY" || blk.Headers["Proc-Type"] != "" {
			return tls.Certificate{}, errors.New("the private key is encrypted: Sluice reads unencrypted PEM keys (decrypt it with `openssl pkcs8 -in key.pem -out plain.pem` and protect the file with its permissions instead)")
		}
	}
	if s.KeyPassword != "" {
		return tls.Certificate{}, errors.New("ssl.key.password is set but encrypted private keys are not supported: decrypt the key and remove ssl.key.password")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("keystore: %w", err)
	}
	return cert, nil
}

// trustPool reads the CA certificates; nil when none are configured.
func (s TLSSettings) trustPool() (*x509.CertPool, error) {
	if err := checkPEMType("ssl.truststore.type", s.TruststoreType); err != nil {
		return nil, err
	}
	var data []byte
	switch {
	case s.TruststoreLocation != "" && s.TruststoreCertificates != "":
		return nil, errors.New("ssl.truststore.location and ssl.truststore.certificates are exclusive")
	case s.TruststoreLocation != "":
		b, err := os.ReadFile(s.TruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		data = b
	case s.TruststoreCertificates != "":
		data = []byte(s.TruststoreCertificates)
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("truststore: no PEM certificate found")
	}
	return pool, nil
}

// versions reads ssl.enabled.protocols.
func (s TLSSettings) versions() (minV, maxV uint16, err error) {
	protos := s.EnabledProtocols
	if len(protos) == 0 {
		protos = []string{"TLSv1.2", "TLSv1.3"}
	}
	for _, p := range protos {
		var v uint16
		switch strings.TrimSpace(p) {
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		default:
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: %q is not supported (TLSv1.2, TLSv1.3)", p)
		}
		if minV == 0 || v < minV {
			minV = v
		}
		maxV = max(maxV, v)
	}
	return minV, maxV, nil
}

// cipherSuites reads ssl.cipher.suites (IANA names). TLS 1.3's suites are
// not configurable in Go; naming them is accepted.
func (s TLSSettings) cipherSuites() ([]uint16, error) {
	if len(s.CipherSuites) == 0 {
		return nil, nil
	}
	known := map[string]uint16{}
	for _, c := range tls.CipherSuites() {
		known[c.Name] = c.ID
	}
	insecure := map[string]bool{}
	for _, c := range tls.InsecureCipherSuites() {
		insecure[c.Name] = true
	}
	var out []uint16
	for _, name := range s.CipherSuites {
		name = strings.TrimSpace(name)
		switch {
		case name == "TLS_AES_128_GCM_SHA256", name == "TLS_AES_256_GCM_SHA384", name == "TLS_CHACHA20_POLY1305_SHA256":
			// TLS 1.3: always on.
		case insecure[name]:
			return nil, fmt.Errorf("ssl.cipher.suites: %s is insecure and not offered", name)
		case known[name] != 0:
			out = append(out, known[name])
		default:
			return nil, fmt.Errorf("ssl.cipher.suites: unknown cipher suite %q (IANA names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", name)
		}
	}
	return out, nil
}

// clientAuth reads ssl.client.auth.
func (s TLSSettings) clientAuth() (tls.ClientAuthType, error) {
	switch strings.ToLower(strings.TrimSpace(s.ClientAuth)) {
	case "", "none":
		return tls.NoClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("ssl.client.auth=%q: want none, requested or required", s.ClientAuth)
}

// ServerTLS is a listener's TLS configuration. Each handshake gets the
// current configuration; at most once a second a handshake first checks the
// key and trust store files' modification times and sizes, and when they
// changed the stores are read again, so a certificate renewed on disk (by
// cron, certbot, ...) is served without a restart. A store that no longer
// reads keeps the previous configuration, and the error is reported through
// OnReload.
type ServerTLS struct {
	settings TLSSettings
	// OnReload is called after each re-read with its error (nil: the new
	// certificate is served). Set it before serving.
	OnReload func(err error)

	cur       atomic.Pointer[tls.Config]
	lastCheck atomic.Int64 // unix nanos of the last file check
	mu        sync.Mutex   // one re-read at a time
	stamps    []fileStamp  // mu
	outer     *tls.Config
}

type fileStamp struct {
	path  string
	mtime time.Time
	size  int64
}

func stampFiles(paths ...string) []fileStamp {
	var out []fileStamp
	for _, p := range paths {
		if p == "" {
			continue
		}
		st := fileStamp{path: p}
		if fi, err := os.Stat(p); err == nil {
			st.mtime, st.size = fi.ModTime(), fi.Size()
		}
		out = append(out, st)
	}
	return out
}

// reloadCheckInterval bounds how often a handshake looks at the files.
const reloadCheckInterval = time.Second

// NewServerTLS reads the stores and checks the settings.
func NewServerTLS(s TLSSettings) (*ServerTLS, error) {
	if !s.HasKeystore() {
		return nil, errors.New("a TLS listener needs ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain)")
	}
	st := &ServerTLS{settings: s}
	st.stamps = stampFiles(s.KeystoreLocation, s.TruststoreLocation)
	cfg, err := st.build()
	if err != nil {
		return nil, err
	}
	st.cur.Store(cfg)
	st.lastCheck.Store(time.Now().UnixNano())
	st.outer = &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return st.current(), nil },
	}
	return st, nil
}

func (st *ServerTLS) build() (*tls.Config, error) {
	s := st.settings
	cert, err := s.keyPair()
	if err != nil {
		return nil, err
	}
	pool, err := s.trustPool()
	if err != nil {
		return nil, err
	}
	minV, maxV, err := s.versions()
	if err != nil {
		return nil, err
	}
	suites, err := s.cipherSuites()
	if err != nil {
		return nil, err
	}
	auth, err := s.clientAuth()
	if err != nil {
		return nil, err
	}
	if auth != tls.NoClientCert && pool == nil {
		return nil, fmt.Errorf("ssl.client.auth=%s needs ssl.truststore.location (the CAs client certificates are checked against)", s.ClientAuth)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   auth,
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: suites,
	}, nil
}

// Config is the tls.Config to serve with (tls.Server, tls.NewListener).
func (st *ServerTLS) Config() *tls.Config { return st.outer }

// current returns the configuration for a handshake, re-reading the stores
// first when their files changed.
func (st *ServerTLS) current() *tls.Config {
	now := time.Now().UnixNano()
	last := st.lastCheck.Load()
	if now-last < int64(reloadCheckInterval) || !st.lastCheck.CompareAndSwap(last, now) {
		return st.cur.Load()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	stamps := stampFiles(st.settings.KeystoreLocation, st.settings.TruststoreLocation)
	changed := false
	for i := range stamps {
		if i >= len(st.stamps) || !stamps[i].mtime.Equal(st.stamps[i].mtime) || stamps[i].size != st.stamps[i].size {
			changed = true
		}
	}
	if !changed {
		return st.cur.Load()
	}
	st.stamps = stamps
	cfg, err := st.build()
	if err == nil {
		st.cur.Store(cfg)
	}
	if st.OnReload != nil {
		st.OnReload(err)
	}
	return st.cur.Load()
}

// Certificate is the leaf certificate served now (after a reload check).
func (st *ServerTLS) Certificate() *x509.Certificate {
	c := st.current()
	if len(c.Certificates) == 0 {
		return nil
	}
	if c.Certificates[0].Leaf != nil {
		return c.Certificates[0].Leaf
	}
	leaf, err := x509.ParseCertificate(c.Certificates[0].Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// ClientAuthConfigured reports whether clients may present certificates.
func (st *ServerTLS) ClientAuthConfigured() bool { return st.cur.Load().ClientAuth != tls.NoClientCert }

// ClientConfig is a client's tls.Config: the truststore's CAs (the
// system's when none is set), the keystore's certificate for mutual TLS
// when one is set, the enabled protocols and suites. ServerName is left to
// the dialer (franz-go sets each broker's host). With
// EndpointIdentification "" the server's certificate is checked against
// the CAs but not against the host name.
func ClientConfig(s TLSSettings) (*tls.Config, error) {
	pool, err := s.trustPool()
	if err != nil {
		return nil, err
	}
	minV, maxV, err := s.versions()
	if err != nil {
		return nil, err
	}
	suites, err := s.cipherSuites()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: minV, MaxVersion: maxV, CipherSuites: suites}
	if s.HasKeystore() {
		cert, err := s.keyPair()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	switch strings.ToLower(strings.TrimSpace(s.EndpointIdentification)) {
	case "https":
	case "":
		// Verify the chain, not the name (Kafka's
		// ssl.endpoint.identification.algorithm= empty).
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm=%q: want https or empty", s.EndpointIdentification)
	}
	return cfg, nil
}
