//! `dsh_session_*`.

use std::ffi::c_char;

use super::store::store_and_id;
use super::{
    arg_str, dsh_buf, dsh_session, dsh_status, dsh_store, guard, json_arg, null_arg, opt_str,
    out_text,
};
use super::{handles, options};
use crate::render::{events_json, write_seqs};
use ::dsh_session::engine::session::DataText;
use ::dsh_session::error::Result;
use ::dsh_session::json::Value;

/// Write a new session handle to `*session` (NULL on failure).
///
/// # Safety
/// `session` is NULL or writable.
pub(super) unsafe fn hand_out(
    session: *mut *mut dsh_session,
    out: *mut dsh_buf,
    f: impl FnOnce() -> Result<(std::sync::Arc<::dsh_session::store::LiveSession>, String)>,
) -> dsh_status {
    if !session.is_null() {
        // SAFETY: non-NULL out-pointer supplied by the caller.
        unsafe { session.write(std::ptr::null_mut()) };
    }
    guard(out, || {
        if session.is_null() {
            return Err(null_arg("session"));
        }
        let (live, text) = f()?;
        // SAFETY: checked non-NULL above.
        unsafe { session.write(handles::new_session(live)) };
        Ok(text)
    })
}

/// Create a session in `store`.
///
/// `options_json` (may be NULL) is an object with keys `id` (generated when
/// absent), `seed` (array of complete events; the session then appends
/// `session/end-seed` unless the seed ends with one), `legacy` (boolean,
/// default false: accept message events without surface markers as appends,
/// see docs/decisions.md) and the optional header fields `cwd`,
/// `parentSession`, `origin`, `delegationDepth`, `agentPreset`. On success
/// `*session` receives a handle to release with `dsh_session_close` and
/// `out` the session header; on failure `*session` is NULL.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_JSON`, `DSH_E_REJECTED` (seed or header
/// rules; the error carries the seed `index`), `DSH_E_CONFLICT` (id in use),
/// `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`, `DSH_E_IO`.
///
/// # Safety
/// Pointers are NULL or valid; strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_create(
    store: *mut dsh_store,
    options_json: *const c_char,
    session: *mut *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        hand_out(session, out, || {
            let s = handles::store(store)?;
            let options = opt_str(options_json, "options_json")?;
            let live = s.create(options::create_options(options)?)?;
            let header = live.header()?.to_json();
            Ok((live, header))
        })
    }
}

/// Open a stored session: load it, run crash repair, make the repair
/// durable, and return a handle. `out` =
/// `{"header":{...},"repaired":[...closing events appended by repair],"cut":...}`,
/// `cut` being `null` or the torn tail the open cut,
/// `{"at","length","why","copy"}`: where it began (a byte offset of a JSONL
/// log, the seq of a SQLite row), how many bytes or rows, why
/// (`partial-line`, `incomplete-frame`, `zero-filled`, `undecodable-rows`)
/// and the quarantine file beside the log holding a copy of what was cut,
/// written before the cut. Damage is never cut: it is `DSH_E_CORRUPT` and
/// the log stays as it is (`dsh_store_repair` salvages it when asked).
///
/// Returns `DSH_OK`, `DSH_E_NOT_FOUND`, `DSH_E_CONFLICT` (already open),
/// `DSH_E_CORRUPT`, `DSH_E_SCHEMA_MISMATCH`, `DSH_E_IO`,
/// `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// Pointers are NULL or valid; `session_id` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_open(
    store: *mut dsh_store,
    session_id: *const c_char,
    session: *mut *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        hand_out(session, out, || {
            let (s, id) = store_and_id(store, session_id)?;
            opened_out(s.open_session(id)?)
        })
    }
}

/// The handle and `out` of an open:
/// `{"header":…,"repaired":[…],"cut":{…}|null}`.
pub(super) fn opened_out(
    opened: ::dsh_session::store::Opened,
) -> Result<(std::sync::Arc<::dsh_session::store::LiveSession>, String)> {
    let live = opened.session;
    let header = live.header()?.to_json();
    let repaired = events_json(opened.repaired.iter().map(|e| &**e));
    let cut = crate::render::cut(opened.cut.as_ref());
    Ok((
        live,
        format!("{{\"header\":{header},\"repaired\":{repaired},\"cut\":{cut}}}"),
    ))
}

