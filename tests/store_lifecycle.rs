//! A stored session's lifecycle through the core `Store` API (with
//! tests/store_support, which takes the C ABI's JSON texts;
//! docs/tests-checklist.md,
//! the persistence sections): ids released by abandoned sessions, closes
//! that drain, inspecting a live open turn, header-only logs, a seq gap
//! bounding the prefix, concurrent sessions' buffers, refused configs.

mod store_support;

use std::sync::Arc;

use ::dsh_session::json::Value;
use store_support::{
    raw_jsonl_store, rule, strip_time, temp_dir, types_of, Store, DSH_E_INVALID_ARGUMENT, DSH_OK,
};

fn jsonl(dir: &std::path::Path, extra: &str) -> String {
    format!(
        r#"{{"backend":"jsonl","path":{}{extra}}}"#,
        Value::str(dir.to_str().unwrap()).to_json()
    )
}

fn inspect(store: &Store, id: &str) -> Value {
    store.inspect(id)
}

fn array<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v.as_object().unwrap().get(key).unwrap().as_array().unwrap()
}

const USER: &str =
    r#"{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#;
const APPEND: Option<&str> = Some(r#"{"surfaceOp":"append"}"#);

/// Lifecycle #21: a session created and closed before anything was
/// appended leaves nothing behind; its id can be created again.
#[test]
fn an_abandoned_never_materialized_session_releases_its_id() {
    let dir = temp_dir("gap-abandoned");
    let store = Store::open(&jsonl(&dir, "")).unwrap();
    let s = store.create(r#"{"id":"lazy"}"#).unwrap();
    assert_eq!(s.close().0, DSH_OK);
    assert_eq!(store.list(), Value::Array(Vec::new()), "nothing on disk");
    let again = store.create(r#"{"id":"lazy"}"#).unwrap();
    again.append_ok("turn/start", r#"{"turn":1}"#, None);
    assert_eq!(again.close().0, DSH_OK);
}

/// Lifecycle #22: closing drains the buffered events before the id is
/// released: reopening right away sees every event.
#[test]
fn closing_drains_buffered_events_before_the_id_is_released() {
    let dir = temp_dir("gap-drain");
    let store = Store::open(&jsonl(&dir, r#","batchWindowMs":600000"#)).unwrap();
    let s = store.create(r#"{"id":"d"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    s.append_ok("user/message", USER, APPEND);
    assert_eq!(s.close().0, DSH_OK);
    let (s, opened) = store.open_session("d").unwrap();
    assert_eq!(
        types_of(array(&opened, "repaired")),
        ["turn/end"],
        "the open turn is closed"
    );
    let events = s.events();
    assert_eq!(
        &types_of(events.as_array().unwrap())[..2],
        ["turn/start", "user/message"]
    );
}

/// Write-behind #9: a batch window over 2147483647 ms is a configuration
/// error (0 is accepted: synchronous writes). The C ABI refuses a JSON
/// window that is no integer at all (`1.5`, `-1`, `"25"`) as one out of
/// range, `u64::MAX` here (crates/ffi-impl/tests/store_lifecycle.rs).
#[test]
fn an_invalid_batch_window_is_refused() {
    let dir = temp_dir("gap-window");
    for bad in [2_147_483_648, u64::MAX] {
        let mut config = ::dsh_session::store::StoreConfig::jsonl(dir.to_path_buf());
        config.batch_window_ms = bad;
        let Err((st, text)) = Store::open_typed(config) else {
            panic!("batch_window_ms {bad} accepted")
        };
        assert_eq!(st, DSH_E_INVALID_ARGUMENT, "{bad}: {text}");
        assert_eq!(rule(&text), "config.invalid", "{bad}");
    }
    Store::open(&jsonl(&dir, r#","batchWindowMs":0"#)).unwrap();
}

/// A PostgreSQL statement timeout is an integer of 1 to 2147483647 ms:
/// anything else is refused before a connection is tried. (That it is a
/// key of the postgres backend only, and what the C ABI makes of JSON
/// that is no integer, crates/ffi-impl/tests/store_lifecycle.rs shows: a
/// typed configuration has no timeout but the postgres backend's.)
#[cfg(feature = "postgres")]
#[test]
fn an_invalid_statement_timeout_is_refused() {
    use ::dsh_session::store::{BackendConfig, StoreConfig, DEFAULT_SCHEMA};
    use store_support::DSH_E_IO;
    let postgres = |extra: &str| {
        format!(r#"{{"backend":"postgres","url":"postgresql://u@127.0.0.1:1/db"{extra}}}"#)
    };
    // u64::MAX: what the C ABI makes of 1.5, -1, "30000" and null.
    for bad in [0, 2_147_483_648, u64::MAX] {
        let config = StoreConfig::new(BackendConfig::Postgres {
            url: "postgresql://u@127.0.0.1:1/db".to_string(),
            schema: DEFAULT_SCHEMA.to_string(),
            statement_timeout_ms: bad,
        });
        let Err((st, text)) = Store::open_typed(config) else {
            panic!("statement_timeout_ms {bad} accepted")
        };
        assert_eq!(st, DSH_E_INVALID_ARGUMENT, "{bad}: {text}");
        assert_eq!(rule(&text), "config.invalid", "{bad}");
        assert!(text.contains("statementTimeoutMs"), "{text}");
    }
    // A valid one passes the configuration's checks: the open then fails
    // only at the connection (nothing listens on port 1).
    let Err((st, text)) = Store::open(&postgres(r#","statementTimeoutMs":1000"#)) else {
        panic!("a server on port 1")
    };
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_IO, "postgres.connect"),
        "{text}"
    );
}

/// Coordinator #23: inspecting a session that is open inside a turn reads
/// it as stored (the closers repair would add are reported, in memory
/// only) and leaves the live turn open.
#[test]
fn inspecting_a_live_open_turn_returns_it_unbalanced() {
    let dir = temp_dir("gap-inspect");
    let store = Store::open(&jsonl(&dir, "")).unwrap();
    let s = store.create(r#"{"id":"i"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    s.append_ok("user/message", USER, APPEND);
    let seen = inspect(&store, "i");
    assert_eq!(
        types_of(array(&seen, "events")),
        ["turn/start", "user/message", "turn/end"]
    );
    assert_eq!(types_of(array(&seen, "repair")), ["turn/end"]);
    // The live session is untouched.
    assert_eq!(
        s.info().as_object().unwrap().get("openTurn"),
        Some(&Value::Number(1.0))
    );
    assert_eq!(strip_time(s.events()).as_array().unwrap().len(), 2);
}

/// JSONL #50: a log holding only its header loads as an empty session.
#[test]
fn a_header_only_log_preserves_nothing() {
    let (dir, config) = raw_jsonl_store("gap-header-only", "h", &[]);
    let store = Store::open(&config).unwrap();
    let seen = inspect(&store, "h");
    assert!(array(&seen, "events").is_empty());
    assert_eq!(
        seen.as_object().unwrap().get("torn"),
        Some(&Value::Bool(false))
    );
    let (s, opened) = store.open_session("h").unwrap();
    assert!(array(&opened, "repaired").is_empty());
    assert_eq!(
        types_of(s.events().as_array().unwrap()),
        ["session/end-seed"]
    );
    drop((s, store));
    let _ = std::fs::remove_dir_all(&dir);
}

/// JSONL #47 / #52: a seq gap after the last `turn/end` bounds the valid
/// prefix, and repair cuts the uncommitted tail.
#[test]
fn a_seq_gap_after_the_last_turn_end_bounds_the_prefix() {
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        r#"{"type":"turn/start","seq":2,"time":1,"data":{"turn":2}}"#,
        r#"{"type":"turn/start","seq":7,"time":1,"data":{"turn":3}}"#,
    ];
    let (dir, config) = raw_jsonl_store("gap-seq", "g", &lines);
    let store = Store::open(&config).unwrap();
    let seen = inspect(&store, "g");
    // The valid prefix (the gap and what follows are cut), then the closer
    // repair would append.
    assert_eq!(
        types_of(array(&seen, "events")),
        ["turn/start", "turn/end", "turn/start", "turn/end"]
    );
    assert_eq!(types_of(array(&seen, "repair")), ["turn/end"]);
    assert_eq!(
        seen.as_object().unwrap().get("torn"),
        Some(&Value::Bool(true))
    );
    let (s, opened) = store.open_session("g").unwrap();
    assert_eq!(types_of(array(&opened, "repaired")), ["turn/end"]);
    let events = s.events();
    let seqs: Vec<f64> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_object().unwrap().get("seq").unwrap().as_f64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        [0.0, 1.0, 2.0, 3.0, 4.0],
        "the gap is gone, closers follow"
    );
    drop((s, store));
    // Cut durably: a fresh store reads the repaired log.
    let store = Store::open(&config).unwrap();
    let seen = inspect(&store, "g");
    assert_eq!(
        seen.as_object().unwrap().get("torn"),
        Some(&Value::Bool(false))
    );
    assert_eq!(array(&seen, "events").len(), 5);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

fn chunk(k: usize, i: usize) -> String {
    format!(r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"s{k} e{i}"}}}}"#)
}

/// JSONL #36: sessions appending concurrently on one store do not mix
/// their buffers; each reloads its own log.
#[test]
fn concurrent_sessions_do_not_mix_buffers() {
    let dir = temp_dir("gap-concurrent");
    let store = Arc::new(Store::open(&jsonl(&dir, r#","batchWindowMs":2"#)).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|k| {
            let store = store.clone();
            std::thread::spawn(move || {
                let s = store.create(&format!(r#"{{"id":"c{k}"}}"#)).unwrap();
                for i in 0..300 {
                    s.append_ok("assistant/chunk", &chunk(k, i), None);
                }
                assert_eq!(s.close().0, DSH_OK);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for k in 0..4 {
        let seen = inspect(&store, &format!("c{k}"));
        let events = array(&seen, "events");
        assert_eq!(events.len(), 300);
        for (i, e) in events.iter().enumerate() {
            let data = e.as_object().unwrap().get("data").unwrap().to_json();
            assert_eq!(data, chunk(k, i));
        }
    }
}

/// SQLite #28: a database path containing NUL is refused.
#[test]
fn a_database_path_with_nul_is_refused() {
    let Err((st, text)) = Store::open(r#"{"backend":"sqlite","path":"/tmp/a\u0000b.db"}"#) else {
        panic!("a path with NUL opened")
    };
    assert_eq!(st, DSH_E_INVALID_ARGUMENT, "{text}");
}

/// `"trimHeap": true` (the host's opt-in to trimming the C heap after an
/// open) is accepted on every backend and changes nothing a session shows.
#[test]
fn a_trimming_store_opens_sessions_as_any_other() {
    let dir = temp_dir("trim-heap");
    let config = jsonl(&dir, r#","trimHeap":true"#);
    let store = Store::open(&config).unwrap();
    let s = store.create(r#"{"id":"t"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    let events = s.events();
    drop(s);
    drop(store);
    let (s, _) = Store::open(&config).unwrap().open_session("t").unwrap();
    let reopened = s.events();
    assert_eq!(
        reopened.as_array().unwrap()[..1],
        events.as_array().unwrap()[..]
    );
}
