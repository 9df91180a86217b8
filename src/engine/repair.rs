//! Crash repair (docs/lifecycle.md §6): the closing events that balance a log
//! that ends inside a turn. Deterministic: no clock, no randomness.

use super::event::{
    Event, ASSISTANT_MESSAGE, CLOSER_ORDER, STEP_END, STEP_START, TOOL_CALL, TOOL_RESULT, TURN_END,
    TURN_START,
};
use super::{seed, upgrade};
use crate::error::{Error, Result, Status};
use crate::json::{JsString, Object, Value};
use crate::rule::Rule;

/// Model-facing text of a call that never started (byte-exact, persisted).
pub const NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// Model-facing text of a call whose outcome is unknown (byte-exact, persisted).
pub const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// Error code of a synthetic result for a call that never started.
pub const TOOL_NOT_STARTED: &str = "TOOL_NOT_STARTED";
/// Error code of a synthetic result for a call whose outcome is unknown.
pub const TOOL_OUTCOME_UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";

/// A JavaScript value read from a stored event's data: a JSON value, or
/// `undefined` for a member the data lacks (or data that is no object).
#[derive(Debug, Clone)]
enum Js {
    Undefined,
    Value(Value),
}

impl Js {
    /// `data[key]` of an event: `undefined` when absent.
    fn member(e: &Event, key: &str) -> Js {
        match e.data().as_object().and_then(|o| o.get(key)) {
            Some(v) => Js::Value(v.clone()),
            None => Js::Undefined,
        }
    }

    /// `data[key]` of an object value: `undefined` when absent.
    fn of(o: &crate::json::Object, key: &str) -> Js {
        o.get(key).map_or(Js::Undefined, |v| Js::Value(v.clone()))
    }

    /// The value held where the reference keeps `null` for "nothing open":
    /// a stored `null` reads as nothing open too.
    fn unless_null(self) -> Option<Js> {
        match self {
            Js::Value(Value::Null) => None,
            other => Some(other),
        }
    }

    /// `SameValueZero`, as a JavaScript `Map` compares keys: primitives by
    /// value, objects and arrays never (each read is a new object).
    fn same_key(&self, other: &Js) -> bool {
        match (self, other) {
            (Js::Undefined, Js::Undefined) => true,
            (Js::Value(a), Js::Value(b)) => match (a, b) {
                (Value::Null, Value::Null) => true,
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Number(x), Value::Number(y)) => x == y,
                (Value::String(x), Value::String(y)) => x == y,
                _ => false,
            },
            _ => false,
        }
    }

    /// `String(value)`, for the message id of a synthetic result.
    fn to_js_string(&self) -> JsString {
        match self {
            Js::Undefined => JsString::from("undefined"),
            Js::Value(v) => js_string(v),
        }
    }

    /// Insert `key: value` into `o`, leaving `undefined` out (as
    /// `JSON.stringify` does).
    fn insert_into(self, o: &mut Object, key: &str) {
        if let Js::Value(v) = self {
            o.insert_str(key, v);
        }
    }
}

/// `String(v)` of a JSON value.
fn js_string(v: &Value) -> JsString {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            // Array.prototype.join(","): null and undefined become "".
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !item.is_null() {
                    out.extend_from_slice(js_string(item).as_wtf8());
                }
            }
            JsString::from_wtf8(out)
        }
        Value::Object(_) => JsString::from("[object Object]"),
        // null, booleans and numbers print as their JSON text.
        other => JsString::from(other.to_json().as_str()),
    }
}

struct Pending {
    call_id: Js,
    step: Js,
    call_seq: Option<u64>,
}

fn resets(e: &Event) -> bool {
    e.ty == TURN_START || e.ty == TURN_END || e.ty == STEP_END
}

