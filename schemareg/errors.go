package schemareg

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error the REST API answers with Confluent's body
// {"error_code":40401,"message":"Subject 'x' not found."} and HTTP status.
type Error struct {
	Status  int    `json:"-"`
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// Confluent's error codes (its rest/exceptions/Errors.java).
const (
	CodeSubjectNotFound            = 40401
	CodeVersionNotFound            = 40402
	CodeSchemaNotFound             = 40403
	CodeSubjectSoftDeleted         = 40404
	CodeSubjectNotSoftDeleted      = 40405
	CodeVersionSoftDeleted         = 40406
	CodeVersionNotSoftDeleted      = 40407
	CodeSubjectCompatNotConfigured = 40408
	CodeSubjectModeNotConfigured   = 40409
	CodeIncompatibleSchema         = 409
	CodeInvalidSchema              = 42201
	CodeInvalidVersion             = 42202
	CodeInvalidCompatibilityLevel  = 42203
	CodeInvalidMode                = 42204
	CodeOperationNotPermitted      = 42205
	CodeReferenceExists            = 42206
	CodeInvalidSubject             = 42208
	CodeStoreError                 = 50001
	CodeOperationTimeout           = 50002
	CodeRequestForwardingFailed    = 50003
	CodeUnknownLeader              = 50004
	CodeUnauthorized               = 40101
	CodeForbidden                  = 40301
	CodeNotFound                   = 404
	CodeMethodNotAllowed           = 405
	CodeUnprocessable              = 422
	CodeJSONParse                  = 50005
	CodeRequestTooLarge            = 413
	codeInternal                   = 500
)

func newErr(status, code int, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(s string) *Error {
	return newErr(http.StatusNotFound, CodeSubjectNotFound, "Subject '%s' not found.", s)
}

func errVersionNotFound(v int) *Error {
	return newErr(http.StatusNotFound, CodeVersionNotFound, "Version %d not found.", v)
}

func errSchemaNotFound() *Error {
	return newErr(http.StatusNotFound, CodeSchemaNotFound, "Schema not found")
}

func errSchemaIDNotFound(id int) *Error {
	return newErr(http.StatusNotFound, CodeSchemaNotFound, "Schema %d not found", id)
}

func errInvalidSchema(format string, args ...any) *Error {
	return newErr(http.StatusUnprocessableEntity, CodeInvalidSchema, "Invalid schema: "+format, args...)
}

func errInvalidVersion(v string) *Error {
	return newErr(http.StatusUnprocessableEntity, CodeInvalidVersion,
		`The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string "latest"`, v)
}

func errInvalidCompatibility() *Error {
	return newErr(http.StatusUnprocessableEntity, CodeInvalidCompatibilityLevel,
		"Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
}

func errInvalidMode(m string) *Error {
	return newErr(http.StatusUnprocessableEntity, CodeInvalidMode,
		"Invalid mode %q. Valid values are READWRITE and READONLY", m)
}

func errReadOnly(subject string) *Error {
	if subject == "" {
		return newErr(http.StatusUnprocessableEntity, CodeOperationNotPermitted, "The registry is in read-only mode")
	}
	return newErr(http.StatusUnprocessableEntity, CodeOperationNotPermitted, "Subject %s is in read-only mode", subject)
}

func errIncompatible(msgs []string) *Error {
	m := "Schema being registered is incompatible with an earlier schema for subject"
	if len(msgs) > 0 {
		m += ", details: " + fmt.Sprint(msgs)
	}
	return newErr(http.StatusConflict, CodeIncompatibleSchema, "%s", m)
}

func errStore(err error) *Error {
	return newErr(http.StatusInternalServerError, CodeStoreError, "Error in the backend data store: %v", err)
}

// asError maps any error to the API's error.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return newErr(http.StatusInternalServerError, codeInternal, "%v", err)
}
