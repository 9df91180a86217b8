//! The header line of a JSONL log (docs/formats.md §3.2): writing it in the
//! exact key order, and reading it back with the version refusal, the shape
//! guard and the retired-field check.

use std::path::Path;

use crate::error::{Error, Result, Status};
use crate::json::{self, Object, Value};
use crate::rule::Rule;

/// Optional keys written between `createdAt` and `delegationDepth`.
const MIDDLE_KEYS: [&str; 4] = ["cwd", "parentSession", "seedLength", "origin"];

/// The header line (with its `\n`) of the session `header` describes:
/// `{"type":"session","version",…,"delegationDepth":N,"agentPreset"?}`.
pub fn header_line(header: &Value) -> String {
    let empty = Object::new();
    let h = header.as_object().unwrap_or(&empty);
    let zero = Value::Number(0.0);
    let mut out = String::from("{\"type\":\"session\"");
    let push = |out: &mut String, key: &str, value: &Value| {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        value.write_json(out);
    };
    push(&mut out, "version", h.get("version").unwrap_or(&zero));
    push(&mut out, "id", h.get("id").unwrap_or(&Value::str("")));
    push(&mut out, "createdAt", h.get("createdAt").unwrap_or(&zero));
    for key in MIDDLE_KEYS {
        if let Some(v) = h.get(key) {
            push(&mut out, key, v);
        }
    }
    push(
        &mut out,
        "delegationDepth",
        h.get("delegationDepth").unwrap_or(&zero),
    );
    if let Some(v) = h.get("agentPreset") {
        push(&mut out, "agentPreset", v);
    }
    out.push_str("}\n");
    out
}

/// How a header line is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A targeted read: every problem is an error.
    Load,
    /// Listing: no version refusal; a line that is not a header is skipped.
    List,
}

fn corrupt(rule: Rule, message: String) -> Error {
    Error::new(Status::Corrupt, rule, message)
}

fn non_negative_safe(v: Option<&Value>) -> bool {
    v.and_then(Value::as_safe_u64).is_some()
        && !v
            .and_then(Value::as_f64)
            .is_some_and(|n| n.is_sign_negative())
}

/// The shape guard (`isHeaderLine`).
fn is_header_line(v: &Value) -> bool {
    let Some(h) = v.as_object() else { return false };
    h.get("type").and_then(Value::as_str) == Some("session")
        && h.get("version").is_some_and(Value::is_number)
        && h.get("id").is_some_and(Value::is_string)
        && non_negative_safe(h.get("createdAt"))
        && non_negative_safe(h.get("delegationDepth"))
        && h.get("origin")
            .is_none_or(|o| o.as_str() == Some("subagent"))
        && h.get("agentPreset").is_none_or(Value::is_string)
}

/// The version refusal of a raw first line (`load.version-newer/older`).
fn refuse_version(v: &Value, path: &Path) -> Result<()> {
    let Some(h) = v.as_object() else {
        return Ok(());
    };
    let Some(version) = h.get("version").and_then(Value::as_f64) else {
        return Ok(());
    };
    if version == 0.0 {
        return Ok(());
    }
    let id = match h.get("id") {
        Some(Value::String(s)) => s.to_string_lossy(),
        Some(other) => other.to_json(),
        None => "undefined".to_string(),
    };
    let shown = Value::Number(version).to_json();
    let raw = format!("(raw log: {})", path.display());
    Err(if version > 0.0 {
        Error::new(
            Status::SchemaMismatch,
            Rule::LoadVersionNewer,
            format!(
                "session {id} uses session format v{shown} but this build reads only v0; \
                 it was written by a newer harness, upgrade to open it {raw}"
            ),
        )
    } else {
        Error::new(
            Status::SchemaMismatch,
            Rule::LoadVersionOlder,
            format!("session {id} uses session format v{shown}, older than v0, and no upgrade path exists {raw}"),
        )
    })
}

/// Read a header record (the first line, `\n` included). Returns the
/// header in docs/events.md §13 key order with `delegationDepth` always present
/// and unknown keys dropped. In [`Mode::List`] a line that is not a header
/// gives `Ok(None)`.
pub(crate) fn read_header(line: &[u8], path: &Path, mode: Mode) -> Result<Option<Value>> {
    let text = String::from_utf8_lossy(line);
    let value = match json::parse(&text) {
        Ok(v) => v,
        Err(_) if mode == Mode::List => return Ok(None),
        Err(e) => {
            return Err(corrupt(
                Rule::JsonlHeaderNotJson,
                format!(
                    "corrupt session log {}: header line is not JSON ({e})",
                    path.display()
                ),
            ))
        }
    };
    if mode == Mode::Load {
        refuse_version(&value, path)?;
    }
    if !is_header_line(&value) {
        if mode == Mode::List {
            return Ok(None);
        }
        return Err(corrupt(
            Rule::JsonlHeaderInvalid,
            format!(
                "corrupt session log {}: first line is not a session header",
                path.display()
            ),
        ));
    }
    let h = value.as_object().expect("checked by the guard");
    if h.contains_key("sandboxMode") || h.contains_key("approvalPolicy") {
        return Err(Error::new(
            Status::SchemaMismatch,
            Rule::JsonlHeaderRetiredFields,
            format!(
                "session log {} uses retired policy baseline fields (sandboxMode/approvalPolicy)",
                path.display()
            ),
        ));
    }
    let mut out = Object::new();
    for key in ["version", "id", "createdAt"]
        .into_iter()
        .chain(MIDDLE_KEYS)
    {
        if let Some(v) = h.get(key) {
            out.insert_str(key, v.clone());
        }
    }
    out.insert_str(
        "delegationDepth",
        h.get("delegationDepth").cloned().unwrap_or_default(),
    );
    if let Some(v) = h.get("agentPreset") {
        out.insert_str("agentPreset", v.clone());
    }
    Ok(Some(Value::Object(out)))
}
