package config

import (
	"strings"
	"testing"
)

func TestSecurityListeners(t *testing.T) {
	c, err := Parse(map[string]string{
		"listeners":                                                      "INTERNAL://127.0.0.1:9093,EXTERNAL://:9094,PLAINTEXT://:9092",
		"listener.security.protocol.map":                                 "INTERNAL:SASL_SSL,EXTERNAL:SSL,PLAINTEXT:PLAINTEXT",
		"inter.broker.listener.name":                                     "INTERNAL",
		"sasl.enabled.mechanisms":                                        "SCRAM-SHA-512",
		"ssl.keystore.location":                                          "/etc/sluice/broker.pem",
		"listener.name.external.ssl.client.auth":                         "required",
		"listener.name.external.ssl.keystore.location":                   "/etc/sluice/external.pem",
		"listener.name.internal.scram-sha-512.sasl.jaas.config":          `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="x";`,
		"listener.name.internal.scram-sha-512.connections.max.reauth.ms": "60000",
		"console.kafka.security.protocol":                                "SASL_SSL",
		"console.kafka.sasl.mechanism":                                   "SCRAM-SHA-512",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.ListenerProtocol("internal"); p != ProtocolSASLSSL {
		t.Fatalf("INTERNAL is %q", p)
	}
	if c.InterBrokerListener() != "INTERNAL" {
		t.Fatal(c.InterBrokerListener())
	}
	ext, err := c.ForListener("EXTERNAL", "")
	if err != nil {
		t.Fatal(err)
	}
	if ext.SSLClientAuth != "required" || ext.SSLKeystoreLocation != "/etc/sluice/external.pem" || c.SSLClientAuth != "none" {
		t.Fatalf("external %q %q, bare %q", ext.SSLClientAuth, ext.SSLKeystoreLocation, c.SSLClientAuth)
	}
	in, err := c.ForListener("INTERNAL", "SCRAM-SHA-512")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.SaslJaasConfig, `username="broker"`) || in.ConnectionsMaxReauthMs != 60000 || in.SSLKeystoreLocation != "/etc/sluice/broker.pem" {
		t.Fatalf("internal %+v", in.SaslJaasConfig)
	}
	if c.ConsoleKafka["security.protocol"] != "SASL_SSL" || c.ConsoleKafka["sasl.mechanism"] != "SCRAM-SHA-512" {
		t.Fatalf("console.kafka %v", c.ConsoleKafka)
	}
	// The inter-broker listener from security.inter.broker.protocol.
	c, _ = Parse(map[string]string{"listeners": "PLAINTEXT://:1,SSL://:2", "security.inter.broker.protocol": "ssl"})
	if err := c.Validate(); err != nil || c.InterBrokerListener() != "SSL" {
		t.Fatalf("%v %q", err, c.InterBrokerListener())
	}
}

func TestSecurityErrors(t *testing.T) {
	for _, tc := range []struct {
		given map[string]string
		key   string
	}{
		{map[string]string{"listeners": "CUSTOM://:1"}, "listeners"},
		{map[string]string{"listener.security.protocol.map": "A:TLS"}, "listener.security.protocol.map"},
		{map[string]string{"listeners": "PLAINTEXT://:1,SSL://:2", "inter.broker.listener.name": "SSL", "security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"},
		{map[string]string{"security.inter.broker.protocol": "SASL_SSL"}, "security.inter.broker.protocol"},
		{map[string]string{"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "PLAIN"}, "sasl.mechanism.inter.broker.protocol"},
		{map[string]string{"ssl.keystore.type": "JKS"}, "ssl.keystore.type"},
		{map[string]string{"ssl.client.auth": "sometimes"}, "ssl.client.auth"},
		{map[string]string{"ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"},
		{map[string]string{"listener.name.other.ssl.client.auth": "none"}, "listener.name.other.ssl.client.auth"},
		{map[string]string{"listener.name.plaintext.ssl.client.auth": "maybe"}, "listener.name.plaintext.ssl.client.auth"},
		{map[string]string{"connections.max.reauth.ms": "-1"}, "connections.max.reauth.ms"},
	} {
		c, err := Parse(tc.given)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%v: error %v, want one naming %s", tc.given, err, tc.key)
		}
	}
	// Unknown keys under the prefixes are refused like any unknown key.
	for _, k := range []string{"listener.name.plaintext.no.such.key", "listener.name.plaintext.gssapi.sasl.jaas.config", "listener.name.plaintext.scram-sha-256.ssl.client.auth"} {
		if _, ok := Lookup(k); ok {
			t.Errorf("%s accepted", k)
		}
	}
}

func TestPasswordKeysType(t *testing.T) {
	for _, name := range []string{"sasl.jaas.config", "ssl.keystore.key", "ssl.key.password"} {
		k, _ := Lookup(name)
		if k.Type != Password {
			t.Errorf("%s is %v", name, k.Type)
		}
	}
}
