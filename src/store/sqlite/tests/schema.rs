//! Opening rules: path and file permissions, foreign or damaged schemas
//! (refused untouched), and a database written by the reference schema.

use crate::rule::Rule;
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::tests::{open, plain, raw, TempDir};
use super::*;

#[cfg(unix)]
#[test]
fn file_and_parent_rules() {
    let dir = TempDir::new("paths");
    let db = dir.db();
    std::fs::write(&db, b"").unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = SqliteBackend::open(&db, 0).unwrap_err();
    assert_eq!((err.status, err.rule), (Status::Io, Rule::SqlitePathFile));
    std::fs::remove_file(&db).unwrap();
    std::os::unix::fs::symlink(dir.0.join("elsewhere.db"), &db).unwrap();
    let err = SqliteBackend::open(&db, 0).unwrap_err();
    assert_eq!(err.rule, Rule::SqlitePathFile);
    let shared = dir.0.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o770)).unwrap();
    let err = SqliteBackend::open(&shared.join("x.db"), 0).unwrap_err();
    assert_eq!((err.status, err.rule), (Status::Io, Rule::SqlitePathParent));
    // A missing parent is created 0700 and the file 0600.
    let nested = dir.0.join("a/b/store.db");
    drop(open(&nested));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(nested.parent().unwrap()), 0o700);
    assert_eq!(mode(&nested), 0o600);
}

/// A writer's connection syncs as the platform needs: `synchronous =
/// FULL` everywhere, and on Apple platforms `fullfsync` and
/// `checkpoint_fullfsync` too (F_FULLFSYNC rather than a plain fsync).
#[test]
fn a_writer_syncs_through_the_drive_cache_where_fsync_does_not() {
    let dir = TempDir::new("fullfsync");
    let b = open(&dir.db());
    let pragma = |name: &str| -> i64 {
        b.conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(pragma("synchronous"), 2);
    let full = i64::from(schema::FULL_FSYNC);
    assert_eq!(pragma("fullfsync"), full);
    assert_eq!(pragma("checkpoint_fullfsync"), full);
    drop(b);
    // What configure runs on Apple platforms takes on any connection (the
    // flags are kept everywhere; only Apple's SQLite acts on them).
    let conn = raw(&dir.db());
    schema::full_fsync(&conn).unwrap();
    let flag = |name: &str| -> i64 {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!((flag("fullfsync"), flag("checkpoint_fullfsync")), (1, 1));
}

/// Build a foreign database with `sql`, then check that opening it fails
/// with `rule` and leaves the file byte-for-byte unchanged.
fn refused(tag: &str, sql: &str, rule: Rule) {
    let dir = TempDir::new(tag);
    let db = dir.db();
    raw(&db).execute_batch(sql).unwrap();
    crate::store::platform::make_private(&db);
    let before = std::fs::read(&db).unwrap();
    let err = SqliteBackend::open(&db, 100).unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::SchemaMismatch, rule),
        "{tag}: {err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "{tag}: file changed");
    let mut wal = db.clone().into_os_string();
    wal.push("-wal");
    assert!(!Path::new(&wal).exists(), "{tag}: WAL created");
}

/// `(seq, type, time, data, source_event_seqs, surface_op, ignorable)`.
type RefRow<'a> = (
    i64,
    &'a str,
    i64,
    rusqlite::types::Value,
    Option<Vec<u8>>,
    Option<&'a str>,
    Option<i64>,
);

fn reference_ddl() -> String {
    // §7.2 token for token, formatted differently (whitespace may differ).
    "CREATE TABLE persistence_state ( singleton INTEGER PRIMARY KEY CHECK (singleton = 1), store_id TEXT NOT NULL ) STRICT;
     CREATE TABLE sessions (
       id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL,
       cwd TEXT, parent_session TEXT, seed_length INTEGER, origin TEXT,
       delegation_depth INTEGER, agent_preset TEXT,
       incarnation TEXT NOT NULL, revision INTEGER NOT NULL
     ) STRICT;
     CREATE TABLE events (
       session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
       seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL,
       data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT,
       ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
       PRIMARY KEY (session_id, seq)
     ) STRICT;
     INSERT INTO persistence_state VALUES (1, '0b8e4c1a-3f7d-4a2e-9c51-6d0f2b7e8a93');
     PRAGMA application_id = 1146308688;
     PRAGMA user_version = 17;"
        .to_string()
}

#[test]
fn foreign_databases_are_refused_untouched() {
    refused(
        "version",
        "CREATE TABLE t (x); PRAGMA user_version = 5;",
        Rule::SqliteSchemaVersion,
    );
    refused(
        "appid",
        "CREATE TABLE t (x); PRAGMA user_version = 17; PRAGMA application_id = 7;",
        Rule::SqliteApplicationId,
    );
    refused(
        "unversioned",
        "CREATE TABLE t (x);",
        Rule::SqliteSchemaUnversioned,
    );
    refused(
        "appid-only",
        "PRAGMA application_id = 1146308688;",
        Rule::SqliteSchemaUnversioned,
    );
    refused(
        "extra",
        &format!("{} CREATE TABLE extra (x);", reference_ddl()),
        Rule::SqliteSchemaObjects,
    );
    refused(
        "index",
        &format!("{} CREATE INDEX ev_time ON events(time);", reference_ddl()),
        Rule::SqliteSchemaObjects,
    );
    refused(
        "changed",
        &reference_ddl().replace("surface_op TEXT,", "surface_op ANY,"),
        Rule::SqliteSchemaObjects,
    );
}

