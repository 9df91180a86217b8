//! Schema 17 (docs/formats.md §4.2, §4.3): the exact DDL, the open-time
//! pragmas, version and identity checks, pristine initialization, the
//! re-validation inside every write transaction, and store/incarnation ids.

use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use super::faults::{self, Point};
use crate::error::{Error, Result, Status};
use crate::rule::Rule;
use crate::store::uuid::{is_uuid, new_uuid};

/// `PRAGMA application_id` of a schema-17 database (0x44534850, "DSHP").
pub const APPLICATION_ID: i64 = 1_146_308_688;

/// `PRAGMA user_version` of a schema-17 database.
pub const SCHEMA_VERSION: i64 = 17;

/// The three CREATE statements, token for token as in docs/formats.md §4.2.
pub const CREATE_TABLES: [&str; 3] = [
    "CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT",
    "CREATE TABLE sessions (
  id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL,
  cwd TEXT, parent_session TEXT, seed_length INTEGER, origin TEXT,
  delegation_depth INTEGER, agent_preset TEXT,
  incarnation TEXT NOT NULL, revision INTEGER NOT NULL
) STRICT",
    "CREATE TABLE events (
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL,
  data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT,
  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT",
];

/// The user schema objects `(type, name, tbl_name, normalized sql)` ordered
/// by type and name, exactly as the validation query must return them.
const EXPECTED_OBJECTS: [(&str, &str, &str, &str); 3] = [
    (
        "table",
        "events",
        "events",
        "CREATE TABLE events ( session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, \
         seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data ANY NOT NULL, \
         source_event_seqs ANY, surface_op TEXT, ignorable INTEGER CHECK (ignorable IS NULL OR \
         ignorable IN (0, 1)), PRIMARY KEY (session_id, seq) ) STRICT",
    ),
    (
        "table",
        "persistence_state",
        "persistence_state",
        "CREATE TABLE persistence_state ( singleton INTEGER PRIMARY KEY CHECK (singleton = 1), \
         store_id TEXT NOT NULL ) STRICT",
    ),
    (
        "table",
        "sessions",
        "sessions",
        "CREATE TABLE sessions ( id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER \
         NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER, origin TEXT, delegation_depth \
         INTEGER, agent_preset TEXT, incarnation TEXT NOT NULL, revision INTEGER NOT NULL ) STRICT",
    ),
];

/// A SQLite failure carrying SQLite's message: a damaged database
/// (SQLITE_CORRUPT and its extended codes, SQLITE_NOTADB) as
/// `DSH_E_CORRUPT` (`sqlite.corrupt`), anything else as `DSH_E_IO`
/// (`sqlite.busy` for SQLITE_BUSY/LOCKED, else `io.sqlite`).
pub fn sql_err(e: rusqlite::Error) -> Error {
    let (status, rule) = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            (Status::Corrupt, Rule::SqliteCorrupt)
        }
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => (Status::Io, Rule::SqliteBusy),
        _ => (Status::Io, Rule::IoSqlite),
    };
    let message = format!("SQLite: {e}");
    Error::new(status, rule, message).with_source(e)
}

fn schema_err(rule: Rule, message: impl Into<String>) -> Error {
    Error::new(Status::SchemaMismatch, rule, message)
}

fn pragma_err(name: &str, value: impl std::fmt::Display) -> Error {
    let rule = match name {
        "trusted_schema" => Rule::SqlitePragmaTrustedSchema,
        "mmap_size" => Rule::SqlitePragmaMmapSize,
        "journal_mode" => Rule::SqlitePragmaJournalMode,
        "locking_mode" => Rule::SqlitePragmaLockingMode,
        // synchronous, fullfsync, checkpoint_fullfsync: how a commit is
        // made durable.
        _ => Rule::SqlitePragmaSynchronous,
    };
    Error::new(
        Status::Io,
        rule,
        format!("database retained {name}={value}"),
    )
}

/// Run `sql` and return the first column of its first row, if any.
/// The first column of the first row of `sql`, run to its end: a statement
/// that writes (`journal_mode = WAL` commits a header change) fails there,
/// and an error at that point would be lost if the statement were only
/// reset.
fn run_to_end(conn: &Connection, sql: &str) -> rusqlite::Result<Option<rusqlite::types::Value>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query([])?;
    let first = match rows.next()? {
        Some(row) => Some(row.get::<_, rusqlite::types::Value>(0)?),
        None => None,
    };
    while rows.next()?.is_some() {}
    Ok(first)
}

fn first_value(conn: &Connection, sql: &str) -> Result<Option<rusqlite::types::Value>> {
    run_to_end(conn, sql).map_err(sql_err)
}

