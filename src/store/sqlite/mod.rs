//! The SQLite backend, schema 17 (docs/formats.md §4): one database file
//! holding every session, one row per event or per packed chunk run.
//!
//! * `file`: path rules, exclusive creation, the single-writer `flock`;
//! * `schema`: the exact DDL, open-time checks, re-validation per write;
//! * `sessions`: the `sessions` table (header columns, revision);
//! * `rows`: the `events` rows (encoding, decoding, physical scan);
//! * `stream`: the streaming read of a windowed open.
//!
//! Revision strings are `file:<dev>:<ino>:<birthtimeNs>:store:<store_id>:
//! incarnation:<uuid>:revision:<n>` (`memory:store:<store_id>:…` for
//! `:memory:`). `birthtimeNs` comes from `statx` through
//! [`std::fs::Metadata::created`]; it is 0 where the kernel or file system
//! does not report a birth time.

mod ahead;
pub mod codec;
mod cut;
mod early;
mod faults;
mod file;
mod load;
mod row_buf;
mod rows;
mod schema;
mod sessions;
mod stream;
#[cfg(test)]
#[path = "tests/round_trip.rs"]
mod tests;
#[cfg(test)]
#[path = "tests/corrupt.rs"]
mod tests_corrupt;
#[cfg(test)]
// SIGKILL: Unix (tests_windows has the Windows side); its test that reads
// /proc/<pid>/maps runs on Linux.
#[cfg(unix)]
#[path = "tests/crash.rs"]
mod tests_crash;
#[cfg(test)]
#[path = "tests/damage.rs"]
mod tests_damage;
// Differential against the JSONL backend.
#[cfg(all(test, feature = "jsonl"))]
#[path = "tests/differential.rs"]
mod tests_differential;
#[cfg(test)]
#[path = "tests/faults.rs"]
mod tests_faults;
#[cfg(test)]
#[path = "tests/load.rs"]
mod tests_load;
#[cfg(test)]
#[path = "tests/open.rs"]
mod tests_open;
#[cfg(test)]
#[path = "tests/packed.rs"]
mod tests_packed;
#[cfg(test)]
#[path = "tests/schema.rs"]
mod tests_schema;
#[cfg(all(test, windows))]
#[path = "tests/windows.rs"]
mod tests_windows;
#[cfg(test)]
#[path = "tests/writer.rs"]
mod tests_writer;
mod write;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use self::rows::Wtf8;
use self::schema::sql_err;
use self::sessions::{header_id_bytes, SessionRow};
use super::backend::{
    Backend, Batch, Cut, Listed, Loaded, ProgressUnit, RangeReads, ReadProgress, Stored, Streamed,
    Torn, TornAt, TornKind,
};
use super::chunk_rows::Record;
use super::writer::Hurry;
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;

pub use self::schema::{APPLICATION_ID, SCHEMA_VERSION};
use self::write::{check_seqs, insert_records, write_batch, write_tx, STREAM_PAGE};

/// Sessions stored in one SQLite database (schema 17).
pub struct SqliteBackend {
    // Field order is drop order: the connection closes before the lock
    // descriptor, so SQLite's POSIX locks are never dropped under it.
    conn: Connection,
    lock: Option<file::FileLock>,
    /// `file:<dev>:<ino>:<birthtimeNs>:store:<id>` or `memory:store:<id>`.
    identity: String,
    zstd: zstd::bulk::Compressor<'static>,
    /// Compresses large values of a batch ahead of the inserts.
    ahead: ahead::Ahead,
    /// When `ahead` may work (`None`: no writer, always).
    hurry: Option<Arc<Hurry>>,
    /// The physical scan of the last load, so the repair that follows
    /// need not decode the whole session again (see [`LastScan`]).
    last_scan: Option<LastScan>,
    /// The next seq of each session this connection wrote, valid while
    /// `PRAGMA data_version` is the one kept with them (no other
    /// connection committed since): a write then need not read the tail.
    tails: (Option<i64>, HashMap<Vec<u8>, u64>),
    /// Events the current streaming read handed on (see
    /// [`RangeReads::progress`]).
    streamed: Arc<std::sync::atomic::AtomicU64>,
}

