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
// cgo must be enabled, with a C compiler. On linux/amd64, linux/arm64,
// darwin/amd64 and darwin/arm64 a released module carries
// the library itself: lib/<goos>_<goarch>/libdsh_session.a and the header
// in lib/include, which the release step (scripts/go-module.sh) puts into
// the module, so go get and go build need nothing else and the program
// holds the library (no shared library to ship or find at run time).
//
// With the build tag dshsession_system (go build -tags dshsession_system),
// and on every other platform, the package links an installed library
// through pkg-config (module dsh-session, i.e. dsh-session.pc): set
// PKG_CONFIG_PATH to the directory holding it, and make the shared library
// findable at run time (LD_LIBRARY_PATH, or CGO_LDFLAGS=-Wl,-rpath,<libdir>).
// A checkout of the repository has no lib/ directory: build with that tag,
// or fill lib/ with scripts/go-module.sh --stage.
//
// At init the package compares dsh_abi_version() of the linked library with
// the DSH_ABI_VERSION of the header it was compiled against and panics when
// they differ.
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
// # Contexts
//
// The calls that can wait on storage or the network (opening a store or a
// session, flushing, forking) come with a context.Context variant, for a
// host that must stay responsive: OpenStoreContext, Store.OpenContext,
// Store.OpenWindowedContext, Session.FlushContext and Session.ForkContext.
//
// A call into the library cannot be interrupted. The Context variant runs
// it on a goroutine of its own and returns ctx.Err() as soon as ctx is done
// (at once, doing nothing, when ctx is already done). The call then runs to
// its end in the background, and what it made is released there:
//
//   - OpenStoreContext: the store it opened is closed;
//   - Store.OpenContext, Store.OpenWindowedContext: the open completes as
//     usual (crash repair included, made durable) and the session is
//     closed; until then another open of the id fails with ErrConflict;
//   - Session.ForkContext: the child session is created in the store all
//     the same and closed; pass a child id to find it afterwards;
//   - Session.FlushContext: the flush goes on; its error is lost, and events
//     whose write failed stay queued, so the next Flush reports it.
//
// A call that completes while ctx is being cancelled returns its own result.
// The library bounds the waiting itself: a PostgreSQL store waits at most
// the URL's connect_timeout (10 s by default) to connect and 30 s for a
// statement, then fails with ErrIO.
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
