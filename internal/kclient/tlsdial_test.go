package kclient

import (
	"context"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestDialTLS: the dial function of Sluice's clients names the server from
// the address when the configuration does not, carries bytes both ways, and
// a certificate that does not name the server fails the dial.
func TestDialTLS(t *testing.T) {
	ca := testutil.NewCA(t, "")
	cert := ca.Server(t, "peer", "127.0.0.1").KeyPair(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	trust := ca.Pool()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := dialTLS(&tls.Config{RootCAs: trust})(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := make([]byte, 100<<10)
	for i := range msg {
		msg[i] = byte(i)
	}
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != msg[i] {
			t.Fatalf("byte %d: %d, want %d", i, got[i], msg[i])
		}
	}

	if _, err := dialTLS(&tls.Config{RootCAs: trust, ServerName: "elsewhere.example"})(ctx, "tcp", ln.Addr().String()); err == nil {
		t.Fatal("a certificate for another name was accepted")
	}
}
