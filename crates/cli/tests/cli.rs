//! Integration tests of the `dsh-session` binary on stores made through the
//! library's public API: every subcommand, verify on planted damage (rule
//! ids and exit statuses), and a 100 000-event convert round trip.

mod cli_support;

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Instant;

use cli_support::*;
use dsh_session::store::BackendConfig;
use predicates::prelude::*;
use predicates::str::contains;

#[test]
fn help_documents_exit_codes_and_usage_errors_exit_64() {
    cli(&["--help"])
        .assert()
        .success()
        .stdout(contains("Exit status"))
        .stdout(contains("64  invalid command line"));
    cli(&["verify", "--help"])
        .assert()
        .success()
        .stdout(contains("repairable"));
    cli(&["frobnicate"]).assert().code(64);
    cli(&["show", "only-a-store"]).assert().code(64);
    cli(&["fork", "x.db", "demo", "--at", "-1"])
        .assert()
        .code(64);
}

#[test]
fn list_show_derive_and_stats_on_sqlite() {
    let dir = temp_dir("read");
    let db = dir.join("store.db");
    let derived = make_store(config("sqlite", &db, None));
    let db = s(&db);

    let (code, out, _) = run(&["list", db]);
    assert_eq!(code, 0);
    assert!(out.starts_with("ID"), "{out}");
    assert!(out.contains("demo") && out.contains("open"), "{out}");
    let list = json(&run(&["--json", "list", db]).1);
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], "demo");
    assert_eq!(rows[0]["events"], 21);
    assert_eq!(rows[0]["openTurn"], serde_json::Value::Null);
    assert_eq!(rows[0]["header"]["cwd"], "/home/demo");
    assert!(rows[0]["revision"]
        .as_str()
        .unwrap()
        .ends_with(":revision:21"));
    assert_eq!(rows[1]["id"], "open");
    assert_eq!(rows[1]["openTurn"], 1);

    // show: one JSON event per line, filtered by seq range and type.
    let (code, out, _) = run(&[
        "--json",
        "show",
        db,
        "demo",
        "--from",
        "3",
        "--to",
        "12",
        "--type",
        "assistant/*",
    ]);
    assert_eq!(code, 0);
    let seqs: Vec<u64> = out
        .lines()
        .map(|l| json(l)["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 5, 6, 11]);
    // `--to` is exclusive, as the C API's `to_seq`.
    let (_, out, _) = run(&["--json", "show", db, "demo", "--from", "4", "--to", "6"]);
    let seqs: Vec<u64> = out
        .lines()
        .map(|l| json(l)["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 5]);
    let all = run(&["--json", "show", db, "demo"]).1;
    assert_eq!(all.lines().count(), 21);
    assert_eq!(
        json(all.lines().nth(15).unwrap())["surfaceOp"]["op"],
        "replace"
    );
    cli(&["show", db, "demo", "--type", "tool/call"])
        .assert()
        .success()
        .stdout(contains("SEQ"))
        .stdout(contains("tool/call"))
        .stdout(contains("user/message").not());

    // derive: the library's message list, and the surface with provenance.
    let (code, out, _) = run(&["--json", "derive", db, "demo"]);
    assert_eq!(code, 0);
    assert_eq!(json(&out), json(&derived));
    cli(&["derive", db, "demo"])
        .assert()
        .success()
        .stdout(contains("sum1"))
        .stdout(contains("You are welcome."));
    let surface = json(&run(&["--json", "derive", db, "demo", "--surface"]).1);
    let nodes: Vec<u64> = surface["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(nodes, [15, 11, 18, 19]);
    let r = &surface["replacements"][0];
    assert_eq!(
        (r["seq"].as_u64(), r["start"].as_u64(), r["end"].as_u64()),
        (Some(15), Some(1), Some(8))
    );
    assert_eq!(r["shadowedSeqs"], serde_json::json!([1, 6, 8]));
    assert_eq!(r["sourceEventSeqs"], serde_json::json!([1, 6, 8]));
    cli(&["derive", db, "demo", "--surface"])
        .assert()
        .success()
        .stdout(contains("seq 15 replaced 1..8, shadowing [1,6,8]"));
    // An interrupted session derives with its closers (in memory), noted on stderr.
    cli(&["derive", db, "open"])
        .assert()
        .success()
        .stderr(contains("closer"));

    // stats: counts, token usage, compaction savings.
    let st = json(&run(&["--json", "stats", db, "demo"]).1);
    assert_eq!(st["events"], 21);
    assert_eq!(st["types"]["user/message"]["count"], 3);
    assert_eq!(st["types"]["assistant/chunk"]["count"], 2);
    assert_eq!(st["tokens"]["input"], 320);
    assert_eq!(st["tokens"]["output"], 40);
    assert_eq!(st["tokens"]["cacheRead"], 100);
    assert_eq!(st["messages"]["events"], 7);
    assert_eq!(st["surface"]["messages"], 4);
    assert_eq!(st["surface"]["replacements"], 1);
    assert_eq!(st["savings"]["messages"], 3);
    assert!(st["savings"]["bytes"].as_u64().unwrap() > 0);
    cli(&["stats", db, "demo"])
        .assert()
        .success()
        .stdout(contains("tokens"))
        .stdout(contains("savings"));

    // Unknown session: 3; no store: 2 (and nothing is created).
    cli(&["show", db, "nope"])
        .assert()
        .code(3)
        .stderr(contains("load.not-found"));
    let missing = dir.join("missing.db");
    cli(&["list", s(&missing)])
        .assert()
        .code(2)
        .stderr(contains("cli.no-store"));
    assert!(!missing.exists());
}

#[test]
fn verify_repair_and_fork_on_sqlite() {
    let dir = temp_dir("repair");
    let path = dir.join("store.sqlite");
    make_store(config("sqlite", &path, None));
    let db = s(&path);

    cli(&["verify", db, "demo"])
        .assert()
        .code(0)
        .stdout(contains("demo: clean"));
    let (code, out, _) = run(&["verify", db]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("seq 0: repair.interrupted-turn"), "{out}");
    let report = json(&run(&["--json", "verify", db, "open"]).1);
    assert_eq!(report["exit"], 1);
    assert_eq!(
        report["sessions"][0]["problems"][0]["rule"],
        "repair.interrupted-turn"
    );
    assert_eq!(report["sessions"][0]["problems"][0]["file"], db);

    // A dry run writes nothing.
    let revision = |id: &str| {
        let list = json(&run(&["--json", "list", db]).1);
        let row = list
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()
            .clone();
        (row["revision"].clone(), row["events"].clone())
    };
    let before = revision("open");
    let plan = json(&run(&["--json", "repair", db, "open", "--dry-run"]).1);
    assert_eq!(plan["applied"], false);
    let closers: Vec<&str> = plan["closers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(closers, ["tool/result", "step/end", "turn/end"]);
    assert_eq!(
        plan["closers"][0]["data"]["error"]["code"],
        "TOOL_OUTCOME_UNKNOWN"
    );
    assert_eq!(revision("open"), before);

    // The repair is what open writes: closers, then the end-seed marker.
    cli(&["repair", db, "open"])
        .assert()
        .success()
        .stdout(contains(
            "closer: seq 5 tool/result for call c9 (TOOL_OUTCOME_UNKNOWN)",
        ))
        .stdout(contains("session/end-seed marker at seq 8"));
    assert_eq!(revision("open").1, 9);
    cli(&["verify", db])
        .assert()
        .code(0)
        .stdout(contains("2 clean"));
    cli(&["repair", db, "open"])
        .assert()
        .success()
        .stdout(contains("nothing to repair"));

    // fork at a closed boundary; inside an open turn or past the log: 3.
    let child = json(&run(&["--json", "fork", db, "demo", "--at", "13", "--as", "child"]).1);
    assert_eq!(child["id"], "child");
    assert_eq!(child["header"]["parentSession"], "demo");
    assert_eq!(child["header"]["seedLength"], 14);
    let shown = run(&["--json", "show", db, "child"]).1;
    assert_eq!(shown.lines().count(), 15);
    assert!(shown.lines().last().unwrap().contains("session/end-seed"));
    cli(&["fork", db, "demo", "--at", "0"])
        .assert()
        .code(3)
        .stderr(contains("fork.open-turn"));
    cli(&["fork", db, "demo", "--at", "99"])
        .assert()
        .code(3)
        .stderr(contains("fork.out-of-range"));
    cli(&["fork", db, "demo", "--at", "13", "--as", "child"])
        .assert()
        .code(3)
        .stderr(contains("persist.exists-stored"));
    cli(&["fork", db, "demo", "--at", "20"])
        .assert()
        .success()
        .stdout(contains("session-1"));
    cli(&["verify", db])
        .assert()
        .code(0)
        .stdout(contains("4 clean"));

    // A store an app holds: the reading commands read beside it, the
    // writing ones answer 3.
    let held = dsh_session::store::Store::open(config("sqlite", &path, None)).unwrap();
    cli(&["verify", db])
        .assert()
        .code(0)
        .stdout(contains("4 clean"));
    cli(&["list", db])
        .assert()
        .code(0)
        .stdout(contains("session-1"));
    cli(&["show", db, "demo", "--to", "3"]).assert().code(0);
    cli(&["fork", db, "demo", "--at", "20"])
        .assert()
        .code(3)
        .stderr(contains("store.locked"));
    drop(held);
    // A writer with "locking": "exclusive" admits no reader.
    let mut exclusive = config("sqlite", &path, None);
    exclusive.access.exclusive = true;
    let held = dsh_session::store::Store::open(exclusive).unwrap();
    // (It holds SQLite's lock for good from its first write.)
    let s = held
        .create(dsh_session::store::CreateOptions::with_id("w"))
        .unwrap();
    s.append_text("turn/start", r#"{"turn":1}"#, None).unwrap();
    s.flush().unwrap();
    cli(&["list", db])
        .assert()
        .code(3)
        .stderr(contains("store.locked"))
        .stderr(contains("exclusive"));
    drop(s);
    drop(held);
    cli(&["list", db]).assert().code(0);
}

#[test]
fn verify_refuses_a_foreign_database_and_leaves_it_untouched() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("foreign");
    let path = dir.join("other.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('keep me');")
        .unwrap();
    drop(conn);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let (code, out, _) = run(&["verify", s(&path)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("sqlite.schema-unversioned"), "{out}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn verify_finds_a_torn_tail_in_jsonl_and_repair_cuts_it() {
    let dir = temp_dir("torn");
    for compression in ["none", "zstd"] {
        let root = dir.join(compression);
        make_store(config("jsonl", &root, Some(compression)));
        let name = if compression == "zstd" {
            "session.jsonl.zstd"
        } else {
            "session.jsonl"
        };
        let log = root.join("--home-demo--/demo").join(name);
        let len = std::fs::metadata(&log).unwrap().len();
        if compression == "none" {
            let mut f = OpenOptions::new().append(true).open(&log).unwrap();
            f.write_all(br#"{"type":"turn/start","seq":21,"ti"#)
                .unwrap();
        } else {
            // Tear the last frame (the final turn/end) in the middle.
            let f = OpenOptions::new().write(true).open(&log).unwrap();
            f.set_len(len - 6).unwrap();
        }
        let root = s(&root);
        let (code, out, _) = run(&["verify", root, "demo"]);
        assert_eq!(code, 1, "{compression}: {out}");
        assert!(out.contains("repair.torn-tail"), "{out}");
        assert!(out.contains(s(&log)), "names the log file: {out}");
        let report = json(&run(&["--json", "verify", root, "demo"]).1);
        let p = &report["sessions"][0]["problems"][0];
        assert_eq!(p["rule"], "repair.torn-tail");
        assert_eq!(p["severity"], "repairable");
        if compression == "none" {
            assert_eq!(p["seq"], 21);
        }
        cli(&["repair", root, "demo"])
            .assert()
            .success()
            .stdout(contains("torn tail"));
        cli(&["verify", root, "demo"]).assert().code(0);
    }
}

#[test]
fn verify_finds_a_seq_gap_in_jsonl() {
    let dir = temp_dir("gap");
    let root = dir.join("raw");
    make_store(config("jsonl", &root, Some("none")));
    let log = root.join("--home-demo--/demo/session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let damaged = text.replacen(r#""seq":9,"#, r#""seq":90,"#, 1);
    assert_ne!(text, damaged);
    std::fs::write(&log, damaged).unwrap();
    let root = s(&root);
    let (code, out, _) = run(&["verify", root]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("seq 9: load.corrupt-seq-gap"), "{out}");
    assert!(
        out.contains("open: repairable"),
        "the other session is still checked: {out}"
    );
    let report = json(&run(&["--json", "verify", root, "demo"]).1);
    assert_eq!(report["status"], "corrupt");
    assert_eq!(
        report["sessions"][0]["problems"][0]["rule"],
        "load.corrupt-seq-gap"
    );
    assert_eq!(report["sessions"][0]["problems"][0]["seq"], 9);
    // The reading commands refuse it with the file, the seq and the rule.
    cli(&["derive", root, "demo"])
        .assert()
        .code(2)
        .stderr(contains(s(&log)))
        .stderr(contains("seq 9: load.corrupt-seq-gap"));
}

#[test]
fn verify_finds_a_bad_source_event_seqs_blob_in_sqlite() {
    let dir = temp_dir("blob");
    let path = dir.join("store.db");
    make_store(config("sqlite", &path, None));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let n = conn
        .execute(
            "UPDATE events SET source_event_seqs = X'80' WHERE session_id = 'demo' AND seq = 6",
            [],
        )
        .unwrap();
    assert_eq!(n, 1);
    drop(conn);
    let db = s(&path);
    let (code, out, _) = run(&["verify", db]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("seq 6: load.corrupt-committed-row [cause codec.truncated]"),
        "{out}"
    );
    let report = json(&run(&["--json", "verify", db, "demo"]).1);
    let p = &report["sessions"][0]["problems"][0];
    assert_eq!(
        (p["rule"].as_str(), p["cause"].as_str()),
        (Some("load.corrupt-committed-row"), Some("codec.truncated"))
    );
    assert_eq!(p["seq"], 6);
    assert_eq!(p["status"], "DSH_E_CORRUPT");
}

#[test]
fn verify_reports_every_rule_broken_in_one_log() {
    let dir = temp_dir("rules");
    let root = dir.join("raw");
    make_store(config("jsonl", &root, Some("none")));
    let log = root.join("--home-demo--/demo/session.jsonl");
    let text = std::fs::read_to_string(&log)
        .unwrap()
        .replacen(r#""id":"u1","#, "", 1)
        .replacen(
            r#""type":"compaction/start""#,
            r#""type":"future/thing""#,
            1,
        )
        .replacen(
            r#""sourceEventSeqs":[1,6,8]"#,
            r#""sourceEventSeqs":[1,8]"#,
            1,
        );
    std::fs::write(&log, text).unwrap();
    let report = json(&run(&["--json", "verify", s(&root), "demo"]).1);
    let found: Vec<(String, u64)> = report["sessions"][0]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["rule"].as_str().unwrap().to_string(),
                p["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("msg.unidentified", 1),
        ("load.unknown-type", 14),
        ("surface.replace-uncovered", 15),
    ];
    for (rule, seq) in want {
        assert!(
            found.contains(&(rule.to_string(), seq)),
            "{rule} at {seq} in {found:?}"
        );
    }
    assert_eq!(report["exit"], 2);
}

#[test]
fn convert_round_trips_100k_events_jsonl_sqlite_jsonl() {
    let dir = temp_dir("big");
    let src = dir.join("src");
    let src_cfg = BackendConfig::Jsonl {
        path: src.clone(),
        zstd: true,
    };
    let started = Instant::now();
    write_big_session(&src_cfg, "big", 5000);
    let generated = started.elapsed();
    let db = dir.join("big.sqlite");
    let back = dir.join("back");

    let t = Instant::now();
    let out = json(&run(&["--json", "convert", s(&src), s(&db)]).1);
    let to_sqlite = t.elapsed();
    assert_eq!(out["events"], 100_000);
    assert_eq!(out["destination"]["backend"], "sqlite");
    let t = Instant::now();
    cli(&["convert", s(&db), s(&back)])
        .assert()
        .success()
        .stdout(contains("100000 event(s)"))
        .stdout(contains("jsonl (zstd)"));
    let to_jsonl = t.elapsed();

    let t = Instant::now();
    let (h0, e0) = load(&src_cfg, "big");
    let (h1, e1) = load(&BackendConfig::Sqlite { path: db.clone() }, "big");
    let (h2, e2) = load(
        &BackendConfig::Jsonl {
            path: back.clone(),
            zstd: true,
        },
        "big",
    );
    assert_eq!(e0.len(), 100_000);
    assert!(e0 == e1 && e0 == e2, "same events as JSON values");
    let text = |v: &[dsh_session::json::Value]| v.iter().map(|e| e.to_json()).collect::<Vec<_>>();
    assert!(text(&e0) == text(&e2), "byte-identical in the logical view");
    assert!(h0 == h1 && h0 == h2, "same header");
    // Physically different: chunk runs are packed into far fewer rows.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(rows < 60_000, "{rows} rows");
    eprintln!(
        "100k events: generate {generated:.2?}, JSONL->SQLite {to_sqlite:.2?}, SQLite->JSONL {to_jsonl:.2?}, compare {:.2?}",
        t.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn convert_raw_to_zstd_and_refuses_to_overwrite() {
    let dir = temp_dir("convert");
    let raw = dir.join("raw");
    make_store(config("jsonl", &raw, Some("none")));
    let zstd = dir.join("zstd");
    cli(&["convert", s(&raw), s(&zstd)])
        .assert()
        .success()
        .stdout(contains("jsonl (none)"))
        .stdout(contains("jsonl (zstd)"));
    assert!(zstd.join("--home-demo--/demo/session.jsonl.zstd").is_file());
    assert!(zstd.join("_no-cwd/open/session.jsonl.zstd").is_file());
    let show = |p: &std::path::Path, id: &str| run(&["--json", "show", s(p), id]).1;
    assert_eq!(show(&raw, "demo"), show(&zstd, "demo"));
    assert_eq!(show(&raw, "open"), show(&zstd, "open"));

    // An existing destination store is refused, and so is an existing session.
    cli(&["convert", s(&raw), s(&zstd)])
        .assert()
        .code(3)
        .stderr(contains("--into-existing"));
    cli(&["convert", s(&raw), s(&zstd), "--into-existing"])
        .assert()
        .code(3)
        .stderr(contains("convert.exists"));
    cli(&["convert", s(&raw), s(&raw)]).assert().code(64);

    // --session picks sessions; --into-existing adds them to a store.
    let db = dir.join("some.db");
    cli(&["convert", s(&raw), s(&db), "--session", "open"])
        .assert()
        .success();
    cli(&[
        "convert",
        s(&zstd),
        s(&db),
        "--session",
        "demo",
        "--into-existing",
    ])
    .assert()
    .success();
    let mut ids: Vec<String> = json(&run(&["--json", "list", s(&db)]).1)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["demo", "open"]);
    assert_eq!(show(&db, "demo"), show(&raw, "demo"));
    // Forced backends: a raw root read as zstd is refused by the library.
    cli(&["list", s(&raw), "--compression", "zstd"])
        .assert()
        .code(2)
        .stderr(contains("jsonl.encoding-mismatch"));
}
