//! Pure functions over explicit logs (no handle).

use std::ffi::c_char;

use super::{arg_str, dsh_buf, dsh_status, guard};
use crate::render;
use ::dsh_session::engine::derive::{derive_log, value_message};
use ::dsh_session::engine::event::typed_log;
use ::dsh_session::engine::repair;
use ::dsh_session::engine::surface::{self, Markers};
use ::dsh_session::error::{Error, Result};
use ::dsh_session::json::{self, Value};
use ::dsh_session::Rule;

fn parse_log(text: &str) -> Result<Vec<Value>> {
    json::parse(text)
        .map_err(|e| {
            Error::invalid_json(
                Rule::JsonParse,
                format!("events_json is not valid JSON: {e}"),
            )
        })?
        .into_array()
        .map_err(|_| {
            Error::invalid_argument(
                Rule::ArgNotArray,
                "events_json must be a JSON array of events",
            )
        })
}

/// The pure full fold of a complete log (docs/events.md §6.4):
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
        Ok(render::fold(&surface::fold(
            &parse_log(text)?,
            Markers::Required,
        )?))
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
        let mut out = String::from("[");
        for (i, m) in derive_log(&log)?.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            m.write_json(&mut out);
        }
        out.push(']');
        Ok(out)
    })
}

/// The closing events crash repair would append to a complete log
/// (docs/lifecycle.md §6), as a JSON array (empty when the log ends balanced).
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
        Ok(render::events_json(&repair::closers(&log)))
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
            Error::invalid_json(
                Rule::JsonParse,
                format!("event_json is not valid JSON: {e}"),
            )
        })?;
        Ok(value_message(&v).map_or_else(|| "null".to_string(), Value::to_json))
    })
}
