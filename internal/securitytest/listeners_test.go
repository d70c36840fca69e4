package securitytest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/security"
)

// secured is one broker with a listener of every security protocol.
type secured struct {
	c                            *testcluster.Cluster
	ca                           *testutil.CA
	internal, saslSSL, saslPlain string // listeners' addresses
	ssl                          string
}

// startSecured starts one broker with four listeners: INTERNAL
// (PLAINTEXT, the inter-broker listener), SASL_SSL, SASL_PLAINTEXT (SCRAM-SHA-256
// only) and SSL (client certificates required), and users alice (both
// SCRAM mechanisms) and bob (SCRAM-SHA-512).
func startSecured(t *testing.T, extra ...string) *secured {
	t.Helper()
	s := &secured{ca: testutil.NewCA(t, "")}
	srv := s.ca.Server(t, "broker")
	s.internal, s.saslSSL, s.saslPlain, s.ssl = testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	settings := []string{
		fmt.Sprintf("listeners=INTERNAL://%s,SASL_SSL://%s,SASL_PLAINTEXT://%s,SSL://%s", s.internal, s.saslSSL, s.saslPlain, s.ssl),
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
		"inter.broker.listener.name=INTERNAL",
		"ssl.keystore.location=" + srv.KeystorePath,
		"ssl.truststore.location=" + s.ca.TrustPath,
		"listener.name.ssl.ssl.client.auth=required",
		"listener.name.ssl.ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=(.*)$/$1@$2/L,DEFAULT",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256",
		"connection.failed.authentication.delay.ms=0",
		"group.initial.rebalance.delay.ms=0",
	}
	s.c = testcluster.New(t, testcluster.BrokerSettings(0, append(settings, extra...)...), testcluster.LogLevel(slog.LevelDebug))
	addUser(t, s.c.App().Coordinator(), "alice", "alice-secret", "SCRAM-SHA-256", "SCRAM-SHA-512")
	addUser(t, s.c.App().Coordinator(), "bob", "bob-secret", "SCRAM-SHA-512")
	return s
}

