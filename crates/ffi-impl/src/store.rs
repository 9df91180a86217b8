//! `dsh_store_*`.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use super::{arg_str, dsh_buf, dsh_status, dsh_store, guard, null_arg, opt_str};
use super::{handles, options, render};
use ::dsh_session::error::Result;
use ::dsh_session::store::{Notice, Store};

/// Open a store.
///
/// `config_json` (NULL or `null`: a memory store) is an object; every key
/// is optional and any other key is refused (`config.invalid`):
///
/// * `backend`: `"memory"` (the default), `"sqlite"`, `"jsonl"` or
///   `"postgres"`;
/// * `path`: the SQLite database file, or the JSONL root directory
///   (required by those two, refused by the others);
/// * `url`: postgres only, required: `postgresql://user@host:port/db`;
/// * `schema`: postgres only: the schema holding the store (default
///   `"dsh"`);
/// * `statementTimeoutMs`: postgres only: how long a statement waits for
///   the server, 1 to 2147483647 (default 30000);
/// * `compression`: jsonl only: `"zstd"` (the default) or `"none"`;
/// * `batchWindowMs`: the write-behind window, 0 to 2147483647 (default
///   25; 0 writes inside each append);
/// * `admission`: `"strict"` (the default) or `"reference"`;
/// * `eventTypes`: the host's own event type names (default `[]`);
/// * `readOnly`: `true` opens a reader beside the store's writer: no lock,
///   no write (sqlite, jsonl, postgres; default `false`);
/// * `locking`: sqlite only: `"shared"` (the default) or `"exclusive"`;
/// * `trimHeap`: `true` returns the heap freed by a session open to the
///   system (default `false`).
///
/// The keys are described in docs/c-api.md, the stores in
/// docs/formats.md. On success `*store` receives a new handle that the
/// caller releases with `dsh_store_close`; on failure `*store` is set to
/// NULL. `out` (may be NULL) receives `{"backend":...}` or the error.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_JSON`, `DSH_E_INVALID_ARGUMENT` (NULL
/// `store`, non-UTF-8 text, bad configuration, a backend not in this
/// build: `config.backend-not-built`, whose message lists the backends it
/// has), `DSH_E_IO`, `DSH_E_SCHEMA_MISMATCH`, `DSH_E_CORRUPT` (a damaged
/// database or store identity), `DSH_E_CONFLICT` (another writer holds the
/// store), `DSH_E_NOT_FOUND` (a `readOnly` open of a path that holds no
/// store).
///
/// # Safety
/// Pointers are NULL or valid for the call; `config_json` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_store_open(
    config_json: *const c_char,
    store: *mut *mut dsh_store,
    out: *mut dsh_buf,
) -> dsh_status {
    if !store.is_null() {
        // SAFETY: non-NULL out-pointer supplied by the caller.
        unsafe { store.write(std::ptr::null_mut()) };
    }
    guard(out, || {
        if store.is_null() {
            return Err(null_arg("store"));
        }
        // SAFETY: caller contract.
        let config = unsafe { opt_str(config_json, "config_json") }?;
        let s = Store::open(options::store_config(config)?)?;
        let name = s.backend_name();
        // SAFETY: checked non-NULL above.
        unsafe { store.write(handles::new_store(s)) };
        Ok(format!("{{\"backend\":\"{name}\"}}"))
    })
}

/// List the stored sessions: `[{"id","createdAt","revision","length",...header fields}]`.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT` (NULL `store`), `DSH_E_CLOSED`,
/// `DSH_E_IO`, `DSH_E_CORRUPT`.
///
/// # Safety
/// `store` is NULL or a handle from `dsh_store_open`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_store_list(store: *mut dsh_store, out: *mut dsh_buf) -> dsh_status {
    guard(out, || Ok(render::list(&handles::store(store)?.list()?)))
}

