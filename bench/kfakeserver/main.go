// Command kfakeserver runs franz-go's kfake, an in-process Kafka-protocol
// broker, as a process of its own, so the benchmark harness can start,
// measure (CPU seconds, peak RSS from /proc) and stop it like any other
// broker.
//
// By default kfake keeps every record in memory; --data-dir makes it write
// its log to disk as well (page cache, fsync only on segment roll, like
// Kafka's defaults; --sync-writes fsyncs every batch).
//
//	kfakeserver --listen 127.0.0.1:9092 [--data-dir DIR] [--brokers 1]
//	kfakeserver --listen 127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292
//	kfakeserver --listen 127.0.0.1:9093 --tls-keystore broker.pem
//
// A list of addresses starts one broker on each (the replication factor
// benchmarks use three); a single address with --brokers N starts N brokers
// on consecutive ports. All brokers live in this one process and share one
// copy of the data: kfake accepts a replication factor up to the number of
// brokers and reports the replicas in metadata, but does not replicate.
//
// --tls-keystore FILE (a PEM file holding the private key and the
// certificate chain, Kafka's PEM ssl.keystore.location) makes every
// listener TLS only.
//
// It prints "kfake listening on ADDR" once it accepts connections and exits
// cleanly on SIGINT or SIGTERM.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	os.Exit(run())
}

func run() int {
	listen := flag.String("listen", "127.0.0.1:9092", "host:port of the first broker, or a comma-separated list with one per broker (kfake always binds 127.0.0.1)")
	brokers := flag.Int("brokers", 1, "brokers in the fake cluster, on consecutive ports from --listen's (ignored when --listen lists several)")
	dataDir := flag.String("data-dir", "", "persist the log under this directory (default: memory only)")
	syncWrites := flag.Bool("sync-writes", false, "with --data-dir, fsync every batch")
	partitions := flag.Int("default-partitions", 1, "partitions of auto-created topics")
	keystore := flag.String("tls-keystore", "", "PEM `FILE` with the private key and certificate chain: serve TLS only")
	version := flag.Bool("version", false, "print the kfake module version and exit")
	flag.Parse()

	if *version {
		fmt.Println(kfakeVersion())
		return 0
	}
	ports, err := listenPorts(*listen, *brokers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfakeserver: %v\n", err)
		return 2
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(len(ports)),
		kfake.Ports(ports...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
		if *syncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	if *keystore != "" {
		pair, err := tls.LoadX509KeyPair(*keystore, *keystore)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kfakeserver: --tls-keystore: %v\n", err)
			return 2
		}
		opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfakeserver: starting cluster: %v\n", err)
		return 1
	}
	fmt.Printf("kfake listening on %v\n", c.ListenAddrs())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
	return 0
}

// listenPorts returns the port of each broker: those of a comma-separated
// list of host:port, or n consecutive ports from a single one.
func listenPorts(listen string, n int) ([]int, error) {
	addrs := strings.Split(listen, ",")
	if len(addrs) == 1 {
		if n < 1 {
			return nil, errors.New("--brokers must be at least 1")
		}
	} else {
		n = len(addrs)
	}
	var ports []int
	for _, a := range addrs {
		_, portStr, err := net.SplitHostPort(strings.TrimSpace(a))
		if err != nil {
			return nil, fmt.Errorf("--listen %q: %w", a, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port <= 0 || port > 65535 {
			return nil, fmt.Errorf("--listen %q: bad port", a)
		}
		ports = append(ports, port)
	}
	if len(ports) == 1 {
		if ports[0] > 65536-n {
			return nil, fmt.Errorf("--listen %q: no room for %d consecutive ports", listen, n)
		}
		for i := 1; i < n; i++ {
			ports = append(ports, ports[0]+i)
		}
	}
	return ports, nil
}

// kfakeVersion returns the kfake module version this binary was built with.
func kfakeVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "kfake (unknown version)"
	}
	for _, m := range bi.Deps {
		if m.Path == "github.com/twmb/franz-go/pkg/kfake" {
			return "kfake " + m.Version
		}
	}
	return "kfake (unknown version)"
}
