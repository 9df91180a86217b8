//! Packed chunk rows (docs/formats.md §3.3, §4.5): runs of streamed
//! `assistant/chunk` deltas stored as one record, expanded back on read.
//! Shared by the JSONL and SQLite formats, which differ only in bounds.
//! Packing is in `pack.rs`; this module validates and expands rows.

use std::sync::Arc;

use crate::engine::event::{safe_int, MAX_SAFE};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::{canon, Object, Value};
use crate::rule::Rule;
use crate::store::backend::Stored;

mod pack;

pub use pack::pack;

/// `text-chunks`.
pub const TEXT_TAG: &str = "text-chunks";
/// `reasoning-chunks`.
pub const REASONING_TAG: &str = "reasoning-chunks";
/// `tool-call-chunks`.
pub const TOOL_TAG: &str = "tool-call-chunks";

/// True when `ty` is one of the three packed-row tags.
pub fn is_tag(ty: &str) -> bool {
    ty == TEXT_TAG || ty == REASONING_TAG || ty == TOOL_TAG
}

/// Size limits of a packed row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Fewest members of a row written (shorter runs stay plain events).
    pub min_members: usize,
    /// Fewest members of a row accepted on read.
    pub decode_min_members: usize,
    /// Most members of a row, if bounded.
    pub max_members: Option<usize>,
    /// Most UTF-8 bytes of `JSON(row.data)`, if bounded.
    pub max_data_bytes: Option<usize>,
}

/// JSONL: at least 3 members, no upper bound (decoding accepts 1 or more).
pub const JSONL_BOUNDS: Bounds = Bounds {
    min_members: 3,
    decode_min_members: 1,
    max_members: None,
    max_data_bytes: None,
};

/// SQLite schema 17: 3..=1024 members and at most 1 MiB of row data.
pub const SQLITE_BOUNDS: Bounds = Bounds {
    min_members: 3,
    decode_min_members: 3,
    max_members: Some(1024),
    max_data_bytes: Some(1_048_576),
};

/// One packed row.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedRow {
    /// The row tag.
    pub tag: &'static str,
    /// Seq of the first member.
    pub seq0: u64,
    /// Time of the first member.
    pub time0: i64,
    /// The row data object as JSON text (`turn, step, index, dt, texts` or
    /// `turn, step, index, dt, id, name?, args`).
    pub data: String,
}

impl PackedRow {
    /// Append the JSONL record `{"type","seq0","time0","data"}` to `out`.
    pub fn write_json(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(
            out,
            "{{\"type\":\"{}\",\"seq0\":{},\"time0\":{},\"data\":",
            self.tag, self.seq0, self.time0
        );
        out.push_str(&self.data);
        out.push('}');
    }
}

/// One storage record: an event as is, or a packed row.
#[derive(Debug, Clone)]
pub enum Record<'a> {
    /// A plain event.
    Event(&'a Arc<Event>),
    /// A packed run of chunk events.
    Row(PackedRow),
}

fn keys_are(o: &Object, keys: &[&str]) -> bool {
    o.len() == keys.len() && keys.iter().all(|k| o.contains_key(k))
}

/// The members of canonical object text when its keys are exactly `keys`
/// (in any order), each value in the position of its key.
fn members_exactly<'a, const N: usize>(obj: &'a str, keys: [&str; N]) -> Option<[&'a str; N]> {
    let mut out = [""; N];
    let mut seen = 0;
    for (k, v) in canon::members(obj)? {
        let at = keys.iter().position(|&want| want == k)?;
        if !out[at].is_empty() {
            return None;
        }
        out[at] = v;
        seen += 1;
    }
    (seen == N).then_some(out)
}

fn is_number(text: &str) -> bool {
    text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
}

fn is_string(text: &str) -> bool {
    text.starts_with('"')
}

fn bad(rule: Rule, tag: &str, what: &str) -> Error {
    Error::new(
        Status::Corrupt,
        rule,
        format!("malformed {tag} storage row: {what}"),
    )
}

