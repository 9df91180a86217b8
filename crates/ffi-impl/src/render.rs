//! The JSON texts the ABI returns for the core's typed results.

use ::dsh_session::engine::surface::Fold;
use ::dsh_session::engine::Event;
use ::dsh_session::json::Value;
use ::dsh_session::store::{Cut, Inspection, RepairReport, SessionSummary, Torn};

/// `dsh_store_list`: `[{...header, "revision"}]`.
pub fn list(sessions: &[SessionSummary]) -> String {
    let rows = sessions.iter().map(|s| {
        let mut o = s.header.as_object().cloned().unwrap_or_default();
        o.insert_str("revision", Value::str(&s.revision));
        Value::Object(o)
    });
    Value::Array(rows.collect()).to_json()
}

/// Events as a JSON array (each event's own text, copied once).
pub fn events_json<'a>(events: impl IntoIterator<Item = &'a Event>) -> String {
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

/// Write seqs as `[1,2,3]`.
pub fn write_seqs<'a>(out: &mut String, seqs: impl IntoIterator<Item = &'a u64>) {
    use std::fmt::Write;
    out.push('[');
    for (i, s) in seqs.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{s}");
    }
    out.push(']');
}

/// `dsh_fold_surface`:
/// `{"nodes":[...],"replacements":[{"seq","start","end","shadowedSeqs"}]}`.
pub fn fold(fold: &Fold) -> String {
    use std::fmt::Write;
    let mut out = String::from("{\"nodes\":");
    write_seqs(&mut out, fold.surface.nodes());
    out.push_str(",\"replacements\":[");
    for (i, r) in fold.replacements.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"seq\":{},\"start\":{},\"end\":{},\"shadowedSeqs\":",
            r.seq, r.start, r.end
        );
        write_seqs(&mut out, &r.shadowed);
        out.push('}');
    }
    out.push_str("]}");
    out
}

/// A path as a JSON string (lossy where it is not UTF-8).
fn path(p: &std::path::Path) -> Value {
    Value::str(&p.to_string_lossy())
}

/// A cut tail's place, size and kind, as an object to complete.
fn tail_object(at: u64, length: u64, why: &str) -> ::dsh_session::json::Object {
    let mut o = ::dsh_session::json::Object::new();
    o.insert_str("at", Value::num(at as f64));
    o.insert_str("length", Value::num(length as f64));
    o.insert_str("why", Value::str(why));
    o
}

/// What an open or a repair cut: `{"at","length","why","copy"}`, or `null`.
pub fn cut(c: Option<&Cut>) -> String {
    c.map_or_else(
        || "null".to_string(),
        |c| {
            let mut o = tail_object(c.at, c.length, c.why.as_str());
            o.insert_str("copy", path(&c.copy));
            Value::Object(o).to_json()
        },
    )
}

/// A torn tail a read found: `{"at","length","why"}`, or `null`.
fn torn(t: Option<&Torn>) -> String {
    t.map_or_else(
        || "null".to_string(),
        |t| Value::Object(tail_object(t.at.value(), t.length, t.why.as_str())).to_json(),
    )
}

/// `dsh_store_repair`: `{"applied","tornTail","repaired","cut"}`.
pub fn repair_report(r: &RepairReport) -> String {
    format!(
        "{{\"applied\":{},\"tornTail\":{},\"repaired\":{},\"cut\":{}}}",
        r.applied,
        torn(r.torn.as_ref()),
        events_json(r.closers.iter().map(|e| &**e)),
        cut(r.cut.as_ref())
    )
}

/// `dsh_store_inspect`: `{"header","revision","torn","tornTail","events",
/// "repair","problems","quarantined"}`, `events` being the stored log
/// followed by the closers.
pub fn inspection(i: &Inspection) -> String {
    let mut out = String::from("{\"header\":");
    out.push_str(&i.header.to_json());
    out.push_str(",\"revision\":");
    out.push_str(&Value::str(&i.revision).to_json());
    out.push_str(&format!(
        ",\"torn\":{},\"tornTail\":{},\"events\":",
        i.torn.is_some(),
        torn(i.torn.as_ref())
    ));
    out.push_str(&events_json(i.events.iter().chain(&i.repair).map(|e| &**e)));
    out.push_str(",\"repair\":");
    out.push_str(&events_json(i.repair.iter().map(|e| &**e)));
    let problems = i.problems.iter().map(|f| {
        Value::obj([
            ("seq", Value::num(f.seq as f64)),
            (
                "rule",
                Value::str(f.error.cause.unwrap_or(f.error.rule).as_str()),
            ),
            ("status", Value::str(crate::status_name(f.error.status))),
            ("message", Value::str(&f.error.message)),
        ])
    });
    out.push_str(",\"problems\":");
    out.push_str(&Value::Array(problems.collect()).to_json());
    out.push_str(",\"quarantined\":");
    out.push_str(&Value::Array(i.quarantined.iter().map(|p| path(p)).collect()).to_json());
    out.push('}');
    out
}
