//! The event envelope (events.md §3) and its canonical serialization.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{Error, Result};
use crate::json::{JsString, Object, Value};

/// `user/message`.
pub const USER_MESSAGE: &str = "user/message";
/// `assistant/message`.
pub const ASSISTANT_MESSAGE: &str = "assistant/message";
/// `tool/result`.
pub const TOOL_RESULT: &str = "tool/result";
/// `tool/call`.
pub const TOOL_CALL: &str = "tool/call";
/// `turn/start`.
pub const TURN_START: &str = "turn/start";
/// `turn/end`.
pub const TURN_END: &str = "turn/end";
/// `step/start`.
pub const STEP_START: &str = "step/start";
/// `step/end`.
pub const STEP_END: &str = "step/end";
/// `request/header`.
pub const REQUEST_HEADER: &str = "request/header";
/// `request/context`.
pub const REQUEST_CONTEXT: &str = "request/context";
/// The retired `request/header-delta` type.
pub const REQUEST_HEADER_DELTA: &str = "request/header-delta";
/// `session/end-seed`.
pub const END_SEED: &str = "session/end-seed";

/// The three surface-eligible types (events.md §5.14).
pub const SURFACE_TYPES: [&str; 3] = [USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT];

/// True when `ty` is one of the three surface-eligible types.
pub fn is_surface_type(ty: &JsString) -> bool {
    SURFACE_TYPES.iter().any(|t| ty == *t)
}

/// The largest safe integer, 2^53 − 1.
pub const MAX_SAFE: u64 = (1 << 53) - 1;

/// One envelope key; an event remembers the order its keys were given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvKey {
    /// `type`
    Type,
    /// `seq`
    Seq,
    /// `time`
    Time,
    /// `data`
    Data,
    /// `sourceEventSeqs`
    Sources,
    /// `surfaceOp`
    Op,
    /// `ignorable`
    Ignorable,
}

impl EnvKey {
    fn name(self) -> &'static str {
        match self {
            EnvKey::Type => "type",
            EnvKey::Seq => "seq",
            EnvKey::Time => "time",
            EnvKey::Data => "data",
            EnvKey::Sources => "sourceEventSeqs",
            EnvKey::Op => "surfaceOp",
            EnvKey::Ignorable => "ignorable",
        }
    }

    fn from_name(name: &JsString) -> Option<EnvKey> {
        Some(match name.as_str()? {
            "type" => EnvKey::Type,
            "seq" => EnvKey::Seq,
            "time" => EnvKey::Time,
            "data" => EnvKey::Data,
            "sourceEventSeqs" => EnvKey::Sources,
            "surfaceOp" => EnvKey::Op,
            "ignorable" => EnvKey::Ignorable,
            _ => return None,
        })
    }
}

/// Key order of events made by `append`: `type, seq, time, data, sourceEventSeqs?, surfaceOp?`.
pub const APPEND_ORDER: [EnvKey; 7] = [
    EnvKey::Type,
    EnvKey::Seq,
    EnvKey::Time,
    EnvKey::Data,
    EnvKey::Sources,
    EnvKey::Op,
    EnvKey::Ignorable,
];

/// Key order of crash-repair closers: `type, seq, time, data, surfaceOp, sourceEventSeqs?`.
pub const CLOSER_ORDER: [EnvKey; 7] = [
    EnvKey::Type,
    EnvKey::Seq,
    EnvKey::Time,
    EnvKey::Data,
    EnvKey::Op,
    EnvKey::Sources,
    EnvKey::Ignorable,
];

