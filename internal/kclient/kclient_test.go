package kclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/testutil"
)

func TestParse(t *testing.T) {
	ca := testutil.NewCA(t, "")
	cert := ca.Client(t, "alice", "")
	t.Setenv("KCLIENT_TEST_PW", "from-env")
	pwFile := filepath.Join(t.TempDir(), "secrets.properties")
	if err := os.WriteFile(pwFile, []byte("alice.password=from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jaas := func(module, pw string) string {
		return "org.apache.kafka.common.security." + module + " required username=\"alice\" password=\"" + pw + "\";"
	}
	for _, tc := range []struct {
		name    string
		props   map[string]string
		proto   string
		tls     bool
		mech    string
		wantErr string
	}{
		{name: "empty", props: nil, proto: "PLAINTEXT"},
		{name: "SASL_SSL SCRAM with jaas", props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
			"sasl.jaas.config": jaas("scram.ScramLoginModule", "x"), "ssl.truststore.location": ca.TrustPath}, proto: "SASL_SSL", tls: true, mech: "SCRAM-SHA-512"},
		{name: "librdkafka names", props: map[string]string{"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
			"sasl.username": "alice", "sasl.password": "${env:KCLIENT_TEST_PW}"}, proto: "SASL_PLAINTEXT", mech: "PLAIN"},
		{name: "password from a file", props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
			"sasl.jaas.config": jaas("scram.ScramLoginModule", "${file:"+pwFile+":alice.password}")}, proto: "SASL_PLAINTEXT", mech: "SCRAM-SHA-256"},
		{name: "mTLS", props: map[string]string{"security.protocol": "SSL", "ssl.truststore.location": ca.TrustPath, "ssl.keystore.location": cert.KeystorePath}, proto: "SSL", tls: true},
		{name: "mTLS librdkafka", props: map[string]string{"security.protocol": "SSL", "ssl.ca.location": ca.TrustPath, "ssl.certificate.location": cert.CertPath, "ssl.key.location": cert.KeyPath}, proto: "SSL", tls: true},

		{name: "unknown protocol", props: map[string]string{"security.protocol": "TLS"}, wantErr: "security.protocol=TLS"},
		{name: "no mechanism", props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.username": "a", "sasl.password": "b"}, wantErr: "needs sasl.mechanism"},
		{name: "GSSAPI", props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "a", "sasl.password": "b"}, wantErr: "not supported"},
		{name: "no password", props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "a"}, wantErr: "user name and password"},
		{name: "wrong login module", props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas("scram.ScramLoginModule", "x")}, wantErr: "takes org.apache.kafka.common.security.plain.PlainLoginModule"},
		{name: "unset env", props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": "${env:KCLIENT_NOT_SET}"}, wantErr: "KCLIENT_NOT_SET is not set"},
		{name: "JKS", props: map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": "x.jks"}, wantErr: "only PEM"},
		{name: "unsupported property", props: map[string]string{"security.protocol": "SSL", "ssl.keymanager.algorithm": "SunX509"}, wantErr: "ssl.keymanager.algorithm"},
		{name: "missing truststore", props: map[string]string{"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent.pem"}, wantErr: "nonexistent"},
		{name: "half a key pair", props: map[string]string{"security.protocol": "SSL", "ssl.certificate.location": cert.CertPath}, wantErr: "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.props)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Protocol != tc.proto || (s.TLS != nil) != tc.tls {
				t.Fatalf("protocol %s tls %v", s.Protocol, s.TLS != nil)
			}
			if tc.mech == "" != (s.SASL == nil) || s.SASL != nil && s.SASL.Name() != tc.mech {
				t.Fatalf("mechanism %v, want %q", s.SASL, tc.mech)
			}
			if tc.name == "mTLS" || tc.name == "mTLS librdkafka" {
				if len(s.TLS.Certificates) != 1 {
					t.Fatal("no client certificate")
				}
			}
			if strings.Contains(tc.name, "password") && s.User != "alice" {
				t.Fatalf("user %q", s.User)
			}
		})
	}
}
