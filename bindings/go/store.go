package dshsession

/*
#include "dsh_session.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"runtime"
	"unicode/utf8"
)

// Store is an open session store (dsh_store). It is safe for concurrent use.
// Close it when done; closing the store and its sessions in any order is safe
// (each open Session keeps the underlying store alive).
type Store struct {
	gate gate // entered by calls, shut by Close: p is not freed under a call
	p    *C.dsh_store
	obs  *observers // shared with the sessions opened from the store
}

// OpenStore opens a store (dsh_store_open). A SQLite or JSONL path may be
// held by one store at a time, in this process or another: a second store
// on it fails with ErrConflict (rule store.locked). A PostgreSQL schema may
// be shared by many stores; a session has one writer at a time (another
// store's write to it fails with ErrConflict, rule postgres.session-locked).
func OpenStore(cfg Config) (*Store, error) {
	const op = "OpenStore"
	cfgJSON, err := cfg.json()
	if err != nil {
		return nil, bindingError(op, StatusInvalidArgument, "arg.encode", err.Error())
	}
	args, err := cStrings(op, jsonArg("config", cfgJSON))
	if err != nil {
		return nil, err
	}
	defer freeAll(args)
	var p *C.dsh_store
	if _, err := call(op, func(out *C.dsh_buf) C.dsh_status {
		return C.dsh_store_open(args[0].p, &p, out)
	}); err != nil {
		return nil, err
	}
	st := &Store{p: p, obs: newObservers()}
	runtime.SetFinalizer(st, (*Store).finalize)
	return st, nil
}

// do runs one C call on the store handle, inside the gate so that Close
// cannot free the handle underneath it.
func (st *Store) do(op string, f func(p *C.dsh_store, out *C.dsh_buf) C.dsh_status) ([]byte, error) {
	if st == nil || !st.gate.enter() {
		return nil, closedError(op, "store")
	}
	defer st.gate.leave()
	debugGC()
	b, err := call(op, func(out *C.dsh_buf) C.dsh_status { return f(st.p, out) })
	runtime.KeepAlive(st)
	return b, err
}

// Create creates a session (dsh_session_create) and returns it open.
// An id already in use fails with ErrConflict; a bad seed with ErrRejected
// and the failing seed Index.
func (st *Store) Create(opts CreateOptions) (*Session, error) {
	const op = "Store.Create"
	for _, s := range []string{opts.ID, opts.Cwd, opts.ParentSession, opts.Origin, opts.AgentPreset} {
		if !utf8.ValidString(s) {
			return nil, bindingError(op, StatusInvalidArgument, "arg.utf8", "an option is not valid UTF-8")
		}
	}
	o, err := opts.json()
	if err != nil {
		return nil, bindingError(op, StatusInvalidJSON, "json.encode", err.Error())
	}
	args, err := cStrings(op, jsonArg("options", o))
	if err != nil {
		return nil, err
	}
	defer freeAll(args)
	var sp *C.dsh_session
	b, err := st.do(op, func(p *C.dsh_store, out *C.dsh_buf) C.dsh_status {
		return st.obs.opened(C.dsh_session_create(p, args[0].p, &sp, out))
	})
	if err != nil {
		return nil, err
	}
	var h Header
	if err := decode(op, b, &h); err != nil {
		closeRaw(sp, st.obs)
		return nil, err
	}
	return newSession(sp, h, nil, st.obs), nil
}

// Open opens a stored session (dsh_session_open): it loads the log, runs
// crash repair and makes the repair durable before returning; the closers
// repair appended are in Session.Repaired. An unknown id fails with
// ErrNotFound, a session that is already open with ErrConflict.
func (st *Store) Open(id string) (*Session, error) {
	const op = "Store.Open"
	return st.open(op, id, nil, func(p *C.dsh_store, args []cText, sp **C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_open(p, args[0].p, sp, out)
	})
}

// OpenWindowed opens a stored session like Open but keeps only about the
// newest window events in memory (dsh_session_open_windowed): older events
// stay in storage and are read back when a call reaches them, so a session
// larger than memory opens. Every call answers as on a fully opened
// session. window <= 0 uses the library's default (8192 events).
func (st *Store) OpenWindowed(id string, window int) (*Session, error) {
	const op = "Store.OpenWindowed"
	options := []byte("null")
	if window > 0 {
		options = []byte(fmt.Sprintf(`{"window":%d}`, window))
	}
	return st.open(op, id, options, func(p *C.dsh_store, args []cText, sp **C.dsh_session, out *C.dsh_buf) C.dsh_status {
		return C.dsh_session_open_windowed(p, args[0].p, args[1].p, sp, out)
	})
}

// open runs one of the open calls; options (when not nil) is its second
// string argument.
func (st *Store) open(op, id string, options []byte,
	call func(*C.dsh_store, []cText, **C.dsh_session, *C.dsh_buf) C.dsh_status) (*Session, error) {
	in := []cArg{text("session id", id)}
	if options != nil {
		in = append(in, jsonArg("options", options))
	}
	args, err := cStrings(op, in...)
	if err != nil {
		return nil, err
	}
	defer freeAll(args)
	var sp *C.dsh_session
	b, err := st.do(op, func(p *C.dsh_store, out *C.dsh_buf) C.dsh_status {
		return st.obs.opened(call(p, args, &sp, out))
	})
	if err != nil {
		return nil, err
	}
	var r struct {
		Header   Header  `json:"header"`
		Repaired []Event `json:"repaired"`
		Cut      *Cut    `json:"cut"`
	}
	if err := decode(op, b, &r); err != nil {
		closeRaw(sp, st.obs)
		return nil, err
	}
	s := newSession(sp, r.Header, r.Repaired, st.obs)
	s.cut = r.Cut
	return s, nil
}

// List returns the stored sessions (dsh_store_list).
func (st *Store) List() ([]StoredSession, error) {
	const op = "Store.List"
	b, err := st.do(op, func(p *C.dsh_store, out *C.dsh_buf) C.dsh_status {
		return C.dsh_store_list(p, out)
	})
	if err != nil {
		return nil, err
	}
	var list []StoredSession
	return list, decode(op, b, &list)
}

// Inspect reads a stored session without changing anything
// (dsh_store_inspect): no repair is written, and it works while the session
// is open (its pending writes are flushed first).
func (st *Store) Inspect(id string) (Inspection, error) {
	const op = "Store.Inspect"
	var in Inspection
	b, err := st.withID(op, id, func(p *C.dsh_store, cid *C.char, out *C.dsh_buf) C.dsh_status {
		return C.dsh_store_inspect(p, cid, out)
	})
	if err != nil {
		return in, err
	}
	if err := decode(op, b, &in); err != nil {
		return in, err
	}
	in.Raw = b
	return in, nil
}

// Repair repairs a stored session that is not open, as Open would, without
// a handle (dsh_store_repair): a torn tail is cut after a copy of its bytes
// is kept beside the log, an interrupted turn gets its closers.
// RepairOptions.DryRun writes nothing; RepairOptions.Salvage also cuts
// damage an open refuses with ErrCorrupt, keeping the log before it and a
// copy of what is cut. It fails with ErrConflict while the session is open.
func (st *Store) Repair(id string, opts RepairOptions) (RepairReport, error) {
	const op = "Store.Repair"
	var r RepairReport
	options, err := json.Marshal(opts)
	if err != nil {
		return r, err
	}
	args, err := cStrings(op, text("session id", id), jsonArg("options", options))
	if err != nil {
		return r, err
	}
	defer freeAll(args)
	b, err := st.do(op, func(p *C.dsh_store, out *C.dsh_buf) C.dsh_status {
		return C.dsh_store_repair(p, args[0].p, args[1].p, out)
	})
	if err != nil {
		return r, err
	}
	err = decode(op, b, &r)
	return r, err
}

// Delete removes a stored session for good (dsh_store_delete). It fails
// with ErrNotFound for an unknown id and ErrConflict (store.delete-live)
// while the session is open.
func (st *Store) Delete(id string) error {
	_, err := st.withID("Store.Delete", id, func(p *C.dsh_store, cid *C.char, out *C.dsh_buf) C.dsh_status {
		return C.dsh_store_delete(p, cid, out)
	})
	return err
}

func (st *Store) withID(op, id string, f func(*C.dsh_store, *C.char, *C.dsh_buf) C.dsh_status) ([]byte, error) {
	args, err := cStrings(op, text("session id", id))
	if err != nil {
		return nil, err
	}
	defer freeAll(args)
	return st.do(op, func(p *C.dsh_store, out *C.dsh_buf) C.dsh_status { return f(p, args[0].p, out) })
}

// Close drains every pending write of the store and releases the handle
// (dsh_store_close); the error reports a failed drain (the handle is
// released anyway). Sessions opened from the store stay usable. Close
// waits for calls in flight on other goroutines; calls made once it has
// begun fail with ErrClosed. Close is idempotent: later calls (and one
// racing with it) return nil.
func (st *Store) Close() error {
	if st == nil || !st.gate.shut() {
		return nil
	}
	p := st.p
	st.p = nil
	runtime.SetFinalizer(st, nil)
	_, err := call("Store.Close", func(out *C.dsh_buf) C.dsh_status { return C.dsh_store_close(p, out) })
	st.obs.release()
	runtime.KeepAlive(st)
	return err
}

// finalize closes a store that was dropped without Close.
func (st *Store) finalize() {
	if st.gate.shut() {
		C.dsh_store_close(st.p, nil)
		st.p = nil
		st.obs.release()
	}
}

func closedError(op, what string) *Error {
	return bindingError(op, StatusClosed, "handle.closed", what+" handle is closed")
}

// rawJSON is json.RawMessage with null mapped to nil.
func rawJSON(b []byte, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	return nullToNil(b), nil
}
