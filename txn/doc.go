// Package txn is the transaction coordinator (KIP-98): the broker side of
// InitProducerId with a transactional id, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions, as
// Apache Kafka 3.9 runs them.
//
// A transactional id lives in partition abs(javaHash(id)) % 50 of
// __transaction_state, whose leader is its coordinator. Each state change
// is one record of Kafka's TransactionLog key and value schemas (codec.go),
// appended with acks=all before memory changes. A newly led partition is
// read from its log start (COORDINATOR_LOAD_IN_PROGRESS meanwhile); its
// transactions that were preparing a commit or abort get their markers
// sent again and complete. EndTxn answers once PrepareCommit/PrepareAbort
// is written; the markers then go to every partition leader of the
// transaction (WriteTxnMarkers), retried until written, and the
// CompleteCommit/CompleteAbort record follows.
//
// Background work: transactions open past their transaction.timeout.ms are
// fenced (epoch+1) and aborted; transactional ids idle for
// transactional.id.expiration.ms are removed (a tombstone).
package txn
