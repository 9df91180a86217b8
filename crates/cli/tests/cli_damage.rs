//! What the CLI says about damage, torn tails and places that hold no
//! store: `verify` tells a writer's work in progress from a crash and
//! names the copies repairs kept, `repair` keeps a copy of what it cuts
//! and salvages only when asked, and a directory or file that holds no
//! store is said to be none.

mod cli_support;

use std::io::Write;

use cli_support::*;
use dsh_session::store::{CreateOptions, Store};

#[test]
fn a_directory_or_file_that_holds_no_store_is_not_a_store() {
    let dir = temp_dir("not-a-store");
    let plain = dir.join("project");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("README.md"), "# a project\n").unwrap();
    let empty_file = dir.join("empty.db");
    std::fs::write(&empty_file, "").unwrap();
    for (cmd, path) in [
        ("verify", &plain),
        ("list", &plain),
        ("verify", &empty_file),
        ("list", &dir.join("missing.db")),
    ] {
        let (code, out, err) = run(&[cmd, s(path)]);
        assert_eq!(code, 2, "{cmd} {}: {out}{err}", path.display());
        assert!(
            err.contains("not a store") || err.contains("no store"),
            "{cmd}: {err}"
        );
        assert!(err.contains("cli.no-store"), "{err}");
    }
    // An empty directory is a store no session was written to yet.
    let fresh = dir.join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let (code, out, err) = run(&["verify", s(&fresh)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("0 clean, 0 repairable, 0 corrupt: clean"),
        "{out}"
    );
}

#[test]
fn the_verdict_agrees_with_the_counts_when_the_store_itself_is_damaged() {
    let dir = temp_dir("verdict");
    let db = dir.join("junk.db");
    std::fs::write(&db, "this is not a database, but it is not empty either\n").unwrap();
    let (code, out, err) = run(&["verify", s(&db)]);
    assert_eq!(code, 2, "{out}{err}");
    let last = out.lines().last().unwrap();
    assert!(
        last.contains("0 clean, 0 repairable, 0 corrupt; the store itself: corrupt"),
        "{out}"
    );
    assert!(last.ends_with(": corrupt"), "{out}");
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "only Linux shows a writer's lock (/proc/locks) without taking it"
)]
fn verify_beside_a_running_writer_calls_its_open_turn_open() {
    for backend in ["sqlite", "jsonl"] {
        let dir = temp_dir("live");
        let path = dir.join(if backend == "sqlite" { "s.db" } else { "root" });
        let store = Store::open(config(backend, &path, None)).unwrap();
        let live = interrupted_session(&store, "w");
        live.flush().unwrap();
        let (code, out, err) = run(&["verify", s(&path), "w"]);
        assert_eq!(code, 0, "{backend}: {out}{err}");
        assert!(out.contains("w: open (live writer)"), "{backend}: {out}");
        assert!(out.contains("1 open (live writer)"), "{backend}: {out}");
        let report = json(&run(&["--json", "verify", s(&path), "w"]).1);
        assert_eq!(report["sessions"][0]["status"], "open (live writer)");
        // Once the writer is gone, the same turn is a crash's: repairable.
        live.close().unwrap();
        drop((live, store));
        let (code, out, _) = run(&["verify", s(&path), "w"]);
        assert_eq!(code, 1, "{backend}: {out}");
        assert!(out.contains("w: repairable"), "{backend}: {out}");
    }
}

#[test]
fn repair_keeps_a_copy_of_what_it_cuts_and_verify_names_it() {
    let dir = temp_dir("repair-copy");
    let root = dir.join("root");
    make_store(config("jsonl", &root, Some("none")));
    let log = root.join("--home-demo--/demo/session.jsonl");
    let torn = br#"{"type":"turn/start","seq":21,"ti"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(torn)
        .unwrap();
    let (code, out, err) = run(&["repair", s(&root), "demo"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("partial-line"), "{out}");
    let kept: Vec<_> = std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".cut-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read(&kept[0]).unwrap(), torn);
    assert!(out.contains(s(&kept[0])), "names the copy: {out}");
    let (code, out, _) = run(&["verify", s(&root), "demo"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("kept copy of a cut tail"), "{out}");
    assert!(out.contains(s(&kept[0])), "{out}");
}

#[test]
fn a_damaged_zstd_log_is_corrupt_until_a_salvage_is_asked_for() {
    let dir = temp_dir("salvage");
    let root = dir.join("root");
    {
        let store = Store::open(config("jsonl", &root, Some("zstd"))).unwrap();
        let s = store.create(CreateOptions::with_id("z")).unwrap();
        for turn in 1..=30 {
            s.append_text("turn/start", &format!(r#"{{"turn":{turn}}}"#), None)
                .unwrap();
            let end = format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#);
            s.append_text("turn/end", &end, None).unwrap();
            s.flush().unwrap();
        }
        s.close().unwrap();
    }
    let log = root.join("_no-cwd/z/session.jsonl.zstd");
    let mut bytes = std::fs::read(&log).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xFF;
    std::fs::write(&log, &bytes).unwrap();
    let (code, out, _) = run(&["verify", s(&root), "z"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("zstd."), "{out}");
    let (code, _, err) = run(&["repair", s(&root), "z"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read(&log).unwrap(), bytes, "a plain repair wrote");
    let (code, out, err) = run(&["repair", s(&root), "z", "--salvage"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("salvaged"), "{out}");
    assert!(out.contains(".cut-"), "{out}");
    let (code, out, _) = run(&["verify", s(&root), "z"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_turn_repair_cannot_close_is_corrupt_not_repairable() {
    let dir = temp_dir("r1");
    let db = dir.join("s.db");
    {
        let mut c = config("sqlite", &db, None);
        c.admission = dsh_session::engine::Admission::Reference;
        let store = Store::open(c).unwrap();
        let s = store.create(CreateOptions::with_id("r1")).unwrap();
        s.append_text("turn/start", r#"{"turn":0}"#, None).unwrap();
        s.close().unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let (code, out, _) = run(&["verify", s(&db), "r1"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("load.legacy-malformed-turn-end"), "{out}");
    let (code, _, err) = run(&["repair", s(&db), "r1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("load.validation"), "{err}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a refused repair wrote"
    );
}