/// Read a stored session without changing anything: `out` =
/// `{"header":{...},"revision":"...","torn":bool,"tornTail":{...}|null,"events":[...],"repair":[...],"problems":[...],"quarantined":[...]}`
/// where `events` is the stored log followed by the closers crash repair
/// would append (computed in memory only), `repair` those closers alone,
/// `torn` whether a torn tail would be cut and `tornTail` what it is
/// (`{"at","length","why"}`), `quarantined` the copies earlier repairs
/// kept beside the log of what they cut, and `problems` the events a
/// `dsh_session_open` refuses one by one (a type the store does not
/// declare, a message or request header of a malformed shape), each as
/// `{"seq","rule","status","message"}`: they are read as stored. Unlike `dsh_session_open` this
/// never writes, never appends `session/end-seed`, and works while the
/// session is open elsewhere in this store (its pending writes are flushed
/// first).
///
/// Returns `DSH_OK`, `DSH_E_NOT_FOUND`, `DSH_E_CORRUPT`,
/// `DSH_E_SCHEMA_MISMATCH`, `DSH_E_IO`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `store` is NULL or a handle from `dsh_store_open`; `session_id` is NULL
/// or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_store_inspect(
    store: *mut dsh_store,
    session_id: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        // SAFETY: caller contract.
        let (s, id) = unsafe { store_and_id(store, session_id) }?;
        Ok(render::inspection(&s.inspect(id)?))
    })
}

/// Repair a stored session that is not open, as `dsh_session_open` would,
/// without handing out a handle: cut a torn tail (a copy of the bytes it
/// cuts is first kept in a quarantine file beside the log) and write the
/// closers of an interrupted turn. `options_json` may be NULL or
/// `{"dryRun": bool, "salvage": bool}`: a dry run writes nothing and says
/// what a repair would do; a salvage also cuts damage an open refuses with
/// `DSH_E_CORRUPT` (a zstd frame that fails its checksum, bytes after the
/// last frame that no crash leaves), keeping the log's prefix before it
/// and a copy of everything cut. `out` =
/// `{"applied":bool,"tornTail":{"at","length","why"}|null,"repaired":[...closers],"cut":{"at","length","why","copy"}|null}`.
///
/// Returns `DSH_OK`, `DSH_E_NOT_FOUND`, `DSH_E_CONFLICT`
/// (`load.live-prepare`: the session is open; `store.read-only`),
/// `DSH_E_CORRUPT`, `DSH_E_SCHEMA_MISMATCH`, `DSH_E_IO` (`quarantine.full`
/// among others), `DSH_E_INVALID_ARGUMENT` (`arg.repair-option`,
/// `arg.option-unknown`), `DSH_E_INVALID_JSON`, `DSH_E_CLOSED`.
///
/// # Safety
/// `store` is NULL or a handle from `dsh_store_open`; `session_id` and
/// `options_json` are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_store_repair(
    store: *mut dsh_store,
    session_id: *const c_char,
    options_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        // SAFETY: caller contract.
        let (s, id) = unsafe { store_and_id(store, session_id) }?;
        // SAFETY: caller contract.
        let text = unsafe { opt_str(options_json, "options_json") }?;
        let options = options::repair_options(text)?;
        Ok(render::repair_report(&s.repair(id, options)?))
    })
}

/// Delete a stored session that is not open: its log and header are
/// removed from the store for good. `out` = `{"ok":true}` or the error.
///
/// Returns `DSH_OK`, `DSH_E_NOT_FOUND` (nothing stored under the id),
/// `DSH_E_CONFLICT` (`store.delete-live`: the session is open),
/// `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`, `DSH_E_IO`.
///
/// # Safety
/// `store` is NULL or a handle from `dsh_store_open`; `session_id` is NULL
/// or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_store_delete(
    store: *mut dsh_store,
    session_id: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        // SAFETY: caller contract.
        let (s, id) = unsafe { store_and_id(store, session_id) }?;
        s.delete(id)?;
        Ok("{\"ok\":true}".to_string())
    })
}

/// Drain every pending write of the store, then release the handle (also
/// when the drain fails; the status reports the drain). Sessions opened from
/// the store stay usable: each keeps the store alive. NULL-safe (returns
/// `DSH_E_INVALID_ARGUMENT`); a second close of the same handle returns
/// `DSH_E_CLOSED`. `out` = `{"ok":true}` or the error.
///
/// # Safety
/// `store` is NULL or a pointer returned by `dsh_store_open`.
#[no_mangle]
pub unsafe extern "C" fn dsh_store_close(store: *mut dsh_store, out: *mut dsh_buf) -> dsh_status {
    guard(out, || {
        let s = handles::release_store(store)?;
        s.flush()?;
        Ok("{\"ok\":true}".to_string())
    })
}

