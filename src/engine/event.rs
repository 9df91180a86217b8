//! The event envelope (docs/events.md §3) and its canonical serialization.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::json::{self, canon, JsString, Value};
use crate::rule::Rule;

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

/// The three surface-eligible types (docs/events.md §1).
pub const SURFACE_TYPES: [&str; 3] = [USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT];

mod build;
mod packed;

pub use packed::{Packed, PACK_AVERAGE_MAX};

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
///
/// The event keeps its canonical JSON text (exactly what `JSON.stringify`
/// writes, in its own key order) plus a small index: the envelope scalars,
/// the byte range of `data`, and the surface metadata. A value tree of
/// `data` is built only when a rare path asks for it ([`Event::data`]).
pub struct Event {
    /// `type`.
    pub ty: JsString,
    /// `seq`: the event's index in its log.
    pub seq: u64,
    /// `time`: epoch milliseconds (a safe integer).
    pub time: i64,
    /// `ignorable: true` was present.
    pub ignorable: bool,
    /// The canonical JSON text of the whole event.
    text: Box<str>,
    /// Byte ranges in `text` of `data`, `sourceEventSeqs` and `surfaceOp`
    /// (an empty range: the key is absent).
    at: Spans,
    /// Seed checks this event is known to pass ([`Checked`] bits), so a
    /// fork does not repeat them on a shared event.
    checked: AtomicU8,
    /// `data` as a value tree, built on first use.
    tree: OnceLock<Box<Value>>,
    /// The packed chunk this event is the last of, once a log sealed it
    /// (another log sealing the same events shares it).
    sealed: OnceLock<Arc<Packed>>,
}

/// Bits of the seed checks an event is known to pass (see [`Event::is_checked`]).
pub struct Checked;

impl Checked {
    /// Every value in the event is lossless JSON.
    pub const LOSSLESS: u8 = 1;
    /// The seed's per-type shape checks (`msg.*`, request header) pass.
    pub const SHAPE: u8 = 2;
    /// The event was built from values that are *not* lossless JSON (a
    /// stored `-0`); its text shows what JSON keeps of them.
    pub const LOSSY: u8 = 4;
}

/// What reading an envelope gives: type, seq, time, member ranges, ignorable.
type Index = (JsString, u64, i64, Spans, bool);

/// Byte ranges of the envelope members an event indexes.
#[derive(Debug, Clone, Copy, Default)]
struct Spans {
    data: (u32, u32),
    sources: (u32, u32),
    op: (u32, u32),
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("text", &&*self.text).finish()
    }
}

impl Clone for Event {
    fn clone(&self) -> Event {
        Event {
            ty: self.ty.clone(),
            seq: self.seq,
            time: self.time,
            ignorable: self.ignorable,
            text: self.text.clone(),
            at: self.at,
            checked: AtomicU8::new(self.checked.load(Ordering::Relaxed)),
            tree: self.tree.clone(),
            sealed: OnceLock::new(),
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
            && (self.data_text() == other.data_text() || self.data() == other.data())
            && self.sources() == other.sources()
            && self.op() == other.op()
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

    /// True when the type is `ty`.
    pub fn is(&self, ty: &str) -> bool {
        self.ty == ty
    }

    /// The canonical JSON text of the event.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn member(&self, at: (u32, u32)) -> Option<&str> {
        (at.1 > at.0).then(|| &self.text[at.0 as usize..at.1 as usize])
    }

    /// The canonical JSON text of `data`.
    pub fn data_text(&self) -> &str {
        self.member(self.at.data).unwrap_or("null")
    }

    /// The JSON text of `sourceEventSeqs`, when present.
    pub fn sources_text(&self) -> Option<&str> {
        self.member(self.at.sources)
    }

    /// The JSON text of `surfaceOp`, when present.
    pub fn op_text(&self) -> Option<&str> {
        self.member(self.at.op)
    }

    /// `sourceEventSeqs` as a value, when present.
    pub fn sources(&self) -> Option<Value> {
        self.sources_text().map(parse_member)
    }

    /// `surfaceOp` as a value, when present.
    pub fn op(&self) -> Option<Value> {
        self.op_text().map(parse_member)
    }

    /// `data` as a value tree, parsed on first use and kept. Hot paths
    /// read [`Event::data_text`] instead.
    pub fn data(&self) -> &Value {
        self.tree
            .get_or_init(|| Box::new(parse_member(self.data_text())))
    }

    /// `data` as a fresh value tree (nothing is kept on the event).
    pub fn parse_data(&self) -> Value {
        match self.tree.get() {
            Some(v) => (**v).clone(),
            None => parse_member(self.data_text()),
        }
    }

    /// Append the event's JSON text (as `JSON.stringify` writes it) to `out`.
    pub fn write_json(&self, out: &mut String) {
        out.push_str(&self.text);
    }

    /// The event as a JSON value (used by pure folds and tests).
    pub fn to_value(&self) -> Value {
        json::parse(&self.text).expect("event text is canonical JSON")
    }
}

fn parse_member(text: &str) -> Value {
    json::parse(text).expect("event text is canonical JSON")
}

/// Whether canonical `data` text has `reason: "fallback"`: the retired
/// `request/header` vocabulary (`header.legacy-fallback`).
pub(crate) fn has_fallback_reason(data: &str) -> bool {
    canon::member(data, "reason") == Some("\"fallback\"")
}

/// A non-negative safe integer written canonically (`0` or no leading zero).
pub(crate) fn plain_int(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 16 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if text.len() > 1 && text.starts_with('0') {
        return None;
    }
    let n: u64 = text.parse().ok()?;
    (n <= MAX_SAFE).then_some(n)
}

/// A safe integer (possibly negative) spelled as canonical JSON spells it.
pub fn safe_int(text: &str) -> Option<i64> {
    match text.strip_prefix('-') {
        Some(digits) => plain_int(digits).filter(|&n| n > 0).map(|n| -(n as i64)),
        None => plain_int(text).map(|n| n as i64),
    }
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
                    Rule::SeqGap,
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
