//! Nothing escapes a JSONL store through a symbolic link planted inside
//! its root: no write, read or delete reaches outside, and what is outside
//! stays byte-identical.

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;

use ::dsh_session::json::Value;
use ::dsh_session_ffi::*;
use support::*;

fn config(root: &Path) -> String {
    format!(
        r#"{{"backend":"jsonl","path":{},"batchWindowMs":0}}"#,
        Value::str(root.to_str().unwrap()).to_json()
    )
}

/// The refusal every look through a planted link gives.
fn refused_at_link(st: dsh_status, text: &str) {
    assert_eq!(
        (st, rule(text).as_str()),
        (DSH_E_IO, "jsonl.link"),
        "{text}"
    );
}

/// Create session `id`, append a turn (written inside the append: window
/// 0) and flush: the first failure, or the flush's status.
fn write_session(store: &Store, id: &str) -> (dsh_status, String) {
    let s = match store.create(&format!(r#"{{"id":"{id}"}}"#)) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (st, text) = s.append("turn/start", r#"{"turn":1}"#, None);
    if st != DSH_OK {
        return (st, text);
    }
    s.flush()
}

#[test]
fn links_planted_in_the_root_are_never_followed() {
    let dir = temp_dir("jsonl-links");
    let outside = dir.join("outside");
    std::fs::create_dir_all(outside.join("proj/b")).unwrap();
    std::fs::write(outside.join("proj/b/session.jsonl.zstd"), b"not yours").unwrap();
    std::fs::write(outside.join("target.jsonl.zstd"), b"keep me").unwrap();
    std::fs::write(
        outside.join("session.jsonl.zstd"),
        b"not a log of the store",
    )
    .unwrap();
    let before = file_tree(&outside);
    let root = dir.join("root");
    let store = Store::open(&config(&root)).unwrap();
    // A project directory, a session directory and a log file that are links.
    symlink(&outside, root.join("_no-cwd")).unwrap();
    let (st, text) = write_session(&store, "a");
    refused_at_link(st, &text);
    std::fs::remove_file(root.join("_no-cwd")).unwrap();
    std::fs::create_dir(root.join("_no-cwd")).unwrap();
    symlink(&outside, root.join("_no-cwd/c")).unwrap();
    let (st, text) = write_session(&store, "c");
    refused_at_link(st, &text);
    std::fs::create_dir(root.join("_no-cwd/d")).unwrap();
    symlink(
        outside.join("target.jsonl.zstd"),
        root.join("_no-cwd/d/session.jsonl.zstd"),
    )
    .unwrap();
    let (st, text) = write_session(&store, "d");
    refused_at_link(st, &text);
    // A session outside, reached through a linked project directory, is not
    // the store's: a delete, an open or a listing stops at the link.
    symlink(outside.join("proj"), root.join("proj")).unwrap();
    let (st, text) = store.delete("b");
    refused_at_link(st, &text);
    let (st, text) = store.open_session("b").err().unwrap();
    refused_at_link(st, &text);
    let id = c("b");
    // SAFETY: live handle, valid string.
    let (st, text) = call(|out| unsafe { dsh_store_list(store.0, out) });
    refused_at_link(st, &text);
    drop(id);
    drop(store);
    // A store whose root holds a link refuses to open until it is removed.
    let (st, text) = Store::open(&config(&root)).err().unwrap();
    refused_at_link(st, &text);
    assert_eq!(
        file_tree(&outside),
        before,
        "a file outside the store changed"
    );
}
