package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage"
)

// Error is a Kafka error code with a message for the client. Everything the
// broker returns to package protocol is either nil, an *Error, or an error
// that ErrorCode maps (storage markers, context errors).
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

// ErrorCode maps err to its Kafka error code and message: 0 and "" for nil;
// *Error and *kerr.Error as they are; storage's markers to the codes Kafka
// uses for them; cancellation and deadlines to REQUEST_TIMED_OUT; anything
// else to UNKNOWN_SERVER_ERROR.
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
	code := kerr.UnknownServerError
	switch {
	case errors.Is(err, record.ErrCorruptBatch), errors.Is(err, record.ErrUnsupportedMagic):
		code = kerr.CorruptMessage
	case errors.Is(err, record.ErrInvalidRecord):
		code = kerr.InvalidRecord
	case errors.Is(err, storage.ErrBatchTooLarge):
		code = kerr.MessageTooLarge
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		code = kerr.OffsetOutOfRange
	case errors.Is(err, storage.ErrDuplicateSequence):
		code = kerr.DuplicateSequenceNumber
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		code = kerr.OutOfOrderSequenceNumber
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		code = kerr.InvalidProducerEpoch
	case errors.Is(err, storage.ErrUnknownProducerID):
		code = kerr.UnknownProducerID
	case errors.Is(err, storage.ErrLogClosed), errors.Is(err, storage.ErrLogDeleted):
		code = kerr.NotLeaderForPartition
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = kerr.RequestTimedOut
	case errors.Is(err, cluster.ErrUnavailable): // no ZooKeeper session: transient
		code = kerr.RequestTimedOut
	}
	return code.Code, err.Error()
}

var (
	errUnknownTopicOrPartition = &Error{Code: kerr.UnknownTopicOrPartition, Msg: "This server does not host this topic-partition."}
	errNotLeader               = &Error{Code: kerr.NotLeaderForPartition, Msg: "This server is not the leader for that topic-partition."}
	errLeaderNotAvailable      = &Error{Code: kerr.LeaderNotAvailable, Msg: "The partition has no leader right now."}
)
