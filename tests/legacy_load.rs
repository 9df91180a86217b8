//! Logs in the reference's older shapes (docs/lifecycle.md §7) open after the
//! in-memory upgrade; retired vocabulary and malformed legacy shapes refuse.
//! The logs are written by hand in the reference's JSONL layout.

mod store_support;

use ::dsh_session::json::Value;
use store_support::*;

/// A raw-lines JSONL store whose session "old" holds `lines`.
fn store_with(lines: &[&str]) -> (store_support::TempDir, String) {
    raw_jsonl_store("legacy", "old", lines)
}

fn open(config: &str) -> Result<Value, (i32, String)> {
    let store = Store::open(config).unwrap();
    let (s, _) = store.open_session("old")?;
    Ok(strip_time(s.events()))
}

fn data_of(events: &Value, seq: usize) -> String {
    events.as_array().unwrap()[seq]
        .as_object()
        .unwrap()
        .get("data")
        .unwrap()
        .to_json()
}

fn type_of(events: &Value, seq: usize) -> String {
    events.as_array().unwrap()[seq]
        .as_object()
        .unwrap()
        .get("type")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn legacy_shapes_are_upgraded_in_memory_and_storage_is_not_rewritten() {
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}"#,
        r#"{"type":"user/message","seq":1,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"steering/message","seq":2,"time":1,"data":{"turn":1,"content":[{"type":"text","text":"steer"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"assistant/message","seq":3,"time":1,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c1","name":"x","arguments":"{}"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append","sourceEventSeqs":[]}"#,
        r#"{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"big"}],"isError":false},"surfaceOp":"append"}"#,
        r#"{"type":"tool/result","seq":5,"time":1,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"[trimmed]"}],"isError":false},"surfaceOp":{"op":"replace","start":4,"end":4},"sourceEventSeqs":[4]}"#,
        r#"{"type":"turn/end","seq":6,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":1,"message":"boom"}}}"#,
        r#"{"type":"turn/start","seq":7,"time":1,"data":{"turn":2}}"#,
        r#"{"type":"turn/end","seq":8,"time":1,"data":{"turn":2,"reason":{"kind":"disposed"}}}"#,
        r#"{"type":"turn/start","seq":9,"time":1,"data":{"turn":3}}"#,
        r#"{"type":"turn/end","seq":10,"time":1,"data":{"turn":3,"reason":{"kind":"aborted"}}}"#,
    ];
    let (dir, config) = store_with(&lines);
    let log = dir.join("root/_no-cwd/old/session.jsonl");
    let stored = std::fs::read(&log).unwrap();
    let events = open(&config).unwrap();
    assert_eq!(data_of(&events, 0), r#"{"turn":1}"#);
    assert_eq!(
        data_of(&events, 1),
        r#"{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:old:1","role":"user"}"#
    );
    assert_eq!(type_of(&events, 2), "user/message");
    assert_eq!(
        data_of(&events, 2),
        r#"{"content":[{"type":"text","text":"steer"}],"source":{"kind":"user"},"id":"legacy-message:old:2","role":"user"}"#
    );
    assert_eq!(
        data_of(&events, 3),
        r#"{"turn":1,"step":1,"message":{"id":"legacy-message:old:3","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"x","arguments":"{}"}],"source":{"provider":"p","model":"m","kind":"model"}}}"#
    );
    assert_eq!(
        data_of(&events, 4),
        r#"{"turn":1,"step":1,"message":{"id":"legacy-message:old:4","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"big"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}}"#
    );
    // A pruned result keeps the identity of the result it rewrites.
    assert!(
        data_of(&events, 5).contains(r#""id":"legacy-message:old:4""#),
        "{}",
        data_of(&events, 5)
    );
    assert_eq!(
        data_of(&events, 6),
        r#"{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}"#
    );
    assert_eq!(
        data_of(&events, 8),
        r#"{"turn":2,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}"#
    );
    assert_eq!(
        data_of(&events, 10),
        r#"{"turn":3,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}"#
    );
    // Only the end-seed marker was appended; the stored lines are untouched.
    let now = std::fs::read(&log).unwrap();
    assert_eq!(&now[..stored.len()], &stored[..]);
    assert_eq!(events.as_array().unwrap().len(), lines.len() + 1);
}

fn refused(lines: &[&str]) -> (i32, String) {
    let (_dir, config) = store_with(lines);
    let err = open(&config).expect_err("refused");
    (err.0, rule(&err.1))
}

#[test]
fn retired_vocabulary_refuses_the_whole_log() {
    let ok = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#;
    for (line, want) in [
        (
            r#"{"type":"request/header-delta","seq":1,"time":1,"data":{}}"#,
            "header.legacy",
        ),
        (
            r#"{"type":"mode/set","seq":1,"time":1,"data":{}}"#,
            "load.legacy-mode-set",
        ),
        (
            r#"{"type":"request/header","seq":1,"time":1,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}}"#,
            "header.legacy-fallback",
        ),
    ] {
        assert_eq!(
            refused(&[ok, line]),
            (DSH_E_SCHEMA_MISMATCH, want.to_string()),
            "{line}"
        );
    }
}

#[test]
fn malformed_legacy_shapes_are_corrupt() {
    for (line, want) in [
        (
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":0,"trigger":{"kind":"user"}}}"#,
            "load.legacy-malformed-turn-start",
        ),
        (
            r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"completed","extra":1}}}"#,
            "load.legacy-malformed-turn-end",
        ),
        (
            r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":1}}}"#,
            "load.legacy-malformed-turn-end",
        ),
        (
            r#"{"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"text":"x"}}"#,
            "load.legacy-malformed-steering",
        ),
    ] {
        let (status, text_rule) = refused(&[line]);
        assert_eq!(status, DSH_E_CORRUPT, "{line}");
        assert_eq!(text_rule, "load.validation", "{line}");
        let (_dir, config) = store_with(&[line]);
        let err = open(&config).expect_err("refused");
        let cause = parse(&err.1).as_object().unwrap().get("cause").cloned();
        assert_eq!(cause, Some(Value::str(want)), "{line}");
    }
}

#[test]
fn a_second_store_on_the_same_path_is_a_conflict() {
    let (_dir, config) = store_with(&[]);
    let first = Store::open(&config).unwrap();
    let err = Store::open(&config).err().expect("second writer refused");
    assert_eq!(
        (err.0, rule(&err.1).as_str()),
        (DSH_E_CONFLICT, "store.locked")
    );
    drop(first);
    assert!(
        Store::open(&config).is_ok(),
        "the lock goes with the first store"
    );
}
