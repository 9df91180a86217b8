//! Opening and mutation-time rules (docs/formats.md §4.3, §4.8): journal
//! modes left by other connections, a busy journal switch, schema changes
//! between open and append, invalid `sessions` rows, store identities and
//! path rules.

use crate::rule::Rule;
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
#[cfg(unix)]
use std::path::Path;
use std::time::{Duration, Instant};

use super::tests::{header, open, plain, raw, values, TempDir};
use super::*;

fn journal_mode(conn: &rusqlite::Connection) -> String {
    conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap()
}

/// A database holding one session `s` of two events, closed.
pub(super) fn with_session(tag: &str) -> (TempDir, Vec<Arc<Event>>) {
    let dir = TempDir::new(tag);
    let events = vec![
        plain(0, "turn/start", r#"{"turn":1}"#, ""),
        plain(1, "turn/end", r#"{"turn":1}"#, ""),
    ];
    open(&dir.db()).append(&header("s"), &events, true).unwrap();
    (dir, events)
}

/// sqlite.spec #9: a database another connection left in any journal mode
/// (`delete`, `truncate`, `persist`, `wal`) opens; the store switches it to
/// WAL and the stored session is intact and appendable.
#[test]
fn a_database_left_in_any_journal_mode_opens() {
    for mode in ["delete", "truncate", "persist", "wal"] {
        let (dir, events) = with_session(&format!("journal-{mode}"));
        let conn = raw(&dir.db());
        let set: String = conn
            .query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(set, mode, "precondition");
        // A write in that mode leaves its artefacts (a persisted journal, a WAL).
        conn.execute_batch("UPDATE sessions SET revision = revision")
            .unwrap();
        drop(conn);
        let mut b = open(&dir.db());
        assert_eq!(b.load("s").unwrap().unwrap().events, values(&events));
        b.append(&header("s"), &[plain(2, "x/e", "{}", "")], false)
            .unwrap();
        drop(b);
        let conn = raw(&dir.db());
        assert_eq!(journal_mode(&conn), "wal", "{mode}");
        drop(conn);
        assert_eq!(open(&dir.db()).load("s").unwrap().unwrap().events.len(), 3);
    }
}

/// sqlite.spec #10: while another connection holds a read transaction on
/// a rollback-journal database the switch to WAL is busy; the open retries
/// within its busy budget and succeeds once the reader lets go, and fails
/// with `sqlite.busy` (`DSH_E_IO`) when the reader outlasts the budget.
#[test]
fn a_busy_journal_switch_is_retried_within_the_budget() {
    let (dir, events) = with_session("busy-journal");
    let hold = |conn: &rusqlite::Connection| {
        let set: String = conn
            .query_row("PRAGMA journal_mode = delete", [], |r| r.get(0))
            .unwrap();
        assert_eq!(set, "delete");
        conn.execute_batch("BEGIN; SELECT count(*) FROM events;")
            .unwrap();
    };
    // Held past the budget: refused after about the budget.
    let reader = raw(&dir.db());
    hold(&reader);
    let started = Instant::now();
    let err = SqliteBackend::open(&dir.db(), 300).unwrap_err();
    let waited = started.elapsed();
    assert_eq!(
        (err.status, err.rule),
        (Status::Io, Rule::SqliteBusy),
        "{err}"
    );
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(journal_mode(&reader), "delete", "nothing switched");
    // Released after 400 ms: a 5 s budget waits for it.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
    });
    let started = Instant::now();
    let mut b = SqliteBackend::open(&dir.db(), 5000).unwrap();
    let waited = started.elapsed();
    releaser.join().unwrap();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert_eq!(b.load("s").unwrap().unwrap().events, values(&events));
    drop(b);
    assert_eq!(journal_mode(&raw(&dir.db())), "wal");
}

