//! Seed admission (docs/errors.md §3.2) and session header validation (§4.5).

use super::event::{Checked, Event, REQUEST_HEADER, REQUEST_HEADER_DELTA};
use crate::error::{Error, Result, Status};
use crate::json::{Object, Value};
use crate::rule::Rule;

mod message;

use message::non_empty_str;
pub use message::{check_event_message, check_message, check_value_message, MessageKind};

/// How a seed is checked (docs/lifecycle.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedMode {
    /// `Session.create`, fork, replay: every event is lossless-checked.
    Snapshot,
    /// Values read back from storage: no lossless walk.
    Restore,
}

/// `SESSION_FORMAT_VERSION`.
pub const FORMAT_VERSION: u64 = 0;

fn not_lossless(index: usize) -> Error {
    Error::invalid_json(
        Rule::JsonNotLossless,
        format!("seed event at index {index} is not losslessly JSON-serializable"),
    )
    .at_index(index)
}

fn legacy_delta(index: usize) -> Error {
    Error::rejected(
        Rule::HeaderLegacy,
        format!(
            "seed event at index {index} uses the unsupported legacy request/header-delta format"
        ),
    )
    .at_index(index)
}

/// Admit element `index` of a seed given as JSON: lossless walk (snapshot
/// mode), `header.legacy`, envelope, then the per-type shape, fallback and contiguity checks.
pub fn admit_value(value: Value, index: usize, mode: SeedMode) -> Result<Event> {
    if mode == SeedMode::Snapshot && !value.is_lossless() {
        return Err(not_lossless(index));
    }
    let is_delta = value
        .as_object()
        .and_then(|o| o.get("type"))
        .is_some_and(|t| t.as_str() == Some(REQUEST_HEADER_DELTA));
    if is_delta {
        return Err(legacy_delta(index));
    }
    // The subject names the index only when there is an error to report.
    let event = Event::from_envelope(value, "seed event").map_err(|mut e| {
        e.message = format!(
            "seed event at index {index}{}",
            &e.message["seed event".len()..]
        );
        e.at_index(index)
    })?;
    check_admitted(&event, index, true)?;
    if mode == SeedMode::Snapshot {
        event.mark_checked(Checked::LOSSLESS);
    }
    Ok(event)
}

/// Admit an event that already passed the envelope (a fork's inherited
/// prefix): lossless walk of its values (snapshot mode), `header.legacy`,
/// then the per-type shape, fallback and contiguity checks.
pub fn admit_event(event: &Event, index: usize, mode: SeedMode) -> Result<()> {
    if mode == SeedMode::Snapshot && !event.is_checked(Checked::LOSSLESS) {
        // An event's text is canonical JSON, so only values it was built
        // from that JSON could not keep (marked lossy) fail here.
        if event.is_checked(Checked::LOSSY) {
            return Err(not_lossless(index));
        }
        event.mark_checked(Checked::LOSSLESS);
    }
    if event.ty == REQUEST_HEADER_DELTA {
        return Err(legacy_delta(index));
    }
    // A restored log had its messages checked when it was adopted.
    check_admitted(event, index, mode == SeedMode::Snapshot)
}

/// Per-type shape, `header.legacy-fallback` and contiguity of seed event `index`.
fn check_admitted(event: &Event, index: usize, messages: bool) -> Result<()> {
    let subject = || format!("seed {} at index {index}", event.ty.to_string_lossy());
    // A shared event (a fork's prefix) that passed these checks once passes
    // them again: they depend on the event alone.
    if !event.is_checked(Checked::SHAPE) {
        if event.ty == REQUEST_HEADER {
            check_event_header(event, &subject).map_err(|e| e.at_index(index))?;
        } else if messages {
            check_event_message(event, &subject).map_err(|e| e.at_index(index))?;
        }
        // (Without `messages` the caller checked them: a restored log.)
        event.mark_checked(Checked::SHAPE);
    }
    let fallback =
        event.ty == REQUEST_HEADER && super::event::has_fallback_reason(event.data_text());
    if fallback {
        return Err(Error::rejected(
            Rule::HeaderLegacyFallback,
            format!("seed event at index {index} uses the unsupported legacy request/header reason \"fallback\""),
        )
        .at_index(index));
    }
    if event.seq != index as u64 {
        return Err(Error::rejected(
            Rule::SeqSeedNotContiguous,
            format!(
                "seed event at index {index} has seq {} but {index} was expected; seeds must start at 0 without gaps",
                event.seq
            ),
        )
        .at_index(index));
    }
    Ok(())
}

