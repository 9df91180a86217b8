//! `dsh_session_open_windowed`: the bounded-memory open.

use std::ffi::c_char;

use super::session::{hand_out, opened_out};
use super::store::store_and_id;
use super::{dsh_buf, dsh_session, dsh_status, dsh_store, opt_str, options};

/// Open a stored session like `dsh_session_open`, keeping only a tail
/// window of its log in memory: older events stay in storage and are read
/// back when a call needs them. Every call behaves exactly as on a fully
/// opened session; only calls that reach before the window
/// (`dsh_session_events` of old seqs, a derive after a compaction, a fork,
/// a rewrite of an old tool result) read storage, a chunk of 4096 events
/// at a time.
///
/// `options_json` may be NULL or `{"window": n}`: at least the newest `n`
/// events stay resident (rounded up to whole chunks; default 8192). The
/// open reads, validates, folds and repairs the whole log once, as
/// `dsh_session_open` does, but streams it: the log is never held whole,
/// so a session larger than memory opens. A log that needs the whole-log
/// read (a torn or damaged tail, events in an older format) is read whole
/// and then windowed; sessions of a memory store stay fully resident.
/// `out` is as for `dsh_session_open`.
///
/// Returns what `dsh_session_open` returns, plus `DSH_E_INVALID_ARGUMENT`
/// (`arg.window`, `arg.option-unknown`) and `DSH_E_INVALID_JSON`. Calls
/// on a windowed session that read storage may also return `DSH_E_IO` or
/// `DSH_E_CORRUPT` (`window.reload-mismatch`: storage no longer holds the
/// events it held at open).
///
/// # Safety
/// Pointers are NULL or valid; strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_open_windowed(
    store: *mut dsh_store,
    session_id: *const c_char,
    options_json: *const c_char,
    session: *mut *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        hand_out(session, out, || {
            let (s, id) = store_and_id(store, session_id)?;
            let options = options::open_options(opt_str(options_json, "options_json")?)?;
            opened_out(s.open_session_windowed(id, options.window)?)
        })
    }
}
