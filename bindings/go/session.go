package dshsession

/*
#include <stdint.h>
#include "dsh_session.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
)

// Session is an open session (dsh_session). It is safe for concurrent use:
// the library serializes calls on one session. Close it when done.
type Session struct {
	gate     gate // entered by calls, shut by Close: p is not freed under a call
	p        *C.dsh_session
	obs      *observers // its store's
	header   Header
	repaired []Event
	cut      *Cut
}

// newSession wraps a handle counted open in obs (observers.opened).
func newSession(p *C.dsh_session, h Header, repaired []Event, obs *observers) *Session {
	s := &Session{p: p, obs: obs, header: h, repaired: repaired}
	runtime.SetFinalizer(s, (*Session).finalize)
	return s
}

// closeRaw releases a session handle counted open in obs, for a handle that
// never got wrapped in a Session and for the finalizer.
func closeRaw(p *C.dsh_session, obs *observers) {
	C.dsh_session_close(p, nil)
	obs.release()
}

// ID returns the session id.
func (s *Session) ID() string { return s.header.ID }

// Header returns the session header as it was when the handle was made.
func (s *Session) Header() Header { return s.header }

// Repaired returns the closing events crash repair appended when Store.Open
// opened this session (nil when there was nothing to repair, or when the
// session was created or forked).
func (s *Session) Repaired() []Event { return s.repaired }

// Cut returns the torn tail Store.Open cut from the log, with where the
// copy of its bytes is kept, or nil when it cut nothing.
func (s *Session) Cut() *Cut { return s.cut }

// do runs one C call on the session handle, inside the gate so that Close
// cannot free the handle underneath it.
func (s *Session) do(op string, f func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status) ([]byte, error) {
	if s == nil || !s.gate.enter() {
		return nil, closedError(op, "session")
	}
	defer s.gate.leave()
	debugGC()
	b, err := call(op, func(out *C.dsh_buf) C.dsh_status { return f(s.p, out) })
	runtime.KeepAlive(s)
	return b, err
}

// Append appends one event (dsh_session_append) and returns it exactly as
// committed, with its seq and time. typ is the event type; data is the event
// data (a json.RawMessage is passed verbatim, any other value is encoded
// with encoding/json; nil is null); intent is Append(), Replace(s, e), an
// Intent such as Append().From(4, 5), or nil for log-only types. Append
// never waits for the disk; Flush is the durability barrier.
//
// A broken surface rule fails with ErrRejected and the rule id, e.g.
// surface.replace-uncovered; nothing is committed.
func (s *Session) Append(typ string, data any, intent SurfaceIntent) (Event, error) {
	return s.appendOrValidate("Session.Append", typ, data, intent, false)
}

// Validate runs the checks of Append without committing anything
// (dsh_session_validate) and returns the event Append would commit now.
func (s *Session) Validate(typ string, data any, intent SurfaceIntent) (Event, error) {
	return s.appendOrValidate("Session.Validate", typ, data, intent, true)
}

func (s *Session) appendOrValidate(op, typ string, data any, intent SurfaceIntent, dry bool) (Event, error) {
	var ev Event
	d, err := encodeData(data)
	if err != nil {
		return ev, bindingError(op, StatusInvalidArgument, "arg.encode", err.Error())
	}
	args, err := cStrings(op, text("type", typ), jsonArg("data", d), jsonArg("intent", intentJSON(intent)))
	if err != nil {
		return ev, err
	}
	defer freeAll(args)
	b, err := s.do(op, func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		if dry {
			return C.dsh_session_validate(p, args[0].p, args[1].p, args[2].p, out)
		}
		return C.dsh_session_append(p, args[0].p, args[1].p, args[2].p, out)
	})
	if err != nil {
		return ev, err
	}
	return ev, decode(op, b, &ev)
}

// AppendBatch appends several events all or nothing
// (dsh_session_append_batch): each is checked against the state after the
// ones before it, and on the first failure nothing is committed and the
// *Error carries the item's Index.
func (s *Session) AppendBatch(items []BatchItem) ([]Event, error) {
	const op = "Session.AppendBatch"
	batch, err := batchJSON(items)
	if err != nil {
		return nil, err
	}
	args, err := cStrings(op, jsonArg("batch", batch))
	if err != nil {
		return nil, err
	}
	defer freeAll(args)
	b, err := s.do(op, func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_append_batch(p, args[0].p, out)
	})
	if err != nil {
		return nil, err
	}
	var evs []Event
	return evs, decode(op, b, &evs)
}

// Flush returns once every event appended so far is durable
// (dsh_session_flush). A failed write is reported here (ErrIO); the events
// stay queued and are retried.
func (s *Session) Flush() error {
	_, err := s.do("Session.Flush", func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_flush(p, out)
	})
	return err
}

// Info returns the session's state (dsh_session_info).
func (s *Session) Info() (Info, error) {
	const op = "Session.Info"
	var in Info
	b, err := s.do(op, func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_info(p, out)
	})
	if err == nil {
		err = decode(op, b, &in)
		in.OpenTurn, in.Raw = nullToNil(in.OpenTurn), b
	}
	return in, err
}

// Events returns the events with from <= seq < to (dsh_session_events); to
// is clamped to the log length, and End means all.
func (s *Session) Events(from, to uint64) ([]Event, error) {
	const op = "Session.Events"
	b, err := s.do(op, func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_events(p, C.uint64_t(from), C.uint64_t(to), out)
	})
	if err != nil {
		return nil, err
	}
	var evs []Event
	return evs, decode(op, b, &evs)
}

// Surface returns the live surface (dsh_session_surface).
func (s *Session) Surface() (Surface, error) {
	const op = "Session.Surface"
	var sf Surface
	b, err := s.do(op, func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_surface(p, out)
	})
	if err == nil {
		err = decode(op, b, &sf)
	}
	return sf, err
}

// Derive returns the derived message list (dsh_session_derive): the
// messages of the surface nodes in surface order, what an agent sends to
// its model. It is cached: O(new events) per call while no replace happened.
func (s *Session) Derive() ([]Message, error) {
	b, err := s.DeriveJSON()
	if err != nil {
		return nil, err
	}
	var msgs []Message
	return msgs, decode("Session.Derive", b, &msgs)
}

// DeriveJSON is Derive returning the JSON array exactly as the library
// produced it (each element byte-identical to the stored message).
func (s *Session) DeriveJSON() (json.RawMessage, error) {
	return s.do("Session.Derive", func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_derive(p, out)
	})
}

// DeriveCursor is how much of the derived message list a host holds: pass
// the zero value the first time, then Derived.Cursor() of the last answer.
type DeriveCursor struct {
	Generation uint64 // the surface generation the count belongs to
	Count      uint64 // the number of messages held
}

// Derived is the answer of Session.DeriveSince.
type Derived struct {
	Generation uint64 `json:"generation"`
	Count      uint64 `json:"count"`
	// Reset false: Messages are the ones added since the cursor (append
	// them to what you hold). Reset true: a replace happened (or the cursor
	// was not one this session gave out) and Messages is the whole list,
	// which replaces what you hold.
	Reset    bool      `json:"reset"`
	Messages []Message `json:"messages"`
}

// Cursor is the cursor to pass to the next DeriveSince.
func (d Derived) Cursor() DeriveCursor { return DeriveCursor{d.Generation, d.Count} }

// DeriveSince returns the derived messages added since cursor
// (dsh_session_derive_since), so that a host's per-step cost does not grow
// with the history: O(new messages) per call while no replace happened.
func (s *Session) DeriveSince(cursor DeriveCursor) (Derived, error) {
	const op = "Session.DeriveSince"
	var d Derived
	b, err := s.do(op, func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_derive_since(p, C.uint64_t(cursor.Generation), C.uint64_t(cursor.Count), out)
	})
	if err == nil {
		err = decode(op, b, &d)
	}
	return d, err
}

// RequestHeader returns the folded request header in canonical form
// (dsh_session_request_header), or nil when there is none.
func (s *Session) RequestHeader() (json.RawMessage, error) {
	return rawJSON(s.do("Session.RequestHeader", func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_request_header(p, out)
	}))
}

// RequestContext returns the data of the latest request/context event
// (dsh_session_request_context), or nil when there is none.
func (s *Session) RequestContext() (json.RawMessage, error) {
	return rawJSON(s.do("Session.RequestContext", func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_request_context(p, out)
	}))
}

// Fork creates a child session in the same store (dsh_session_fork) that
// inherits the events up to and including seq boundary (LastEvent: all of
// them) plus a session/end-seed marker, and returns it open. childID ""
// lets the library generate an id. A boundary inside an open turn fails
// with ErrRejected (fork.open-turn), one past the log with
// ErrInvalidArgument (fork.out-of-range), a child id in use with
// ErrConflict (fork.child-exists).
func (s *Session) Fork(boundary int64, childID string) (*Session, error) {
	const op = "Session.Fork"
	var opts []byte
	if childID != "" {
		opts, _ = json.Marshal(map[string]string{"id": childID})
	}
	args, err := cStrings(op, jsonArg("options", opts))
	if err != nil {
		return nil, err
	}
	defer freeAll(args)
	var cp *C.dsh_session
	b, err := s.do(op, func(p *C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return s.obs.opened(C.dsh_session_fork(p, C.int64_t(boundary), args[0].p, &cp, out))
	})
	if err != nil {
		return nil, err
	}
	var h Header
	if err := decode(op, b, &h); err != nil {
		closeRaw(cp, s.obs)
		return nil, err
	}
	return newSession(cp, h, nil, s.obs), nil
}

// Close drains the session's pending writes and releases the handle
// (dsh_session_close); the error reports a failed drain (the handle is
// released anyway). Close waits for calls in flight on other goroutines;
// calls made once it has begun fail with ErrClosed. It is idempotent: later
// calls (and one racing with it) return nil, and every other method then
// fails with ErrClosed.
func (s *Session) Close() error {
	if s == nil || !s.gate.shut() {
		return nil
	}
	p := s.p
	s.p = nil
	runtime.SetFinalizer(s, nil)
	_, err := call("Session.Close", func(out *C.dsh_buf) C.dsh_status { return C.dsh_session_close(p, out) })
	s.obs.release() // after the close: it publishes NoticeDisposed
	runtime.KeepAlive(s)
	return err
}

// finalize closes a session that was dropped without Close (a safety net:
// the drain's error is lost).
func (s *Session) finalize() {
	if s.gate.shut() {
		closeRaw(s.p, s.obs)
		s.p = nil
	}
}