/// Where a session's stored log stands, as the last load found it or the
/// last append of this connection left it: valid while nothing else was
/// written to the database since (any other write by this connection
/// clears it, and a commit by another connection changes `PRAGMA
/// data_version`).
#[derive(Debug)]
struct LastScan {
    id: Vec<u8>,
    data_version: i64,
    torn_from: Option<u64>,
    next: u64,
}

/// `PRAGMA data_version`: changes when another connection commits.
fn data_version(conn: &Connection) -> Result<i64> {
    conn.prepare_cached("PRAGMA data_version")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(sql_err)
}

impl std::fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

const INSERT_EVENT: &str = "INSERT INTO events \
    (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

impl SqliteBackend {
    /// Open (creating and initializing when absent or empty) the database at
    /// `path`, or an in-memory database for `":memory:"` (docs/formats.md
    /// §4.3), and take the exclusive writer lock (`store.locked`). A
    /// database that is refused is left unchanged.
    pub fn open(path: &Path, busy_timeout_ms: u32) -> Result<SqliteBackend> {
        SqliteBackend::open_with_locking(path, busy_timeout_ms, false)
    }

    /// [`SqliteBackend::open`]; with `exclusive`, SQLite's exclusive
    /// locking mode for the connection's life (`"locking": "exclusive"`):
    /// the WAL index lives in this process's heap instead of a shared
    /// mapping of the `-shm` file, and no reader can open the database
    /// beside this writer.
    pub fn open_with_locking(
        path: &Path,
        busy_timeout_ms: u32,
        exclusive: bool,
    ) -> Result<SqliteBackend> {
        let started = Instant::now();
        let busy = Duration::from_millis(u64::from(busy_timeout_ms));
        let memory = path.as_os_str() == ":memory:";
        let lock = if memory {
            None
        } else {
            Some(file::acquire(path)?)
        };
        if !memory {
            schema::refuse_foreign_file(path)?;
        }
        let conn = if memory {
            Connection::open_in_memory()
        } else {
            Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        }
        .map_err(sql_err)?;
        let mut backend = SqliteBackend {
            conn,
            lock,
            identity: String::new(),
            zstd: rows::compressor()?,
            ahead: ahead::Ahead::default(),
            hurry: None,
            last_scan: None,
            tails: (None, HashMap::new()),
            streamed: Arc::default(),
        };
        backend.conn.busy_timeout(busy).map_err(sql_err)?;
        backend.conn.set_prepared_statement_cache_capacity(32);
        let store_id = schema::configure(&mut backend.conn, memory, exclusive, started, busy)?;
        if !memory {
            // The reads of `configure` opened (and so created) the WAL.
            file::sync_parent(path)?;
        }
        backend.identity = match &backend.lock {
            Some(l) => format!("file:{}:{}:{}:store:{store_id}", l.dev, l.ino, l.birth_ns),
            None => format!("memory:store:{store_id}"),
        };
        Ok(backend)
    }

