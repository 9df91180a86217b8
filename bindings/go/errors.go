package dshsession

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Status is a status code of the C ABI (dsh_status). The values mirror the
// DSH_OK and DSH_E_* constants of dsh_session.h; numbers are never reused.
type Status int32

// The status codes of dsh_session.h.
const (
	// StatusOK is DSH_OK: success. It never appears in an *Error.
	StatusOK Status = 0
	// StatusInvalidJSON is DSH_E_INVALID_JSON: input is not JSON, or not lossless JSON.
	StatusInvalidJSON Status = 1
	// StatusRejected is DSH_E_REJECTED: well-formed input that breaks a session rule; nothing changed.
	StatusRejected Status = 2
	// StatusCorrupt is DSH_E_CORRUPT: stored data is damaged.
	StatusCorrupt Status = 3
	// StatusSchemaMismatch is DSH_E_SCHEMA_MISMATCH: stored data is of another format or schema version.
	StatusSchemaMismatch Status = 4
	// StatusIO is DSH_E_IO: an operating-system or SQLite I/O failure.
	StatusIO Status = 5
	// StatusNotFound is DSH_E_NOT_FOUND: unknown session id.
	StatusNotFound Status = 6
	// StatusConflict is DSH_E_CONFLICT: valid alone but clashes with the current state
	// (duplicate id, session already open, store locked by another writer, ...).
	StatusConflict Status = 7
	// StatusInvalidArgument is DSH_E_INVALID_ARGUMENT: bad argument, configuration or boundary.
	StatusInvalidArgument Status = 8
	// StatusClosed is DSH_E_CLOSED: the handle was closed, or poisoned by an earlier internal failure.
	StatusClosed Status = 9
	// StatusInternal is DSH_E_INTERNAL: a bug in the library (a panic caught at the boundary).
	StatusInternal Status = 99
)

var statusNames = map[Status]string{
	StatusOK:              "DSH_OK",
	StatusInvalidJSON:     "DSH_E_INVALID_JSON",
	StatusRejected:        "DSH_E_REJECTED",
	StatusCorrupt:         "DSH_E_CORRUPT",
	StatusSchemaMismatch:  "DSH_E_SCHEMA_MISMATCH",
	StatusIO:              "DSH_E_IO",
	StatusNotFound:        "DSH_E_NOT_FOUND",
	StatusConflict:        "DSH_E_CONFLICT",
	StatusInvalidArgument: "DSH_E_INVALID_ARGUMENT",
	StatusClosed:          "DSH_E_CLOSED",
	StatusInternal:        "DSH_E_INTERNAL",
}

// String returns the C constant's name, e.g. "DSH_E_REJECTED"
// ("DSH_E_UNKNOWN" for values that are not status codes, as dsh_status_name).
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "DSH_E_UNKNOWN"
}

// Sentinel errors, one per status, for errors.Is. They match any *Error of
// the same Status, whatever its rule and message. Do not modify them.
var (
	ErrInvalidJSON     = &Error{Status: StatusInvalidJSON, Index: -1}
	ErrRejected        = &Error{Status: StatusRejected, Index: -1}
	ErrCorrupt         = &Error{Status: StatusCorrupt, Index: -1}
	ErrSchemaMismatch  = &Error{Status: StatusSchemaMismatch, Index: -1}
	ErrIO              = &Error{Status: StatusIO, Index: -1}
	ErrNotFound        = &Error{Status: StatusNotFound, Index: -1}
	ErrConflict        = &Error{Status: StatusConflict, Index: -1}
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument, Index: -1}
	ErrClosed          = &Error{Status: StatusClosed, Index: -1}
	ErrInternal        = &Error{Status: StatusInternal, Index: -1}
)

// Error is a failed library call: the error object the C ABI returned in its
// output buffer, {"status","code","rule","message","index"?}, plus the Go
// method that made the call.
type Error struct {
	// Op is the Go method that failed, e.g. "Session.Append".
	Op string
	// Status is the status code the call returned.
	Status Status
	// Rule is the stable rule id of docs/errors.md (e.g. "surface.replace-uncovered"),
	// or "json.*", "arg.*", "io.*", "handle.closed", ... for other conditions.
	Rule string
	// Message is the human-readable explanation.
	Message string
	// Index is the position of the failing item in a batch or seed, or -1.
	Index int
	// ReferenceCode is the reference engine's structured code where the
	// library reports one (fork errors: "INVALID_BOUNDARY", "OPEN_TURN",
	// "SESSION_ALREADY_EXISTS"), else "".
	ReferenceCode string
	// Raw is the error object exactly as the library returned it (nil for
	// errors raised by the binding itself).
	Raw json.RawMessage
}

// Error formats the error as "dshsession: Op: STATUS rule: message (index i)".
func (e *Error) Error() string {
	s := "dshsession: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += e.Status.String()
	if e.Rule != "" {
		s += " " + e.Rule
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Index >= 0 {
		s += " (index " + strconv.Itoa(e.Index) + ")"
	}
	return s
}

// Is reports whether target is an *Error whose non-zero Status and Rule
// both equal e's, so errors.Is(err, ErrRejected) tests the status and
// errors.Is(err, &Error{Rule: "fork.open-turn"}) tests the rule.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || (t.Status == StatusOK && t.Rule == "") {
		return false
	}
	return (t.Status == StatusOK || t.Status == e.Status) && (t.Rule == "" || t.Rule == e.Rule)
}

// newError builds an *Error from the library's error object. A body that
// does not parse (which the library never produces) still yields an error
// with the status.
func newError(op string, st Status, body []byte) *Error {
	e := &Error{Op: op, Status: st, Index: -1}
	var obj struct {
		Rule          string `json:"rule"`
		Message       string `json:"message"`
		Index         *int   `json:"index"`
		ReferenceCode string `json:"referenceCode"`
	}
	if len(body) > 0 {
		e.Raw = json.RawMessage(body)
		if err := json.Unmarshal(body, &obj); err != nil {
			e.Message = fmt.Sprintf("unreadable error object %q", body)
			return e
		}
	}
	e.Rule, e.Message, e.ReferenceCode = obj.Rule, obj.Message, obj.ReferenceCode
	if obj.Index != nil {
		e.Index = *obj.Index
	}
	return e
}

// bindingError is an error raised by the Go side before reaching the library.
func bindingError(op string, st Status, rule, msg string) *Error {
	return &Error{Op: op, Status: st, Rule: rule, Message: msg, Index: -1}
}
