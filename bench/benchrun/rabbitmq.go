package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RabbitMQ runs as two systems, one per queue type, both driven over AMQP
// 0-9-1 by bench/rabbitperf with publisher confirms: "RabbitMQ stream"
// (stream queues: an append-only log read without removing, the closest
// to a Kafka partition) and "RabbitMQ quorum" (quorum queues: a Raft
// replicated FIFO queue, RabbitMQ's durable queue of choice, read
// destructively).
//
// Each measurement starts a node of its own: Debian's rabbitmq-server
// script (/usr/lib/rabbitmq/bin/rabbitmq-server, not the /usr/sbin wrapper,
// which switches to the rabbitmq user) with every RABBITMQ_* location under
// the measurement's directory, a node name of its own, listeners on
// loopback only, and its own epmd (Erlang's port mapper, started first on
// a free port and stopped last, so no daemon outlives the measurement).
// Broker CPU and RSS are the Erlang VM's (the script's child); epmd is not
// counted.

// rabbitDefaults are where Debian's packages put the programs.
const (
	defaultRabbitServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	defaultEpmd         = "/usr/bin/epmd"
)

// rabbitConf is the node's rabbitmq.conf: AMQP on loopback only, the guest
// user (allowed from loopback only, as by default), logs to the console
// (the broker log of the measurement) at warning level.
func rabbitConf(port int) string {
	return fmt.Sprintf(`listeners.tcp.1 = 127.0.0.1:%d
loopback_users.guest = true
log.console = true
log.console.level = warning
log.file = false
`, port)
}

// rabbitProcs returns epmd and the RabbitMQ node of a one-broker layout:
// l.Ports[0] is AMQP, l.Peers[0] Erlang distribution, l.Monitor[0] epmd.
func rabbitProcs(p paths, l layout) []procSpec {
	dir := l.brokerDir(0)
	amqpPort, distPort, epmdPort := l.Ports[0], l.Peers[0], l.Monitor[0]
	conf := filepath.Join(dir, "rabbitmq.conf")
	plugins := filepath.Join(dir, "enabled_plugins")
	env := []string{
		"HOME=" + filepath.Join(dir, "home"), // the Erlang cookie
		"ERL_EPMD_PORT=" + strconv.Itoa(epmdPort),
		fmt.Sprintf("RABBITMQ_NODENAME=bench%d@localhost", amqpPort),
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(amqpPort),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort),
		"RABBITMQ_CONFIG_FILE=" + conf,
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + plugins,
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"), // absent: not /etc's
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE=" + filepath.Join(dir, "rabbitmq.pid"),
		"RABBITMQ_LOGS=-",
		"ERL_CRASH_DUMP=" + filepath.Join(dir, "erl_crash.dump"),
	}
	return []procSpec{
		{
			Argv:   []string{p.Epmd, "-port", strconv.Itoa(epmdPort), "-address", "127.0.0.1"},
			Wait:   localAddr(epmdPort),
			Helper: true,
		},
		{
			Argv: append(append([]string{"env"}, env...), p.RabbitServer),
			Wait: localAddr(amqpPort),
			Files: map[string]string{
				conf:    rabbitConf(amqpPort),
				plugins: "[].\n", // none: stream queues over AMQP 0-9-1 need no plugin
			},
			Dirs:         []string{filepath.Join(dir, "home")},
			Stage:        1,
			MeasureChild: true,
			// An Erlang VM booting RabbitMQ takes 5–10 s on an idle 2-core
			// VM and has taken over 30 s on a busy one.
			StartTimeout: 2 * time.Minute,
		},
	}
}

// rabbitSystem is RabbitMQ with queues of queueType ("stream", "quorum").
func rabbitSystem(p paths, key, name, queueType string) *system {
	return &system{
		Key: key, Name: name,
		procs: func(l layout) []procSpec { return rabbitProcs(p, l) },
		client: func(phase string, w workload, addr string, n int64, rate, secs int) []string {
			base := []string{p.RabbitPerf, phase, "--url", addr, "--queue-type", queueType,
				"--record-size", strconv.Itoa(w.Size), "--partitions", strconv.Itoa(w.Partitions), "--output", "json"}
			switch phase {
			case "produce":
				return append(base, "--queue", "bench", "--num-records", strconv.FormatInt(n, 10),
					"--acks", w.Acks, "--payload", w.payloadFor())
			case "consume":
				return append(base, "--queue", "bench", "--num-records", strconv.FormatInt(n, 10))
			default:
				return append(base, "--queue", "e2e", "--throughput", strconv.Itoa(rate),
					"--duration", strconv.Itoa(secs)+"s", "--acks", w.Acks)
			}
		},
		version: func(ctx context.Context) string {
			return rabbitVersion(ctx) + ", client " + versionOf(ctx, p.RabbitPerf, "version")
		},
		unsupported: func(w workload) string {
			switch {
			case w.Compression != "none":
				return "AMQP 0-9-1 does not compress messages"
			case w.Replication > 1:
				return "the harness runs RabbitMQ as a single node"
			}
			return ""
		},
		addr: func(l layout) string {
			return fmt.Sprintf("amqp://guest:guest@%s/", localAddr(l.Ports[0]))
		},
	}
}

// rabbitVersion is the installed rabbitmq-server and Erlang/OTP release.
func rabbitVersion(ctx context.Context) string {
	v := "rabbitmq-server (version unknown)"
	if out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server").Output(); err == nil {
		v = "rabbitmq-server " + strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "erl", "-noshell", "-eval",
		`io:format("~s", [erlang:system_info(otp_release)]), halt().`).Output(); err == nil {
		v += ", Erlang/OTP " + strings.TrimSpace(string(out))
	}
	return v
}
