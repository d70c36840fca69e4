package broker

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage"
)

// TestErrorCode: every marker of the packages below, however deeply
// wrapped, is answered with its Kafka code and its text; a broker *Error
// with its own message; anything unknown with UNKNOWN_SERVER_ERROR.
func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code *kerr.Error
	}{
		{record.ErrCorruptBatch, kerr.CorruptMessage},
		{record.ErrUnsupportedMagic, kerr.CorruptMessage},
		{record.ErrInvalidRecord, kerr.InvalidRecord},
		{fmt.Errorf("%w: %w", record.ErrInvalidRecord, record.ErrDecompressedTooLarge), kerr.InvalidRecord},
		{storage.ErrBatchTooLarge, kerr.MessageTooLarge},
		{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{storage.ErrDuplicateSequence, kerr.DuplicateSequenceNumber},
		{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{storage.ErrUnknownProducerID, kerr.UnknownProducerID},
		{storage.ErrLogClosed, kerr.NotLeaderForPartition},
		{storage.ErrLogDeleted, kerr.NotLeaderForPartition},
		{fmt.Errorf("append to 0.log: %w: %w", storage.ErrStorage, syscall.ENOSPC), kerr.KafkaStorageError},
		{context.Canceled, kerr.RequestTimedOut},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{cluster.ErrUnavailable, kerr.RequestTimedOut},
		{cluster.ErrNotController, kerr.NotController},
		{cluster.ErrBrokerNotAvailable, kerr.BrokerNotAvailable},
		{cluster.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
		{cluster.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
		{cluster.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
		{cluster.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
		{cluster.ErrNoTopic, kerr.UnknownTopicOrPartition},
		{cluster.ErrNoReassignment, kerr.NoReassignmentInProgress},
		{cluster.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
		{errors.New("disk on fire"), kerr.UnknownServerError},
	} {
		err := fmt.Errorf("t-0: batch at byte 0: %w", tc.err)
		code, msg := ErrorCode(err)
		if code != tc.code.Code || msg != err.Error() {
			t.Errorf("%v: code %d %q, want %d (%s)", err, code, msg, tc.code.Code, tc.code.Message)
		}
	}
	if code, msg := ErrorCode(fmt.Errorf("wrapped: %w", errorf(kerr.InvalidTxnState, "no transactions"))); code != kerr.InvalidTxnState.Code || msg != "no transactions" {
		t.Errorf("*Error: %d %q", code, msg)
	}
	if code, msg := ErrorCode(kerr.NotCoordinator); code != kerr.NotCoordinator.Code || msg != "" {
		t.Errorf("*kerr.Error: %d %q", code, msg)
	}
	if code, msg := ErrorCode(nil); code != 0 || msg != "" {
		t.Errorf("nil: %d %q", code, msg)
	}
}
