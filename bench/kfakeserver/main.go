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
//
// It prints "kfake listening on ADDR" once it accepts connections and exits
// cleanly on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	os.Exit(run())
}

func run() int {
	listen := flag.String("listen", "127.0.0.1:9092", "host:port of the first broker (kfake always binds 127.0.0.1; more brokers take the next ports)")
	brokers := flag.Int("brokers", 1, "brokers in the fake cluster")
	dataDir := flag.String("data-dir", "", "persist the log under this directory (default: memory only)")
	syncWrites := flag.Bool("sync-writes", false, "with --data-dir, fsync every batch")
	partitions := flag.Int("default-partitions", 1, "partitions of auto-created topics")
	version := flag.Bool("version", false, "print the kfake module version and exit")
	flag.Parse()

	if *version {
		fmt.Println(kfakeVersion())
		return 0
	}
	_, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfakeserver: --listen %q: %v\n", *listen, err)
		return 2
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535-*brokers {
		fmt.Fprintf(os.Stderr, "kfakeserver: --listen %q: bad port\n", *listen)
		return 2
	}
	if *brokers < 1 {
		fmt.Fprintf(os.Stderr, "kfakeserver: --brokers must be at least 1\n")
		return 2
	}
	ports := make([]int, *brokers)
	for i := range ports {
		ports[i] = port + i
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(*brokers),
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
