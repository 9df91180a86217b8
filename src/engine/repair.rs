//! Crash repair (lifecycle.md §6): the closing events that balance a log
//! that ends inside a turn. Deterministic: no clock, no randomness.

use super::event::{
    Event, ASSISTANT_MESSAGE, CLOSER_ORDER, STEP_END, STEP_START, TOOL_CALL, TOOL_RESULT, TURN_END,
    TURN_START,
};
use crate::json::{JsString, Object, Value};

/// Model-facing text of a call that never started (byte-exact, persisted).
pub const NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// Model-facing text of a call whose outcome is unknown (byte-exact, persisted).
pub const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// Error code of a synthetic result for a call that never started.
pub const TOOL_NOT_STARTED: &str = "TOOL_NOT_STARTED";
/// Error code of a synthetic result for a call whose outcome is unknown.
pub const TOOL_OUTCOME_UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";

struct Pending {
    call_id: JsString,
    step: Option<Value>,
    call_seq: Option<u64>,
}

fn field<'a>(e: &'a Event, key: &str) -> Option<&'a Value> {
    e.data().as_object()?.get(key)
}

fn resets(e: &Event) -> bool {
    e.ty == TURN_START || e.ty == TURN_END || e.ty == STEP_END
}

/// The closers crash repair would append after `log` (empty when the log
/// ends balanced).
///
/// Every `turn/start`, `turn/end` and `step/end` resets the pending calls
/// and the open step, so the walk starts at the last of them (a `step/end`
/// keeps the turn the last `turn/start`/`turn/end` before it left open):
/// only the log's tail is read.
pub fn closers<'a, I>(log: I) -> Vec<Event>
where
    I: IntoIterator<Item = &'a Event>,
    I::IntoIter: DoubleEndedIterator + ExactSizeIterator + Clone,
{
    let log = log.into_iter();
    let n = log.len();
    let from = log.clone().rev().position(resets).map_or(0, |p| n - 1 - p);
    let mut open_turn: Option<Value> = None;
    if log.clone().nth(from).is_some_and(|e| e.ty == STEP_END) {
        let turn = log
            .clone()
            .take(from)
            .rev()
            .find(|e| e.ty == TURN_START || e.ty == TURN_END);
        if let Some(t) = turn.filter(|t| t.ty == TURN_START) {
            open_turn = field(t, "turn").cloned();
        }
    }
    let mut open_step: Option<Value> = None;
    let mut pending: Vec<Pending> = Vec::new();
    let mut last: Option<&Event> = None;
    for e in log.skip(from) {
        last = Some(e);
        if e.ty == TURN_START {
            open_turn = field(e, "turn").cloned();
            open_step = None;
            pending.clear();
        } else if e.ty == TURN_END {
            open_turn = None;
            open_step = None;
            pending.clear();
        } else if e.ty == STEP_START {
            open_step = field(e, "step").cloned();
        } else if e.ty == STEP_END {
            open_step = None;
            pending.clear();
        } else if e.ty == ASSISTANT_MESSAGE {
            let step = field(e, "step").cloned();
            let blocks = field(e, "message")
                .and_then(Value::as_object)
                .and_then(|m| m.get("content"))
                .and_then(Value::as_array);
            for block in blocks.into_iter().flatten() {
                let Some(b) = block.as_object() else { continue };
                if b.get("type").and_then(Value::as_str) != Some("tool-call") {
                    continue;
                }
                let Some(id) = b.get("id").and_then(Value::as_js_str) else {
                    continue;
                };
                match pending.iter_mut().find(|p| &p.call_id == id) {
                    Some(p) => {
                        p.step = step.clone();
                        p.call_seq = None;
                    }
                    None => pending.push(Pending {
                        call_id: id.clone(),
                        step: step.clone(),
                        call_seq: None,
                    }),
                }
            }
        } else if e.ty == TOOL_CALL {
            if let Some(id) = field(e, "callId").and_then(Value::as_js_str) {
                if let Some(p) = pending.iter_mut().find(|p| &p.call_id == id) {
                    p.call_seq = Some(e.seq);
                }
            }
        } else if e.ty == TOOL_RESULT {
            let id = field(e, "message")
                .and_then(Value::as_object)
                .and_then(|m| m.get("source"))
                .and_then(Value::as_object)
                .and_then(|s| s.get("callId"))
                .and_then(Value::as_js_str);
            if let Some(id) = id {
                pending.retain(|p| &p.call_id != id);
            }
        }
    }
    let (Some(turn), Some(last)) = (open_turn, last) else {
        return Vec::new();
    };
    let time = last.time;
    let mut seq = last.seq + 1;
    let mut out = Vec::new();
    for p in pending {
        out.push(tool_result_closer(&turn, p, seq, time));
        seq += 1;
    }
    if let Some(step) = open_step {
        let data = Value::obj([("turn", turn.clone()), ("step", step)]);
        out.push(closer(STEP_END, seq, time, data, None, None));
        seq += 1;
    }
    let reason = Value::obj([("kind", Value::str("interrupted"))]);
    let data = Value::obj([("turn", turn), ("reason", reason)]);
    out.push(closer(TURN_END, seq, time, data, None, None));
    out
}

fn closer(
    ty: &str,
    seq: u64,
    time: i64,
    data: Value,
    op: Option<Value>,
    sources: Option<Value>,
) -> Event {
    Event::new(
        JsString::from(ty),
        seq,
        time,
        data,
        sources,
        op,
        CLOSER_ORDER,
    )
}

fn tool_result_closer(turn: &Value, p: Pending, seq: u64, time: i64) -> Event {
    let started = p.call_seq.is_some();
    let text = if started {
        OUTCOME_UNKNOWN_TEXT
    } else {
        NOT_STARTED_TEXT
    };
    let block = Value::obj([
        ("type", Value::str("tool-result")),
        ("toolCallId", Value::String(p.call_id.clone())),
        ("isError", Value::Bool(true)),
        (
            "content",
            Value::Array(vec![Value::obj([
                ("type", Value::str("text")),
                ("text", Value::str(text)),
            ])]),
        ),
    ]);
    // The id keeps the call id's code units exactly (lone surrogates too).
    let mut id = Vec::from(&b"interrupted-tool-result-"[..]);
    id.extend_from_slice(p.call_id.as_wtf8());
    id.extend_from_slice(format!("-{seq}").as_bytes());
    let id = JsString::from_wtf8(id);
    let message = Value::obj([
        ("id", Value::String(id)),
        ("role", Value::str("user")),
        (
            "source",
            Value::obj([
                ("kind", Value::str("tool")),
                ("callId", Value::String(p.call_id)),
            ]),
        ),
        ("content", Value::Array(vec![block])),
    ]);
    let error = if started {
        Value::obj([
            ("name", Value::str("ToolOutcomeUnknownError")),
            ("code", Value::str(TOOL_OUTCOME_UNKNOWN)),
        ])
    } else {
        Value::obj([
            ("name", Value::str("ToolNotStartedError")),
            ("code", Value::str(TOOL_NOT_STARTED)),
        ])
    };
    let mut data = Object::new();
    data.insert_str("turn", turn.clone());
    if let Some(step) = p.step {
        data.insert_str("step", step);
    }
    data.insert_str("message", message);
    data.insert_str("error", error);
    let sources = p
        .call_seq
        .map(|s| Value::Array(vec![Value::Number(s as f64)]));
    closer(
        TOOL_RESULT,
        seq,
        time,
        Value::Object(data),
        Some(Value::str("append")),
        sources,
    )
}