/// A host callback for store lifecycle notices.
///
/// `kind` is `"created"` (payload: the session header), `"event"` (payload:
/// the committed event), `"flush"` (sent by `dsh_session_flush` with its
/// outcome, `{"ok":true}` or `{"ok":false,"rule":...}`; background
/// write-behind rounds send none) or `"disposed"` (payload: `null`). All
/// strings are NUL-terminated UTF-8 owned by the library and valid only
/// during the call. The callback runs on the thread that made the change,
/// after the session's lock is released; it may read the session (derive,
/// events, …) but an append to the same session from inside the callback
/// is refused with `DSH_E_CONFLICT` (`append.reentrant`). It must not
/// unwind.
pub type dsh_observer_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        session_id: *const c_char,
        kind: *const c_char,
        payload_json: *const c_char,
    ),
>;

struct HostObserver {
    callback: unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, *const c_char),
    user_data: *mut c_void,
}

// SAFETY: the header documents that the callback may be called from any
// thread; the host is responsible for `user_data` being usable there.
unsafe impl Send for HostObserver {}
// SAFETY: as above; the library never dereferences `user_data`.
unsafe impl Sync for HostObserver {}

impl HostObserver {
    fn call(&self, id: &str, kind: &str, payload: &str) {
        let (id, kind, payload) = (c_text(id), c_text(kind), c_text(payload));
        // SAFETY: the host promised the callback stays valid while installed;
        // the strings live until the call returns.
        unsafe { (self.callback)(self.user_data, id.as_ptr(), kind.as_ptr(), payload.as_ptr()) };
    }
}

/// The store behind `store`, then the session id `session_id` names: the
/// argument checks, in that order, of every call on a stored session.
///
/// # Safety
/// `session_id` is NULL or NUL-terminated.
pub(crate) unsafe fn store_and_id<'a>(
    store: *mut dsh_store,
    session_id: *const c_char,
) -> Result<(Arc<Store>, &'a str)> {
    let s = handles::store(store)?;
    // SAFETY: forwarded caller contract.
    let id = unsafe { arg_str(session_id, "session_id") }?;
    Ok((s, id))
}

fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', "\u{fffd}")).unwrap_or_default()
}

/// Install (or, with a NULL `callback`, remove) the store's lifecycle
/// observer. Notices of every session of this store are delivered to it.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT` (NULL `store`), `DSH_E_CLOSED`.
///
/// # Safety
/// `store` is NULL or a handle from `dsh_store_open`; `callback`, when not
/// NULL, stays callable (and `user_data` valid) until the store and all its
/// sessions are closed. Replacing or removing it does not wait for a
/// notice already being delivered on another thread, so a replaced
/// callback may still be called once after this returns.
#[no_mangle]
pub unsafe extern "C" fn dsh_store_set_observer(
    store: *mut dsh_store,
    callback: dsh_observer_fn,
    user_data: *mut c_void,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let s = handles::store(store)?;
        let observer = callback.map(|callback| {
            let host = HostObserver {
                callback,
                user_data,
            };
            Arc::new(move |id: &str, notice: Notice<'_>| {
                let flushed;
                let header;
                let (kind, payload) = match notice {
                    Notice::Created(h) => {
                        header = h.to_json();
                        ("created", header.as_str())
                    }
                    Notice::Event(e) => ("event", e.text()),
                    Notice::Flush(Ok(())) => ("flush", "{\"ok\":true}"),
                    Notice::Flush(Err(e)) => {
                        flushed = format!("{{\"ok\":false,\"rule\":\"{}\"}}", e.rule);
                        ("flush", flushed.as_str())
                    }
                    Notice::Disposed => ("disposed", "null"),
                };
                host.call(id, kind, payload);
            }) as ::dsh_session::store::Observer
        });
        s.set_observer(observer);
        Ok("{\"ok\":true}".to_string())
    })
}