fn int_value(conn: &Connection, sql: &str) -> Result<i64> {
    match first_value(conn, sql)? {
        Some(rusqlite::types::Value::Integer(n)) => Ok(n),
        other => Err(Error::new(
            Status::Io,
            Rule::IoSqlite,
            format!("SQLite: unexpected result {other:?} from {sql}"),
        )),
    }
}

/// Collapse every whitespace run to one space and trim.
pub fn normalize_sql(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `sqlite.schema-objects`: the user objects equal the canonical schema.
fn validate_objects(conn: &Connection) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema \
             WHERE name NOT GLOB 'sqlite_*' ORDER BY type, name",
        )
        .map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let mut n = 0;
    let mut ok = true;
    while let Some(row) = rows.next().map_err(sql_err)? {
        let text = |i: usize| match row.get_ref(i) {
            Ok(ValueRef::Text(t)) => Some(String::from_utf8_lossy(t).into_owned()),
            _ => None,
        };
        let got = (
            text(0),
            text(1),
            text(2),
            text(3).map(|s| normalize_sql(&s)),
        );
        ok &= EXPECTED_OBJECTS.get(n).is_some_and(|(ty, name, tbl, sql)| {
            got.0.as_deref() == Some(*ty)
                && got.1.as_deref() == Some(*name)
                && got.2.as_deref() == Some(*tbl)
                && got.3.as_deref() == Some(*sql)
        });
        n += 1;
    }
    if ok && n == EXPECTED_OBJECTS.len() {
        Ok(())
    } else {
        Err(schema_err(
            Rule::SqliteSchemaObjects,
            "database does not contain the required schema objects",
        ))
    }
}

/// Inside a write transaction: the database is still ours and unchanged
/// (`sqlite.mutation-app-id`, `sqlite.schema-objects`, `sqlite.mutation-version`).
pub fn validate_for_mutation(conn: &Connection) -> Result<()> {
    let app = int_value(conn, "PRAGMA application_id")?;
    if app != APPLICATION_ID {
        return Err(schema_err(
            Rule::SqliteMutationAppId,
            format!("database application id changed to {app} before mutation"),
        ));
    }
    validate_objects(conn)?;
    let version = int_value(conn, "PRAGMA user_version")?;
    if version != SCHEMA_VERSION {
        return Err(schema_err(
            Rule::SqliteMutationVersion,
            format!("database schema version changed to {version} before mutation"),
        ));
    }
    Ok(())
}

/// The page cache of a file store's connection, in KiB (SQLite's default
/// is 2 MiB). A store reads a session whole and in order, once per open,
/// and appends at the right edge of its b-trees: neither comes back to
/// more than the few pages on the path to a leaf. A whole-session read
/// fills the cache while it allocates the session's events, so releasing
/// the cache afterwards (`PRAGMA shrink_memory`) left that much free
/// memory scattered among the events: RSS after opening a 10k-event
/// session was 1.20x the log's JSON with 2 MiB, 1.18x with 256 KiB, and
/// opens and write-behind ran as fast (docs/performance.md).
const CACHE_KIB: u32 = 256;

/// Steps 1–7 of docs/formats.md §4.3 on a freshly opened connection, with
/// `exclusive` after SQLite's exclusive locking mode, taken before any of
/// them reads the database; returns the store id. A refused database is left unchanged (the only writes are
/// the pristine initialization and the journal mode, after the checks).
pub fn configure(
    conn: &mut Connection,
    memory: bool,
    exclusive: bool,
    started: Instant,
    busy: Duration,
) -> Result<String> {
    if !memory && exclusive {
        // `"locking": "exclusive"`: no other connection may share the
        // database. Set before anything reads the database (a pragma such
        // as `cache_size` reads its schema), so before SQLite opens an
        // existing WAL or makes a new one, the WAL index lives in this
        // process's heap instead of a shared mapping of the `-shm` file,
        // which a truncated or immutable `-shm` would turn into SIGBUS.
        let mode = first_value(conn, "PRAGMA locking_mode = EXCLUSIVE")?;
        if !matches!(&mode, Some(rusqlite::types::Value::Text(m)) if m == "exclusive") {
            return Err(pragma_err("locking_mode", format!("{mode:?}")));
        }
    }
    conn.execute_batch("PRAGMA trusted_schema = OFF")
        .map_err(sql_err)?;
    let trusted = int_value(conn, "PRAGMA trusted_schema")?;
    if trusted != 0 {
        return Err(pragma_err("trusted_schema", trusted));
    }
    first_value(conn, "PRAGMA mmap_size = 0")?;
    if !memory {
        let mmap = int_value(conn, "PRAGMA mmap_size")?;
        if mmap != 0 {
            return Err(pragma_err("mmap_size", mmap));
        }
    }
    if !memory {
        conn.execute_batch(&format!("PRAGMA cache_size = -{CACHE_KIB}"))
            .map_err(sql_err)?;
    }
    conn.execute_batch("PRAGMA foreign_keys = ON")
        .map_err(sql_err)?;
    check_or_initialize(conn)?;
    select_wal(conn, memory, started, busy)?;
    conn.execute_batch("PRAGMA synchronous = FULL")
        .map_err(sql_err)?;
    let sync = int_value(conn, "PRAGMA synchronous")?;
    if sync != 2 {
        return Err(pragma_err("synchronous", sync));
    }
    if FULL_FSYNC {
        full_fsync(conn)?;
    }
    store_id(conn)
}

