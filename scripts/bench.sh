#!/usr/bin/env bash
# Side-by-side benchmark of Sluice, franz-go's kfake and NATS JetStream
# (`make bench`, which runs `make build` first). Writes docs/bench/perf.md.
#
#   make bench                              # the full matrix, 3 runs (tens of minutes)
#   BENCH_SMOKE=1 make bench                # ~1 minute: checks the harness, report to stdout
#   ./scripts/bench.sh --smoke              # the same without rebuilding bin/sluice
#   BENCH_RECORDS=200000 BENCH_RUNS=1 make bench
#   BENCH_SYSTEMS=kfake,nats make bench     # leave a system out
#
# Every flag of bench/benchrun can be given after the script name; their
# defaults come from these variables:
#   BENCH_RECORDS (1000000)  BENCH_RUNS (3)  BENCH_SYSTEMS (sluice,kfake,nats)
#   BENCH_SIZES (100,1024)   BENCH_PARTITIONS (1,6)  BENCH_ACKS (1,all)
#   BENCH_COMPRESSION (none,zstd)  BENCH_E2E (1)  BENCH_E2E_RATE (10000)
#   BENCH_E2E_SECONDS (10)   BENCH_REPLICATION (1; 3 once cluster mode exists)
#   BENCH_OUT (docs/bench/perf.md)  BENCH_WORKDIR (a temp dir)  BENCH_NOTE
#   BENCH_SLUICE_SERVE (the `sluice serve` arguments, {port} and {dir} filled in)
#   BENCH_NATS_SERVER (/usr/sbin/nats-server)
#
# The kfake launcher and the NATS load generator live in their own Go module
# (bench/), so nats.go never enters the main module or the sluice binary.
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

mkdir -p bin/bench
(cd bench && CGO_ENABLED=0 "$GO" build -trimpath -o ../bin/bench/ ./kfakeserver ./natsperf ./benchrun)

exec bin/bench/benchrun "$@"
