//! JSONL store roots (docs/tests-checklist.md, jsonl.spec
//! rows): a relative root, revisions across roots and reopens, ignorable
//! events named like storage tags, a file where a session directory goes.
//!
//! One test changes the process's working directory; every other test of
//! this file uses absolute paths only.

mod store_support;

use ::dsh_session::json::Value;
use store_support::*;

const TURN_END: &str = r#"{"turn":1,"reason":{"kind":"completed"}}"#;

fn jsonl(path: &str, compression: &str) -> String {
    format!(
        r#"{{"backend":"jsonl","path":{},"compression":"{compression}"}}"#,
        Value::str(path).to_json()
    )
}

fn revisions(store: &Store) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = store
        .list()
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let o = l.as_object().unwrap();
            let id = o.get("id").and_then(Value::as_str).unwrap().to_string();
            let rev = o.get("revision").and_then(Value::as_str).unwrap();
            (id, rev.to_string())
        })
        .collect();
    out.sort();
    out
}

/// Copy the directory tree `from` to `to`.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// jsonl.spec #5: a relative root is resolved when the store opens, so a
/// later change of the working directory does not move the store: the
/// session written before the change is found and loads after it.
#[test]
fn a_relative_root_is_resolved_when_the_store_opens() {
    let base = temp_dir("gap2-relative");
    let elsewhere = temp_dir("gap2-elsewhere");
    let before = std::env::current_dir().unwrap();
    std::env::set_current_dir(&base).unwrap();
    let store = Store::open(&jsonl("rel-root", "none"));
    std::env::set_current_dir(&elsewhere).unwrap();
    let store = store.unwrap();
    let s = store.create(r#"{"id":"r"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    s.append_ok("turn/end", TURN_END, None);
    assert_eq!(s.close().0, DSH_OK);
    let (s, _) = store.open_session("r").unwrap();
    assert_eq!(
        types_of(s.events().as_array().unwrap())[..2],
        ["turn/start", "turn/end"]
    );
    assert_eq!(s.close().0, DSH_OK);
    assert_eq!(store.close().0, DSH_OK);
    std::env::set_current_dir(&before).unwrap();
    assert!(base.join("rel-root/_no-cwd/r/session.jsonl").is_file());
    assert!(!elsewhere.join("rel-root").exists());
}

/// jsonl.spec #17: the same log bytes under two roots have different
/// revisions (the file identity is part of it); closing and reopening a
/// store keeps a log's revision.
#[test]
fn revisions_differ_across_roots_and_survive_reopening() {
    for compression in ["none", "zstd"] {
        let dir = temp_dir("gap2-revisions");
        let (a, b) = (dir.join("a"), dir.join("b"));
        let store = Store::open(&jsonl(a.to_str().unwrap(), compression)).unwrap();
        let s = store.create(r#"{"id":"same"}"#).unwrap();
        s.append_ok("turn/start", r#"{"turn":1}"#, None);
        s.append_ok("turn/end", TURN_END, None);
        assert_eq!(s.close().0, DSH_OK);
        let first = revisions(&store);
        assert_eq!(first.len(), 1);
        assert_eq!(store.close().0, DSH_OK);
        copy_tree(&a, &b);
        let store_a = Store::open(&jsonl(a.to_str().unwrap(), compression)).unwrap();
        let store_b = Store::open(&jsonl(b.to_str().unwrap(), compression)).unwrap();
        assert_eq!(revisions(&store_a), first, "{compression}: reopening");
        let other = revisions(&store_b);
        assert_eq!(other[0].0, "same");
        assert_ne!(other[0].1, first[0].1, "{compression}: another root");
        // Both load the same events.
        let (sa, _) = store_a.open_session("same").unwrap();
        let (sb, _) = store_b.open_session("same").unwrap();
        assert_eq!(strip_time(sa.events()), strip_time(sb.events()));
    }
}

/// differential #1: ignorable events named like storage tags survive a
/// JSONL store (both encodings) through create and open.
#[test]
fn ignorable_events_named_like_storage_tags_survive_jsonl() {
    for compression in ["none", "zstd"] {
        for ty in ["text-chunks", "reasoning-chunks", "tool-call-chunks"] {
            let dir = temp_dir("tag-named");
            let config = format!(
                r#"{{"backend":"jsonl","path":{},"compression":"{compression}"}}"#,
                Value::str(dir.to_str().unwrap()).to_json()
            );
            let store = Store::open(&config).unwrap();
            let seed = format!(
                r#"{{"id":"t","seed":[{{"type":"{ty}","seq":0,"time":5,"data":{{"x":1}},"ignorable":true}}]}}"#
            );
            drop(store.create(&seed).unwrap());
            let (s, _) = store
                .open_session("t")
                .unwrap_or_else(|e| panic!("{compression} {ty}: {e:?}"));
            assert_eq!(
                types_of(s.events().as_array().unwrap()),
                [ty, "session/end-seed"]
            );
        }
    }
}

/// jsonl.spec #82: a regular file where a session directory goes is a
/// store fault (`io.*`), not an absent session.
#[test]
fn a_file_where_the_session_directory_goes_is_an_io_error() {
    let dir = temp_dir("enotdir");
    std::fs::create_dir_all(dir.join("_no-cwd")).unwrap();
    std::fs::write(dir.join("_no-cwd/f"), b"x").unwrap();
    let config = format!(
        r#"{{"backend":"jsonl","path":{},"compression":"none"}}"#,
        Value::str(dir.to_str().unwrap()).to_json()
    );
    let store = Store::open(&config).unwrap();
    let (status, text) = store.open_session("f").err().expect("refused");
    assert_eq!(status, DSH_E_IO, "{text}");
    assert!(text.contains("\"rule\":\"io."), "{text}");
}
