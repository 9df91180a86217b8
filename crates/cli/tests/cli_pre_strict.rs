//! A log written before strict admission (an undeclared event type, a
//! message the strict rules refuse): the reading commands show it and name
//! each offending seq; declared with `--event-types`, it reads clean.

mod cli_support;

use cli_support::*;
use dsh_session::engine::Admission;
use dsh_session::store::{Store, StoreConfig};

const APPEND: Option<&str> = Some(r#"{"surfaceOp":"append"}"#);
const USER: &str =
    r#"{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#;

/// Sessions `old` (an undeclared `myapp/note`, then a message with string
/// content) and `typed` (only the undeclared type), in reference admission.
fn pre_strict_log(path: &str) {
    let mut config = StoreConfig::sqlite(path);
    config.admission = Admission::Reference;
    let store = Store::open(config).unwrap();
    let s = store
        .create(dsh_session::store::CreateOptions::with_id("old"))
        .unwrap();
    s.append_text("user/message", USER, APPEND).unwrap();
    s.append_text("myapp/note", r#"{"x":1}"#, None).unwrap();
    s.append_text(
        "user/message",
        r#"{"id":"u2","role":"user","content":"hi","source":{"kind":"user"}}"#,
        APPEND,
    )
    .unwrap();
    s.close().unwrap();
    let t = store
        .create(dsh_session::store::CreateOptions::with_id("typed"))
        .unwrap();
    t.append_text("myapp/note", r#"{"x":2}"#, None).unwrap();
    t.append_text("user/message", USER, APPEND).unwrap();
    t.close().unwrap();
}

#[test]
fn the_cli_reads_a_pre_strict_log_and_names_each_offending_seq() {
    let dir = temp_dir("pre-strict");
    let db = dir.join("s.db");
    let path = db.to_str().unwrap();
    pre_strict_log(path);
    let (code, out, _) = run(&["show", path, "old"]);
    assert_eq!(code, 0);
    assert!(out.contains("myapp/note"), "{out}");
    for cmd in ["derive", "stats"] {
        let (code, out, err) = run(&[cmd, path, "old"]);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert!(!out.is_empty());
        assert!(
            err.contains("seq 1: load.unknown-type") && err.contains("seq 2: msg.content"),
            "{cmd}: {err}"
        );
    }
    let (code, out, _) = run(&["--json", "verify", path, "old"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("load.unknown-type") && out.contains("msg.content"),
        "{out}"
    );
    // Declared on the command line, the typed log reads clean.
    let (code, _, err) = run(&["derive", path, "typed", "--event-types", "myapp/note"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("load.unknown-type"), "{err}");
    let (code, _, err) = run(&["verify", path, "typed", "--event-types", "Bad"]);
    assert_eq!(code, 64, "{err}");
    let (code, out, _) = run(&["verify", path, "typed", "--event-types", "myapp/note"]);
    assert_eq!(code, 0, "{out}");
}
