// Package securitytest holds the end-to-end tests of broker security:
// named listeners of every security protocol, TLS (server and client
// certificates generated at test time), SASL PLAIN and SCRAM with franz-go,
// librdkafka (kcat, confluent-kafka-python), kafka-python and sarama, the
// refusals a client gets, and brokers replicating over an authenticated
// inter-broker listener. Only its tests have code.
package securitytest