func addUser(t *testing.T, creds cluster.Credentials, user, password string, mechanisms ...string) {
	t.Helper()
	var changes []cluster.ScramChange
	for _, m := range mechanisms {
		mech, _ := security.ScramMechanismNamed(m)
		cred, err := mech.NewCredential(password, 4096)
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, cluster.ScramChange{User: user, Mechanism: m, Credential: &cred})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, err := range creds.AlterScramCredentials(ctx, changes) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// trust is a client TLS configuration trusting the test CA, with a client
// certificate when cert is set.
func (s *secured) trust(cert *testutil.Cert) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.CertPEM)
	cfg := &tls.Config{RootCAs: pool}
	if cert != nil {
		kp, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
		if err != nil {
			panic(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(1), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// produceConsume creates topic through addr, produces n records and reads
// them back in a consumer group, every client with opts.
func produceConsume(t *testing.T, addr, topic string, opts ...kgo.Opt) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	adm := kadm.NewClient(client(t, addr, opts...))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	p := client(t, addr, opts...)
	const n = 20
	for i := range n {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	c := client(t, addr, append(opts, kgo.ConsumerGroup("g-"+topic), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	got := 0
	for got < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d from %s: %v", got, n, topic, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		got += fs.NumRecords()
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// brokerAddr is the address Metadata gives for the broker to a client of
// addr.
func brokerAddr(t *testing.T, cl *kgo.Client) string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctxFor(t, 20*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("brokers: %+v", resp.Brokers)
	}
	return net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port)))
}

func scramSHA512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

// TestListenersOfEverySecurityProtocol: franz-go produces and consumes in a
// group over SASL_SSL (SCRAM-SHA-512 and PLAIN), SASL_PLAINTEXT
// (SCRAM-SHA-256) and SSL with a client certificate (its subject mapped by
// ssl.principal.mapping.rules); Metadata gives each client the address of
// the listener it connected to.
func TestListenersOfEverySecurityProtocol(t *testing.T) {
	s := startSecured(t)
	tlsOpt := kgo.DialTLSConfig(s.trust(nil))

	t.Run("SASL_SSL SCRAM-SHA-512", func(t *testing.T) {
		opts := []kgo.Opt{tlsOpt, kgo.SASL(scramSHA512("alice", "alice-secret"))}
		produceConsume(t, s.saslSSL, "scram512", opts...)
		if got := brokerAddr(t, client(t, s.saslSSL, opts...)); got != s.saslSSL {
			t.Fatalf("Metadata over SASL_SSL advertises %s, want %s", got, s.saslSSL)
		}
	})
	t.Run("SASL_SSL PLAIN", func(t *testing.T) {
		produceConsume(t, s.saslSSL, "plain", tlsOpt, kgo.SASL(plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism()))
	})
	t.Run("SASL_PLAINTEXT SCRAM-SHA-256", func(t *testing.T) {
		opts := []kgo.Opt{kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())}
		produceConsume(t, s.saslPlain, "scram256", opts...)
		if got := brokerAddr(t, client(t, s.saslPlain, opts...)); got != s.saslPlain {
			t.Fatalf("Metadata over SASL_PLAINTEXT advertises %s, want %s", got, s.saslPlain)
		}
	})
	t.Run("SSL client certificate", func(t *testing.T) {
		cert := s.ca.Client(t, "Carol", "Eng")
		opts := []kgo.Opt{kgo.DialTLSConfig(s.trust(cert))}
		produceConsume(t, s.ssl, "mtls", opts...)
		if got := brokerAddr(t, client(t, s.ssl, opts...)); got != s.ssl {
			t.Fatalf("Metadata over SSL advertises %s, want %s", got, s.ssl)
		}
		if log := s.c.Log(); !strings.Contains(log, "principal=User:carol@eng") {
			t.Fatalf("the SSL connection's principal is not User:carol@eng (mapped from CN=Carol,OU=Eng):\n%s", log)
		}
	})
	t.Run("PLAINTEXT", func(t *testing.T) {
		if got := brokerAddr(t, client(t, s.internal)); got != s.internal {
			t.Fatalf("Metadata over INTERNAL advertises %s, want %s", got, s.internal)
		}
	})
}

// TestAuthenticationRefusals: a wrong password, an unknown user, a
// mechanism the listener does not enable, a plaintext client on a TLS port,
// a client without a certificate or with an expired one on a listener that
// requires one: each is refused with Kafka's error, the refusals are
// counted, nothing is written, and the broker goes on serving.
func TestAuthenticationRefusals(t *testing.T) {
	s := startSecured(t)
	ctx := ctxFor(t, 60*time.Second)
	good := []kgo.Opt{kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scramSHA512("alice", "alice-secret"))}
	adm := kadm.NewClient(client(t, s.saslSSL, good...))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "guarded"); err != nil {
		t.Fatal(err)
	}
	produce := func(addr string, opts ...kgo.Opt) error {
		cl := client(t, addr, opts...)
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "guarded", Value: []byte("x")}).FirstErr()
	}
	// refused: a client's first request (Metadata, before it could
	// produce) fails with the authentication's error.
	refused := func(addr string, opts ...kgo.Opt) error {
		cl := client(t, addr, opts...)
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		return err
	}
	expired := s.ca.Issue(t, "expired", testutil.CertOptions{Subject: pkix.Name{CommonName: "old"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	for _, tc := range []struct {
		name string
		addr string
		opts []kgo.Opt
		want error // nil: any error
	}{
		{"wrong password", s.saslSSL, []kgo.Opt{kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scramSHA512("alice", "guess"))}, kerr.SaslAuthenticationFailed},
		{"unknown user", s.saslSSL, []kgo.Opt{kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scramSHA512("mallory", "x"))}, kerr.SaslAuthenticationFailed},
		{"PLAIN wrong password", s.saslSSL, []kgo.Opt{kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(plain.Auth{User: "bob", Pass: "nope"}.AsMechanism())}, kerr.SaslAuthenticationFailed},
		{"SCRAM-SHA-512 user without the mechanism's credential", s.saslSSL, []kgo.Opt{kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism())}, kerr.SaslAuthenticationFailed},
		{"mechanism not enabled", s.saslPlain, []kgo.Opt{kgo.SASL(plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism())}, kerr.UnsupportedSaslMechanism},
		{"plaintext client on a TLS port", s.saslSSL, []kgo.Opt{kgo.SASL(scramSHA512("alice", "alice-secret"))}, nil},
		{"no certificate where one is required", s.ssl, []kgo.Opt{kgo.DialTLSConfig(s.trust(nil))}, nil},
		{"expired certificate", s.ssl, []kgo.Opt{kgo.DialTLSConfig(s.trust(expired))}, nil},
		{"untrusted server", s.saslSSL, []kgo.Opt{kgo.DialTLSConfig(&tls.Config{}), kgo.SASL(scramSHA512("alice", "alice-secret"))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := refused(tc.addr, tc.opts...)
			if err == nil {
				t.Fatal("served")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
	// Nothing was written, and the broker still serves.
	offs, err := adm.ListEndOffsets(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("guarded", 0); o.Offset != 0 {
		t.Fatalf("end offset %d after refused producers, want 0", o.Offset)
	}
	if err := produce(s.saslSSL, good...); err != nil {
		t.Fatalf("a good client after the refusals: %v", err)
	}
	fams, err := s.c.App().Metrics().Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := testutil.ByName(fams)
	id := strconv.Itoa(int(s.c.App().BrokerID()))
	metric := func(name, listener, mech string) float64 {
		v, _ := testutil.MetricSum(byName, name, map[string]string{"broker": id, "listener": listener, "mechanism": mech})
		return v
	}
	for _, l := range []struct{ listener, mech string }{{"SASL_SSL", "SCRAM-SHA-512"}, {"SASL_SSL", "PLAIN"}, {"SASL_PLAINTEXT", "PLAIN"}, {"SSL", "SSL"}, {"SASL_SSL", "SSL"}} {
		if n := metric("sluice_broker_authentication_failures_total", l.listener, l.mech); n < 1 {
			t.Errorf("authentication failures on %s/%s: %v, want ≥ 1", l.listener, l.mech, n)
		}
	}
	if n := metric("sluice_broker_authentication_successes_total", "SASL_SSL", "SCRAM-SHA-512"); n < 1 {
		t.Errorf("authentication successes on SASL_SSL/SCRAM-SHA-512: %v", n)
	}
	if log := s.c.Log(); strings.Contains(log, "guess") || strings.Contains(log, "alice-secret") {
		t.Fatal("a password is in the broker's log")
	}
}

// rawConn is a client speaking the wire protocol by hand.
type rawConn struct {
	nc   net.Conn
	br   *bufio.Reader
	corr int32
}

func (c *rawConn) send(t *testing.T, req kmsg.Request) int32 {
	t.Helper()
	c.corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, c.corr)
	if _, err := c.nc.Write(f); err != nil {
		t.Fatal(err)
	}
	return c.corr
}

// recv reads a response into resp (whose version is set).
func (c *rawConn) recv(t *testing.T, resp kmsg.Response) error {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c.br, sz[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c.br, body); err != nil {
		return err
	}
	body = body[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	return resp.ReadFrom(body)
}

// TestOnlySASLBeforeAuthentication: on a SASL listener a connection may
// send ApiVersions, SaslHandshake and SaslAuthenticate before it has
// authenticated; any other request closes it unanswered. A mechanism not
// enabled is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones.
// On a PLAINTEXT listener SaslHandshake is ILLEGAL_SASL_STATE.
func TestOnlySASLBeforeAuthentication(t *testing.T) {
	s := startSecured(t)
	dial := func(addr string) *rawConn {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return &rawConn{nc: nc, br: bufio.NewReader(nc)}
	}

	c := dial(s.saslPlain)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1"
	c.send(t, av)
	avr := av.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := c.recv(t, avr); err != nil || avr.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: %v %v", err, avr.ErrorCode)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(t, md)
	if err := c.recv(t, md.ResponseKind()); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("Metadata before authentication: %v, want the connection closed", err)
	}

	c = dial(s.saslPlain)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = "PLAIN"
	c.send(t, hs)
	hsr := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if err := c.recv(t, hsr); err != nil {
		t.Fatal(err)
	}
	if hsr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hsr.SupportedMechanisms, ",") != "SCRAM-SHA-256" {
		t.Fatalf("PLAIN on a SCRAM-SHA-256 listener: %v %v", kerr.ErrorForCode(hsr.ErrorCode), hsr.SupportedMechanisms)
	}

	c = dial(s.internal)
	c.send(t, hs)
	hsr = hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if err := c.recv(t, hsr); err != nil {
		t.Fatal(err)
	}
	if hsr.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: %v", kerr.ErrorForCode(hsr.ErrorCode))
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}
