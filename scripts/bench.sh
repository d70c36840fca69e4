#!/usr/bin/env bash
# Side-by-side benchmark of Sluice, franz-go's kfake, NATS JetStream and
# RabbitMQ (stream queues and quorum queues) (`make bench`, which runs
# `make build` first). Writes the report into BENCHMARKS.md
# (between its "make bench" markers).
#
#   make bench                              # the full matrix, 3 runs (tens of minutes)
#   BENCH_SMOKE=1 make bench                # ~1 minute: checks the harness, report to stdout
#   ./scripts/bench.sh --smoke              # the same without rebuilding bin/sluice
#   BENCH_RECORDS=200000 BENCH_RUNS=1 make bench
#   BENCH_SYSTEMS=kfake,nats make bench     # leave a system out
#   BENCH_SYSTEMS=sluice,rabbitmq-stream,rabbitmq-quorum make bench   # Sluice against RabbitMQ only
#   BENCH_SYSTEMS=sluice,sluice-ssl,sluice-sasl-ssl,kfake,kfake-ssl BENCH_OUT=tls.md make bench   # PLAINTEXT against TLS
#   BENCH_REPLICATION=3 make bench          # three-broker clusters, topics/streams with 3 replicas
#   BENCH_SMOKE=1 BENCH_REPLICATION=3 ./scripts/bench.sh   # ~30 s check of the cluster harness
#   ./scripts/bench.sh --replication 3 --records 50000 --runs 1
#
# Replication factor N > 1 (BENCH_REPLICATION, --replication, up to 5) starts, for
# every measurement, a cluster of N brokers of each system on loopback: a ZooKeeper
# server (java + Debian's /usr/share/java/zookeeper.jar) and N `sluice serve`
# processes (broker.id 1..N, default.replication.factor N, min.insync.replicas
# N/2+1); one kfakeserver process with N brokers; N clustered nats-server processes
# (-js, routes, streams with N replicas). Broker CPU and peak RSS are summed over
# the broker processes (ZooKeeper is not counted). Its default matrix is smaller:
# 6 partitions, compression none (sizes 100,1024, acks 1,all, plus e2e); the
# BENCH_* lists below still override. The report goes between BENCHMARKS.md's
# "make bench rfN" markers (appended at the end when missing), never over the
# single-broker report.
#
# sluice-ssl and sluice-sasl-ssl (asked for by name only) are Sluice with an SSL
# or a SASL_SSL (SCRAM-SHA-512) client listener, kfake-ssl kfake with TLS
# listeners, `sluice perf` connecting with --command-config; the CA and
# server certificate are made at run time
# (bench/benchrun/tls.go), and the report checks TLS produce of 1 KiB records
# against 60 % of PLAINTEXT (issue 15) and states the TLS version, cipher suite
# and key exchange the load generator negotiated.
#
# Every flag of bench/benchrun can be given after the script name; their
# defaults come from these variables:
#   BENCH_RECORDS (1000000)  BENCH_RUNS (3)
#   BENCH_SYSTEMS (sluice,kfake,nats,rabbitmq-stream,rabbitmq-quorum)
#   BENCH_SIZES (100,1024)   BENCH_PARTITIONS (1,6; 6 with replication)  BENCH_ACKS (1,all)
#   BENCH_COMPRESSION (none,zstd; none with replication)  BENCH_E2E (1)  BENCH_E2E_RATE (10000)
#   BENCH_E2E_SECONDS (10)   BENCH_REPLICATION (1)  BENCH_PROFILE (0)
#   BENCH_OUT (BENCHMARKS.md)  BENCH_WORKDIR (a temp dir)  BENCH_NOTE
#   BENCH_SLUICE_SERVE (the `sluice serve` arguments, {port} and {dir} filled in)
#   BENCH_SLUICE_CLUSTER (added per broker of a Sluice cluster: {id}, {zk}, {rf}, {minisr})
#   BENCH_NATS_SERVER (/usr/sbin/nats-server)
#   BENCH_RABBITMQ_SERVER (/usr/lib/rabbitmq/bin/rabbitmq-server)  BENCH_EPMD (/usr/bin/epmd)
#   SLUICE_JAVA, SLUICE_ZOOKEEPER_JAR (where java and the ZooKeeper jar are, for replication)
#
# RabbitMQ is Debian's rabbitmq-server, installed here with apt-get when
# missing and a RabbitMQ system is asked for; each measurement starts a node
# of its own on free loopback ports (see bench/benchrun/rabbitmq.go). It is
# not a test dependency: `make test` never needs it.
#
# The kfake launcher and the NATS and RabbitMQ load generators live in their
# own Go module (bench/), so nats.go and amqp091-go never enter the main
# module or the sluice binary.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
if [[ ! -x bin/sluice ]]; then
	echo "bench: bin/sluice is missing; run 'make build' (or 'make bench')" >&2
	exit 1
fi
if [[ ! -x ${BENCH_NATS_SERVER:-/usr/sbin/nats-server} ]]; then
	echo "bench: nats-server not found (apt-get install nats-server); NATS JetStream will be skipped" >&2
fi

wants_rabbitmq() {
	local systems=${BENCH_SYSTEMS:-rabbitmq} arg prev=""
	for arg in "$@"; do
		case $prev in --systems) systems=$arg ;; esac
		case $arg in --systems=*) systems=${arg#--systems=} ;; esac
		prev=$arg
	done
	[[ $systems == *rabbitmq* ]]
}
if wants_rabbitmq "$@" && [[ ! -x ${BENCH_RABBITMQ_SERVER:-/usr/lib/rabbitmq/bin/rabbitmq-server} ]]; then
	echo "bench: installing rabbitmq-server (Debian's package)" >&2
	if [[ $(id -u) -eq 0 ]]; then SUDO=(); else SUDO=(sudo); fi
	# Where systemd runs, the package starts its own service on port 5672;
	# the harness leaves it alone and starts nodes of its own.
	if ! { "${SUDO[@]}" apt-get update -qq &&
		"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null; }; then
		echo "bench: could not install rabbitmq-server; RabbitMQ will be skipped" >&2
	fi
fi

mkdir -p bin/bench
(cd bench && CGO_ENABLED=0 "$GO" build -trimpath -o ../bin/bench/ ./kfakeserver ./natsperf ./rabbitperf ./benchrun)

exec bin/bench/benchrun "$@"