/// One committed (immutable) event.
#[derive(Debug)]
pub struct Event {
    /// `type`.
    pub ty: JsString,
    /// `seq`: the event's index in its log.
    pub seq: u64,
    /// `time`: epoch milliseconds (a safe integer).
    pub time: i64,
    /// `data`.
    pub data: Value,
    /// `sourceEventSeqs`, as given.
    pub sources: Option<Value>,
    /// `surfaceOp`, as given.
    pub op: Option<Value>,
    /// `ignorable: true` was present.
    pub ignorable: bool,
    /// The order of the envelope keys when serialized.
    order: [EnvKey; 7],
    /// Seed checks this event is known to pass ([`Checked`] bits), so a
    /// fork does not repeat them on a shared event.
    checked: AtomicU8,
}

/// Bits of the seed checks an event is known to pass (see [`Event::is_checked`]).
pub struct Checked;

impl Checked {
    /// Every value in the event is lossless JSON.
    pub const LOSSLESS: u8 = 1;
    /// The seed's per-type shape checks (`msg.*`, request header) pass.
    pub const SHAPE: u8 = 2;
}

impl Clone for Event {
    fn clone(&self) -> Event {
        Event {
            ty: self.ty.clone(),
            seq: self.seq,
            time: self.time,
            data: self.data.clone(),
            sources: self.sources.clone(),
            op: self.op.clone(),
            ignorable: self.ignorable,
            order: self.order,
            checked: AtomicU8::new(self.checked.load(Ordering::Relaxed)),
        }
    }
}

impl PartialEq for Event {
    /// Events are equal when their envelope and values are (key order and
    /// check bits aside).
    fn eq(&self, other: &Event) -> bool {
        self.ty == other.ty
            && self.seq == other.seq
            && self.time == other.time
            && self.data == other.data
            && self.sources == other.sources
            && self.op == other.op
            && self.ignorable == other.ignorable
    }
}

impl Event {
    /// Whether the seed checks in `bits` are known to pass.
    pub fn is_checked(&self, bits: u8) -> bool {
        self.checked.load(Ordering::Relaxed) & bits == bits
    }

    /// Record that the seed checks in `bits` pass.
    pub fn mark_checked(&self, bits: u8) {
        self.checked.fetch_or(bits, Ordering::Relaxed);
    }

    /// A new event whose keys serialize in `order` (absent keys are skipped).
    pub fn new(
        ty: JsString,
        seq: u64,
        time: i64,
        data: Value,
        sources: Option<Value>,
        op: Option<Value>,
        order: [EnvKey; 7],
    ) -> Event {
        Event {
            ty,
            seq,
            time,
            data,
            sources,
            op,
            ignorable: false,
            order,
            checked: AtomicU8::new(0),
        }
    }

    /// True when the type is `ty`.
    pub fn is(&self, ty: &str) -> bool {
        self.ty == ty
    }