/// sqlite.spec #16: `user_version` or `application_id` changed by another
/// connection after the open refuses the next append
/// (`sqlite.mutation-version` / `sqlite.mutation-app-id`,
/// `DSH_E_SCHEMA_MISMATCH`), writing nothing.
#[test]
fn schema_identity_changed_before_an_append_is_refused() {
    let changes = [
        ("PRAGMA user_version = 18", Rule::SqliteMutationVersion),
        ("PRAGMA user_version = 0", Rule::SqliteMutationVersion),
        ("PRAGMA application_id = 7", Rule::SqliteMutationAppId),
    ];
    for (sql, rule) in changes {
        let (dir, events) = with_session("mutation");
        let mut b = open(&dir.db());
        let before = b.revision("s").unwrap();
        raw(&dir.db()).execute_batch(sql).unwrap();
        let err = b
            .append(&header("s"), &[plain(2, "x/e", "{}", "")], false)
            .unwrap_err();
        assert_eq!(
            (err.status, err.rule),
            (Status::SchemaMismatch, rule),
            "{sql}"
        );
        let err = b
            .append(&header("t"), &[plain(0, "x/e", "{}", "")], true)
            .unwrap_err();
        assert_eq!(err.rule, rule, "{sql}: materialization");
        let err = b
            .commit_repair(&header("s"), None, &[plain(2, "x/e", "{}", "")])
            .unwrap_err();
        assert_eq!(err.rule, rule, "{sql}: repair");
        assert_eq!(b.revision("s").unwrap(), before);
        assert_eq!(b.load("s").unwrap().unwrap().events, values(&events));
        assert!(b.load("t").unwrap().is_none());
    }
}

/// sqlite.spec #17 and #19: a `sessions` row with an invalid value is
/// refused by `list` and by load (`sqlite.row-session`, `DSH_E_CORRUPT`)
/// before any header is exposed.
#[test]
fn invalid_session_rows_are_reported_by_list_and_refused_by_load() {
    let cases = [
        "created_at = -1",
        "created_at = 9007199254740992",
        "origin = 'parent'",
        "origin = ''",
        "delegation_depth = -1",
        "seed_length = -1",
        "seed_length = 9007199254740992",
        "cwd = 'relative/dir'",
        "version = 9007199254740992",
        "incarnation = 'not-a-uuid'",
        "incarnation = ''",
        "revision = -1",
    ];
    for set in cases {
        let (dir, _) = with_session("session-row");
        raw(&dir.db())
            .execute_batch(&format!("UPDATE sessions SET {set} WHERE id = 's'"))
            .unwrap();
        let mut b = open(&dir.db());
        // The listing goes on; the row carries its problem.
        let listed = b.list().unwrap();
        let err = listed[0].problem.clone().expect("the row's problem");
        assert_eq!(
            (err.status, err.rule),
            (Status::Corrupt, Rule::SqliteRowSession),
            "list, {set}"
        );
        let err = b.load("s").unwrap_err();
        assert_eq!(
            (err.status, err.rule),
            (Status::Corrupt, Rule::SqliteRowSession),
            "load, {set}"
        );
    }
    // Valid optional values are restored.
    let (dir, _) = with_session("session-row-ok");
    raw(&dir.db())
        .execute_batch(
            "UPDATE sessions SET cwd = '/w', origin = 'subagent', delegation_depth = 0, \
             seed_length = 0 WHERE id = 's'",
        )
        .unwrap();
    let listed = open(&dir.db()).list().unwrap();
    assert_eq!(
        listed[0].header.to_json(),
        r#"{"version":0,"id":"s","createdAt":1700000000000,"cwd":"/w","seedLength":0,"origin":"subagent","delegationDepth":0}"#
    );
}

/// sqlite.spec #27: a database without its `persistence_state` row, or
/// with an empty `store_id`, is refused (`sqlite.store-id`, `DSH_E_CORRUPT`).
#[test]
fn missing_and_empty_store_identities_are_refused() {
    for sql in [
        "DELETE FROM persistence_state",
        "UPDATE persistence_state SET store_id = ''",
    ] {
        let (dir, _) = with_session("store-identity");
        raw(&dir.db()).execute_batch(sql).unwrap();
        let err = SqliteBackend::open(&dir.db(), 100).unwrap_err();
        assert_eq!(
            (err.status, err.rule),
            (Status::Corrupt, Rule::SqliteStoreId),
            "{sql}"
        );
    }
}

