package main

// The TLS systems: Sluice with an SSL listener ("sluice-ssl") and with a
// SASL_SSL listener using SCRAM-SHA-512 ("sluice-sasl-ssl"), measured with
// the same workloads as Sluice over PLAINTEXT, and kfake with TLS listeners
// ("kfake-ssl") beside them, so the report shows what
// TLS (no sendfile on the fetch path, encryption in user space) and SASL
// cost. The certificates are made when benchrun starts (crypto/x509, a CA
// and a server certificate for 127.0.0.1 valid for a day): nothing that
// expires is checked in. Each broker also has a PLAINTEXT listener, SETUP,
// on its l.Peers port: the inter-broker listener, and where the harness
// creates the SCRAM user before the measurement.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/kclient"
)

// The SCRAM user of the SASL_SSL system.
const (
	benchUser     = "bench"
	benchPassword = "bench-secret"
)

// tlsFiles are the PEM files and client properties of the TLS systems.
type tlsFiles struct {
	CA       string // the CA certificate (truststore of broker and client)
	Keystore string // the broker's key and certificate (ssl.keystore.location)
	// SSLProps and SASLProps are `sluice perf --command-config` files.
	SSLProps, SASLProps string
	pool                *x509.CertPool
	// Negotiated is what a client with the SSL properties (sluice perf's
	// settings) negotiates with the broker: protocol version, cipher suite
	// and key exchange. tlsSetup sets it; the report prints it.
	Negotiated string
}

