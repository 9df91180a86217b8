//! Seed admission (errors.md §3.2) and session header validation (§4.5).

use super::event::{
    Checked, Event, ASSISTANT_MESSAGE, REQUEST_HEADER, REQUEST_HEADER_DELTA, TOOL_RESULT,
    USER_MESSAGE,
};
use crate::error::{Error, Result, Status};
use crate::json::{Object, Value};

/// How a seed is checked (lifecycle.md §3).
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
        "json.not-lossless",
        format!("seed event at index {index} is not losslessly JSON-serializable"),
    )
    .at_index(index)
}

fn legacy_delta(index: usize) -> Error {
    Error::rejected(
        "header.legacy",
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
            // A tree for the check only (not kept on the event).
            check_request_header(&event.parse_data(), index)?;
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
            "header.legacy-fallback",
            format!("seed event at index {index} uses the unsupported legacy request/header reason \"fallback\""),
        )
        .at_index(index));
    }
    if event.seq != index as u64 {
        return Err(Error::rejected(
            "seq.seed-not-contiguous",
            format!(
                "seed event at index {index} has seq {} but {index} was expected; seeds must start at 0 without gaps",
                event.seq
            ),
        )
        .at_index(index));
    }
    Ok(())
}

/// The `msg.*` rules for one event of a stored log (`adoptSessionEvent`);
/// other types pass. `subject` names the event in messages. A message that
/// passes is checked on its canonical text alone; only a failing one is
/// parsed, for the precise rule.
pub fn check_event_message(event: &Event, subject: &dyn Fn() -> String) -> Result<()> {
    let kind = if event.ty == USER_MESSAGE {
        MessageKind::User
    } else if event.ty == ASSISTANT_MESSAGE {
        MessageKind::Assistant
    } else if event.ty == TOOL_RESULT {
        MessageKind::ToolResult
    } else {
        return Ok(());
    };
    if message_text_ok(event.data_text(), kind) {
        return Ok(());
    }
    let data = event.parse_data();
    let message = match kind {
        MessageKind::User => Some(&data),
        _ => message_of(&data),
    };
    check_message(message, kind, subject)
}

/// Whether [`check_message`] passes, decided on canonical text (`None`
/// means it may not: the caller runs the tree check).
fn message_text_ok(data: &str, kind: MessageKind) -> bool {
    message_text_check(data, kind).unwrap_or(false)
}

fn message_text_check(data: &str, kind: MessageKind) -> Option<bool> {
    use crate::json::canon::{is_nonempty_string, member, members};
    let m = match kind {
        MessageKind::User => data,
        _ => member(data, "message")?,
    };
    let role_want = if kind == MessageKind::Assistant {
        "\"assistant\""
    } else {
        "\"user\""
    };
    // One pass over the message's members (canonical: no duplicates).
    let (mut id, mut role, mut source, mut content) = (None, None, None, None);
    for (k, v) in members(m)? {
        match k {
            "id" => id = Some(v),
            "role" => role = Some(v),
            "source" => source = Some(v),
            "content" => content = Some(v),
            _ => {}
        }
    }
    let (source, content) = (source?, content?);
    let (mut source_kind, mut provider, mut model, mut call_id) = (None, None, None, None);
    for (k, v) in members(source)? {
        match k {
            "kind" => source_kind = Some(v),
            "provider" => provider = Some(v),
            "model" => model = Some(v),
            "callId" => call_id = Some(v),
            _ => {}
        }
    }
    let source_kind = source_kind?;
    let ok = is_nonempty_string(id?)
        && role? == role_want
        && is_nonempty_string(source_kind)
        && content.starts_with('[');
    if !ok {
        return Some(false);
    }
    Some(match kind {
        MessageKind::User => true,
        MessageKind::Assistant => {
            source_kind == "\"model\""
                && is_nonempty_string(provider?)
                && is_nonempty_string(model?)
        }
        MessageKind::ToolResult => {
            let call_id = call_id?;
            if source_kind != "\"tool\"" || !is_nonempty_string(call_id) {
                return Some(false);
            }
            // `content` must be `[{...}]`: the block's members are read
            // straight from after the `[`, and the block must end right
            // before the closing `]` (one pass over the block).
            let Some(inner_text) = content.strip_prefix("[{").map(|_| &content[1..]) else {
                return Some(false);
            };
            let (mut ty, mut inner, mut tool_call_id) = (None, None, None);
            let mut last_end = 0;
            let base = inner_text.as_ptr() as usize;
            for (k, v) in members(inner_text)? {
                last_end = v.as_ptr() as usize - base + v.len();
                match k {
                    "type" => ty = Some(v),
                    "content" => inner = Some(v),
                    "toolCallId" => tool_call_id = Some(v),
                    _ => {}
                }
            }
            if inner_text.get(last_end..) != Some("}]") {
                return Some(false);
            }
            ty? == "\"tool-result\"" && inner?.starts_with('[') && tool_call_id? == call_id
        }
    })
}

fn message_of(data: &Value) -> Option<&Value> {
    data.as_object()?.get("message")
}

fn non_empty_str(v: Option<&Value>) -> bool {
    v.and_then(Value::as_js_str).is_some_and(|s| !s.is_empty())
}

/// Which message event a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// `user/message` (the data is the message).
    User,
    /// `assistant/message`.
    Assistant,
    /// `tool/result`.
    ToolResult,
}

