// Package storage is the partition log of Sluice: Kafka record batches v2
// stored on disk exactly as Apache Kafka stores them, so an operator who opens
// a Sluice data directory recognises every file. The bytes of a batch (its
// header, CRC, records, compression) are package record's; storage keeps the
// log: segments, indexes, recovery, retention, compaction, producer state,
// leader epochs and checkpoints, and its own errors (errors.go).
//
// # Layout
//
// Each log directory (log.dirs) holds one folder per partition, named
// <topic>-<partition>. A folder holds segments named after their base offset,
// zero-padded to 20 digits: <base>.log (the batches, byte for byte as the
// producer sent them, with the base offset and partition leader epoch set by
// the broker), <base>.index (8-byte entries: relative offset, position),
// <base>.timeindex (12-byte entries: timestamp, relative offset),
// <base>.txnindex (34-byte entries: the aborted transactions whose marker
// is in the segment, txnindex.go) and <base>.snapshot (producer state, with
// each producer's open transaction). The folder also holds
// leader-epoch-checkpoint. The log directory itself holds Kafka's text
// checkpoints: recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// replication-offset-checkpoint and cleaner-offset-checkpoint, and
// .kafka_cleanshutdown after a clean stop.
//
// # Concurrency
//
// A Log has one writer at a time (appends, truncation, roll and retention take
// Log.mu) and any number of readers. Readers never take Log.mu for the data
// path: they read the segment list from an atomically swapped snapshot and the
// committed end of a segment from an atomic, so a reader never waits on a
// writer's fsync. A segment's files stay open while a FileRegion handed to a
// reader refers to them (reference counted), so deletion by retention or
// compaction never closes a file under an in-flight sendfile.
//
// # Transactions
//
// Producer state (producerstate.go) follows each producer's open
// transaction: a transactional batch opens it, an end-transaction marker
// (a control batch, appended with OriginCoordinator) ends it. The last
// stable offset (Log.LastStableOffset) is the first offset of the earliest
// transaction open or ended above the high watermark, else the high
// watermark; read_committed fetches read up to it and drop the aborted
// transactions Log.AbortedTransactions finds in the .txnindex files.
// Snapshots keep open transactions across restarts; a recovered segment,
// or one whose .txnindex is missing, has its index rebuilt by replaying the
// log with the producer state. Compaction stops at the last stable offset
// and drops aborted data (cleaner.go).
//
// # Filesystem
//
// Every file operation goes through a vfs.FS (ManagerConfig.FS; package
// vfs): the operating system's by default, whose files are the *os.File
// itself, so appends, the memory maps and sendfile are as without a seam.
// Tests put package errorfs there to inject I/O errors, full disks, torn
// writes and crashes. An append the disk fails wraps ErrStorage.
//
// Lock order: Manager.mu, then Log.cleanMu, then Log.mu, then segment.mu
// (txnIndex.mu is taken alone).
package storage
