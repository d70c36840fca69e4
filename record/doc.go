// Package record is Kafka's record codec: the bytes a producer sends, the
// log stores and a consumer reads, with nothing of the log, the network or
// the cluster.
//
//   - Record batch v2 (DefaultRecordBatch.java): the 61-byte header
//     (ParseBatchHeader, DecodeHeader, PutHeader, the Off* field positions
//     and Attr* bits), its CRC-32C (ValidateBatch, BatchCRC) and the
//     in-place edits the leader makes (SetBaseOffset, SetLeaderEpoch,
//     SetLogAppendTime); ForEachBatch walks concatenated batches.
//   - Records (varints, headers): Records and WalkRecords decode them,
//     AppendRecord and BuildBatch encode them, CheckUncompressedRecords
//     checks a producer's without allocating.
//   - Message sets v0/v1 (Produce v0-v2) and their conversion to one batch
//     v2 (ConvertMessageSet), as Kafka's LogValidator converts them.
//   - Compression (gzip, snappy raw and xerial-framed, lz4, zstd) with
//     pooled coders (Compress, Decompress, Recompress), and the streaming
//     check of a compressed producer batch (CheckCompressedRecords): its
//     records are parsed as they are decompressed through a small window, so
//     checking holds no more memory than the window whatever the batch
//     claims to expand to, within a limit (DecompressLimit,
//     DefaultMaxDecompressedBatchBytes).
//
// Bad bytes are errors wrapping one of the markers in errors.go
// (ErrCorruptBatch, ErrInvalidRecord, ErrUnsupportedMagic,
// ErrDecompressedTooLarge), never a panic: every decoder here reads bytes
// from outside and has a fuzz target (fuzz_test.go). Package recordtest
// builds batches for tests, hostile ones included.
//
// Imported by storage (the log), broker (produce: message-set conversion,
// the first header of a produce), group (__consumer_offsets records) and
// the appliance's bounded decompressor (internal/decompress).
package record
