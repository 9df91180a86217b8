//! A database that is not this library's is refused before SQLite may
//! touch it: its hot rollback journal is not rolled back and its pending
//! WAL is not checkpointed, so every byte of it stays as it was.

mod store_support;

use std::path::{Path, PathBuf};

use ::dsh_session::json::Value;
use rusqlite::config::DbConfig;
use rusqlite::Connection;
use store_support::*;

fn config(db: &Path) -> String {
    format!(
        r#"{{"backend":"sqlite","path":{}}}"#,
        Value::str(db.to_str().unwrap()).to_json()
    )
}

fn side(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The bytes of the database and of its side files that exist.
fn snapshot(db: &Path) -> Vec<(String, Vec<u8>)> {
    ["", "-wal", "-journal"]
        .iter()
        .filter_map(|s| std::fs::read(side(db, s)).ok().map(|b| (s.to_string(), b)))
        .collect()
}

/// The library opens only user-only files (0600).
#[cfg(unix)]
fn user_only(db: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for s in ["", "-wal", "-journal", "-shm"] {
        let _ = std::fs::set_permissions(side(db, s), std::fs::Permissions::from_mode(0o600));
    }
}

/// Windows: the library opens only files whose DACL grants this user
/// alone, which these tests cannot make through the public API (the open
/// rules on Windows are the unit tests' of `store::sqlite`); the tests
/// that need one are ignored there.
#[cfg(not(unix))]
fn user_only(_db: &Path) {}

fn assert_refused_untouched(db: &Path, want: &str) {
    user_only(db);
    let before = snapshot(db);
    let (st, text) = Store::open(&config(db))
        .err()
        .expect("a foreign database is refused");
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_SCHEMA_MISMATCH, want),
        "{text}"
    );
    assert_eq!(snapshot(db), before, "the foreign database was changed");
}

/// A WAL database whose last writes are still only in its WAL.
fn wal_database(db: &Path, pragmas: &str) {
    let conn = Connection::open(db).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; {pragmas}
         CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
         INSERT INTO notes (body) VALUES ('one'), ('two');"
    ))
    .unwrap();
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .unwrap();
    drop(conn);
    assert!(std::fs::metadata(side(db, "-wal")).unwrap().len() > 0);
}

#[test]
#[cfg_attr(windows, ignore = "needs a foreign file with a user-only DACL")]
fn a_foreign_wal_database_is_not_checkpointed() {
    let dir = temp_dir("foreign-wal");
    let db = dir.join("app.db");
    wal_database(&db, "");
    assert_refused_untouched(&db, "sqlite.schema-unversioned");
    let other = dir.join("other.db");
    wal_database(
        &other,
        "PRAGMA application_id = 42; PRAGMA user_version = 3;",
    );
    // Its identity is in the WAL too: the file's header still says 0.
    assert_refused_untouched(&other, "sqlite.schema-unversioned");
}

#[test]
#[cfg_attr(windows, ignore = "needs a foreign file with a user-only DACL")]
fn a_foreign_database_with_a_hot_journal_is_not_rolled_back() {
    let dir = temp_dir("foreign-journal");
    let live = dir.join("live.db");
    let conn = Connection::open(&live).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 1;
         CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
         INSERT INTO notes (body) VALUES ('committed');
         BEGIN; ",
    )
    .unwrap();
    // Enough pages that the tiny cache spills them into the file mid-transaction.
    for i in 0..2000 {
        conn.execute(
            "INSERT INTO notes (body) VALUES (?1)",
            [format!("{i:0>200}")],
        )
        .unwrap();
    }
    // What a crash leaves: the file and its journal, mid-transaction.
    let db = dir.join("crashed.db");
    std::fs::copy(&live, &db).unwrap();
    std::fs::copy(side(&live, "-journal"), side(&db, "-journal")).unwrap();
    conn.execute_batch("ROLLBACK").unwrap();
    drop(conn);
    assert!(std::fs::metadata(side(&db, "-journal")).unwrap().len() > 0);
    assert_refused_untouched(&db, "sqlite.schema-unversioned");
}

#[test]
#[cfg_attr(windows, ignore = "needs a foreign file with a user-only DACL")]
fn an_empty_file_and_the_library_own_database_still_open() {
    let dir = temp_dir("foreign-own");
    let db = dir.join("own.db");
    std::fs::write(&db, b"").unwrap();
    user_only(&db);
    let store = Store::open(&config(&db)).unwrap();
    let s = store.create(r#"{"id":"a"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    drop(s);
    assert_eq!(store.close().0, DSH_OK);
    let store = Store::open(&config(&db)).unwrap();
    assert!(store.open_session("a").is_ok());
}

/// With `"locking": "exclusive"` the store holds its database
/// exclusively, so its WAL index lives in the process's heap: no `-shm`
/// mapping exists for a truncated or replaced `-shm` file to turn into
/// SIGBUS (the price: no reader beside it).
#[test]
fn a_damaged_shm_file_cannot_reach_an_exclusive_store() {
    let dir = temp_dir("shm");
    let db = dir.join("s.db");
    let exclusive = config(&db).replacen('{', r#"{"locking":"exclusive","#, 1);
    let store = Store::open(&exclusive).unwrap();
    let s = store.create(r#"{"id":"a"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    assert_eq!(s.flush().0, DSH_OK);
    assert!(!side(&db, "-shm").exists(), "a shared WAL index was made");
    // A -shm planted, empty, while the store is open changes nothing.
    std::fs::write(side(&db, "-shm"), b"").unwrap();
    for turn in 2..50 {
        s.append_ok(
            "turn/end",
            &format!(r#"{{"turn":{},"reason":{{"kind":"completed"}}}}"#, turn - 1),
            None,
        );
        s.append_ok("turn/start", &format!(r#"{{"turn":{turn}}}"#), None);
        assert_eq!(s.flush().0, DSH_OK);
    }
    let events = s.events();
    drop(s);
    assert_eq!(store.close().0, DSH_OK);
    let store = Store::open(&config(&db)).unwrap();
    let (s, _) = store.open_session("a").unwrap();
    let n = events.as_array().unwrap().len();
    assert_eq!(
        s.events().as_array().unwrap()[..n],
        events.as_array().unwrap()[..]
    );
}