    /// Open the database at `path` for reading beside its writer
    /// (`"readOnly": true`): a read-only connection, no lock of this
    /// library, no initialization, no write; each read is one read
    /// transaction, so it sees one committed state. A writer in exclusive
    /// locking mode admits no reader: `store.locked`.
    pub fn open_read_only(path: &Path, busy_timeout_ms: u32) -> Result<SqliteBackend> {
        let (dev, ino, birth_ns) = file::identify(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql_err)?;
        conn.busy_timeout(Duration::from_millis(u64::from(busy_timeout_ms)))
            .map_err(sql_err)?;
        conn.set_prepared_statement_cache_capacity(32);
        let store_id = schema::configure_read_only(&conn).map_err(|e| {
            if e.rule == Rule::SqliteBusy {
                Error::new(
                    Status::Conflict,
                    Rule::StoreLocked,
                    format!(
                        "database {} is held by a writer that admits no readers (\"locking\": \"exclusive\"): {}",
                        path.display(),
                        e.message
                    ),
                )
            } else {
                e
            }
        })?;
        Ok(SqliteBackend {
            conn,
            lock: None,
            identity: format!("file:{dev}:{ino}:{birth_ns}:store:{store_id}"),
            zstd: rows::compressor()?,
            ahead: ahead::Ahead::default(),
            hurry: None,
            last_scan: None,
            tails: (None, HashMap::new()),
            streamed: Arc::default(),
        })
    }

    /// Count the store's waiting flushes in `hurry` (the writer's hint:
    /// with a flush waiting, a write may use a helper thread).
    pub fn set_hurry(&mut self, hurry: Arc<Hurry>) {
        self.hurry = Some(hurry);
    }

    /// A whole-session read ended: remember what it found, for the repair
    /// that may follow, and hand back the pages it read.
    fn read_done(&mut self, last: LastScan) {
        self.last_scan = Some(last);
        self.release_cache();
    }

    /// Hand SQLite's page cache back: the pages a whole-session read
    /// touched stay cached otherwise, long after the session is open.
    fn release_cache(&self) {
        let _ = self.conn.execute_batch("PRAGMA shrink_memory");
    }

    fn revision_of(&self, row: &SessionRow) -> String {
        format!(
            "{}:incarnation:{}:revision:{}",
            self.identity, row.incarnation, row.revision
        )
    }
}

impl Backend for SqliteBackend {
    fn precompute(&self) -> Option<Arc<dyn crate::store::backend::Precompute>> {
        Some(self.ahead.early.clone())
    }

    fn kind(&self) -> crate::store::backend::BackendKind {
        crate::store::backend::BackendKind::Sqlite
    }

    fn list(&mut self) -> Result<Vec<Listed>> {
        let rows = sessions::select_all(&self.conn)?;
        Ok(rows
            .into_iter()
            .map(|row| match row {
                Ok(row) => Listed {
                    header: row.header.clone(),
                    revision: self.revision_of(&row),
                    problem: None,
                },
                Err((id, e)) => Listed {
                    header: Value::obj([("id", id)]),
                    revision: String::new(),
                    problem: Some(e),
                },
            })
            .collect())
    }

    fn load(&mut self, id: &str) -> Result<Option<Loaded>> {
        let tx = self.conn.transaction().map_err(sql_err)?;
        let Some(session) = sessions::select(&tx, id.as_bytes())? else {
            return Ok(None);
        };
        let scan = load::scan_session(&tx, id.as_bytes())?;
        let torn_rows = match scan.torn_from {
            Some(from) => cut::count_from(&tx, id.as_bytes(), from)?,
            None => 0,
        };
        let data_version = load::commit_read(tx)?;
        self.read_done(LastScan {
            id: id.as_bytes().to_vec(),
            data_version,
            torn_from: scan.torn_from,
            next: scan.events.len() as u64,
        });
        Ok(Some(Loaded {
            revision: self.revision_of(&session),
            header: session.header,
            events: scan.events,
            torn: scan.torn_from.map(|row| Torn {
                at: TornAt::Row(row),
                recovered: 0,
                why: TornKind::UndecodableRows,
                length: torn_rows,
            }),
        }))
    }

    fn revision(&mut self, id: &str) -> Result<Option<String>> {
        Ok(sessions::select(&self.conn, id.as_bytes())?.map(|row| self.revision_of(&row)))
    }

