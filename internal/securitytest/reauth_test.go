package securitytest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestSessionLifetime (KIP-368): with connections.max.reauth.ms a SASL
// session ends. SaslAuthenticate v1 announces the lifetime; a client that
// does not re-authenticate is disconnected at its next request after it;
// franz-go re-authenticates on the open connection and keeps producing.
func TestSessionLifetime(t *testing.T) {
	const lifetime = 1500 * time.Millisecond
	s := startSecured(t, "listener.name.sasl_ssl.connections.max.reauth.ms=1500")

	nc, err := tls.Dial("tcp", s.saslSSL, s.trust(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &rawConn{nc: nc, br: bufio.NewReader(nc)}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	c.send(t, hs)
	if err := c.recv(t, hs.ResponseKind()); err != nil {
		t.Fatal(err)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 1, []byte("\x00bob\x00bob-secret")
	c.send(t, auth)
	ar := auth.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if err := c.recv(t, ar); err != nil || ar.ErrorCode != 0 {
		t.Fatalf("authenticate: %v %d", err, ar.ErrorCode)
	}
	if got := time.Duration(ar.SessionLifetimeMillis) * time.Millisecond; got != lifetime {
		t.Fatalf("session lifetime %v, want %v", got, lifetime)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(t, md)
	if err := c.recv(t, md.ResponseKind()); err != nil {
		t.Fatalf("Metadata within the session: %v", err)
	}
	time.Sleep(lifetime + 200*time.Millisecond) // let the session end
	c.send(t, md)
	if err := c.recv(t, md.ResponseKind()); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("Metadata after the session ended: %v, want the connection closed", err)
	}

	if testing.Short() {
		return
	}
	// franz-go re-authenticates before the session ends and goes on.
	ctx := ctxFor(t, 60*time.Second)
	p := client(t, s.saslSSL, kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scramSHA512("alice", "alice-secret")), kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	deadline := time.Now().Add(3 * lifetime)
	for time.Now().Before(deadline) {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce across re-authentications: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	testutil.CheckFor(t, 5*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(s.c.Log(), "reauthentication=true") {
			return errors.New("no re-authentication logged")
		}
		return nil
	})
}
