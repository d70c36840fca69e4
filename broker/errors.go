package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/security"
	"github.com/sluice-io/sluice/storage"
)

// Error is a Kafka error code with a message for the client. Everything the
// broker returns to package protocol is either nil, an *Error, or an error
// that ErrorCode maps (the markers of errorTable).
type Error struct {
	Code *kerr.Error
	Msg  string // for the response's error_message where the API has one
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Code.Message
	}
	return e.Code.Message + ": " + e.Msg
}

// Unwrap lets errors.Is(err, kerr.X) work.
func (e *Error) Unwrap() error { return e.Code }

func errorf(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// errorTable is the one place an error marker of the packages below the
// wire (record, storage, cluster, context) meets the Kafka error it is
// answered with. A *kerr.Error carries the rest of what a client learns: the
// code, its name and description, and whether the client retries it. The
// first marker err wraps, in table order, decides.
var errorTable = []struct {
	marker error
	code   *kerr.Error
}{
	// The bytes of a batch (package record).
	{record.ErrCorruptBatch, kerr.CorruptMessage},
	{record.ErrUnsupportedMagic, kerr.CorruptMessage},
	{record.ErrInvalidRecord, kerr.InvalidRecord},
	// The log (package storage).
	{storage.ErrBatchTooLarge, kerr.MessageTooLarge},
	{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{storage.ErrDuplicateSequence, kerr.DuplicateSequenceNumber},
	{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{storage.ErrUnknownProducerID, kerr.UnknownProducerID},
	{storage.ErrInvalidTxnState, kerr.InvalidTxnState},
	{storage.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{storage.ErrLogClosed, kerr.NotLeaderForPartition},
	{storage.ErrLogDeleted, kerr.NotLeaderForPartition},
	{storage.ErrStorage, kerr.KafkaStorageError},
	// Waits that ended, and a metadata store out of reach (transient:
	// clients retry).
	{context.Canceled, kerr.RequestTimedOut},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{cluster.ErrUnavailable, kerr.RequestTimedOut},
	// The controller's answers (ControlledShutdown, ElectLeaders,
	// AlterPartitionReassignments).
	{cluster.ErrNotController, kerr.NotController},
	{cluster.ErrBrokerNotAvailable, kerr.BrokerNotAvailable},
	{cluster.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{cluster.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{cluster.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{cluster.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{cluster.ErrNoTopic, kerr.UnknownTopicOrPartition},
	{cluster.ErrNoReassignment, kerr.NoReassignmentInProgress},
	{cluster.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	// An ACL binding or filter that cannot be stored or used (CreateAcls,
	// DeleteAcls, DescribeAcls: Kafka's InvalidRequestException).
	{security.ErrInvalidACL, kerr.InvalidRequest},
}

// ErrorCode maps err to its Kafka error code and message: 0 and "" for nil;
// *Error and *kerr.Error as they are; the markers of errorTable to their
// codes, with err's text as the message; anything else to
// UNKNOWN_SERVER_ERROR.
func ErrorCode(err error) (int16, string) {
	if err == nil {
		return 0, ""
	}
	var be *Error
	if errors.As(err, &be) {
		return be.Code.Code, be.Msg
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code, ""
	}
	for _, e := range errorTable {
		if errors.Is(err, e.marker) {
			return e.code.Code, err.Error()
		}
	}
	return kerr.UnknownServerError.Code, err.Error()
}

var (
	errUnknownTopicOrPartition = &Error{Code: kerr.UnknownTopicOrPartition, Msg: "This server does not host this topic-partition."}
	errNotLeader               = &Error{Code: kerr.NotLeaderForPartition, Msg: "This server is not the leader for that topic-partition."}
	errLeaderNotAvailable      = &Error{Code: kerr.LeaderNotAvailable, Msg: "The partition has no leader right now."}
)
