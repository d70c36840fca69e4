// Package security holds what Sluice's authentication and authorization
// share and what they are made of, free of the network and of the rest of
// the project (it imports nothing of it, like record and config):
//
//   - Principal: who a connection is (Kafka's KafkaPrincipal).
//   - SCRAM (RFC 5802, RFC 7677): the credentials Kafka keeps in ZooKeeper
//     under /config/users/<name> (ScramCredential, its text form, the user
//     name sanitizer), their derivation from a password, and the server's
//     side of the exchange (ScramServer). PLAIN (RFC 4616) is verified
//     against the same stored SCRAM credentials, so an operator keeps one
//     user list.
//   - TLS: a server's tls.Config built from Kafka's ssl.* keys, PEM first,
//     with certificates renewed on disk picked up on the next handshake;
//     client certificates mapped to principals by
//     ssl.principal.mapping.rules; the client's side for Sluice's own
//     clients.
//   - JAAS: the sasl.jaas.config values Kafka's clients and brokers carry,
//     and ${env:NAME} / ${file:path:key} / ${directory:dir:file}
//     references that keep passwords out of properties files.
//   - Throttle: failed authentications slowed per source address.
//
// The wire protocol (SaslHandshake, SaslAuthenticate) is package protocol's;
// where credentials are stored is package cluster's.
package security
