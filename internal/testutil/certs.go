package testutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: its certificates are
// generated with crypto/x509 when the test runs (no fixture that expires)
// and written as PEM files under the test's temporary directory.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// CertPEM is the CA certificate; TrustPath a file holding it
	// (ssl.truststore.location, ssl.ca.location).
	CertPEM   []byte
	TrustPath string
	dir       string
}

var certSerial atomic.Int64

// NewCA creates a CA named name ("" = "Sluice Test CA").
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCAIn(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// NewCAIn is NewCA writing its files in dir, for certificates that outlive
// one test (a cluster the tests of a package share).
func NewCAIn(dir, name string) (*CA, error) {
	if name == "" {
		name = "Sluice Test CA"
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(certSerial.Add(1)),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Sluice Tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, dir: dir}
	ca.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	ca.TrustPath = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.TrustPath, ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	return ca, nil
}

// CertOptions describe a certificate to issue.
type CertOptions struct {
	// Subject is the certificate's subject; Hosts its DNS names and IP
	// addresses (a server's).
	Subject pkix.Name
	Hosts   []string
	// NotBefore and NotAfter default to an hour ago and a day ahead; set
	// NotAfter in the past for an expired certificate.
	NotBefore, NotAfter time.Time
}

// Cert is an issued certificate and its key, as PEM and as files.
type Cert struct {
	CertPEM, KeyPEM []byte // the certificate; its PKCS#8 key
	CertPath        string // the certificate alone
	KeyPath         string // the key alone
	// KeystorePath holds the key and the certificate in one file (Kafka's
	// PEM ssl.keystore.location).
	KeystorePath string
	Leaf         *x509.Certificate
}

// Issue signs a certificate usable by servers and clients alike.
func (ca *CA) Issue(t testing.TB, name string, o CertOptions) *Cert {
	t.Helper()
	c, err := ca.IssueCert(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// IssueCert is Issue returning its error.
func (ca *CA) IssueCert(name string, o CertOptions) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(certSerial.Add(1)),
		Subject:      o.Subject,
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}
	c.Leaf, _ = x509.ParseCertificate(der)
	c.CertPath = filepath.Join(ca.dir, name+".crt")
	c.KeyPath = filepath.Join(ca.dir, name+".key")
	c.KeystorePath = filepath.Join(ca.dir, name+".pem")
	for path, data := range map[string][]byte{c.CertPath: c.CertPEM, c.KeyPath: c.KeyPEM, c.KeystorePath: append(append([]byte{}, c.KeyPEM...), c.CertPEM...)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Server issues a server certificate for localhost, 127.0.0.1-3 and hosts.
func (ca *CA) Server(t testing.TB, name string, hosts ...string) *Cert {
	t.Helper()
	return ca.Issue(t, name, serverOptions(name, hosts))
}

// ServerCert is Server returning its error.
func (ca *CA) ServerCert(name string, hosts ...string) (*Cert, error) {
	return ca.IssueCert(name, serverOptions(name, hosts))
}

func serverOptions(name string, hosts []string) CertOptions {
	return CertOptions{Subject: pkix.Name{CommonName: name},
		Hosts: append([]string{"localhost", "127.0.0.1", "127.0.0.2", "127.0.0.3", "::1"}, hosts...)}
}

// Client issues a client certificate whose subject is CN=cn,OU=ou (ou
// "" leaves it out).
func (ca *CA) Client(t testing.TB, cn, ou string) *Cert {
	t.Helper()
	subj := pkix.Name{CommonName: cn}
	if ou != "" {
		subj.OrganizationalUnit = []string{ou}
	}
	return ca.Issue(t, "client-"+cn, CertOptions{Subject: subj})
}

// Pool is a certificate pool holding the CA (a tls.Config's RootCAs or
// ClientCAs).
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// KeyPair is the certificate with its key, for a tls.Config's
// Certificates.
func (c *Cert) KeyPair(t testing.TB) tls.Certificate {
	t.Helper()
	kp, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}