/// The `msg.*` rules (errors.md §4.3) on the message of one event, in the
/// reference's order. `subject` names the event in messages.
pub fn check_message(
    message: Option<&Value>,
    kind: MessageKind,
    subject: &dyn Fn() -> String,
) -> Result<()> {
    let role = if kind == MessageKind::Assistant {
        "assistant"
    } else {
        "user"
    };
    let fail = |rule: &'static str, what: &str| {
        Err(Error::rejected(rule, format!("{} {what}", subject())))
    };
    let Some(m) = message.and_then(Value::as_object) else {
        return fail("msg.unidentified", "has no identified message");
    };
    if !non_empty_str(m.get("id")) {
        return fail("msg.unidentified", "has no identified message");
    }
    if m.get("role").and_then(Value::as_str) != Some(role) {
        return fail("msg.role", &format!("message role must be \"{role}\""));
    }
    let source = m.get("source").and_then(Value::as_object);
    let Some(source) = source.filter(|s| non_empty_str(s.get("kind"))) else {
        return fail("msg.source", "message source is invalid");
    };
    let Some(content) = m.get("content").and_then(Value::as_array) else {
        return fail("msg.content", "message content is invalid");
    };
    if kind == MessageKind::Assistant {
        let model = source.get("kind").and_then(Value::as_str) == Some("model")
            && non_empty_str(source.get("provider"))
            && non_empty_str(source.get("model"));
        if !model {
            return fail("msg.model-source", "message needs a model source");
        }
    } else if kind == MessageKind::ToolResult {
        let call_id = source.get("callId").and_then(Value::as_js_str);
        let tool = source.get("kind").and_then(Value::as_str) == Some("tool")
            && call_id.is_some_and(|c| !c.is_empty());
        if !tool {
            return fail("msg.tool-source", "message needs a tool source");
        }
        let block = match content.as_slice() {
            [Value::Object(b)] => Some(b),
            _ => None,
        };
        let Some(block) = block.filter(|b| {
            b.get("type").and_then(Value::as_str) == Some("tool-result")
                && b.get("content").is_some_and(|c| c.as_array().is_some())
        }) else {
            return fail(
                "msg.tool-result-block",
                "message must hold exactly one tool-result block",
            );
        };
        if block.get("toolCallId").and_then(Value::as_js_str) != call_id {
            return fail(
                "msg.tool-call-id-mismatch",
                "message tool call ids disagree",
            );
        }
    }
    Ok(())
}

/// `assertCurrentLlmShape` for a seeded `request/header`.
fn check_request_header(data: &Value, index: usize) -> Result<()> {
    let fail = |rule: &'static str, what: &str| {
        Err(
            Error::rejected(rule, format!("seed request/header at index {index} {what}"))
                .at_index(index),
        )
    };
    let header = data
        .as_object()
        .and_then(|d| d.get("header"))
        .and_then(Value::as_object);
    let config = header
        .and_then(|h| h.get("config"))
        .and_then(Value::as_object);
    let (Some(header), Some(config)) = (header, config) else {
        return fail("seed.header-provider-model", "lacks provider/model");
    };
    if !non_empty_str(config.get("provider")) || !non_empty_str(config.get("model")) {
        return fail("seed.header-provider-model", "lacks provider/model");
    }
    if let Some(effort) = config.get("reasoningEffort") {
        if !non_empty_str(Some(effort)) {
            return fail(
                "seed.header-reasoning-effort",
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
                "seed.header-adapter-defaults",
                "has invalid adapterDefaults",
            );
        }
    }
    Ok(())
}

fn header_error(rule: &'static str, message: impl Into<String>) -> Error {
    Error::rejected(rule, message)
}

/// `validateSessionHeader` (errors.md §4.5) for a header about to be used
/// for session `id`.
pub fn validate_header(header: &Value, id: &str) -> Result<()> {
    if !header.is_lossless() {
        return Err(Error::new(
            Status::InvalidJson,
            "header.not-lossless",
            "session header cannot be losslessly serialized",
        ));
    }
    let Some(h) = header.as_object() else {
        return Err(header_error(
            "header.not-record",
            "session header is not a plain JSON record",
        ));
    };
    if h.get("version").and_then(Value::as_f64) != Some(FORMAT_VERSION as f64) {
        return Err(header_error(
            "header.version",
            format!("header version must be {FORMAT_VERSION}"),
        ));
    }
    if h.get("id").and_then(Value::as_str) != Some(id) {
        return Err(header_error(
            "header.id-mismatch",
            format!("header id does not match session id \"{id}\""),
        ));
    }
    if h.get("createdAt").and_then(Value::as_safe_u64).is_none() {
        return Err(header_error(
            "header.created-at",
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
                "header.cwd-type",
                "header cwd must be a string",
            ));
        };
        if !cwd.as_wtf8().starts_with(b"/") {
            return Err(header_error(
                "header.cwd-not-absolute",
                format!(
                    "header cwd must be absolute, got \"{}\"",
                    cwd.to_string_lossy()
                ),
            ));
        }
    }
    let string_field = |key: &str, rule: &'static str| -> Result<()> {
        match h.get(key) {
            Some(v) if v.as_js_str().is_none() => {
                Err(header_error(rule, format!("header {key} must be a string")))
            }
            _ => Ok(()),
        }
    };
    string_field("parentSession", "header.parent-session")?;
    let count_field = |key: &str, rule: &'static str| -> Result<()> {
        match h.get(key) {
            Some(v) if v.as_safe_u64().is_none() => Err(header_error(
                rule,
                format!("header {key} must be a non-negative safe integer"),
            )),
            _ => Ok(()),
        }
    };
    count_field("seedLength", "header.seed-length")?;
    if let Some(origin) = h.get("origin") {
        if origin.as_str() != Some("subagent") {
            return Err(header_error(
                "header.origin",
                "header origin must be \"subagent\"",
            ));
        }
    }
    count_field("delegationDepth", "header.delegation-depth")?;
    string_field("agentPreset", "header.agent-preset")?;
    Ok(())
}
