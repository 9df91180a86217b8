//! Pure functions over explicit logs (no handle).

use std::ffi::c_char;

use super::{arg_str, dsh_buf, dsh_status, guard};
use crate::engine::derive::event_message;
use crate::engine::event::events_to_json;
use crate::engine::surface::{self, Markers};
use crate::engine::{repair, Event};
use crate::error::{Error, Result};
use crate::json::{self, Value};

fn parse_log(text: &str) -> Result<Vec<Value>> {
    json::parse(text)
        .map_err(|e| {
            Error::invalid_json("json.parse", format!("events_json is not valid JSON: {e}"))
        })?
        .into_array()
        .map_err(|_| {
            Error::invalid_argument(
                "arg.not-array",
                "events_json must be a JSON array of events",
            )
        })
}

/// Envelope-check a log for the folds that need typed events.
fn typed_log(values: Vec<Value>) -> Result<Vec<Event>> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let e = Event::from_envelope(v, &format!("event at index {i}"))
                .map_err(|e| e.at_index(i))?;
            if e.seq != i as u64 {
                return Err(Error::rejected(
                    "seq.gap",
                    format!(
                        "session event seq {} is not contiguous; expected {i}",
                        e.seq
                    ),
                )
                .at_index(i));
            }
            Ok(e)
        })
        .collect()
}

/// The pure full fold of a complete log (surface.md §7):
/// `{"nodes":[...],"replacements":[{"seq","start","end","shadowedSeqs"}]}`.
/// Only the surface rules and `seq.gap` are checked; the error carries the
/// failing event's `index`.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_JSON`, `DSH_E_REJECTED`, `DSH_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `events_json` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_fold_surface(
    events_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        // SAFETY: forwarded caller contract.
        let text = unsafe { arg_str(events_json, "events_json")? };
        Ok(surface::fold(&parse_log(text)?, Markers::Required)?.to_json())
    })
}

/// The derived message list of a complete log: its surface fold, projected.
///
/// Returns as `dsh_fold_surface`.
///
/// # Safety
/// `events_json` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_derive_messages(
    events_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        // SAFETY: forwarded caller contract.
        let text = unsafe { arg_str(events_json, "events_json")? };
        let log = parse_log(text)?;
        let fold = surface::fold(&log, Markers::Required)?;
        let mut messages = Vec::new();
        for &seq in fold.surface.nodes() {
            let c = surface::candidate_of(&log[seq as usize]);
            if let (Some(ty), Some(data)) = (c.ty, c.data) {
                if let Some(m) = event_message(ty, data) {
                    messages.push(m.clone());
                }
            }
        }
        Ok(Value::Array(messages).to_json())
    })
}

/// The closing events crash repair would append to a complete log
/// (lifecycle.md §6), as a JSON array (empty when the log ends balanced).
///
/// Returns `DSH_OK`, `DSH_E_INVALID_JSON`, `DSH_E_REJECTED` (envelope or
/// `seq.gap`), `DSH_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `events_json` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_repair_events(
    events_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        // SAFETY: forwarded caller contract.
        let text = unsafe { arg_str(events_json, "events_json")? };
        let log = typed_log(parse_log(text)?)?;
        Ok(events_to_json(&repair::closers(&log)))
    })
}

/// The message one event contributes to the derived history
/// (`deriveEventMessage`), or `null`.
///
/// Returns `DSH_OK`, `DSH_E_INVALID_JSON`, `DSH_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `event_json` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dsh_derive_event_message(
    event_json: *const c_char,
    out: *mut dsh_buf,
) -> dsh_status {
    guard(out, || {
        // SAFETY: forwarded caller contract.
        let text = unsafe { arg_str(event_json, "event_json")? };
        let v = json::parse(text).map_err(|e| {
            Error::invalid_json("json.parse", format!("event_json is not valid JSON: {e}"))
        })?;
        let c = surface::candidate_of(&v);
        let message = match (c.ty, c.data) {
            (Some(ty), Some(data)) => event_message(ty, data),
            _ => None,
        };
        Ok(message.map_or_else(|| "null".to_string(), Value::to_json))
    })
}
