package storage

import "errors"

// The log's error markers, tested with errors.Is; package broker's error
// table maps them to Kafka codes. Errors about the bytes of a batch (CRC,
// lengths, records, compression) are package record's.
var (
	// ErrBatchTooLarge: larger than max.message.bytes (MESSAGE_TOO_LARGE).
	ErrBatchTooLarge = errors.New("record batch larger than max.message.bytes")
	// ErrOffsetOutOfRange: below the log start or above the log end (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrDuplicateSequence: the batch was appended before; AppendInfo carries
	// its original offsets (the broker answers success with them, as Kafka does).
	ErrDuplicateSequence = errors.New("duplicate sequence number")
	// ErrOutOfOrderSequence: a gap or reordering in a producer's sequence.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch: an epoch older than the one seen (fenced producer).
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrUnknownProducerID: a non-zero sequence from a producer the log does
	// not know (its state was removed by retention).
	ErrUnknownProducerID = errors.New("unknown producer id")
	// ErrInvalidTxnState: a producer with an open transaction wrote a
	// non-transactional batch (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTransactionCoordinatorFenced: an end-transaction marker from a
	// coordinator epoch older than the producer's last marker's
	// (TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("transaction coordinator fenced")
	// ErrLogClosed: the log (or its manager) was closed.
	ErrLogClosed = errors.New("log closed")
	// ErrLogDeleted: the log was deleted.
	ErrLogDeleted = errors.New("log deleted")
	// ErrStorage: the disk failed an append: a write, an fsync, or the
	// files of a roll (EIO, ENOSPC, ...; the cause is wrapped too), Kafka's
	// KafkaStorageException (KAFKA_STORAGE_ERROR, which clients retry).
	ErrStorage = errors.New("storage error")
)