/// Whether [`configure`] asks SQLite for `F_FULLFSYNC` (Apple platforms).
/// There `fsync` leaves the data in the drive's write cache, and SQLite's
/// syncs are plain `fsync`s, `synchronous = FULL` or not, unless the
/// connection sets `fullfsync` (every sync of the WAL) and
/// `checkpoint_fullfsync` (a checkpoint's syncs). Elsewhere SQLite has no
/// use for them (docs/decisions.md, "Storage on macOS").
pub const FULL_FSYNC: bool = cfg!(target_vendor = "apple");

/// `PRAGMA fullfsync = ON` and `PRAGMA checkpoint_fullfsync = ON`, each
/// read back (`sqlite.pragma-synchronous` when one did not take). SQLite
/// keeps the flags on every platform; it only uses them where
/// `F_FULLFSYNC` exists.
pub fn full_fsync(conn: &Connection) -> Result<()> {
    conn.execute_batch("PRAGMA fullfsync = ON; PRAGMA checkpoint_fullfsync = ON")
        .map_err(sql_err)?;
    for name in ["fullfsync", "checkpoint_fullfsync"] {
        let value = int_value(conn, &format!("PRAGMA {name}"))?;
        if value != 1 {
            return Err(pragma_err(name, value));
        }
    }
    Ok(())
}

/// The store's identity (`persistence_state.store_id`, a UUID).
fn store_id(conn: &Connection) -> Result<String> {
    match first_value(
        conn,
        "SELECT store_id FROM persistence_state WHERE singleton = 1",
    )? {
        Some(rusqlite::types::Value::Text(id)) if is_uuid(&id) => Ok(id),
        _ => Err(Error::new(
            Status::Corrupt,
            Rule::SqliteStoreId,
            "database has no valid store identity",
        )),
    }
}

/// The checks of [`configure`] a reader can make, on a read-only
/// connection: the same pragmas where they only concern this connection,
/// then, in one read transaction, the identity, the schema objects, WAL
/// mode and the store id. Nothing is written.
pub fn configure_read_only(conn: &Connection) -> Result<String> {
    conn.execute_batch("PRAGMA trusted_schema = OFF; PRAGMA query_only = ON")
        .map_err(sql_err)?;
    if int_value(conn, "PRAGMA trusted_schema")? != 0 {
        return Err(pragma_err("trusted_schema", 1));
    }
    first_value(conn, "PRAGMA mmap_size = 0")?;
    conn.execute_batch(&format!("PRAGMA cache_size = -{CACHE_KIB}"))
        .map_err(sql_err)?;
    conn.execute_batch("BEGIN").map_err(sql_err)?;
    let checked = (|| {
        let version = checked_identity(conn)?;
        if version == 0 {
            return Err(schema_err(
                Rule::SqliteSchemaUnversioned,
                "database was never initialized by a writer: nothing to read",
            ));
        }
        validate_objects(conn)?;
        match first_value(conn, "PRAGMA journal_mode")? {
            Some(rusqlite::types::Value::Text(m)) if m.eq_ignore_ascii_case("wal") => {}
            other => return Err(pragma_err("journal_mode", format!("{other:?}"))),
        }
        store_id(conn)
    })();
    let _ = conn.execute_batch("COMMIT");
    checked
}

/// Step 4's verdict on the open database ([`check_identity`] over its
/// `user_version`, `application_id` and schema objects); its version.
fn checked_identity(conn: &Connection) -> Result<i64> {
    let version = int_value(conn, "PRAGMA user_version")?;
    let app = int_value(conn, "PRAGMA application_id")?;
    let objects = int_value(
        conn,
        "SELECT count(*) FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*'",
    )?;
    check_identity(
        version,
        app,
        &format!("{objects} schema objects"),
        objects > 0,
    )?;
    Ok(version)
}

