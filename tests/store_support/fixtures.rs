//! What the storage suites share whichever surface they drive (the core's
//! `Store` in `tests/`, the C ABI in `crates/ffi-impl/tests`): the host
//! types they declare, temporary directories, hand-written logs, the
//! PostgreSQL server they may use, and small readers of results.
#![allow(dead_code)]

use ::dsh_session::json::{self, Value};

#[path = "tempdir.rs"]
mod tempdir;
pub use tempdir::TempDir;

/// The host event types the integration tests append, declared so a
/// default (strict) store accepts them and every later open reads them.
pub const TEST_EVENT_TYPES: [&str; 6] = [
    "plugin/a",
    "plugin/b",
    "plugin/note",
    "plugin/noise",
    "plugin/x",
    "plugin/reentrant",
];

/// `config` (a store configuration object, or `null`) with
/// [`TEST_EVENT_TYPES`] declared as its `eventTypes`.
pub fn declaring(config: &str) -> String {
    let types: Vec<String> = TEST_EVENT_TYPES
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect();
    let member = format!("\"eventTypes\":[{}]", types.join(","));
    match config.trim() {
        "null" | "{}" => format!("{{{member}}}"),
        c => format!(
            "{{{member},{}",
            c.trim_start().strip_prefix('{').expect("a config object")
        ),
    }
}

pub fn parse(text: &str) -> Value {
    json::parse(text).expect("library output is JSON")
}

/// The `rule` of an error object.
pub fn rule(text: &str) -> String {
    parse(text)
        .as_object()
        .and_then(|o| o.get("rule"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Remove `time` from an event or an array of events.
pub fn strip_time(mut v: Value) -> Value {
    match &mut v {
        Value::Object(o) => {
            o.remove("time");
        }
        Value::Array(a) => {
            for e in a.iter_mut() {
                if let Some(o) = e.as_object_mut() {
                    o.remove("time");
                }
            }
        }
        _ => {}
    }
    v
}

/// A raw-lines JSONL store (under a fresh temp dir named after `tag`)
/// whose session `id` holds `lines` after the reference's header line.
/// Returns the temp dir and the store config.
pub fn raw_jsonl_store(tag: &str, id: &str, lines: &[&str]) -> (TempDir, String) {
    let dir = temp_dir(tag);
    let root = dir.join("root");
    let log_dir = root.join("_no-cwd").join(id);
    std::fs::create_dir_all(&log_dir).unwrap();
    let mut text = format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1700000000000,"delegationDepth":0}}"#
    );
    text.push('\n');
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(log_dir.join("session.jsonl"), text).unwrap();
    let config = format!(
        r#"{{"backend":"jsonl","path":{},"compression":"none"}}"#,
        Value::str(root.to_str().unwrap()).to_json()
    );
    (dir, config)
}

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(name: &str) -> TempDir {
    tempdir::make("dsh-test", name)
}

/// The `type` of each event of an array.
pub fn types_of(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            e.as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Every file under `dir` with its bytes, in path order (to show a store's
/// files are left byte-identical).
pub fn file_tree(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The PostgreSQL server the tests may use (`DSH_TEST_POSTGRES_URL`, which
/// `scripts/test.sh` sets to a throwaway cluster), or `None` with a note
/// on stderr that the PostgreSQL test is skipped.
pub fn postgres_url() -> Option<String> {
    match std::env::var("DSH_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "skipped: no PostgreSQL server (set DSH_TEST_POSTGRES_URL, as scripts/test.sh does)"
            );
            None
        }
    }
}

/// A schema name no other test (or earlier run) uses.
pub fn fresh_schema() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "t_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A PostgreSQL store configuration in a fresh schema of the test server,
/// with `extra` members (`,"batchWindowMs":5`), or `None` (skipped, as
/// [`postgres_url`] says).
pub fn postgres_config(extra: &str) -> Option<String> {
    let url = postgres_url()?;
    Some(format!(
        r#"{{"backend":"postgres","url":{},"schema":"{}"{extra}}}"#,
        Value::str(&url).to_json(),
        fresh_schema()
    ))
}