// writeTLSFiles makes a CA and a server certificate for 127.0.0.1 and
// localhost, and writes them with the clients' properties under dir.
func writeTLSFiles(dir string) (*tlsFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Sluice Bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sluice-bench-broker"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	f := &tlsFiles{
		CA: filepath.Join(dir, "ca.pem"), Keystore: filepath.Join(dir, "broker.pem"),
		SSLProps: filepath.Join(dir, "ssl.properties"), SASLProps: filepath.Join(dir, "sasl_ssl.properties"),
		pool: x509.NewCertPool(),
	}
	f.pool.AddCert(caCert)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	keystore := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	ssl := "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=" + f.CA + "\n"
	sasl := strings.Replace(ssl, "=SSL\n", "=SASL_SSL\n", 1) +
		"sasl.mechanism=SCRAM-SHA-512\nsasl.username=" + benchUser + "\nsasl.password=" + benchPassword + "\n"
	for path, data := range map[string][]byte{f.CA: caPEM, f.Keystore: keystore, f.SSLProps: []byte(ssl), f.SASLProps: []byte(sasl)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// tlsSystem is Sluice with its client listener secured by protocol (SSL or
// SASL_SSL).
func tlsSystem(p paths, key, protocol string) *system {
	props := func() string {
		if protocol == "SSL" {
			return p.TLS.SSLProps
		}
		return p.TLS.SASLProps
	}
	plain := kafkaClient(p)
	return &system{
		Key: key, Name: "Sluice " + protocol,
		procs: func(l layout) []procSpec {
			vars := map[string]string{"port": strconv.Itoa(l.Ports[0]), "dir": l.brokerDir(0)}
			argv := append([]string{p.Sluice}, expand(p.SluiceServe, vars)...)
			argv = append(argv, tlsServeArgs(p.TLS, protocol, l.Ports[0], l.Peers[0])...)
			return []procSpec{{Argv: argv, Wait: localAddr(l.Ports[0])}}
		},
		client: func(phase string, w workload, addr string, n int64, rate, secs int) []string {
			return append(plain(phase, w, addr, n, rate, secs), "--command-config", props())
		},
		version: func(ctx context.Context) string {
			return versionOf(ctx, p.Sluice, "version")
		},
		unsupported: func(w workload) string {
			if w.Replication > 1 {
				return "the TLS systems are measured with one broker"
			}
			return ""
		},
		addr: func(l layout) string { return localAddr(l.Ports[0]) },
		setup: func(ctx context.Context, l layout) error {
			return tlsSetup(ctx, p, protocol, l)
		},
	}
}

// kfakeTLSSystem is kfake with TLS-only listeners, the side-by-side of
// "sluice-ssl" (kfake has no SASL_SSL of its own here).
func kfakeTLSSystem(p paths) *system {
	plain := kafkaClient(p)
	return &system{
		Key: "kfake-ssl", Name: "kfake SSL",
		procs: func(l layout) []procSpec {
			return []procSpec{{Argv: []string{p.KfakeServer, "--listen", localAddr(l.Ports[0]), "--tls-keystore", p.TLS.Keystore},
				Wait: localAddr(l.Ports[0])}}
		},
		client: func(phase string, w workload, addr string, n int64, rate, secs int) []string {
			return append(plain(phase, w, addr, n, rate, secs), "--command-config", p.TLS.SSLProps)
		},
		version: func(ctx context.Context) string {
			return versionOf(ctx, p.KfakeServer, "--version") + " (in memory)"
		},
		unsupported: func(w workload) string {
			if w.Replication > 1 {
				return "the TLS systems are measured with one broker"
			}
			return ""
		},
		addr: func(l layout) string { return localAddr(l.Ports[0]) },
		setup: func(ctx context.Context, l layout) error {
			return tlsSetup(ctx, p, "SSL", l)
		},
	}
}

// tlsServeArgs are the overrides that give a broker its secured listener
// on port and the PLAINTEXT SETUP listener on setupPort.
func tlsServeArgs(f *tlsFiles, protocol string, port, setupPort int) []string {
	kv := []string{
		fmt.Sprintf("listeners=%s://127.0.0.1:%d,SETUP://127.0.0.1:%d", protocol, port, setupPort),
		fmt.Sprintf("listener.security.protocol.map=%s:%s,SETUP:PLAINTEXT", protocol, protocol),
		"inter.broker.listener.name=SETUP",
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + f.Keystore,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + f.CA,
	}
	if protocol == "SASL_SSL" {
		kv = append(kv, "sasl.enabled.mechanisms=SCRAM-SHA-512")
	}
	var out []string
	for _, s := range kv {
		out = append(out, "--override", s)
	}
	return out
}

// tlsSetup creates the SCRAM user (SASL_SSL) through the SETUP listener
// with `sluice users set`, then waits until the secured listener answers a
// Metadata request as the client will connect.
func tlsSetup(ctx context.Context, p paths, protocol string, l layout) error {
	if protocol == "SASL_SSL" {
		cmd := exec.CommandContext(ctx, p.Sluice, "users", "set", benchUser, "--mechanism", "SCRAM-SHA-512",
			"--iterations", "4096", "--password-stdin", "--brokers", localAddr(l.Peers[0]))
		cmd.Stdin = strings.NewReader(benchPassword + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sluice users set %s: %v: %s", benchUser, err, strings.TrimSpace(string(out)))
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(localAddr(l.Ports[0])), kgo.DialTimeout(2 * time.Second), kgo.RetryTimeout(2 * time.Second),
		kgo.DialTLSConfig(&tls.Config{RootCAs: p.TLS.pool, MinVersion: tls.VersionTLS12})}
	if protocol == "SASL_SSL" {
		opts = append(opts, kgo.SASL(scram.Auth{User: benchUser, Pass: benchPassword}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	err = poll(ctx, func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(rctx, cl)
		if err != nil {
			return fmt.Errorf("metadata over %s: %w", protocol, err)
		}
		if len(resp.Brokers) == 0 {
			return errors.New("metadata lists no broker")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if p.TLS.Negotiated == "" {
		s, err := negotiated(ctx, p.TLS.SSLProps, localAddr(l.Ports[0]))
		if err != nil {
			return fmt.Errorf("TLS handshake with the SSL client settings: %w", err)
		}
		p.TLS.Negotiated = s
	}
	return nil
}

// negotiated makes a TLS handshake with addr as a client with the
// properties in propsPath (what `sluice perf --command-config` reads) and
// says what was agreed: "TLS 1.3, TLS_AES_128_GCM_SHA256, X25519MLKEM768".
func negotiated(ctx context.Context, propsPath, addr string) (string, error) {
	props, err := kclient.ReadFile(propsPath)
	if err != nil {
		return "", err
	}
	s, err := kclient.Parse(props)
	if err != nil {
		return "", err
	}
	if s.TLS == nil {
		return "", fmt.Errorf("%s: no TLS settings", propsPath)
	}
	cfg := s.TLS.Clone()
	if cfg.ServerName == "" {
		// As franz-go's dialer does: the host of the broker's address.
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return "", err
		}
		cfg.ServerName = host
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d := &tls.Dialer{Config: cfg}
	nc, err := d.DialContext(hctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	cs := nc.(*tls.Conn).ConnectionState()
	return fmt.Sprintf("%s, %s, %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), cs.CurveID), nil
}

// tlsTargets checks issue 15's target where the run has the data: Sluice
// over SSL and SASL_SSL produces 1 KiB records (no compression) at no
// less than 60 % of its PLAINTEXT rate.
func (r *report) tlsTargets(b *strings.Builder) {
	var lines []string
	for _, w := range r.workloads {
		if w.Size != 1024 || w.Compression != "none" || w.Replication > 1 {
			continue
		}
		plain := r.stat(w.String(), "Sluice", produceRate)
		if !plain.ok() {
			continue
		}
		for _, name := range []string{"Sluice SSL", "Sluice SASL_SSL"} {
			s := r.stat(w.String(), name, produceRate)
			if !s.ok() {
				continue
			}
			pct := 100 * s.median() / plain.median()
			lines = append(lines, fmt.Sprintf("%s produce (%s): %s/s vs PLAINTEXT %s/s = %.0f %% (target ≥ 60 %%): %s",
				name, w, fmtRate(s.median()), fmtRate(plain.median()), pct, verdict(pct >= 60)))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\n## Against the TLS target of issue 15\n\n")
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", l)
	}
}
