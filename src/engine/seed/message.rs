//! The `msg.*` rules (docs/errors.md §4.3) on the message of a
//! `user/message`, `assistant/message` or `tool/result` event: decided on
//! the canonical text in one pass when it passes, on a tree for the
//! precise rule when it may not.

use crate::engine::event::{Event, ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE};
use crate::error::{Error, Result};
use crate::json::Value;
use crate::rule::Rule;

/// The `msg.*` rules for one event of a stored log (`adoptSessionEvent`);
/// other types pass. `subject` names the event in messages. A message that
/// passes is checked on its canonical text alone; only a failing one is
/// parsed, for the precise rule.
pub fn check_event_message(event: &Event, subject: &dyn Fn() -> String) -> Result<()> {
    let Some(kind) = event.ty.as_str().and_then(message_kind) else {
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

/// [`check_event_message`] of a stored event that is still a value, before
/// its envelope is checked (the reference adopts events before it checks
/// their vocabulary and their envelopes): events that are not message
/// events, or whose `type` is not a string, pass.
pub fn check_value_message(v: &Value, subject: &dyn Fn() -> String) -> Result<()> {
    let o = v.as_object();
    let ty = o.and_then(|o| o.get("type")).and_then(Value::as_str);
    let Some(kind) = ty.and_then(message_kind) else {
        return Ok(());
    };
    let data = o.and_then(|o| o.get("data"));
    let message = match kind {
        MessageKind::User => data,
        _ => data.and_then(message_of),
    };
    check_message(message, kind, subject)
}

/// Whether [`check_message`] passes, decided on canonical text (`None`
/// means it may not: the caller runs the tree check).
pub(super) fn message_text_ok(data: &str, kind: MessageKind) -> bool {
    message_text_check(data, kind).unwrap_or(false)
}

/// [`message_text_ok`], with `None` where the text cannot decide.
pub(super) fn message_text_check(data: &str, kind: MessageKind) -> Option<bool> {
    use crate::json::canon::{skip_value, walk_members};
    // One pass over the data: the message is walked into, not skipped and
    // then read again, so its long texts are skimmed once.
    let mut m = MessageText::default();
    if kind == MessageKind::User {
        walk_message(data, 0, kind, &mut m)?;
    } else {
        let mut seen = false;
        walk_members(data, 0, |k, v| {
            if k == "message" {
                seen = true;
                walk_message(data, v, kind, &mut m)
            } else {
                skip_value(data, v)
            }
        })?;
        if !seen {
            return None;
        }
    }
    m.verdict(kind)
}

/// What [`message_text_check`] reads of one message: value texts.
#[derive(Default)]
struct MessageText<'a> {
    id: Option<&'a str>,
    role: Option<&'a str>,
    /// `content` is present and an array.
    content: Option<bool>,
    source_kind: Option<&'a str>,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    call_id: Option<&'a str>,
    /// Tool results: the number of content blocks, and the first block's
    /// `type`, whether its `content` is an array, and its `toolCallId`.
    blocks: usize,
    block_type: Option<&'a str>,
    block_content: Option<bool>,
    block_call_id: Option<&'a str>,
}

impl MessageText<'_> {
    /// The text check's answer (see [`message_text_check`]).
    fn verdict(&self, kind: MessageKind) -> Option<bool> {
        use crate::json::canon::is_nonempty_string;
        let role_want = if kind == MessageKind::Assistant {
            "\"assistant\""
        } else {
            "\"user\""
        };
        let source_kind = self.source_kind?;
        let ok = is_nonempty_string(self.id?)
            && self.role? == role_want
            && is_nonempty_string(source_kind)
            && self.content?;
        if !ok {
            return Some(false);
        }
        Some(match kind {
            MessageKind::User => true,
            MessageKind::Assistant => {
                source_kind == "\"model\""
                    && is_nonempty_string(self.provider?)
                    && is_nonempty_string(self.model?)
            }
            MessageKind::ToolResult => {
                let call_id = self.call_id?;
                // `content` must be exactly one tool-result block.
                if source_kind != "\"tool\"" || !is_nonempty_string(call_id) || self.blocks != 1 {
                    return Some(false);
                }
                self.block_type? == "\"tool-result\""
                    && self.block_content?
                    && self.block_call_id? == call_id
            }
        })
    }
}

