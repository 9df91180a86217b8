//! The JSONL root on Windows: its lock is a byte lock on a lock file in
//! the root (which the layout never reads), and reparse points below the
//! root are refused.

use std::fs;

use super::tests::{assert_same, header, sample_events, TempRoot};
use super::*;
use crate::rule::Rule;

#[test]
fn the_lock_file_excludes_a_second_writer_and_is_no_session() {
    let root = TempRoot::new("win-lock");
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let lock = root.0.join(crate::store::platform::LOCK_FILE);
    assert!(lock.is_file());
    assert_eq!(
        crate::store::platform::check_private(&lock, false).unwrap(),
        None
    );
    let err = JsonlBackend::open(&root.0, Compression::Zstd).unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Conflict, Rule::StoreLocked)
    );
    let events = sample_events();
    b.append(&header("a", None), &events, true).unwrap();
    assert_eq!(b.list().unwrap().len(), 1);
    assert_same(&b.load("a").unwrap().unwrap().values(), &events);
    drop(b);
    // The file stays; the lock went with its holder.
    assert!(lock.is_file());
    drop(JsonlBackend::open(&root.0, Compression::Zstd).unwrap());
}

#[test]
#[ignore = "Wine 8 makes no reparse points (CreateSymbolicLinkW reports success and creates \
            nothing); run with --include-ignored on Windows"]
fn a_reparse_point_below_the_root_is_refused() {
    let root = TempRoot::new("win-links");
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let events = sample_events();
    b.append(&header("a", None), &events, true).unwrap();
    let project = root.0.join(layout::NO_CWD_DIR);
    std::os::windows::fs::symlink_dir(&project, root.0.join("--v--")).unwrap();
    let err = b.load("a").unwrap_err();
    assert_eq!(err.rule, Rule::JsonlLink, "{err}");
    assert!(err.message.contains("reparse point"), "{err}");
    assert_eq!(b.list().unwrap_err().rule, Rule::JsonlLink);
    fs::remove_dir(root.0.join("--v--")).unwrap();
    assert_same(&b.load("a").unwrap().unwrap().values(), &events);
}

#[test]
fn a_session_in_a_drive_letter_directory_is_stored_and_opens_again() {
    use crate::json::{Object, Value};
    use crate::store::{CreateOptions, Store, StoreConfig};
    let root = TempRoot::new("win-cwd");
    let store = Store::open(StoreConfig::jsonl(root.0.clone())).unwrap();
    let mut header_fields = Object::new();
    header_fields.insert_str("cwd", Value::str("C:\\work\\project"));
    let opts = CreateOptions {
        header_fields,
        ..CreateOptions::with_id("w")
    };
    let live = store.create(opts).unwrap();
    live.append_text("turn/start", r#"{"turn":1}"#, None)
        .unwrap();
    live.close().unwrap();
    assert!(root.0.join("--C-work-project--").is_dir());
    let opened = store.open_session("w").unwrap().session;
    let header = opened.header().unwrap();
    assert_eq!(
        header
            .as_object()
            .and_then(|h| h.get("cwd"))
            .and_then(Value::as_str),
        Some("C:\\work\\project")
    );
    opened.close().unwrap();
}
