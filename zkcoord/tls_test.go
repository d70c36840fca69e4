package zkcoord

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// testCA makes certificates for the test, valid for an hour.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mustOK(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	mustOK(t, err)
	cert, err := x509.ParseCertificate(der)
	mustOK(t, err)
	ca := &testCA{cert: cert, key: key, dir: t.TempDir()}
	mustOK(t, os.WriteFile(filepath.Join(ca.dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	return ca
}

func (ca *testCA) caFile() string { return filepath.Join(ca.dir, "ca.pem") }

// issue writes a PEM key store (PKCS#8 key, then the certificate) named
// name and returns its path.
func (ca *testCA) issue(t *testing.T, name, cn string, server bool) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mustOK(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"sluice-test"}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	if server {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	mustOK(t, err)
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	mustOK(t, err)
	out := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	p := filepath.Join(ca.dir, name)
	mustOK(t, os.WriteFile(p, out, 0o600))
	return p
}

func TestTLSOptions(t *testing.T) {
	ca := newTestCA(t)
	ks := ca.issue(t, "client.pem", "broker", false)
	cfg, err := TLSOptions{KeystoreLocation: ks, TruststoreLocation: ca.caFile(), EnabledProtocols: []string{"TLSv1.3"},
		EndpointIdentification: "HTTPS"}.TLSConfig()
	if err != nil || len(cfg.Certificates) != 1 || cfg.RootCAs == nil || cfg.MinVersion != 0x0304 || cfg.InsecureSkipVerify {
		t.Fatalf("TLSConfig: %+v, %v", cfg, err)
	}
	cfg, err = TLSOptions{TruststoreLocation: ca.caFile()}.TLSConfig()
	if err != nil || !cfg.InsecureSkipVerify || cfg.VerifyConnection == nil {
		t.Fatalf("no endpoint identification: the chain must still be verified: %+v %v", cfg, err)
	}
	enc := filepath.Join(ca.dir, "enc.pem")
	mustOK(t, os.WriteFile(enc, []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"), 0o600))
	for _, bad := range []TLSOptions{
		{KeystoreType: "JKS", KeystoreLocation: ks},
		{TruststoreType: "PKCS12", TruststoreLocation: ca.caFile()},
		{KeystoreLocation: enc},
		{KeystoreLocation: filepath.Join(ca.dir, "missing.pem")},
		{TruststoreLocation: ks + ".nope"},
		{EnabledProtocols: []string{"TLSv1.1"}},
		{CipherSuites: []string{"TLS_RSA_WITH_RC4_128_SHA"}},
		{EndpointIdentification: "LDAP"},
	} {
		if _, err := bad.TLSConfig(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestTLSEnsemble: zookeeper.ssl.client.enable against a ZooKeeper with a
// secureClientPort that needs client certificates; with
// zookeeper.set.acl the certificate is the brokers' identity (x509), and a
// client without it can change nothing.
func TestTLSEnsemble(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	ca := newTestCA(t)
	srv := zktest.Start(t, zktest.Options{TLS: &zktest.TLSOptions{
		KeyStore: ca.issue(t, "server.pem", "zookeeper", true), TrustStore: ca.caFile()}})
	clientStore := ca.issue(t, "broker.pem", "sluice-broker", false)
	tlsCfg, err := TLSOptions{KeystoreLocation: clientStore, TruststoreLocation: ca.caFile(), EndpointIdentification: "HTTPS"}.TLSConfig()
	mustOK(t, err)
	chroot := "/tls"
	// The first handshake with a JVM that has just started (Netty's TLS
	// set-up, on a busy machine) can take seconds: a generous wait for
	// the session, which asserts nothing about speed.
	c := open(t, srv.SecureAddr(), chroot, func(c *Config) {
		c.TLS, c.SetACL = tlsCfg, true
		c.ConnectionTimeout = 30 * time.Second
	})
	setupTopic(t, c)
	writesRefused(t, rawConn(t, srv.Addr()), chroot)

	// Without a client certificate the TLS port refuses the client.
	noCert, err := TLSOptions{TruststoreLocation: ca.caFile()}.TLSConfig()
	mustOK(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Connect: srv.SecureAddr() + chroot, SessionTimeout: 3 * time.Second, ConnectionTimeout: 3 * time.Second, Logger: testLogger(t), TLS: noCert}
	if co, err := Open(ctx, cfg); err == nil {
		co.Close()
		t.Fatal("a client without a certificate connected")
	} else if !strings.Contains(err.Error(), "no session") {
		t.Logf("refused: %v", err)
	}
	// A plaintext client on the TLS port gets nowhere either.
	cfg.TLS = nil
	if co, err := Open(ctx, cfg); err == nil {
		co.Close()
		t.Fatal("a plaintext client connected to the TLS port")
	}
}
