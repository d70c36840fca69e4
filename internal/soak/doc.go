// Package soak is Sluice's soak test: mixed load on a three-broker
// ZooKeeper cluster of `sluice serve` processes for minutes (`make soak`)
// or an hour (`make soak SOAK_DURATION=60m`), watching each broker's
// resident memory, goroutines and open files and the produce and
// end-to-end latency for growth once warmed up.
//
// The load, all at once:
//
//   - `sluice perf load` in process (internal/perf/kafkaperf.Load):
//     producers at SOAK_RATE (20 MiB/s by default) of SOAK_RECORD_SIZE-byte
//     records over one topic of SOAK_PARTITIONS (100) partitions,
//     replication factor 3, acks=all, read back by a consumer group of
//     three members that measures end-to-end latency;
//   - two more consumer groups reading the same topic;
//   - the web console of the console leader, signed in: a live tail of the
//     topic (the console's server-sent-events endpoint), a continuous
//     comparison of two topics fed the same keyed records, and an alert
//     rule evaluated every 5 s.
//
// The topic keeps 4 segments of SOAK_SEGMENT_BYTES (4 MiB; 8 MiB for runs
// over 15 minutes) per partition, so segments roll and are deleted all
// along and the disk holds a few GB however long the run.
//
// Six times every SOAK_INTERVAL (30 s; 5 min for runs over 15 min) it reads,
// for each broker, VmRSS (/proc/PID/status), go_goroutines (the console's
// /metrics) and open files (/proc/PID/fd); every interval it prints a row
// of the window's medians with the window's produce and end-to-end p99. At the end it prints the table and
// fails when, after SOAK_WARMUP (2 min; 10 min for runs over 15 min), any
// broker's RSS, goroutines or open files grow faster than the stated
// slopes, or when the load, the tail, the comparison or the alert
// evaluation stopped making progress. Slopes are Theil–Sen estimates (the
// median of the pairwise slopes, which one garbage collection cannot
// tilt) over every reading after warm-up; the limits (SOAK_MAX_RSS_SLOPE,
// SOAK_MAX_GOROUTINE_SLOPE, SOAK_MAX_FD_SLOPE) are, a minute:
//
//	                5-minute run   hour-long run
//	RSS             8 MiB          1 MiB   (60 MiB an hour)
//	goroutines      10             2
//	open files      5              1
//
// The short run's are looser because a slope fitted to a few minutes of
// samples that move by ±20 goroutines or files with the requests in
// flight is itself uncertain by several a minute.
//
// The test is behind the build tag soak, so `go test ./...` and `make
// test` never run it:
//
//	make soak                       # 5 minutes
//	make soak SOAK_DURATION=60m     # the hour-long version
//	SOAK_RATE=5MiB/s SOAK_DURATION=2m go test -tags soak -run TestSoak -v -timeout 0 ./internal/soak
package soak