    /// Every batch in one transaction (one WAL sync for all of them), each
    /// inside a savepoint of its own: a batch that fails is rolled back to
    /// its savepoint and fails alone; a failed commit fails them all.
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        self.ahead.early.next_round();
        let last = self.last_scan.take();
        let mut results: Vec<Option<Result<()>>> = batches
            .iter()
            .map(|b| b.events.is_empty().then_some(Ok(())))
            .collect();
        if results.iter().all(Option::is_some) {
            return results.into_iter().flatten().collect();
        }
        let mut nexts = Vec::with_capacity(batches.len());
        let outcome = (|| -> Result<i64> {
            let mut tx = write_tx(&mut self.conn)?;
            // The stored tail decides where a log continues. While no other
            // connection committed since this one last read or wrote it, that
            // is what the last load or write left; otherwise (or after any
            // failure) the tail is read and decoded again.
            let version = data_version(&tx)?;
            if self.tails.0 != Some(version) {
                self.tails = (Some(version), HashMap::new());
            }
            for (b, slot) in batches.iter().zip(results.iter_mut()) {
                if slot.is_some() {
                    continue;
                }
                let id = header_id_bytes(b.header);
                let known = last
                    .as_ref()
                    .filter(|l| l.id == id && l.data_version == version && l.torn_from.is_none())
                    .map(|l| l.next)
                    .or_else(|| self.tails.1.get(id).copied());
                let events = b.events.to_slice();
                let mut sp = tx.savepoint().map_err(sql_err)?;
                let r = write_batch(
                    &sp,
                    b,
                    &events,
                    known,
                    &mut self.zstd,
                    &mut self.ahead,
                    self.hurry.as_ref(),
                );
                match r {
                    Ok(next) => {
                        sp.commit().map_err(sql_err)?;
                        nexts.push((id.to_vec(), next));
                        *slot = Some(Ok(()));
                    }
                    Err(e) => {
                        sp.rollback().map_err(sql_err)?;
                        *slot = Some(Err(e));
                    }
                }
            }
            tx.commit().map_err(sql_err)?;
            Ok(version)
        })();
        match outcome {
            // Its own commit does not move this connection's data_version.
            Ok(version) => {
                self.tails.0 = Some(version);
                self.tails.1.extend(nexts);
            }
            Err(e) => {
                // Nothing of the transaction is stored: every batch that had
                // not failed on its own fails with it.
                self.tails = (None, HashMap::new());
                for slot in &mut results {
                    if !matches!(slot, Some(Err(_))) {
                        *slot = Some(Err(e.clone()));
                    }
                }
            }
        }
        results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
    }

    fn delete(&mut self, id: &str) -> Result<bool> {
        self.last_scan = None;
        self.tails.1.remove(id.as_bytes());
        let tx = write_tx(&mut self.conn)?;
        let id = Wtf8(id.as_bytes());
        tx.prepare_cached("DELETE FROM events WHERE session_id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(sql_err)?;
        let removed = tx
            .prepare_cached("DELETE FROM sessions WHERE id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(sql_err)?;
        tx.commit().map_err(sql_err)?;
        Ok(removed > 0)
    }

    fn commit_repair(
        &mut self,
        header: &Value,
        torn: Option<&Torn>,
        events: &[Arc<Event>],
    ) -> Result<Option<Cut>> {
        self.tails.1.remove(header_id_bytes(header));
        if torn.is_none() && events.is_empty() {
            return Ok(None);
        }
        let id = header_id_bytes(header);
        let mut cut = None;
        let db = self.conn.path().map(std::path::PathBuf::from);
        let last = self.last_scan.take();
        let tx = write_tx(&mut self.conn)?;
        if !sessions::exists(&tx, id)? {
            return Err(sessions::metadata_missing(id));
        }
        // The load just before found the physical state, and nothing was
        // written since: no need to decode the whole session again.
        let version = data_version(&tx)?;
        let (torn_from, next) = match last.filter(|l| l.id == id && l.data_version == version) {
            Some(l) => (l.torn_from, l.next),
            None => {
                let scan = load::scan_session(&tx, id)?;
                (scan.torn_from, scan.events.len() as u64)
            }
        };
        let cut_from = match (torn, torn_from) {
            (Some(t), Some(from)) if t.at == TornAt::Row(from) => Some((from, t.why)),
            (Some(t), _) => {
                return Err(Error::new(
                    Status::Conflict,
                    Rule::SqliteRepairStaleTail,
                    format!(
                        "repair is stale: physical tail no longer starts at {}",
                        t.at.value()
                    ),
                ))
            }
            (None, Some(from)) => {
                return Err(Error::new(
                    Status::Conflict,
                    Rule::SqliteRepairOmittedTail,
                    format!("repair omitted the current torn tail at {from}"),
                ))
            }
            (None, None) => None,
        };
        check_seqs(
            next,
            events,
            Rule::SqliteRepairStaleCloser,
            "repair is stale: closer",
        )?;
        if let Some((from, why)) = cut_from {
            // No row leaves the database without a copy beside it.
            let (copy, rows) = cut::keep_rows(&tx, db.as_deref(), id, from)?;
            cut = copy.map(|copy| Cut {
                at: from,
                length: rows,
                why,
                copy,
            });
            tx.prepare_cached("DELETE FROM events WHERE session_id = ?1 AND seq >= ?2")
                .and_then(|mut s| s.execute((Wtf8(id), from as i64)))
                .map_err(sql_err)?;
        }
        sessions::bump_revision(&tx, id)?;
        let records: Vec<Record<'_>> = events.iter().map(Record::Event).collect();
        insert_records(&tx, id, &records, &mut self.zstd, &[], None)?;
        tx.commit().map_err(sql_err)?;
        // A repair follows a load and reads the tail again.
        self.release_cache();
        Ok(cut)
    }

    fn quarantined(&mut self, id: &str) -> Result<Vec<std::path::PathBuf>> {
        let db = self.conn.path().map(std::path::PathBuf::from);
        cut::kept(db.as_deref(), id.as_bytes())
    }

    fn writer_running(&mut self, _id: &str) -> Option<bool> {
        // A writer holds its `flock` on the database file (an in-memory
        // database has no other writer).
        let path = self.conn.path().filter(|p| !p.is_empty())?;
        crate::store::lockinfo::writer_lock_held(Path::new(path))
    }

    fn range_reads(&mut self) -> Option<&mut dyn RangeReads> {
        Some(self)
    }
}

impl RangeReads for SqliteBackend {
    fn load_streaming(
        &mut self,
        id: &str,
        sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
    ) -> Result<Option<Streamed>> {
        let streamed = self.streamed.clone();
        streamed.store(0, std::sync::atomic::Ordering::Relaxed);
        let mut counted = |h: &Value, batch: Vec<Stored>| {
            let n = batch.len() as u64;
            streamed.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            sink(h, batch)
        };
        let streaming = stream::stream(&mut self.conn, id, &mut counted)?;
        let Some((session, next, data_version)) = streaming else {
            return Ok(None);
        };
        self.read_done(LastScan {
            id: id.as_bytes().to_vec(),
            data_version,
            torn_from: None,
            next,
        });
        Ok(Some(Streamed {
            revision: self.revision_of(&session),
            header: session.header,
        }))
    }

    fn load_range(&mut self, id: &str, from: u64, to: u64) -> Result<Vec<Stored>> {
        load::load_range(&self.conn, id, from, to)
    }

    fn progress(&mut self, id: &str) -> Option<ReadProgress> {
        let last: Option<i64> = self
            .conn
            .query_row(
                "SELECT max(seq) FROM events WHERE session_id = ?1",
                [Wtf8(id.as_bytes())],
                |r| r.get(0),
            )
            .ok()?;
        self.streamed.store(0, std::sync::atomic::Ordering::Relaxed);
        Some(ReadProgress {
            unit: ProgressUnit::Events,
            total: u64::try_from(last?).ok()? + 1,
            done: self.streamed.clone(),
        })
    }
}