/// The closers crash repair would append after `log` (empty when the log
/// ends balanced).
///
/// The scan keeps the reference's states: the open turn and step are
/// "nothing" after a reset and otherwise whatever the start event's data
/// holds there, `undefined` when it lacks the member; a stored `null`
/// cannot be told from "nothing open". So a turn whose number is `null`
/// is not repaired, and a step whose number is missing is closed by a
/// `step/end` without one. Pending calls are keyed by their block id as
/// stored, compared as a JavaScript `Map` compares keys. Closers built
/// from such values may break the rules a load applies: see
/// [`check_closers`] and [`check_closers_reread`].
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
    let mut open_turn: Option<Js> = None;
    if log.clone().nth(from).is_some_and(|e| e.ty == STEP_END) {
        let turn = log
            .clone()
            .take(from)
            .rev()
            .find(|e| e.ty == TURN_START || e.ty == TURN_END);
        if let Some(t) = turn.filter(|t| t.ty == TURN_START) {
            open_turn = Js::member(t, "turn").unless_null();
        }
    }
    let mut open_step: Option<Js> = None;
    let mut pending: Vec<Pending> = Vec::new();
    let mut last: Option<&Event> = None;
    for e in log.skip(from) {
        last = Some(e);
        if e.ty == TURN_START {
            open_turn = Js::member(e, "turn").unless_null();
            open_step = None;
            pending.clear();
        } else if e.ty == TURN_END {
            open_turn = None;
            open_step = None;
            pending.clear();
        } else if e.ty == STEP_START {
            open_step = Js::member(e, "step").unless_null();
        } else if e.ty == STEP_END {
            open_step = None;
            pending.clear();
        } else if e.ty == ASSISTANT_MESSAGE {
            let step = Js::member(e, "step");
            let data = e.data();
            let blocks = data
                .as_object()
                .and_then(|d| d.get("message"))
                .and_then(Value::as_object)
                .and_then(|m| m.get("content"))
                .and_then(Value::as_array);
            for block in blocks.into_iter().flatten() {
                let Some(b) = block.as_object() else { continue };
                if b.get("type").and_then(Value::as_str) != Some("tool-call") {
                    continue;
                }
                let id = Js::of(b, "id");
                match pending.iter_mut().find(|p| p.call_id.same_key(&id)) {
                    Some(p) => {
                        p.step = step.clone();
                        p.call_seq = None;
                    }
                    None => pending.push(Pending {
                        call_id: id,
                        step: step.clone(),
                        call_seq: None,
                    }),
                }
            }
        } else if e.ty == TOOL_CALL {
            let id = Js::member(e, "callId");
            if let Some(p) = pending.iter_mut().find(|p| p.call_id.same_key(&id)) {
                p.call_seq = Some(e.seq);
            }
        } else if e.ty == TOOL_RESULT {
            let data = e.data();
            let source = data
                .as_object()
                .and_then(|d| d.get("message"))
                .and_then(Value::as_object)
                .and_then(|m| m.get("source"))
                .and_then(Value::as_object);
            if let Some(source) = source {
                let id = Js::of(source, "callId");
                pending.retain(|p| !p.call_id.same_key(&id));
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
        let mut data = Object::new();
        turn.clone().insert_into(&mut data, "turn");
        step.insert_into(&mut data, "step");
        out.push(closer(STEP_END, seq, time, Value::Object(data), None, None));
        seq += 1;
    }
    let mut data = Object::new();
    turn.insert_into(&mut data, "turn");
    data.insert_str("reason", Value::obj([("kind", Value::str("interrupted"))]));
    out.push(closer(TURN_END, seq, time, Value::Object(data), None, None));
    out
}

/// The rules a session's construction applies to the closers it seeds
/// (the `msg.*` rules of a stored message event): a closer built from
/// stored values repair cannot close with (a tool call whose id is not a
/// non-empty string) breaks them, and the open refuses, as the
/// reference's does, before anything is written.
pub fn check_closers<'a>(closers: impl IntoIterator<Item = &'a Event>) -> Result<()> {
    for c in closers {
        let subject = || format!("the crash-repair closer at seq {}", c.seq);
        seed::check_event_message(c, &subject)?;
    }
    Ok(())
}

/// The rules the next read of the log would apply to the closers once
/// written (the legacy upgrade's turn shapes): a closer that breaks them
/// (a `turn/end` whose turn is not a safe integer of at least 1, copied
/// from its `turn/start`) would make the repaired log refuse to open, so
/// the repair must not be written; the error is the one that next read
/// would give. `id` is the session's.
pub fn check_closers_reread<'a>(
    id: &str,
    closers: impl IntoIterator<Item = &'a Event>,
) -> Result<()> {
    let values: Vec<Value> = closers.into_iter().map(Event::to_value).collect();
    let read = upgrade::upgrade(id, values.clone())?;
    if let Some((v, _)) = values.iter().zip(&read).find(|(v, r)| v != r) {
        // Never the case for the closers repair makes; a rewrite would
        // make the next read differ from what was written.
        return Err(Error::new(
            Status::Internal,
            Rule::InternalRepairCloser,
            format!(
                "the crash-repair closer {} would read back changed",
                v.to_json()
            ),
        ));
    }
    Ok(())
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

fn tool_result_closer(turn: &Js, p: Pending, seq: u64, time: i64) -> Event {
    let started = p.call_seq.is_some();
    let text = if started {
        OUTCOME_UNKNOWN_TEXT
    } else {
        NOT_STARTED_TEXT
    };
    let mut block = Object::new();
    block.insert_str("type", Value::str("tool-result"));
    p.call_id.clone().insert_into(&mut block, "toolCallId");
    block.insert_str("isError", Value::Bool(true));
    block.insert_str(
        "content",
        Value::Array(vec![Value::obj([
            ("type", Value::str("text")),
            ("text", Value::str(text)),
        ])]),
    );
    // The id keeps the call id's code units exactly (lone surrogates too).
    let mut id = Vec::from(&b"interrupted-tool-result-"[..]);
    id.extend_from_slice(p.call_id.to_js_string().as_wtf8());
    id.extend_from_slice(format!("-{seq}").as_bytes());
    let id = JsString::from_wtf8(id);
    let mut source = Object::new();
    source.insert_str("kind", Value::str("tool"));
    p.call_id.insert_into(&mut source, "callId");
    let message = Value::obj([
        ("id", Value::String(id)),
        ("role", Value::str("user")),
        ("source", Value::Object(source)),
        ("content", Value::Array(vec![Value::Object(block)])),
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
    turn.clone().insert_into(&mut data, "turn");
    p.step.insert_into(&mut data, "step");
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