/// Validate a packed row given by its parts and expand it into event
/// objects (key order `type, seq, time, data`; data `turn, step, chunk`).
pub fn expand(
    tag: &str,
    seq0: &Value,
    time0: &Value,
    data: &Value,
    bounds: Bounds,
) -> Result<Vec<Stored>> {
    let tag_static = if tag == TEXT_TAG {
        TEXT_TAG
    } else if tag == REASONING_TAG {
        REASONING_TAG
    } else if tag == TOOL_TAG {
        TOOL_TAG
    } else {
        return Err(bad(
            Rule::RowPackedTag,
            tag,
            "packed discriminator needs a chunk tag",
        ));
    };
    let tool = tag_static == TOOL_TAG;
    let seq0 = seq0
        .as_safe_u64()
        .ok_or_else(|| bad(Rule::RowSeq0, tag, "seq0 invalid"))?;
    let time0 = time0
        .as_safe_i64()
        .ok_or_else(|| bad(Rule::RowTime0, tag, "time0 invalid"))?;
    if data.as_array().is_some() {
        return Err(bad(Rule::RowDataKeys, tag, "bad data fields"));
    }
    let d = data
        .as_object()
        .ok_or_else(|| bad(Rule::RowDataObject, tag, "data must be an object"))?;
    let keys_ok = if tool {
        keys_are(d, &["turn", "step", "index", "id", "dt", "args"])
            || keys_are(d, &["turn", "step", "index", "id", "dt", "args", "name"])
    } else {
        keys_are(d, &["turn", "step", "index", "dt", "texts"])
    };
    if !keys_ok {
        return Err(bad(Rule::RowDataKeys, tag, "bad data fields"));
    }
    let (id, name) = if tool {
        let id = d.get("id").and_then(Value::as_js_str);
        let name = d.get("name");
        if id.is_none() || name.is_some_and(|n| n.as_js_str().is_none()) {
            return Err(bad(Rule::RowToolId, tag, "id/name must be strings"));
        }
        (id, name.and_then(Value::as_js_str))
    } else {
        (None, None)
    };
    let (turn, step, index) = (d.get("turn"), d.get("step"), d.get("index"));
    if [turn, step, index]
        .iter()
        .any(|v| v.and_then(Value::as_f64).is_none())
    {
        return Err(bad(
            Rule::RowNumbers,
            tag,
            "turn/step/index must be numbers",
        ));
    }
    let members = d
        .get(if tool { "args" } else { "texts" })
        .and_then(Value::as_array);
    let members = members
        .filter(|m| m.iter().all(|v| v.as_js_str().is_some()))
        .filter(|m| {
            m.len() >= bounds.decode_min_members && bounds.max_members.is_none_or(|x| m.len() <= x)
        })
        .ok_or_else(|| bad(Rule::RowMembers, tag, "member array invalid"))?;
    let dt = d
        .get("dt")
        .and_then(Value::as_array)
        .filter(|dt| dt.len() + 1 == members.len() && dt.iter().all(|v| v.as_safe_i64().is_some()))
        .ok_or_else(|| bad(Rule::RowDt, tag, "dt invalid or arity mismatch"))?;
    if seq0 + members.len() as u64 - 1 > MAX_SAFE {
        return Err(bad(
            Rule::RowSeqOverflow,
            tag,
            "member seqs leave the safe range",
        ));
    }
    let mut times = Vec::with_capacity(members.len());
    let mut t = time0;
    times.push(t);
    for v in dt {
        t = t
            .checked_add(v.as_safe_i64().unwrap_or(0))
            .filter(|t| t.unsigned_abs() <= MAX_SAFE)
            .ok_or_else(|| {
                bad(
                    Rule::RowTimeOverflow,
                    tag,
                    "member times leave the safe range",
                )
            })?;
        times.push(t);
    }
    let chunk_type = match tag_static {
        TEXT_TAG => "text-delta",
        REASONING_TAG => "reasoning-delta",
        _ => "tool-call-delta",
    };
    let null = Value::Null;
    let (turn, step, index) = (
        turn.unwrap_or(&null),
        step.unwrap_or(&null),
        index.unwrap_or(&null),
    );
    // The members are written straight to canonical event text; only a
    // number JSON cannot keep (-0) needs the value form.
    let lossless = turn.is_lossless() && step.is_lossless() && index.is_lossless();
    let mut out = Vec::with_capacity(members.len());
    for (k, member) in members.iter().enumerate() {
        let mut chunk = Object::new();
        chunk.insert_str("type", Value::str(chunk_type));
        chunk.insert_str("index", index.clone());
        if tool {
            chunk.insert_str("id", Value::String(id.cloned().unwrap_or_default()));
            if let Some(name) = name {
                chunk.insert_str("name", Value::String(name.clone()));
            }
            chunk.insert_str("argumentsDelta", member.clone());
        } else {
            chunk.insert_str("text", member.clone());
        }
        if lossless {
            use std::fmt::Write;
            let mut text = String::with_capacity(member_len(member) + 128);
            let _ = write!(
                text,
                "{{\"type\":\"assistant/chunk\",\"seq\":{},\"time\":{},\"data\":{{\"turn\":",
                seq0 + k as u64,
                times[k]
            );
            turn.write_json(&mut text);
            text.push_str(",\"step\":");
            step.write_json(&mut text);
            text.push_str(",\"chunk\":");
            Value::Object(chunk).write_json(&mut text);
            text.push_str("}}");
            out.push(Stored::Canonical(text.into_boxed_str()));
            continue;
        }
        let mut data = Object::new();
        data.insert_str("turn", turn.clone());
        data.insert_str("step", step.clone());
        data.insert_str("chunk", Value::Object(chunk));
        let mut e = Object::new();
        e.insert_str("type", Value::str("assistant/chunk"));
        e.insert_str("seq", Value::Number((seq0 + k as u64) as f64));
        e.insert_str("time", Value::Number(times[k] as f64));
        e.insert_str("data", Value::Object(data));
        out.push(Stored::Value(Value::Object(e)));
    }
    Ok(out)
}