    /// Write the event as `JSON.stringify` would.
    pub fn write_json(&self, out: &mut String) {
        out.push('{');
        let mut first = true;
        for key in self.order {
            let value: Option<ValueOrScalar<'_>> = match key {
                EnvKey::Type => Some(ValueOrScalar::Str(&self.ty)),
                EnvKey::Seq => Some(ValueOrScalar::Int(self.seq as i64)),
                EnvKey::Time => Some(ValueOrScalar::Int(self.time)),
                EnvKey::Data => Some(ValueOrScalar::Value(&self.data)),
                EnvKey::Sources => self.sources.as_ref().map(ValueOrScalar::Value),
                EnvKey::Op => self.op.as_ref().map(ValueOrScalar::Value),
                EnvKey::Ignorable => self.ignorable.then_some(ValueOrScalar::True),
            };
            let Some(value) = value else { continue };
            if !first {
                out.push(',');
            }
            first = false;
            out.push('"');
            out.push_str(key.name());
            out.push_str("\":");
            match value {
                ValueOrScalar::Str(s) => s.write_json(out),
                ValueOrScalar::Int(n) => {
                    use std::fmt::Write;
                    let _ = write!(out, "{n}");
                }
                ValueOrScalar::Value(v) => v.write_json(out),
                ValueOrScalar::True => out.push_str("true"),
            }
        }
        out.push('}');
    }

    /// The event as JSON text.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    /// Build an event from a JSON object, checking the envelope rules
    /// (`seed.envelope-key`, `seed.envelope-invalid`) in the reference's
    /// order. `what` names the event in messages ("seed event at index 3").
    /// The `header.legacy` check that precedes these is the caller's.
    pub fn from_envelope(value: Value, what: &str) -> Result<Event> {
        let Ok(obj) = value.into_object() else {
            return Err(invalid_envelope(what));
        };
        let mut order = [EnvKey::Ignorable; 7];
        let mut n = 0;
        for key in obj.keys() {
            match EnvKey::from_name(key) {
                Some(k) => {
                    order[n] = k;
                    n += 1;
                }
                None => {
                    return Err(Error::rejected(
                        "seed.envelope-key",
                        format!(
                            "{what} has an invalid envelope: unknown key \"{}\"",
                            key.to_string_lossy()
                        ),
                    ))
                }
            }
        }
        // Keys not present are never written, so the tail of `order` only
        // needs to hold each missing key once.
        for k in APPEND_ORDER {
            if !order[..n].contains(&k) {
                order[n] = k;
                n += 1;
            }
        }
        let mut obj = obj;
        let ty = obj
            .remove("type")
            .and_then(|t| t.into_js_string().ok())
            .ok_or_else(|| invalid_envelope(what))?;
        let seq = obj
            .get("seq")
            .and_then(Value::as_safe_u64)
            .ok_or_else(|| invalid_envelope(what))?;
        let time = obj
            .get("time")
            .and_then(Value::as_safe_i64)
            .ok_or_else(|| invalid_envelope(what))?;
        let data = obj.remove("data").ok_or_else(|| invalid_envelope(what))?;
        let ignorable = match obj.get("ignorable") {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err(invalid_envelope(what)),
        };
        let sources = obj.remove("sourceEventSeqs");
        let op = obj.remove("surfaceOp");
        Ok(Event {
            ty,
            seq,
            time,
            data,
            sources,
            op,
            ignorable,
            order,
            checked: AtomicU8::new(0),
        })
    }

    /// The event as a JSON value (used by pure folds and tests).
    pub fn to_value(&self) -> Value {
        let mut obj = Object::new();
        for key in self.order {
            let v = match key {
                EnvKey::Type => Some(Value::String(self.ty.clone())),
                EnvKey::Seq => Some(Value::Number(self.seq as f64)),
                EnvKey::Time => Some(Value::Number(self.time as f64)),
                EnvKey::Data => Some(self.data.clone()),
                EnvKey::Sources => self.sources.clone(),
                EnvKey::Op => self.op.clone(),
                EnvKey::Ignorable => self.ignorable.then_some(Value::Bool(true)),
            };
            if let Some(v) = v {
                obj.insert_str(key.name(), v);
            }
        }
        Value::Object(obj)
    }
}

enum ValueOrScalar<'a> {
    Str(&'a JsString),
    Int(i64),
    Value(&'a Value),
    True,
}

fn invalid_envelope(what: &str) -> Error {
    Error::rejected(
        "seed.envelope-invalid",
        format!("{what} has an invalid envelope"),
    )
}

/// Envelope-check a complete log given as JSON values, for the pure
/// functions that need typed events: every element must pass the envelope
/// rules and carry `seq` equal to its index (`seq.gap`). Errors carry the
/// index.
pub fn typed_log(values: Vec<Value>) -> Result<Vec<Event>> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let e = Event::from_envelope(v, "event").map_err(|mut e| {
                e.message = format!("event at index {i}{}", &e.message["event".len()..]);
                e.at_index(i)
            })?;
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

/// Serialize a list of events as a JSON array.
pub fn events_to_json<'a>(events: impl IntoIterator<Item = &'a Event>) -> String {
    let mut out = String::from("[");
    for (i, e) in events.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        e.write_json(&mut out);
    }
    out.push(']');
    out
}