/// Fork `source` into a new session of the same store.
///
/// `boundary` is the seq of the last source event the child keeps
/// (inclusive); `-1` means the source's last event (an empty source then
/// gives an empty seed). `options_json` (may be NULL) may name the child
/// `id` and may carry `boundary` as any JSON value, which is then used
/// instead of the integer argument (which must be `-1`). The child gets the
/// inherited events plus `session/end-seed`, and `out` its header.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT` (`fork.boundary-invalid`,
/// `fork.out-of-range`), `DSH_E_REJECTED` (`fork.open-turn`, seed rules),
/// `DSH_E_CONFLICT` (`fork.child-exists`), `DSH_E_CLOSED`, `DSH_E_IO`.
///
/// # Safety
/// Pointers are NULL or valid; strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_fork(
    source: *mut dsh_session,
    boundary: i64,
    options_json: *const c_char,
    child: *mut *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        hand_out(child, out, || {
            let s = handles::session(source)?;
            let options = opt_str(options_json, "options_json")?;
            let live = s.fork(options::fork_options(options, boundary)?)?;
            let header = live.header()?.to_json();
            Ok((live, header))
        })
    }
}

/// Drain the session's pending writes, then release the handle (also when
/// the drain fails; the status reports it). NULL-safe (returns
/// `DSH_E_INVALID_ARGUMENT`); a second close returns `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a pointer returned by this library.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_close(
    session: *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let live = handles::release_session(session)?;
        live.close()?;
        Ok("{\"ok\":true}".to_string())
    })
}

/// The `(type, data_json, intent_json)` arguments of append and validate.
///
/// # Safety
/// Each pointer is NULL or a NUL-terminated string valid for the call.
unsafe fn event_args<'a>(
    type_: *const c_char,
    data_json: *const c_char,
    intent_json: *const c_char,
) -> Result<(&'a str, DataText<'a>, Option<&'a str>)> {
    // SAFETY: forwarded caller contract.
    unsafe {
        Ok((
            arg_str(type_, "type")?,
            json_arg(data_json, "data_json")?,
            opt_str(intent_json, "intent_json")?,
        ))
    }
}

/// Append one event: `type` is the event type, `data_json` its data,
/// `intent_json` (may be NULL) the surface intent
/// `{"surfaceOp": "append" | {"op":"replace","start":S,"end":E}, "sourceEventSeqs": [...]}`.
/// The session assigns `seq` and `time`; `out` = the committed event.
/// Never waits for disk.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_JSON` (`json.*`), `DSH_E_REJECTED`
/// (`surface.*`, `header.legacy*`), `DSH_E_CONFLICT` (`append.reentrant`),
/// `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`, `DSH_E_IO`.
///
/// # Safety
/// Pointers are NULL or valid; strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_append(
    session: *mut dsh_session,
    type_: *const c_char,
    data_json: *const c_char,
    intent_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let s = handles::session(session)?;
        // SAFETY: forwarded caller contract.
        let (ty, data, intent) = unsafe { event_args(type_, data_json, intent_json)? };
        Ok(out_text(s.append_text(ty, data, intent)?.text()))
    })
}

/// Append `[{"type":...,"data":...,"intent":{...}}, ...]` all or nothing:
/// each item is checked against the state after the ones before it; on the
/// first failure nothing is committed and the error carries `index`.
/// `out` = the array of committed events.
///
/// Returns as `dsh_session_append`.
///
/// # Safety
/// Pointers are NULL or valid; strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_append_batch(
    session: *mut dsh_session,
    batch_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let s = handles::session(session)?;
        // SAFETY: forwarded caller contract.
        let batch = unsafe { json_arg(batch_json, "batch_json")? };
        let events = s.append_batch_text(batch)?;
        Ok(events_json(events.iter().map(|e| &**e)))
    })
}

