package protocol_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/security"
)

// BenchmarkProduceTLS: produce requests of about 1 MB (960 records of 1 KiB,
// acks=1, 4 in flight, as a client with batches of up to 1 MB sends them)
// over PLAINTEXT and over an SSL listener (TLS 1.3, AES-GCM), the latter
// with and without the low-water mark of tlssource.go. Client and broker
// share the process; cpu-ns/op is the process's user+system CPU per request
// (client and broker), the figure that decides throughput on a machine
// where both run.
//
//	go test ./protocol -run '^$' -bench ProduceTLS -benchtime 400x -count 6
func BenchmarkProduceTLS(b *testing.B) {
	ca := testutil.NewCA(b, "")
	cert := ca.Server(b, "broker")
	for _, c := range []struct {
		name  string
		tls   bool
		lowat bool
	}{
		{"plaintext", false, false},
		{"ssl/lowat=off", true, false},
		{"ssl/lowat=on", true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			protocol.SetTLSLowWater(c.lowat)
			defer protocol.SetTLSLowWater(true)
			sslAddr := testutil.FreeAddr(b)
			var opt func(*protocol.Config)
			if c.tls {
				st, err := security.NewServerTLS(security.TLSSettings{KeystoreLocation: cert.KeystorePath})
				if err != nil {
					b.Fatal(err)
				}
				opt = func(cfg *protocol.Config) {
					cfg.Listeners = append(cfg.Listeners, protocol.Listener{Name: "SSL", Addr: sslAddr, SecurityProtocol: "SSL", TLS: st})
				}
			} else {
				opt = func(*protocol.Config) {}
			}
			n := startBenchNode(b, nil, opt)
			var conn *rawConn
			if c.tls {
				pool := x509.NewCertPool()
				pool.AddCert(ca.Cert)
				nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", sslAddr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
				if err != nil {
					b.Fatal(err)
				}
				cs := nc.ConnectionState()
				b.Logf("negotiated %s, %s, %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), cs.CurveID)
				conn = &rawConn{tb: b, nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
			} else {
				conn = dialRaw(b, n.addr)
			}
			defer conn.Close()
			const records, size, window = 960, 1024, 4
			f := produceFrame(1, benchBatch(b, records, size))
			if ec := produceErr(conn.recv(conn.send(f))); ec != 0 {
				b.Fatalf("produce error %d", ec)
			}
			b.SetBytes(records * size)
			var before, after syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			b.ResetTimer()
			sent, recvd := 0, 0
			for recvd < b.N {
				for sent < b.N && sent-recvd < window {
					conn.send(f)
					sent++
				}
				conn.recv(int32(recvd + 2))
				recvd++
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