/// [`expand`] of a row whose data is canonical text (what this library
/// writes), straight from the text: each member's event text is the same
/// as the value path's. `None` whenever the value path might answer
/// otherwise (it then validates, reports, and expands).
pub fn expand_canonical(
    tag: &str,
    seq0: u64,
    time0: i64,
    data: &str,
    bounds: Bounds,
) -> Option<Vec<Stored>> {
    use std::fmt::Write;
    let tool = tag == TOOL_TAG;
    let ([turn, step, index, dt, members], id, name) = if tool {
        let keys = ["turn", "step", "index", "dt", "args", "id", "name"];
        match members_exactly(data, keys) {
            Some([t, s, i, d, a, id, n]) => ([t, s, i, d, a], Some(id), Some(n)),
            None => match members_exactly(data, ["turn", "step", "index", "dt", "args", "id"])? {
                [t, s, i, d, a, id] => ([t, s, i, d, a], Some(id), None),
            },
        }
    } else if tag == TEXT_TAG || tag == REASONING_TAG {
        let keys = ["turn", "step", "index", "dt", "texts"];
        (members_exactly(data, keys)?, None, None)
    } else {
        return None;
    };
    let strings = id.iter().chain(name.iter()).all(|t| is_string(t));
    if !strings || ![turn, step, index].iter().all(|t| is_number(t)) {
        return None;
    }
    let members: Vec<&str> = canon::elements(members)?.collect();
    let n = members.len();
    let counted =
        n >= bounds.decode_min_members.max(1) && bounds.max_members.is_none_or(|x| n <= x);
    if !counted || !members.iter().all(|m| is_string(m)) || seq0 + n as u64 - 1 > MAX_SAFE {
        return None;
    }
    let mut dt = canon::elements(dt)?;
    let (chunk_type, member_key) = match tag {
        TEXT_TAG => ("text-delta", "text"),
        REASONING_TAG => ("reasoning-delta", "text"),
        _ => ("tool-call-delta", "argumentsDelta"),
    };
    let mut out = Vec::with_capacity(n);
    let mut time = time0;
    for (k, member) in members.iter().enumerate() {
        if k > 0 {
            time = time
                .checked_add(safe_int(dt.next()?)?)
                .filter(|t| t.unsigned_abs() <= MAX_SAFE)?;
        }
        let mut text = String::with_capacity(member.len() + 160);
        let _ = write!(
            text,
            "{{\"type\":\"assistant/chunk\",\"seq\":{},\"time\":{time},\"data\":{{\"turn\":{turn},\
             \"step\":{step},\"chunk\":{{\"type\":\"{chunk_type}\",\"index\":{index},",
            seq0 + k as u64,
        );
        for (key, value) in [("id", id), ("name", name)] {
            if let Some(value) = value {
                let _ = write!(text, "\"{key}\":{value},");
            }
        }
        let _ = write!(text, "\"{member_key}\":{member}}}}}}}");
        out.push(Stored::Canonical(text.into_boxed_str()));
    }
    dt.next().is_none().then_some(out)
}

fn member_len(v: &Value) -> usize {
    v.as_js_str().map_or(0, |s| s.as_wtf8().len())
}

/// Decode one JSONL storage record: a tagged object is validated
/// (`row.envelope` and the rest) and expanded; anything else is one event.
pub fn decode_jsonl_record(record: Value) -> Result<Vec<Stored>> {
    // A packed row never carries `ignorable`; an ignorable logical event
    // may have a tag as its type (the vocabulary is open) and is an event.
    let tag = record
        .as_object()
        .filter(|o| o.get("ignorable").and_then(Value::as_bool) != Some(true))
        .and_then(|o| o.get("type"))
        .and_then(Value::as_str)
        .filter(|t| is_tag(t))
        .map(str::to_string);
    let Some(tag) = tag else {
        return Ok(vec![Stored::Value(record)]);
    };
    let o = record.as_object().expect("checked above");
    if !keys_are(o, &["type", "seq0", "time0", "data"]) {
        return Err(bad(Rule::RowEnvelope, &tag, "bad envelope"));
    }
    let get = |k| o.get(k).expect("checked above");
    expand(&tag, get("seq0"), get("time0"), get("data"), JSONL_BOUNDS)
}
