package dshsession

/*
#include "dsh_session.h"
*/
import "C"

import (
	"encoding/json"
	"log"
	"runtime/cgo"
	"runtime/debug"
	"sync"
	"unsafe"
)

// NoticeKind is the kind of a store lifecycle Notice. The set is open: a
// newer library may send kinds this package does not name.
type NoticeKind string

// The notice kinds of dsh_observer_fn.
const (
	// NoticeCreated: a session was created, opened or forked (Store.Create,
	// Store.Open, Store.OpenWindowed, Session.Fork). Notice.Header is set.
	NoticeCreated NoticeKind = "created"
	// NoticeEvent: an event was committed by Session.Append or
	// Session.AppendBatch (one notice per event, in seq order). Notice.Event
	// is set. Seed events and the closers crash repair appends are not
	// published.
	NoticeEvent NoticeKind = "event"
	// NoticeFlush: a Session.Flush finished. Notice.Flush is set.
	NoticeFlush NoticeKind = "flush"
	// NoticeDisposed: a session handle was closed (Session.Close or its
	// finalizer). It has no payload.
	NoticeDisposed NoticeKind = "disposed"
)

// Notice is a store lifecycle notice, delivered to the function installed
// with Store.SetObserver.
type Notice struct {
	// SessionID is the session the notice is about.
	SessionID string
	// Kind says what happened.
	Kind NoticeKind
	// Header is the session header, for NoticeCreated; else nil.
	Header *Header
	// Event is the committed event exactly as recorded (Event.Raw is its
	// text), for NoticeEvent; else nil.
	Event *Event
	// Flush is the outcome of the flush, for NoticeFlush; else nil.
	Flush *FlushResult
	// Payload is the notice's JSON payload exactly as the library sent it
	// (nil for the null payload of NoticeDisposed).
	Payload json.RawMessage
}

// FlushResult is the payload of a NoticeFlush: {"ok":true} or
// {"ok":false,"rule":...}.
type FlushResult struct {
	// OK reports whether everything appended so far reached storage.
	OK bool `json:"ok"`
	// Rule is the rule id of the failure (e.g. "io.write") when OK is false.
	Rule string `json:"rule,omitempty"`
}

// newNotice decodes a notice. A payload of an unexpected shape (which the
// library never sends) leaves the typed field nil; Payload still has it.
func newNotice(id string, kind NoticeKind, payload []byte) Notice {
	n := Notice{SessionID: id, Kind: kind, Payload: nullToNil(payload)}
	switch kind {
	case NoticeCreated:
		var h Header
		if json.Unmarshal(payload, &h) == nil {
			n.Header = &h
		}
	case NoticeEvent:
		var e Event
		if json.Unmarshal(payload, &e) == nil {
			n.Event = &e
		}
	case NoticeFlush:
		var f FlushResult
		if json.Unmarshal(payload, &f) == nil {
			n.Flush = &f
		}
	}
	return n
}

// observers is shared by a store and every session opened from it, forks
// included. The library may call the store's observer until the store and
// all those sessions are closed, so the cgo.Handle it holds as user_data
// stays valid until the last of these handles is closed.
type observers struct {
	mu     sync.Mutex
	open   int          // open handles: the store and its sessions
	handle cgo.Handle   // user_data of the installed callback; 0 when none was ever installed or all handles are closed
	fn     func(Notice) // the observer; nil when none
}

func newObservers() *observers { return &observers{open: 1} }

// acquire counts one more open handle. Call it while another handle of the
// same store is open (inside its call), never after the last was closed.
func (o *observers) acquire() {
	o.mu.Lock()
	o.open++
	o.mu.Unlock()
}

// opened counts the session handle a create, open or fork call returned
// with status OK as open; it runs inside that call, while the store or the
// forked session is still open.
func (o *observers) opened(status C.dsh_status) C.dsh_status {
	if status == C.DSH_OK {
		o.acquire()
	}
	return status
}

// release counts a handle closed (after its close call returned: closing
// a session publishes NoticeDisposed). After the last one the library calls
// no observer any more, and the cgo.Handle is deleted.
func (o *observers) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open--
	if o.open == 0 {
		o.fn = nil
		if o.handle != 0 {
			o.handle.Delete()
			o.handle = 0
		}
	}
}

// current returns the observer to call now, or nil.
func (o *observers) current() func(Notice) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fn
}

// SetObserver installs fn as the store's lifecycle observer
// (dsh_store_set_observer), replacing any earlier one; nil removes it. One
// observer hears the notices of every session of the store (see Notice and
// NoticeKind), including sessions still open after the store was closed.
//
// fn runs synchronously on the goroutine whose call caused the notice,
// inside that call (Session.Append returns after fn did), and may run on
// several goroutines at once when several goroutines use the store's
// sessions. A notice delivered while SetObserver is replacing the observer
// on another goroutine may reach the old one.
//
// fn may call the binding: read the session (Info, Events, Derive, ...),
// use other sessions, even replace the observer. An append to the session
// it is being told about fails with ErrConflict (rule append.reentrant).
// fn must not Close the Session or Store whose method call caused the
// notice (Close would wait for that call to end), and must not call runtime.Goexit
// (t.Fatal in a test): use t.Error. A panic in fn is recovered and logged
// with the standard log package (the change it reports stays committed);
// it would otherwise unwind through the library's frames.
//
// The store keeps fn referenced until it is replaced or removed, or until
// the store and all sessions opened from it are closed: the finalizers of a
// Store or Session that fn refers to do not run while it is installed, so
// close them explicitly.
func (st *Store) SetObserver(fn func(Notice)) error {
	const op = "Store.SetObserver"
	_, err := st.do(op, func(p *C.dsh_store, out *C.dsh_buf) C.dsh_status {
		o := st.obs
		// Held across the C call so that concurrent SetObserver calls leave
		// the library's and the Go side's observer in the same state. The
		// library does not publish anything from dsh_store_set_observer.
		o.mu.Lock()
		defer o.mu.Unlock()
		if fn == nil {
			status := setObserver(p, 0, out)
			if status == C.DSH_OK {
				o.fn = nil
			}
			return status
		}
		if o.handle == 0 {
			o.handle = cgo.NewHandle(o)
		}
		status := setObserver(p, uintptr(o.handle), out)
		if status == C.DSH_OK {
			o.fn = fn
		}
		return status
	})
	return err
}

// dshGoObserver is the dsh_observer_fn of every store: userData is the
// cgo.Handle of the store's *observers. It must not unwind into the
// library, so a panic (of the observer, or a bug here) is recovered and
// logged.
//
//export dshGoObserver
func dshGoObserver(userData unsafe.Pointer, sessionID, kind, payload *C.char) {
	var n Notice
	defer func() {
		if r := recover(); r != nil {
			log.Printf("dshsession: the store observer panicked on a %q notice of session %q: %v\n%s",
				n.Kind, n.SessionID, r, debug.Stack())
		}
	}()
	n.SessionID, n.Kind = C.GoString(sessionID), NoticeKind(C.GoString(kind))
	fn := cgo.Handle(uintptr(userData)).Value().(*observers).current()
	if fn == nil {
		return
	}
	n = newNotice(n.SessionID, n.Kind, []byte(C.GoString(payload)))
	fn(n)
}