#[test]
fn missing_store_id_is_corrupt() {
    let dir = TempDir::new("storeid");
    let db = dir.db();
    raw(&db)
        .execute_batch(
            &reference_ddl().replace("'0b8e4c1a-3f7d-4a2e-9c51-6d0f2b7e8a93'", "'not-a-uuid'"),
        )
        .unwrap();
    crate::store::platform::make_private(&db);
    let err = SqliteBackend::open(&db, 100).unwrap_err();
    assert_eq!(err.rule, Rule::SqliteStoreId, "{err}");
    assert_eq!(err.status, Status::Corrupt);
}

#[test]
fn reference_written_database_loads() {
    let dir = TempDir::new("reference");
    let db = dir.db();
    let conn = raw(&db);
    conn.execute_batch(&reference_ddl()).unwrap();
    conn.execute(
        "INSERT INTO sessions VALUES ('ref-1', 0, 1700000000000, '/home/u', NULL, NULL, 'subagent', NULL, 'preset', \
         'a1b2c3d4-e5f6-4789-8abc-def012345678', 3)",
        [],
    )
    .unwrap();
    let big = format!(
        r#"{{"message":{{"role":"assistant","content":"{}"}}}}"#,
        "xy".repeat(4000)
    );
    let frame = zstd::bulk::compress(big.as_bytes(), 19).unwrap();
    let rows: [RefRow<'_>; 7] = [
        (0, "turn/start", 10, r#"{"turn":1}"#.to_string().into(), None, None, None),
        (1, "user/message", 11, r#"{"message":{"role":"user","content":"hi"}}"#.to_string().into(), Some(vec![]), Some(r#""append""#), None),
        (2, "text-chunks", 2000, r#"{"turn":1,"step":1,"index":0,"dt":[1,-1],"texts":["a","b","c"]}"#.to_string().into(), None, None, Some(0)),
        (5, "tool-call-chunks", 3000, r#"{"turn":1,"step":1,"index":0,"id":"call_1","name":"ls","dt":[0,0,5],"args":["{","\"a\"",":1","}"]}"#.to_string().into(), None, None, Some(0)),
        (9, "assistant/message", 12, frame.into(), Some(vec![0x0a, 0x02, 0x02]), Some(r#"{"kind":"replace"}"#), None),
        (10, "x/ext", 13, "null".to_string().into(), None, None, Some(1)),
        (11, "turn/end", 14, r#"{"turn":1,"reason":{"kind":"completed"}}"#.to_string().into(), None, None, None),
    ];
    for (seq, ty, time, data, sources, op, ignorable) in rows {
        conn.execute(
            "INSERT INTO events VALUES ('ref-1', ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            rusqlite::params![seq, ty, time, data, sources, op, ignorable],
        )
        .unwrap();
    }
    drop(conn);
    crate::store::platform::make_private(&db);
    let mut b = open(&db);
    let loaded = b.load("ref-1").unwrap().unwrap();
    let chunk = |seq: u64, time: i64, text: &str| {
        format!(
            r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}}}"#
        )
    };
    let tool = |seq: u64, time: i64, arg: &str| {
        format!(
            r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"chunk":{{"type":"tool-call-delta","index":0,"id":"call_1","name":"ls","argumentsDelta":"{arg}"}}}}}}"#
        )
    };
    let expected = [
        r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#.to_string(),
        r#"{"type":"user/message","seq":1,"time":11,"data":{"message":{"role":"user","content":"hi"}},"sourceEventSeqs":[],"surfaceOp":"append"}"#.to_string(),
        chunk(2, 2000, "a"),
        chunk(3, 2001, "b"),
        chunk(4, 2000, "c"),
        tool(5, 3000, "{"),
        tool(6, 3000, r#"\"a\""#),
        tool(7, 3000, ":1"),
        tool(8, 3005, "}"),
        format!(r#"{{"type":"assistant/message","seq":9,"time":12,"data":{big},"sourceEventSeqs":[10,11,12],"surfaceOp":{{"kind":"replace"}}}}"#),
        r#"{"type":"x/ext","seq":10,"time":13,"data":null,"ignorable":true}"#.to_string(),
        r#"{"type":"turn/end","seq":11,"time":14,"data":{"turn":1,"reason":{"kind":"completed"}}}"#.to_string(),
    ];
    let got: Vec<String> = loaded.values().iter().map(|v| v.to_json()).collect();
    assert_eq!(got, expected);
    assert_eq!(
        loaded.header.to_json(),
        r#"{"version":0,"id":"ref-1","createdAt":1700000000000,"cwd":"/home/u","origin":"subagent","agentPreset":"preset"}"#
    );
    assert!(loaded
        .revision
        .ends_with(":store:0b8e4c1a-3f7d-4a2e-9c51-6d0f2b7e8a93:incarnation:a1b2c3d4-e5f6-4789-8abc-def012345678:revision:3"));
    b.append(
        &loaded.header,
        &[plain(12, "turn/start", r#"{"turn":2}"#, "")],
        false,
    )
    .unwrap();
    let again = b.load("ref-1").unwrap().unwrap();
    assert_eq!(again.events.len(), 13);
    assert!(again.revision.ends_with(":revision:4"));
}