/// The checks of `dsh_session_append` without committing anything. `out` =
/// the event `append` would commit now (its `time` is the time of the check).
///
/// Returns as `dsh_session_append`.
///
/// # Safety
/// Pointers are NULL or valid; strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_validate(
    session: *mut dsh_session,
    type_: *const c_char,
    data_json: *const c_char,
    intent_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let s = handles::session(session)?;
        // SAFETY: forwarded caller contract.
        let (ty, data, intent) = unsafe { event_args(type_, data_json, intent_json)? };
        Ok(out_text(s.validate_text(ty, data, intent)?.text()))
    })
}

/// Return once every event appended so far is durable (the persistence
/// barrier); a memory store returns at once. `out` = `{"ok":true}`.
///
/// Returns `DSH_OK`, `DSH_E_IO`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_flush(
    session: *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        handles::session(session)?.flush()?;
        Ok("{\"ok\":true}".to_string())
    })
}

/// `{"id","header","length","firstLiveSeq","replaceGeneration","openTurn",
/// "admission","eventTypes"}` (`openTurn` is the open turn number or null;
/// `admission` is `"strict"` or `"reference"`; `eventTypes` the store's
/// declared host types).
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_info(
    session: *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let i = handles::session(session)?.info()?;
        let types = i.event_types.iter().map(|t| Value::str(t)).collect();
        Ok(format!(
            "{{\"id\":{},\"header\":{},\"length\":{},\"firstLiveSeq\":{},\"replaceGeneration\":{},\"openTurn\":{},\"admission\":\"{}\",\"eventTypes\":{}}}",
            Value::str(&i.id).to_json(),
            i.header.to_json(),
            i.length,
            i.first_live_seq,
            i.replace_generation,
            i.open_turn.map_or_else(|| "null".to_string(), |t| t.to_json()),
            i.admission.as_str(),
            Value::Array(types).to_json(),
        ))
    })
}

/// The events with `from_seq <= seq < to_seq` as a JSON array (`to_seq` is
/// clamped to the length; `UINT64_MAX` means all).
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_events(
    session: *mut dsh_session,
    from_seq: u64,
    to_seq: u64,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let events = handles::session(session)?.events(from_seq, to_seq)?;
        Ok(events_json(events.iter().map(|e| &**e)))
    })
}

/// The live surface: `{"nodes":[seq,...],"replaceGeneration":n}`.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_surface(
    session: *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let (nodes, generation) = handles::session(session)?.surface()?;
        let mut text = String::from("{\"nodes\":");
        write_seqs(&mut text, &nodes);
        text.push_str(&format!(",\"replaceGeneration\":{generation}}}"));
        Ok(text)
    })
}

/// The derived message list (docs/events.md §9): the messages of the surface nodes
/// in surface order. Cached: O(new events) per call while no replace happened.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_derive(
    session: *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || handles::session(session)?.derive_json())
}

/// The derived messages added since a cursor the caller holds, so a host's
/// per-step cost does not grow with history.
///
/// Pass `generation = 0, count = 0` the first time; then pass back the
/// `generation` and `count` of the previous answer. `out` =
/// `{"generation":g,"count":n,"reset":bool,"messages":[...]}`: while no
/// replace happened, `messages` holds only the messages appended since the
/// cursor and `reset` is false; after a replace (or with a cursor this
/// session never gave out) `reset` is true and `messages` is the whole list,
/// which replaces what the host held. O(new messages) per call.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_derive_since(
    session: *mut dsh_session,
    generation: u64,
    count: u64,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let d = handles::session(session)?.derive_since_json(generation, count)?;
        Ok(format!(
            "{{\"generation\":{},\"count\":{},\"reset\":{},\"messages\":{}}}",
            d.generation, d.count, d.reset, d.messages
        ))
    })
}

/// The folded request header in canonical form, or `null`.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_request_header(
    session: *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let header = handles::session(session)?.request_header()?;
        Ok(header.map_or_else(|| "null".to_string(), |v| v.to_json()))
    })
}

/// The data of the latest `request/context` event, or `null`.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_ARGUMENT`, `DSH_E_CLOSED`.
///
/// # Safety
/// `session` is NULL or a handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_session_request_context(
    session: *mut dsh_session,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        let context = handles::session(session)?.request_context()?;
        Ok(context.map_or_else(|| "null".to_string(), |v| v.to_json()))
    })
}
