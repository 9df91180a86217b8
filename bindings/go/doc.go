// Package dshsession is the Go binding of libdsh_session, the native
// DeepSeek Harness session engine (a Rust library with a C ABI).
//
// A session is an append-only log of typed events. Its surface (the ordered
// message-producing events) is kept incrementally; compaction replaces a
// range of it while the log keeps every byte, and Derive returns the message
// list an agent sends to its model.
//
//	store, err := dshsession.OpenStore(dshsession.Config{Backend: dshsession.SQLite, Path: "agent.db"})
//	if err != nil { ... }
//	defer store.Close()
//	s, err := store.Create(dshsession.CreateOptions{ID: "demo"})
//	if err != nil { ... }
//	defer s.Close()
//	_, err = s.Append("turn/start", map[string]any{"turn": 1}, nil)
//	_, err = s.Append("user/message", json.RawMessage(`{"id":"u1","role":"user",...}`), dshsession.Append())
//	_, err = s.Append("user/message", summary, dshsession.Replace(1, 8).From(1, 6, 8)) // a compaction
//	msgs, err := s.Derive()
//
// # Building
//
// The package links the shared library through pkg-config (module
// dsh-session, i.e. dsh-session.pc): set PKG_CONFIG_PATH to the directory
// holding it, and make the library findable at run time (LD_LIBRARY_PATH, or
// CGO_LDFLAGS=-Wl,-rpath,<libdir>). cgo must be enabled. At init the package
// compares dsh_abi_version() of the loaded library with the DSH_ABI_VERSION
// of the header it was compiled against and panics when they differ.
//
// # Data and results
//
// Event data passed as json.RawMessage reaches the library byte for byte; any
// other value is encoded with encoding/json first. Results come back as typed
// structs (Event, Message, Header, ...) whose Raw field holds the exact JSON
// text the library returned, or as json.RawMessage where the shape is open.
// Typed string fields are decoded by encoding/json, which turns a lone
// surrogate escape into U+FFFD; Raw keeps it exact.
//
// # Errors
//
// Every failure is an *Error carrying the library's Status, rule id, message
// and (for batches and seeds) the failing Index. Test the status with
// errors.Is against the sentinels (errors.Is(err, dshsession.ErrRejected)) or
// with a rule-only *Error (errors.Is(err, &dshsession.Error{Rule: "surface.replace-uncovered"})),
// and get the details with errors.As.
//
// # Handles, goroutines and Close
//
// Store and Session values may be used from any number of goroutines; the
// library serializes calls on one handle. Close them when done: Close drains
// pending writes and reports a failed drain, and an open Session keeps its id
// busy (Store.Open of it gives ErrConflict, Store.Delete refuses) until it is
// closed. Stores and sessions may be closed in any order. Close is
// idempotent: the second and later calls return nil (never a double free),
// and every other method of a closed handle returns an *Error with
// StatusClosed (rule handle.closed). A finalizer closes a handle that was
// dropped without Close, as a safety net only: it runs at an unpredictable
// time and its drain error is lost. A Close that has begun turns new calls on
// its handle away with ErrClosed rather than making them wait.
//
// # Observers
//
// Store.SetObserver installs a func(Notice) that hears every session of the
// store: NoticeCreated (create, open, fork; Notice.Header), NoticeEvent (each
// committed event; Notice.Event), NoticeFlush (Notice.Flush) and
// NoticeDisposed (a session closed). It runs synchronously inside the call
// that caused the notice, on that call's goroutine, and may read the session
// or the store; an append to the same session from inside it fails with
// ErrConflict (rule append.reentrant). A panic in it is recovered and
// logged. Sessions still open after Store.Close keep notifying it; nil
// removes it.
package dshsession
