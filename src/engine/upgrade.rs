//! Load-time handling of stored logs (docs/lifecycle.md §7, docs/errors.md §3.5):
//! whole-log refusal of retired vocabulary, the in-memory legacy shape
//! upgrades, and the known-type check. Storage is never rewritten.

use std::collections::HashMap;

use super::event::{
    ASSISTANT_MESSAGE, REQUEST_HEADER, REQUEST_HEADER_DELTA, TOOL_RESULT, TURN_END, TURN_START,
    USER_MESSAGE,
};
use super::vocabulary::is_known;
use super::{Event, Vocabulary};
use crate::error::{Error, Result, Status};
use crate::json::{JsString, Object, Value};
use crate::rule::Rule;

fn obj<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.get(key)
}

fn ty_of(e: &Value) -> Option<&str> {
    obj(e, "type")?.as_str()
}

fn seq_text(e: &Value) -> String {
    obj(e, "seq").map_or_else(|| "?".to_string(), Value::to_json)
}

/// `err` about the stored event `e` (its seq, when it has a usable one).
fn about(err: Error, e: &Value) -> Error {
    match obj(e, "seq").and_then(Value::as_safe_u64) {
        Some(seq) => err.at_seq(seq),
        None => err,
    }
}

/// Refuse retired vocabulary anywhere in the log, in the reference's order:
/// every `request/header-delta` first, then `mode/set`, then a
/// `request/header` with reason `"fallback"`.
pub fn refuse_retired(id: &str, events: &[Value]) -> Result<()> {
    let schema =
        |rule, msg: String, e: &Value| Err(about(Error::new(Status::SchemaMismatch, rule, msg), e));
    if let Some(e) = events
        .iter()
        .find(|e| ty_of(e) == Some(REQUEST_HEADER_DELTA))
    {
        return schema(
            Rule::HeaderLegacy,
            format!(
                "session \"{id}\" contains a legacy request/header-delta event at seq {}",
                seq_text(e)
            ),
            e,
        );
    }
    if let Some(e) = events.iter().find(|e| ty_of(e) == Some("mode/set")) {
        return schema(
            Rule::LoadLegacyModeSet,
            format!(
                "session \"{id}\" contains a legacy mode/set event at seq {}",
                seq_text(e)
            ),
            e,
        );
    }
    let fallback = |e: &&Value| {
        ty_of(e) == Some(REQUEST_HEADER)
            && obj(e, "data")
                .and_then(|d| obj(d, "reason"))
                .and_then(Value::as_str)
                == Some("fallback")
    };
    if let Some(e) = events.iter().find(fallback) {
        return schema(
            Rule::HeaderLegacyFallback,
            format!("session \"{id}\" uses the unsupported legacy request/header reason \"fallback\" at seq {}", seq_text(e)),
            e,
        );
    }
    Ok(())
}

/// Whether `e` passes [`check_known_types`] under the known vocabulary
/// alone (a cheap first look; a store's declared types are checked after).
pub fn has_known_type(e: &Event) -> bool {
    e.ignorable || is_known(e.ty.as_str().unwrap_or(""))
}

/// The `load.unknown-type` refusal of type `ty` at `seq`.
pub fn unknown_type(id: &str, ty: &str, seq: &str) -> Error {
    let err = Error::new(
        Status::SchemaMismatch,
        Rule::LoadUnknownType,
        format!(
            "session \"{id}\" contains event type \"{ty}\" (seq {seq}) unknown to this build and not ignorable; refusing to interpret (declare it in the store's \"eventTypes\" to open the session)"
        ),
    );
    match seq.parse() {
        Ok(seq) => err.at_seq(seq),
        Err(_) => err,
    }
}

/// `load.unknown-type`: a type outside `vocab` without `ignorable: true`.
pub fn check_known_types<'a>(
    id: &str,
    events: impl IntoIterator<Item = &'a Event>,
    vocab: &Vocabulary,
) -> Result<()> {
    match events.into_iter().find(|e| !vocab.admits_type(e)) {
        Some(e) => Err(unknown_type(
            id,
            &e.ty.to_string_lossy(),
            &e.seq.to_string(),
        )),
        None => Ok(()),
    }
}