/// Walk the message object at byte `start` of `text` (one pass), filling
/// `m`; returns the end of the message.
fn walk_message<'a>(
    text: &'a str,
    start: usize,
    kind: MessageKind,
    m: &mut MessageText<'a>,
) -> Option<usize> {
    use crate::json::canon::{skip_value, walk_elements, walk_members};
    let value = |v: usize, end: usize| text.get(v..end);
    walk_members(text, start, |k, v| match k {
        "source" => walk_members(text, v, |sk, sv| {
            let end = skip_value(text, sv)?;
            match sk {
                "kind" => m.source_kind = value(sv, end),
                "provider" => m.provider = value(sv, end),
                "model" => m.model = value(sv, end),
                "callId" => m.call_id = value(sv, end),
                _ => {}
            }
            Some(end)
        }),
        "content" if kind == MessageKind::ToolResult => {
            // The blocks are walked into: the first block's members are
            // read on the way, its long content is skimmed once.
            m.content = Some(true);
            walk_elements(text, v, |e| {
                m.blocks += 1;
                if m.blocks > 1 || text.as_bytes().get(e) != Some(&b'{') {
                    return skip_value(text, e);
                }
                walk_members(text, e, |bk, bv| {
                    let end = skip_value(text, bv)?;
                    match bk {
                        "type" => m.block_type = value(bv, end),
                        "content" => m.block_content = Some(text.as_bytes()[bv] == b'['),
                        "toolCallId" => m.block_call_id = value(bv, end),
                        _ => {}
                    }
                    Some(end)
                })
            })
        }
        _ => {
            let end = skip_value(text, v)?;
            match k {
                "id" => m.id = value(v, end),
                "role" => m.role = value(v, end),
                "content" => m.content = Some(text.as_bytes()[v] == b'['),
                _ => {}
            }
            Some(end)
        }
    })
}

/// The `message` member of an event's data.
pub(super) fn message_of(data: &Value) -> Option<&Value> {
    data.as_object()?.get("message")
}

/// True when `v` is a non-empty string.
pub(super) fn non_empty_str(v: Option<&Value>) -> bool {
    v.and_then(Value::as_js_str).is_some_and(|s| !s.is_empty())
}

/// The message event kind of type `ty`, if it is one.
fn message_kind(ty: &str) -> Option<MessageKind> {
    match ty {
        USER_MESSAGE => Some(MessageKind::User),
        ASSISTANT_MESSAGE => Some(MessageKind::Assistant),
        TOOL_RESULT => Some(MessageKind::ToolResult),
        _ => None,
    }
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

/// The `msg.*` rules (docs/errors.md §4.3) on the message of one event, in the
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
    let fail = |rule: Rule, what: &str| Err(Error::rejected(rule, format!("{} {what}", subject())));
    let Some(m) = message.and_then(Value::as_object) else {
        return fail(Rule::MsgUnidentified, "has no identified message");
    };
    if !non_empty_str(m.get("id")) {
        return fail(Rule::MsgUnidentified, "has no identified message");
    }
    if m.get("role").and_then(Value::as_str) != Some(role) {
        return fail(Rule::MsgRole, &format!("message role must be \"{role}\""));
    }
    let source = m.get("source").and_then(Value::as_object);
    let Some(source) = source.filter(|s| non_empty_str(s.get("kind"))) else {
        return fail(Rule::MsgSource, "message source is invalid");
    };
    let Some(content) = m.get("content").and_then(Value::as_array) else {
        return fail(Rule::MsgContent, "message content is invalid");
    };
    if kind == MessageKind::Assistant {
        let model = source.get("kind").and_then(Value::as_str) == Some("model")
            && non_empty_str(source.get("provider"))
            && non_empty_str(source.get("model"));
        if !model {
            return fail(Rule::MsgModelSource, "message needs a model source");
        }
    } else if kind == MessageKind::ToolResult {
        let call_id = source.get("callId").and_then(Value::as_js_str);
        let tool = source.get("kind").and_then(Value::as_str) == Some("tool")
            && call_id.is_some_and(|c| !c.is_empty());
        if !tool {
            return fail(Rule::MsgToolSource, "message needs a tool source");
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
                Rule::MsgToolResultBlock,
                "message must hold exactly one tool-result block",
            );
        };
        if block.get("toolCallId").and_then(Value::as_js_str) != call_id {
            return fail(
                Rule::MsgToolCallIdMismatch,
                "message tool call ids disagree",
            );
        }
    }
    Ok(())
}
