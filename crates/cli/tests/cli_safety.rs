//! The CLI cannot be turned against its store or its terminal: a child id
//! goes through the library's id rules, one unreadable sessions row does
//! not hide the others, and stored control characters never reach the
//! terminal raw, and `--json` failures are one JSON object.

mod cli_support;

use cli_support::*;
use dsh_session::store::Store;

#[test]
fn fork_as_an_empty_id_is_refused_and_nothing_is_written() {
    let dir = temp_dir("safety-fork-empty");
    let db = dir.join("s.db");
    make_store(config("sqlite", &db, None));
    let (code, _, err) = run(&["fork", s(&db), "demo", "--at", "20", "--as", ""]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("arg.id"), "{err}");
    let (code, out, err) = run(&["--json", "list", s(&db)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out).as_array().unwrap().len(), 2, "{out}");
}

#[test]
fn one_unreadable_sessions_row_is_reported_and_the_others_are_listed() {
    let dir = temp_dir("safety-bad-row");
    let db = dir.join("s.db");
    make_store(config("sqlite", &db, None));
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("UPDATE sessions SET origin = 'elsewhere' WHERE id = 'open'")
            .unwrap();
    }
    let (code, out, err) = run(&["list", s(&db)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("demo"), "{out}");
    assert!(out.contains("unreadable: sqlite.row-session"), "{out}");
    let (code, out, _) = run(&["verify", s(&db)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("sqlite.row-session"), "{out}");
    // The library's listing goes on past the row too.
    let store = Store::open(config("sqlite", &db, None)).unwrap();
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    assert!(
        listed.contains(&"demo".to_string()) && !listed.contains(&"open".to_string()),
        "{listed:?}"
    );
}

#[test]
fn stored_control_characters_are_escaped_in_human_output() {
    let dir = temp_dir("safety-control");
    let db = dir.join("s.db");
    {
        let store = Store::open(config("sqlite", &db, None)).unwrap();
        let s = store
            .create(dsh_session::store::CreateOptions::with_id(
                "evil\u{1b}]0;title\u{7}",
            ))
            .unwrap();
        s.append_text(
            "user/message",
            r#"{"id":"u","role":"user","content":[{"type":"text","text":"hi\u001b[2J\u009bK\nfake line"}],"source":{"kind":"user"}}"#,
            Some(r#"{"surfaceOp":"append"}"#),
        )
        .unwrap();
        s.close().unwrap();
        store.flush().unwrap();
    }
    let id = "evil\u{1b}]0;title\u{7}";
    for args in [
        vec!["list", s(&db)],
        vec!["derive", s(&db), id],
        vec!["show", s(&db), id],
        vec!["stats", s(&db), id],
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        for bad in ['\u{1b}', '\u{7}', '\u{9b}'] {
            assert!(
                !out.contains(bad) && !err.contains(bad),
                "{args:?}: {out:?} {err:?}"
            );
        }
        assert!(out.contains("\\u001b"), "{args:?}: {out}");
    }
    let (_, out, _) = run(&["derive", s(&db), id]);
    assert!(!out.lines().any(|l| l.starts_with("fake line")), "{out}");
}

#[test]
fn json_errors_are_one_documented_object_on_stderr() {
    let dir = temp_dir("json-errors");
    let db = dir.join("store.db");
    make_store(config("sqlite", &db, None));
    let db = s(&db);

    // A library refusal: every field, the session named.
    let (code, out, err) = run(&["--json", "show", db, "nosuch"]);
    assert_eq!(code, 3, "{err}");
    assert!(out.is_empty(), "{out}");
    let e = &json(err.trim())["error"];
    assert_eq!(e["exit"], 3);
    assert_eq!(e["status"], "DSH_E_NOT_FOUND");
    assert_eq!(e["code"], 6);
    assert_eq!(e["rule"], "load.not-found");
    assert_eq!(e["session"], "nosuch");
    assert!(e["seq"].is_null());
    assert!(e["file"].as_str().unwrap().ends_with("store.db"), "{e}");
    assert!(e["message"].as_str().unwrap().contains("load.not-found"));

    // A missing store, and a bad command line: `exit` and `message` only.
    let (code, _, err) = run(&["show", "--json", &format!("{db}.missing"), "x"]);
    assert_eq!(code, 2);
    assert_eq!(json(err.trim())["error"]["rule"], "cli.no-store");
    let (code, _, err) = run(&["--json", "frobnicate"]);
    assert_eq!(code, 64);
    let e = &json(err.trim())["error"];
    assert_eq!(e["exit"], 64);
    assert!(e["message"].as_str().unwrap().contains("frobnicate"), "{e}");
    assert!(e.get("rule").is_none());

    // Without --json the same failure is one `error:` line.
    let (_, _, err) = run(&["show", db, "nosuch"]);
    assert!(
        err.starts_with("error: ") && err.contains("load.not-found"),
        "{err}"
    );
}