/// The version and application-id verdict of step 4: a database of
/// another schema version or application is refused, and so is an
/// unversioned one that holds anything (`objects`, described by `what`).
fn check_identity(version: i64, app: i64, what: &str, objects: bool) -> Result<()> {
    if version == 0 && (app != 0 || objects) {
        return Err(schema_err(
            Rule::SqliteSchemaUnversioned,
            format!("database has an unversioned schema or application identity (application_id {app}, {what})"),
        ));
    }
    if version != 0 && version != SCHEMA_VERSION {
        return Err(schema_err(
            Rule::SqliteSchemaVersion,
            format!("database has schema version {version}, incompatible with this build ({SCHEMA_VERSION})"),
        ));
    }
    if version == SCHEMA_VERSION && app != APPLICATION_ID {
        return Err(schema_err(
            Rule::SqliteApplicationId,
            format!("database application id {app} is not the expected {APPLICATION_ID}"),
        ));
    }
    Ok(())
}

/// Step 4 decided from the database file's own bytes, before SQLite opens
/// it: opening a foreign database would let SQLite roll back its hot
/// journal or checkpoint its WAL, changing its bytes before the refusal.
/// The header's `user_version` (offset 60) and `application_id` (68)
/// refuse another schema or application; an unversioned file is ours to
/// initialize only when it is empty: no cell on its schema page, no WAL
/// and no hot journal beside it. Files that are not SQLite databases (or
/// too short to tell) are left to SQLite, which refuses them unchanged.
pub fn refuse_foreign_file(path: &std::path::Path) -> Result<()> {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else {
        return Ok(());
    };
    let mut h = [0u8; 108];
    let mut n = 0;
    while n < h.len() {
        match f.read(&mut h[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(()),
        }
    }
    let side = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        std::fs::metadata(p).is_ok_and(|m| m.len() > 0)
    };
    if n < h.len() {
        // This library initializes a new file outside WAL mode, so an
        // empty file whose content waits in a WAL was written by another.
        if n == 0 && side("-wal") {
            return Err(schema_err(
                Rule::SqliteSchemaUnversioned,
                "database file is empty but its WAL holds data: not this library's; left untouched",
            ));
        }
        return Ok(());
    }
    if &h[..16] != b"SQLite format 3\0" {
        return Ok(());
    }
    let be = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let (version, app) = (i64::from(be(60)), i64::from(be(68) as i32));
    let cells = u16::from_be_bytes([h[103], h[104]]);
    let pending = side("-wal") || side("-journal");
    let what =
        format!("{cells} schema page cells, pending WAL or journal: {pending}; left untouched");
    check_identity(version, app, &what, cells > 0 || (version == 0 && pending))
}

/// Step 4: version / application id checks or pristine initialization, in
/// one `BEGIN IMMEDIATE` transaction (rolled back on any failure).
fn check_or_initialize(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let version = checked_identity(&tx)?;
    if version == 0 {
        for ddl in CREATE_TABLES {
            tx.execute_batch(ddl).map_err(sql_err)?;
        }
        tx.execute(
            "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?1)",
            [new_uuid()?],
        )
        .map_err(sql_err)?;
        tx.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
        ))
        .map_err(sql_err)?;
    }
    validate_objects(&tx)?;
    tx.commit().map_err(sql_err)
}

/// The pause between two busy `journal_mode` attempts (at most the rest
/// of the budget).
const JOURNAL_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// Step 5: `journal_mode = WAL`, retrying SQLITE_BUSY every ≤ 10 ms until
/// `busy` after the open started: no attempt starts at or after that
/// cutoff, so a pause that reaches it ends the retries. Other failures are
/// reported at once.
fn select_wal(conn: &Connection, memory: bool, started: Instant, busy: Duration) -> Result<()> {
    let cutoff = started + busy;
    let mode: String = loop {
        let result = faults::hit(Point::JournalMode { cutoff })
            .and_then(|()| run_to_end(conn, "PRAGMA journal_mode = WAL"));
        match result {
            Ok(Some(rusqlite::types::Value::Text(mode))) => break mode,
            Ok(other) => return Err(pragma_err("journal_mode", format!("{other:?}"))),
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {
                let left = cutoff.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(sql_err(e));
                }
                std::thread::sleep(left.min(JOURNAL_RETRY_PAUSE));
                if Instant::now() >= cutoff {
                    return Err(sql_err(e));
                }
            }
            Err(e) => return Err(sql_err(e)),
        }
    };
    let wanted = if memory { "memory" } else { "wal" };
    if !mode.eq_ignore_ascii_case(wanted) {
        return Err(pragma_err("journal_mode", mode));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_normalizes_to_the_expected_objects() {
        let mut by_name: Vec<(&str, String)> = CREATE_TABLES
            .iter()
            .map(|ddl| {
                (
                    ddl.split_whitespace().nth(2).unwrap_or(""),
                    normalize_sql(ddl),
                )
            })
            .collect();
        by_name.sort();
        for ((name, sql), (_, exp_name, _, exp_sql)) in by_name.iter().zip(EXPECTED_OBJECTS) {
            assert_eq!(*name, exp_name);
            assert_eq!(sql, exp_sql);
        }
    }
}
