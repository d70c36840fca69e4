package record

import "errors"

// The codec's error markers. Every error the package returns for bad bytes
// wraps one of them with %w, with the detail (which batch, which field) in
// the text around it, so a caller classifies an error with errors.Is and
// never by its message, however many layers wrapped it since (pebble's
// corruption marker, without a dependency). Package broker's error table
// maps each to its Kafka code.
var (
	// ErrCorruptBatch: bad CRC, bad length, truncated (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("corrupt record batch")
	// ErrInvalidRecord: record count, offset deltas or varints inconsistent,
	// bad compressed data (INVALID_RECORD).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrUnsupportedMagic: not a v2 batch where one is needed.
	ErrUnsupportedMagic = errors.New("unsupported message format magic")
	// ErrDecompressedTooLarge: a compressed batch expands beyond the limit
	// (wrapped in ErrInvalidRecord on the append path).
	ErrDecompressedTooLarge = errors.New("batch decompresses to more than the limit")
)
