// Package perf is the measuring core of Sluice's load generators: a
// fixed-memory latency histogram, a throughput meter that prints a progress
// line every interval, a pacer that holds a producer to a records-per-second
// cap, pre-generated payloads, and the Result that every generator prints as
// a text summary or as JSON.
//
// It depends on the standard library only, so the Kafka generator
// (internal/perf/kafkaperf, behind `sluice perf`) and the NATS JetStream
// generator of the benchmark harness (bench/natsperf, a separate module)
// measure and report the same way and their results compare line for line.
package perf