/// [`check_known_types`] of stored values, before their envelopes are
/// checked (the reference's order): an event whose `type` is a string
/// outside `vocab` and whose `ignorable` is not exactly `true` refuses the
/// whole log, whatever else is wrong with it.
pub fn check_known_values(id: &str, events: &[Value], vocab: &Vocabulary) -> Result<()> {
    match unknown_values(events, vocab).next() {
        Some((ty, seq)) => Err(unknown_type(id, ty, &seq)),
        None => Ok(()),
    }
}

/// `(type, seq)` of every stored value [`check_known_values`] refuses.
fn unknown_values<'a>(
    events: &'a [Value],
    vocab: &'a Vocabulary,
) -> impl Iterator<Item = (&'a str, String)> + 'a {
    events.iter().filter_map(|e| {
        let ty = ty_of(e)?;
        let ignorable = obj(e, "ignorable") == Some(&Value::Bool(true));
        (!ignorable && !vocab.knows(ty)).then(|| (ty, seq_text(e)))
    })
}

fn is_safe_int_at_least(v: Option<&Value>, min: i64) -> bool {
    v.and_then(Value::as_safe_i64).is_some_and(|n| n >= min)
}

fn keys_exactly(o: &Object, keys: &[&str]) -> bool {
    o.len() == keys.len() && keys.iter().all(|k| o.contains_key(k))
}

fn malformed(rule: Rule, what: &str, e: &Value) -> Error {
    let err = Error::new(
        Status::Corrupt,
        rule,
        format!("malformed pre-react-loop {what} at seq {}", seq_text(e)),
    );
    about(err, e)
}

fn legacy_id(sid: &str, e: &Value) -> Value {
    Value::str(&format!("legacy-message:{sid}:{}", seq_text(e)))
}

/// The message id an event carries once upgraded, if identified.
fn message_id(e: &Value) -> Option<JsString> {
    let data = obj(e, "data")?;
    let message = match ty_of(e)? {
        USER_MESSAGE => data,
        ASSISTANT_MESSAGE | TOOL_RESULT => obj(data, "message")?,
        _ => return None,
    };
    obj(message, "id")?
        .as_js_str()
        .filter(|s| !s.is_empty())
        .cloned()
}

/// Whether the legacy rewrites leave the event `e` as it is and raise no
/// error, decided without the rest of the log: true for every event of
/// the current format except turn events, which are checked here, and
/// the legacy-only types (`steering/message`, retired vocabulary), which
/// are not. Message events are the caller's: one that passes the `msg.*`
/// rules is never rewritten.
pub fn is_current_turn_event(e: &Value) -> bool {
    let mut copy = e.clone();
    let unchanged = |c: &Value| c == e;
    match ty_of(e) {
        Some(TURN_START) => upgrade_turn_start(&mut copy).is_ok() && unchanged(&copy),
        Some(TURN_END) => upgrade_turn_end(&mut copy).is_ok() && unchanged(&copy),
        _ => false,
    }
}

/// [`is_current_turn_event`] of an event, read off its canonical text for
/// the shapes this library writes; a tree is built only for the others.
pub fn is_current_turn(e: &Event) -> bool {
    turn_text_current(e).unwrap_or_else(|| is_current_turn_event(&e.to_value()))
}

/// The common cases of [`is_current_turn`] on text; `None`: build the tree.
fn turn_text_current(e: &Event) -> Option<bool> {
    use crate::json::canon::members;
    let data = e.data_text();
    if e.ty == TURN_START {
        // Only a `trigger` member is rewritten (or refused). Canonical text
        // spells a plain key as it is, so no escaped spelling can hide one.
        return Some(members(data).is_none_or(|mut m| m.all(|(k, _)| k != "trigger")));
    }
    if e.ty != TURN_END {
        return Some(false);
    }
    // `{"turn": N >= 1, "reason": {"kind": K}}` for a K kept as it is.
    let (mut turn, mut reason, mut n) = (None, None, 0);
    for (k, v) in members(data)? {
        n += 1;
        match k {
            "turn" => turn = Some(v),
            "reason" => reason = Some(v),
            _ => return None,
        }
    }
    if n != 2 || super::event::plain_int(turn?)? < 1 {
        return None;
    }
    let mut r = members(reason?)?;
    let (key, kind) = r.next()?;
    let kept = matches!(
        kind,
        r#""completed""# | r#""blocked""# | r#""max-tokens""# | r#""interrupted""#
    );
    (key == "kind" && kept && r.next().is_none()).then_some(true)
}

/// Apply the four legacy rewrites (turn/start → turn/end → steering →
/// message) to every event, in order.
pub fn upgrade(sid: &str, events: Vec<Value>) -> Result<Vec<Value>> {
    let mut ids: HashMap<u64, JsString> = HashMap::new();
    let mut out = Vec::with_capacity(events.len());
    for mut e in events {
        upgrade_turn_start(&mut e)?;
        upgrade_turn_end(&mut e)?;
        upgrade_steering(sid, &mut e)?;
        upgrade_message(sid, &mut e, &ids);
        if let (Some(seq), Some(id)) = (obj(&e, "seq").and_then(Value::as_safe_u64), message_id(&e))
        {
            ids.insert(seq, id);
        }
        out.push(e);
    }
    Ok(out)
}

fn data_mut(e: &mut Value) -> Option<&mut Object> {
    e.as_object_mut()?.get_mut("data")?.as_object_mut()
}

fn upgrade_turn_start(e: &mut Value) -> Result<()> {
    if ty_of(e) != Some(TURN_START) {
        return Ok(());
    }
    let Some(d) = obj(e, "data").and_then(Value::as_object) else {
        return Ok(());
    };
    if !d.contains_key("trigger") {
        return Ok(());
    }
    let ok = keys_exactly(d, &["turn", "trigger"])
        && is_safe_int_at_least(d.get("turn"), 1)
        && d.get("trigger")
            .and_then(|t| obj(t, "kind"))
            .and_then(Value::as_js_str)
            .is_some_and(|k| !k.is_empty());
    if !ok {
        return Err(malformed(
            Rule::LoadLegacyMalformedTurnStart,
            "turn/start",
            e,
        ));
    }
    if let Some(d) = data_mut(e) {
        d.remove("trigger");
    }
    Ok(())
}

fn upgrade_turn_end(e: &mut Value) -> Result<()> {
    if ty_of(e) != Some(TURN_END) {
        return Ok(());
    }
    let Some(d) = obj(e, "data").and_then(Value::as_object) else {
        return Ok(());
    };
    let bad = || malformed(Rule::LoadLegacyMalformedTurnEnd, "turn/end", e);
    let reason = d.get("reason").and_then(Value::as_object);
    let kind = reason.and_then(|r| r.get("kind")).and_then(Value::as_str);
    let (Some(reason), Some(kind)) = (reason, kind) else {
        return Err(bad());
    };
    if !keys_exactly(d, &["turn", "reason"]) || !is_safe_int_at_least(d.get("turn"), 1) {
        return Err(bad());
    }
    let obj_of = |pairs: &[(&str, Value)]| {
        let mut o = Object::new();
        for (k, v) in pairs {
            o.insert_str(k, v.clone());
        }
        Value::Object(o)
    };
    let new_reason = match kind {
        "completed" | "blocked" | "max-tokens" | "interrupted" => {
            if reason.len() != 1 {
                return Err(bad());
            }
            None
        }
        "aborted" if reason.contains_key("reason") => None,
        "aborted" | "disposed" => {
            if reason.len() != 1 {
                return Err(bad());
            }
            let cause = if kind == "aborted" {
                "legacy"
            } else {
                "disposed"
            };
            Some(obj_of(&[
                ("kind", Value::str("aborted")),
                ("reason", obj_of(&[("kind", Value::str(cause))])),
            ]))
        }
        "error" if reason.contains_key("error") => None,
        "error" => {
            if reason.get("step").and_then(Value::as_safe_u64).is_none() {
                return Err(bad());
            }
            let failure = reason.get("failure").and_then(Value::as_object);
            let error = if keys_exactly(reason, &["kind", "step", "failure"])
                && failure.is_some_and(valid_failure)
            {
                reason.get("failure").cloned()
            } else {
                let message = reason.get("message").filter(|m| m.as_js_str().is_some());
                let code = reason.get("code");
                let shape = keys_exactly(reason, &["kind", "step", "message"])
                    || (keys_exactly(reason, &["kind", "step", "message", "code"])
                        && code.is_some_and(|c| c.as_js_str().is_some()));
                match (shape, message) {
                    (true, Some(m)) => Some(obj_of(&[
                        ("message", m.clone()),
                        (
                            "code",
                            code.cloned().unwrap_or_else(|| Value::str("UNKNOWN")),
                        ),
                    ])),
                    _ => None,
                }
            };
            let Some(error) = error else {
                return Err(bad());
            };
            Some(obj_of(&[("kind", Value::str("error")), ("error", error)]))
        }
        _ => None,
    };
    if let (Some(r), Some(d)) = (new_reason, data_mut(e)) {
        d.insert_str("reason", r);
    }
    Ok(())
}

fn valid_failure(f: &Object) -> bool {
    let string = |k: &str| f.get(k).is_some_and(|v| v.as_js_str().is_some());
    let number = |k: &str| f.get(k).is_none_or(|v| v.as_f64().is_some());
    let known = [
        "message",
        "code",
        "status",
        "providerRetryAfterMs",
        "requestId",
    ];
    string("message")
        && string("code")
        && number("status")
        && number("providerRetryAfterMs")
        && f.get("requestId").is_none_or(|v| v.as_js_str().is_some())
        && f.keys().all(|k| known.iter().any(|n| k == *n))
}

fn upgrade_steering(sid: &str, e: &mut Value) -> Result<()> {
    if ty_of(e) != Some("steering/message") {
        return Ok(());
    }
    let bad = |e: &Value| malformed(Rule::LoadLegacyMalformedSteering, "steering/message", e);
    let Some(d) = obj(e, "data").and_then(Value::as_object) else {
        return Err(bad(e));
    };
    let turn_ok = d.get("turn").and_then(Value::as_safe_i64).is_some();
    let new_data = if keys_exactly(d, &["turn", "message"])
        && turn_ok
        && d.get("message").is_some_and(|m| m.as_object().is_some())
    {
        d.get("message").cloned().unwrap_or_default()
    } else if keys_exactly(d, &["turn", "content", "source"]) && turn_ok {
        let mut m = Object::new();
        for (k, v) in d.iter() {
            if k != "turn" {
                m.insert(k.clone(), v.clone());
            }
        }
        m.insert_str("id", legacy_id(sid, e));
        m.insert_str("role", Value::str("user"));
        Value::Object(m)
    } else {
        return Err(bad(e));
    };
    if let Some(o) = e.as_object_mut() {
        o.insert_str("type", Value::str(USER_MESSAGE));
        o.insert_str("data", new_data);
    }
    Ok(())
}

fn upgrade_message(sid: &str, e: &mut Value, ids: &HashMap<u64, JsString>) {
    let Some(ty) = ty_of(e) else { return };
    let Some(d) = obj(e, "data").and_then(Value::as_object) else {
        return;
    };
    let has = |k: &str| d.contains_key(k);
    let new_data = match ty {
        USER_MESSAGE
            if !has("id") && !has("role") && !has("message") && has("content") && has("source") =>
        {
            let mut n = d.clone();
            n.insert_str("id", legacy_id(sid, e));
            n.insert_str("role", Value::str("user"));
            n
        }
        ASSISTANT_MESSAGE if !has("message") && has("content") && has("provenance") => {
            let mut n = d.clone();
            let content = n.remove("content").unwrap_or_default();
            let mut source = n
                .remove("provenance")
                .and_then(|p| p.into_object().ok())
                .unwrap_or_default();
            source.insert_str("kind", Value::str("model"));
            let mut m = Object::new();
            m.insert_str("id", legacy_id(sid, e));
            m.insert_str("role", Value::str("assistant"));
            m.insert_str("content", content);
            m.insert_str("source", Value::Object(source));
            n.insert_str("message", Value::Object(m));
            n
        }
        TOOL_RESULT if !has("message") && has("callId") && has("content") && has("isError") => {
            let mut n = d.clone();
            let call_id = n.remove("callId").unwrap_or_default();
            let content = n.remove("content").unwrap_or_default();
            let is_error = n.remove("isError").unwrap_or_default();
            let replace_start = obj(e, "surfaceOp")
                .filter(|op| obj(op, "op").and_then(Value::as_str) == Some("replace"))
                .and_then(|op| obj(op, "start"))
                .and_then(Value::as_f64);
            let id = match replace_start {
                Some(start) => ids
                    .get(&(start as u64))
                    .filter(|_| start >= 0.0)
                    .map(|i| Value::String(i.clone())),
                None => Some(legacy_id(sid, e)),
            };
            let mut block = Object::new();
            block.insert_str("type", Value::str("tool-result"));
            block.insert_str("toolCallId", call_id.clone());
            block.insert_str("content", content);
            block.insert_str("isError", is_error);
            let mut source = Object::new();
            source.insert_str("kind", Value::str("tool"));
            source.insert_str("callId", call_id);
            let mut m = Object::new();
            if let Some(id) = id {
                m.insert_str("id", id);
            }
            m.insert_str("role", Value::str("user"));
            m.insert_str("content", Value::Array(vec![Value::Object(block)]));
            m.insert_str("source", Value::Object(source));
            n.insert_str("message", Value::Object(m));
            n
        }
        _ => return,
    };
    if let Some(o) = e.as_object_mut() {
        o.insert_str("data", Value::Object(new_data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_events_read_on_text_agree_with_the_tree() {
        let datas = [
            r#"{"turn":1}"#,
            r#"{"turn":3,"trigger":{"kind":"user"}}"#,
            r#"{"turn":3,"trigger":{"kind":""}}"#,
            r#"{"trigger":{"kind":"user"},"turn":2}"#,
            r#"{"turn":0}"#,
            r#"{}"#,
            r#"[1]"#,
            r#""x""#,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
            r#"{"reason":{"kind":"interrupted"},"turn":7}"#,
            r#"{"turn":1,"reason":{"kind":"max-tokens"}}"#,
            r#"{"turn":1,"reason":{"kind":"blocked"}}"#,
            r#"{"turn":0,"reason":{"kind":"completed"}}"#,
            r#"{"turn":1.5,"reason":{"kind":"completed"}}"#,
            r#"{"turn":1,"reason":{"kind":"completed","x":1}}"#,
            r#"{"turn":1,"reason":{"kind":"aborted"}}"#,
            r#"{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}"#,
            r#"{"turn":1,"reason":{"kind":"disposed"}}"#,
            r#"{"turn":1,"reason":{"kind":"error","step":2,"message":"m"}}"#,
            r#"{"turn":1,"reason":{"kind":"error","error":{"message":"m"}}}"#,
            r#"{"turn":1,"reason":{"kind":7}}"#,
            r#"{"turn":1,"reason":"completed"}"#,
            r#"{"turn":1,"reason":{"kind":"completed"},"extra":true}"#,
            r#"{"turn":1}"#,
        ];
        for ty in [TURN_START, TURN_END, "step/start"] {
            for data in datas {
                let e = Event::from_canonical_text(
                    format!(r#"{{"type":"{ty}","seq":0,"time":1,"data":{data}}}"#).into(),
                )
                .unwrap();
                assert_eq!(
                    is_current_turn(&e),
                    is_current_turn_event(&e.to_value()),
                    "{ty} {data}"
                );
            }
        }
    }
}
