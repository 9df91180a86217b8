//! The JSON texts the ABI returns for the core's typed results.

use ::dsh_session::engine::event::events_to_json;
use ::dsh_session::json::Value;
use ::dsh_session::store::{Inspection, SessionSummary};

/// `dsh_store_list`: `[{...header, "revision"}]`.
pub fn list(sessions: &[SessionSummary]) -> String {
    let rows = sessions.iter().map(|s| {
        let mut o = s.header.as_object().cloned().unwrap_or_default();
        o.insert_str("revision", Value::str(&s.revision));
        Value::Object(o)
    });
    Value::Array(rows.collect()).to_json()
}

/// `dsh_store_inspect`: `{"header","revision","torn","events","repair",
/// "problems"}`, `events` being the stored log followed by the closers.
pub fn inspection(i: &Inspection) -> String {
    let mut out = String::from("{\"header\":");
    out.push_str(&i.header.to_json());
    out.push_str(",\"revision\":");
    out.push_str(&Value::str(&i.revision).to_json());
    out.push_str(&format!(",\"torn\":{},\"events\":", i.torn.is_some()));
    out.push_str(&events_to_json(
        i.events.iter().chain(&i.repair).map(|e| &**e),
    ));
    out.push_str(",\"repair\":");
    out.push_str(&events_to_json(i.repair.iter().map(|e| &**e)));
    let problems = i.problems.iter().map(|f| {
        Value::obj([
            ("seq", Value::num(f.seq as f64)),
            (
                "rule",
                Value::str(f.error.cause.unwrap_or(f.error.rule).as_str()),
            ),
            ("status", Value::str(f.error.status.name())),
            ("message", Value::str(&f.error.message)),
        ])
    });
    out.push_str(",\"problems\":");
    out.push_str(&Value::Array(problems.collect()).to_json());
    out.push('}');
    out
}
