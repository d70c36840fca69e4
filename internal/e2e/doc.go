// Package e2e holds the broker's end-to-end tests: real Kafka clients
// (franz-go, kcat, confluent-kafka-python, sarama) against a Sluice broker
// started in-process or as the sluice binary, on 127.0.0.1 with free ports.
// It has no non-test code beyond this comment.
package e2e