/// Whether [`check_request_header`] passes, decided on canonical text
/// (`false` means it may not: the caller runs the tree check).
fn request_header_text_ok(data: &str) -> bool {
    request_header_text_check(data).unwrap_or(false)
}

fn request_header_text_check(data: &str) -> Option<bool> {
    use crate::json::canon::{is_nonempty_string, skip_value, walk_members};
    // One pass over the data; only the small `config` and
    // `adapterDefaults` objects are read again.
    let (mut config, mut defaults) = (None, None);
    walk_members(data, 0, |k, v| {
        if k != "header" {
            return skip_value(data, v);
        }
        walk_members(data, v, |hk, hv| {
            let end = skip_value(data, hv)?;
            match hk {
                "config" => config = data.get(hv..end),
                "adapterDefaults" => defaults = data.get(hv..end),
                _ => {}
            }
            Some(end)
        })
    })?;
    let config = config?;
    let (mut provider, mut model, mut effort, mut max_tokens) = (None, None, None, false);
    walk_members(config, 0, |k, v| {
        let end = skip_value(config, v)?;
        match k {
            "provider" => provider = config.get(v..end),
            "model" => model = config.get(v..end),
            "reasoningEffort" => effort = config.get(v..end),
            "maxTokens" => max_tokens = true,
            _ => {}
        }
        Some(end)
    })?;
    if !is_nonempty_string(provider?)
        || !is_nonempty_string(model?)
        || effort.is_some_and(|e| !is_nonempty_string(e))
    {
        return Some(false);
    }
    if let Some(defaults) = defaults {
        let mut ok = true;
        walk_members(defaults, 0, |k, v| {
            let end = skip_value(defaults, v)?;
            let known = match k {
                "reasoningEffort" => effort.is_some(),
                "maxTokens" => max_tokens,
                _ => false,
            };
            ok &= known && defaults.get(v..end) == Some("true");
            Some(end)
        })?;
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

/// The seed header rules of a `request/header` event (other types pass):
/// decided on the text when it passes; otherwise a tree for the check
/// only (not kept on the event), for the precise rule. `subject` names
/// the event in messages.
pub fn check_event_header(event: &Event, subject: &dyn Fn() -> String) -> Result<()> {
    if event.ty != REQUEST_HEADER || request_header_text_ok(event.data_text()) {
        return Ok(());
    }
    check_request_header(&event.parse_data(), subject)
}

/// `assertCurrentLlmShape` for a seeded `request/header`.
fn check_request_header(data: &Value, subject: &dyn Fn() -> String) -> Result<()> {
    let fail = |rule: Rule, what: &str| Err(Error::rejected(rule, format!("{} {what}", subject())));
    let header = data
        .as_object()
        .and_then(|d| d.get("header"))
        .and_then(Value::as_object);
    let config = header
        .and_then(|h| h.get("config"))
        .and_then(Value::as_object);
    let (Some(header), Some(config)) = (header, config) else {
        return fail(Rule::SeedHeaderProviderModel, "lacks provider/model");
    };
    if !non_empty_str(config.get("provider")) || !non_empty_str(config.get("model")) {
        return fail(Rule::SeedHeaderProviderModel, "lacks provider/model");
    }
    if let Some(effort) = config.get("reasoningEffort") {
        if !non_empty_str(Some(effort)) {
            return fail(
                Rule::SeedHeaderReasoningEffort,
                "has an invalid reasoningEffort",
            );
        }
    }
    if let Some(ad) = header.get("adapterDefaults") {
        let ok = ad.as_object().is_some_and(|o| {
            o.iter().all(|(k, v)| {
                let known = k == "reasoningEffort" || k == "maxTokens";
                known
                    && *v == Value::Bool(true)
                    && k.as_str().is_some_and(|k| config.contains_key(k))
            })
        });
        if !ok {
            return fail(
                Rule::SeedHeaderAdapterDefaults,
                "has invalid adapterDefaults",
            );
        }
    }
    Ok(())
}

fn header_error(rule: Rule, message: impl Into<String>) -> Error {
    Error::rejected(rule, message)
}

/// `validateSessionHeader` (docs/errors.md §4.5) for a header about to be used
/// for session `id`.
pub fn validate_header(header: &Value, id: &str) -> Result<()> {
    if !header.is_lossless() {
        return Err(Error::new(
            Status::InvalidJson,
            Rule::HeaderNotLossless,
            "session header cannot be losslessly serialized",
        ));
    }
    let Some(h) = header.as_object() else {
        return Err(header_error(
            Rule::HeaderNotRecord,
            "session header is not a plain JSON record",
        ));
    };
    if h.get("version").and_then(Value::as_f64) != Some(FORMAT_VERSION as f64) {
        return Err(header_error(
            Rule::HeaderVersion,
            format!("header version must be {FORMAT_VERSION}"),
        ));
    }
    if h.get("id").and_then(Value::as_str) != Some(id) {
        return Err(header_error(
            Rule::HeaderIdMismatch,
            format!("header id does not match session id \"{id}\""),
        ));
    }
    if h.get("createdAt").and_then(Value::as_safe_u64).is_none() {
        return Err(header_error(
            Rule::HeaderCreatedAt,
            "header createdAt must be a non-negative safe integer",
        ));
    }
    check_optional_header_fields(h)
}

/// The optional header fields (shared by session creation options).
pub fn check_optional_header_fields(h: &Object) -> Result<()> {
    if let Some(cwd) = h.get("cwd") {
        let Some(cwd) = cwd.as_js_str() else {
            return Err(header_error(
                Rule::HeaderCwdType,
                "header cwd must be a string",
            ));
        };
        if !super::cwd::is_absolute(cwd) {
            return Err(header_error(
                Rule::HeaderCwdNotAbsolute,
                format!(
                    "header cwd must be absolute, got \"{}\"",
                    cwd.to_string_lossy()
                ),
            ));
        }
    }
    let string_field = |key: &str, rule: Rule| -> Result<()> {
        match h.get(key) {
            Some(v) if v.as_js_str().is_none() => {
                Err(header_error(rule, format!("header {key} must be a string")))
            }
            _ => Ok(()),
        }
    };
    string_field("parentSession", Rule::HeaderParentSession)?;
    let count_field = |key: &str, rule: Rule| -> Result<()> {
        match h.get(key) {
            Some(v) if v.as_safe_u64().is_none() => Err(header_error(
                rule,
                format!("header {key} must be a non-negative safe integer"),
            )),
            _ => Ok(()),
        }
    };
    count_field("seedLength", Rule::HeaderSeedLength)?;
    if let Some(origin) = h.get("origin") {
        if origin.as_str() != Some("subagent") {
            return Err(header_error(
                Rule::HeaderOrigin,
                "header origin must be \"subagent\"",
            ));
        }
    }
    count_field("delegationDepth", Rule::HeaderDelegationDepth)?;
    string_field("agentPreset", Rule::HeaderAgentPreset)?;
    Ok(())
}

#[cfg(test)]
mod tests;