/// sqlite.spec #29: a directory at the database path is refused
/// (`sqlite.path-file`), and so is a symlinked parent directory
/// (`sqlite.path-parent`), both `DSH_E_IO`, creating nothing.
#[cfg(unix)]
#[test]
fn a_directory_at_the_path_and_a_symlinked_parent_are_refused() {
    let dir = TempDir::new("path-kinds");
    std::fs::create_dir(dir.db()).unwrap();
    let err = SqliteBackend::open(&dir.db(), 100).unwrap_err();
    assert_eq!((err.status, err.rule), (Status::Io, Rule::SqlitePathFile));
    assert_eq!(std::fs::read_dir(dir.db()).unwrap().count(), 0);
    let real = dir.0.join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = dir.0.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let err = SqliteBackend::open(&link.join("store.db"), 100).unwrap_err();
    assert_eq!((err.status, err.rule), (Status::Io, Rule::SqlitePathParent));
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
}

/// The permission refusals say what they found and how to fix it: a
/// 0644 copy of a database, a 0775 parent, a symlinked parent.
#[cfg(unix)]
#[test]
fn permission_refusals_name_the_fix() {
    let dir = TempDir::new("path-fixes");
    let store = SqliteBackend::open(&dir.db(), 100).unwrap();
    drop(store);
    std::fs::set_permissions(dir.db(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = SqliteBackend::open(&dir.db(), 100).unwrap_err();
    assert_eq!(err.rule, Rule::SqlitePathFile);
    assert!(
        err.message.contains("mode 644") && err.message.contains("chmod 600"),
        "{}",
        err.message
    );
    std::fs::set_permissions(dir.db(), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o775)).unwrap();
    let err = SqliteBackend::open(&dir.db(), 100).unwrap_err();
    assert_eq!(err.rule, Rule::SqlitePathParent);
    assert!(
        err.message.contains("mode 775") && err.message.contains("chmod go-w"),
        "{}",
        err.message
    );
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = dir.0.join("link");
    std::os::unix::fs::symlink(&dir.0, &link).unwrap();
    let err = SqliteBackend::open(&link.join("store.db"), 100).unwrap_err();
    assert_eq!(err.rule, Rule::SqlitePathParent);
    assert!(err.message.contains("symbolic link"), "{}", err.message);
    assert!(SqliteBackend::open(&dir.db(), 100).is_ok());
}

#[cfg(unix)]
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// sqlite.spec #31: a parent that passes the path rules but where the file
/// cannot be created surfaces the failure (`io.*`, `DSH_E_IO`). Root
/// ignores directory permissions, so the parent used is this process's
/// `/proc/<pid>` directory (owned by the user, mode 0555, no new files);
/// a non-root run also checks a 0500 directory.
#[cfg(unix)]
#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "its unwritable parent is /proc/<pid>, which only Linux has"
)]
fn a_creation_failure_after_path_validation_surfaces() {
    let proc_dir = std::path::PathBuf::from(format!("/proc/{}", std::process::id()));
    let meta = std::fs::symlink_metadata(&proc_dir).unwrap();
    assert!(meta.is_dir(), "precondition: a real directory");
    let err = SqliteBackend::open(&proc_dir.join("store.db"), 100).unwrap_err();
    assert_eq!(err.status, Status::Io, "{err}");
    assert!(err.rule.as_str().starts_with("io."), "{err}");
    if euid() != 0 {
        let dir = TempDir::new("unwritable");
        let parent = dir.0.join("ro");
        std::fs::create_dir(&parent).unwrap();
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o500)).unwrap();
        let err = SqliteBackend::open(&parent.join("store.db"), 100).unwrap_err();
        assert_eq!(err.status, Status::Io, "{err}");
        assert!(err.rule.as_str().starts_with("io."), "{err}");
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(!Path::new(&parent.join("store.db")).exists());
    }
}
