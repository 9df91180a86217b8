//! The PostgreSQL backend, for sessions shared by many machines: one
//! schema (default `dsh`) of one database holds a store's sessions.
//!
//! * `schema`: the exact tables, created on first open, version-checked;
//! * `conn`: the statements, error mapping, the redacted server name;
//! * `rows`: reading rows back into stored events and headers.
//!
//! Every event is one row of `events`, keyed by `(session_id, seq)`: the
//! event's exact JSON text (`text`, never `jsonb`, which reorders keys and
//! drops duplicates) and its envelope as columns. A session's header is
//! one row of `sessions`, with its `next_seq` and revision.
//!
//! One writer per session, enforced by the database: a writer takes the
//! session's advisory lock (`pg_advisory_lock`, waiting at most
//! two seconds, `LOCK_WAIT_MS`) before its first write and keeps it while the session
//! is live here (`postgres.session-locked` when another connection holds
//! it; a writer that finds itself stale lets it go), and every batch is inserted by one
//! statement that moves the session's `next_seq` only from the batch's
//! first seq (`postgres.append-seq-mismatch` otherwise). A stale writer's
//! batch therefore fails whole, with no gap and no duplicate, even when
//! the lock was lost with a connection. A lost connection is opened again
//! by the next call; a batch whose commit outcome was lost with it is
//! checked against the rows the database holds before it is written again.
//!
//! Every wait for the server is bounded (`client`): the connection by its
//! connect timeout, every statement by the store's statement timeout
//! (`postgres.timeout`), so a dead or black-holed network fails a call
//! instead of hanging it; the connection is then given up like a lost one.
//!
//! Revision strings are `postgres:store:<store_id>:incarnation:<uuid>:
//! revision:<n>`.

mod client;
mod conn;
mod rows;
mod schema;
#[cfg(test)]
mod tests;
mod write;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use self::client::{Db, Tx};
use self::conn::{pg_err, Sql, CONNECT_TIMEOUT};
use self::rows::Prepared;
use super::backend::{
    header_id, Backend, Batch, Cut, Listed, Loaded, ProgressUnit, RangeReads, ReadProgress, Stored,
    Streamed, Torn,
};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;

pub use self::conn::{parse_url, printable_url};
pub use self::schema::SCHEMA_VERSION;

/// How long a statement waits for the server when the configuration does
/// not say (`statementTimeoutMs`).
pub const DEFAULT_STATEMENT_TIMEOUT: Duration =
    Duration::from_millis(crate::store::DEFAULT_STATEMENT_TIMEOUT_MS);

/// How long a writer waits for a session's writer lock (and any other
/// lock) before it reports `postgres.session-locked`: long enough for the
/// server to notice a killed writer's connection is gone.
const LOCK_WAIT_MS: u32 = 2000;

/// Rows a streaming read hands over at a time.
const STREAM_BATCH: usize = 1024;

/// Sessions stored in one schema of a PostgreSQL database.
pub struct PostgresBackend {
    config: tokio_postgres::Config,
    /// The bound of every statement's wait for the server.
    statement_timeout: Duration,
    /// `host:port/dbname`, for messages (never the password).
    target: String,
    sql: Sql,
    read_only: bool,
    store_id: String,
    /// `None` after a lost connection: the next call connects again.
    client: Option<Db>,
    /// The statements prepared on `client`.
    prepared: Option<Prepared>,
    /// Sessions whose writer lock this connection holds.
    locks: HashSet<String>,
    /// What this backend knows is stored, per session: its incarnation and
    /// a prefix length (read by a load or written here). A fork copies
    /// only within it.
    known: HashMap<String, Known>,
    /// Sessions whose last write failed with its outcome unknown (the
    /// connection was lost around the commit).
    suspect: HashSet<String>,
    /// The incarnation a creation that failed used, for its retry.
    retry_incarnation: HashMap<String, String>,
    /// Events the current streaming read handed on (see
    /// [`RangeReads::progress`]).
    streamed: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Debug, Clone)]
struct Known {
    incarnation: String,
    len: u64,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("target", &self.target)
            .field("schema", &self.sql.schema())
            .finish_non_exhaustive()
    }
}

impl PostgresBackend {
    /// Open the store in `schema` of the database at `url` as a writer:
    /// the schema and its tables are created when absent (or empty); a
    /// schema of another version or with foreign objects is refused and
    /// left untouched. Statements wait at most the default statement
    /// timeout.
    pub fn open(url: &str, schema: &str) -> Result<PostgresBackend> {
        PostgresBackend::open_with(url, schema, false, DEFAULT_STATEMENT_TIMEOUT)
    }

    /// Open the store for reading beside its writers: nothing is created
    /// or written, and every read is one consistent snapshot.
    pub fn open_read_only(url: &str, schema: &str) -> Result<PostgresBackend> {
        PostgresBackend::open_with(url, schema, true, DEFAULT_STATEMENT_TIMEOUT)
    }

    /// [`PostgresBackend::open`] (or, `read_only`,
    /// [`PostgresBackend::open_read_only`]) whose every statement waits at
    /// most `statement_timeout` for the server's reply
    /// (`postgres.timeout` after that).
    pub fn open_with(
        url: &str,
        schema: &str,
        read_only: bool,
        statement_timeout: Duration,
    ) -> Result<PostgresBackend> {
        crate::store::check_schema_name(schema)?;
        let mut config = parse_url(url)?;
        if config.get_tcp_user_timeout().is_none() {
            // Data the server never acknowledges fails the connection
            // within the statement timeout too (Linux).
            config.tcp_user_timeout(statement_timeout);
        }
        let mut backend = PostgresBackend {
            target: conn::target(&config),
            config,
            statement_timeout,
            sql: Sql::new(schema),
            read_only,
            store_id: String::new(),
            client: None,
            prepared: None,
            locks: HashSet::new(),
            known: HashMap::new(),
            suspect: HashSet::new(),
            retry_incarnation: HashMap::new(),
            streamed: Arc::default(),
        };
        backend.client()?;
        Ok(backend)
    }

    /// The connection and its statements, connecting again when the
    /// connection was lost (the advisory locks went with it: each is
    /// taken again before the next write).
    fn client(&mut self) -> Result<(&mut Db, &Prepared)> {
        if self.client.as_ref().is_none_or(Db::is_closed) {
            self.client = None;
            self.prepared = None;
            self.locks.clear();
            let connect_timeout = self
                .config
                .get_connect_timeout()
                .copied()
                .unwrap_or(CONNECT_TIMEOUT);
            let connected = Db::connect(&self.config, connect_timeout, self.statement_timeout);
            let mut client = connected.map_err(|e| {
                Error::new(
                    Status::Io,
                    Rule::PostgresConnect,
                    format!(
                        "cannot connect to PostgreSQL at {}: {}",
                        self.target,
                        conn::with_causes(&e)
                    ),
                )
            })?;
            let settings = if self.read_only {
                "SET default_transaction_read_only = on".to_string()
            } else {
                let mut statements = vec![format!("SET lock_timeout = '{LOCK_WAIT_MS}ms'")];
                statements.extend(conn::server_keepalives(&self.config));
                statements.join("; ")
            };
            client.batch_execute(&settings).map_err(pg_err)?;
            let found = if self.read_only || !self.store_id.is_empty() {
                schema::open_for_reading(&mut client, &self.sql)?
            } else {
                schema::open_for_writing(&mut client, &self.sql)?
            };
            if self.store_id.is_empty() {
                self.store_id = found;
            } else if found != self.store_id {
                // A new connection reached a schema replaced meanwhile.
                return Err(Error::new(
                    Status::Conflict,
                    Rule::PostgresSchemaForeign,
                    format!(
                        "schema {} now holds another store ({found}, opened as {})",
                        self.sql.schema(),
                        self.store_id
                    ),
                ));
            }
            self.prepared = Some(Prepared::new(&mut client, &self.sql)?);
            self.client = Some(client);
        }
        match (self.client.as_mut(), self.prepared.as_ref()) {
            (Some(c), Some(p)) => Ok((c, p)),
            _ => unreachable!("connected above"),
        }
    }

    /// Pass `r` on; a failure that closed the connection drops it, so
    /// the next call connects again.
    fn check<T>(&mut self, r: Result<T>) -> Result<T> {
        let lost = r
            .as_ref()
            .is_err_and(|e| matches!(e.rule, Rule::PostgresConnect | Rule::PostgresTimeout));
        if lost || (r.is_err() && self.client.as_ref().is_some_and(Db::is_closed)) {
            self.client = None;
            self.prepared = None;
            self.locks.clear();
        }
        r
    }

    fn revision_of(&self, incarnation: &str, revision: i64) -> String {
        format!(
            "postgres:store:{}:incarnation:{incarnation}:revision:{revision}",
            self.store_id
        )
    }

    fn writable(&self, what: &str) -> Result<()> {
        if self.read_only {
            return Err(Error::new(
                Status::Conflict,
                Rule::StoreReadOnly,
                format!("{what} on a read-only PostgreSQL store"),
            ));
        }
        Ok(())
    }

    /// Take the writer lock of `id` unless this connection holds it.
    fn lock(&mut self, id: &str) -> Result<()> {
        if self.locks.contains(id) {
            return Ok(());
        }
        let key = self.sql.lock_key(id);
        let target = self.target.clone();
        // The server ends the wait after LOCK_WAIT_MS: the reply may take
        // that long on top of the statement timeout.
        let wait = Duration::from_millis(u64::from(LOCK_WAIT_MS));
        let r = self.client().and_then(|(c, p)| {
            match c.with_extra(wait, |c| c.execute(&p.lock, &[&key])) {
                Ok(_) => Ok(()),
                Err(e) if conn::is_lock_timeout(&e) => Err(Error::new(
                    Status::Conflict,
                    Rule::PostgresSessionLocked,
                    format!(
                        "session \"{id}\" has a writer on another connection to {target} (its advisory lock stayed held for {LOCK_WAIT_MS} ms)"
                    ),
                )),
                Err(e) => Err(pg_err(e)),
            }
        });
        self.check(r)?;
        self.locks.insert(id.to_string());
        Ok(())
    }
}

impl Backend for PostgresBackend {
    fn kind(&self) -> crate::store::backend::BackendKind {
        crate::store::backend::BackendKind::Postgres
    }

    fn list(&mut self) -> Result<Vec<Listed>> {
        let r = self.client().and_then(|(c, p)| rows::select_sessions(c, p));
        let found = self.check(r)?;
        Ok(found
            .into_iter()
            .map(|row| match row {
                Ok(s) => Listed {
                    revision: self.revision_of(&s.incarnation, s.revision),
                    header: s.header,
                    problem: None,
                },
                Err((id, e)) => Listed {
                    header: Value::obj([("id", Value::str(&id))]),
                    revision: String::new(),
                    problem: Some(e),
                },
            })
            .collect())
    }

    fn load(&mut self, id: &str) -> Result<Option<Loaded>> {
        let streamed = self.streamed.clone();
        streamed.store(0, std::sync::atomic::Ordering::Relaxed);
        let r = self.client().and_then(|(c, p)| {
            let mut tx = snapshot(c)?;
            let Some(session) = rows::select_session(&mut tx, p, id)? else {
                return Ok(None);
            };
            let log = rows::select_log(&mut tx, p, id, session.next_seq)?;
            tx.commit().map_err(pg_err)?;
            Ok(Some((session, log)))
        });
        let Some((session, log)) = self.check(r)? else {
            return Ok(None);
        };
        if log.canonical {
            self.known.insert(
                id.to_string(),
                Known {
                    incarnation: session.incarnation.clone(),
                    len: log.events.len() as u64,
                },
            );
        }
        Ok(Some(Loaded {
            revision: self.revision_of(&session.incarnation, session.revision),
            header: session.header,
            events: log.events,
            torn: None,
        }))
    }

    fn revision(&mut self, id: &str) -> Result<Option<String>> {
        let r = self
            .client()
            .and_then(|(c, p)| rows::select_session(c, p, id));
        Ok(self
            .check(r)?
            .map(|s| self.revision_of(&s.incarnation, s.revision)))
    }

    /// One statement (and transaction) per batch, in order: each session
    /// has its own advisory lock and guarded insert.
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        if let Some(r) = self.write_group(batches) {
            return r;
        }
        batches
            .iter()
            .map(|b| {
                let events = b.events.to_slice();
                self.write_batch(b.header, &events, b.materialize, b.fork)
            })
            .collect()
    }

    fn delete(&mut self, id: &str) -> Result<bool> {
        self.writable("delete")?;
        self.lock(id)?;
        let r = self.client().and_then(|(c, p)| {
            let mut tx = c.begin("BEGIN").map_err(pg_err)?;
            tx.execute(p.sql.delete_events.as_str(), &[&id])
                .map_err(pg_err)?;
            let n = tx
                .execute(p.sql.delete_session.as_str(), &[&id])
                .map_err(pg_err)?;
            tx.commit().map_err(pg_err)?;
            Ok(n > 0)
        });
        let removed = self.check(r)?;
        self.known.remove(id);
        self.release(id);
        Ok(removed)
    }

    fn commit_repair(
        &mut self,
        header: &Value,
        torn: Option<&Torn>,
        events: &[Arc<Event>],
    ) -> Result<Option<Cut>> {
        if let Some(t) = torn {
            // This backend never reports a torn tail: every batch is one
            // statement, so nothing half-written can be stored.
            return Err(Error::new(
                Status::Internal,
                Rule::InternalUntracked,
                format!("a PostgreSQL log has no torn tail to cut (at {:?})", t.at),
            ));
        }
        self.write_batch(header, events, false, None)?;
        Ok(None)
    }

    fn writer_running(&mut self, id: &str) -> Option<bool> {
        // A writer holds the session's advisory lock while it writes it.
        let key = self.sql.lock_key(id);
        let (c, _) = self.client().ok()?;
        let row = c
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
                 AND granted AND objsubid = 1 \
                 AND ((classid::int8 << 32) | objid::int8) = hashtextextended($1, 0))",
                &[&key],
            )
            .ok()?;
        row.try_get::<_, bool>(0).ok()
    }

    fn release(&mut self, id: &str) {
        if !self.locks.remove(id) {
            return;
        }
        let key = self.sql.lock_key(id);
        if let Some(c) = self.client.as_mut().filter(|c| !c.is_closed()) {
            let r = c
                .execute(
                    "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                    &[&key],
                )
                .map_err(pg_err);
            let _ = self.check(r);
        }
    }

    fn range_reads(&mut self) -> Option<&mut dyn RangeReads> {
        Some(self)
    }
}

impl RangeReads for PostgresBackend {
    fn load_streaming(
        &mut self,
        id: &str,
        sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
    ) -> Result<Option<Streamed>> {
        let streamed = self.streamed.clone();
        streamed.store(0, std::sync::atomic::Ordering::Relaxed);
        let r = self.client().and_then(|(c, p)| {
            let mut tx = snapshot(c)?;
            let Some(session) = rows::select_session(&mut tx, p, id)? else {
                return Ok(None);
            };
            rows::stream_log(&mut tx, p, id, session.next_seq, STREAM_BATCH, |b| {
                streamed.fetch_add(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
                sink(&session.header, b)
            })?;
            tx.commit().map_err(pg_err)?;
            Ok(Some(session))
        });
        let Some(session) = self.check(r)? else {
            return Ok(None);
        };
        Ok(Some(Streamed {
            revision: self.revision_of(&session.incarnation, session.revision),
            header: session.header,
        }))
    }

    fn load_range(&mut self, id: &str, from: u64, to: u64) -> Result<Vec<Stored>> {
        let r = self
            .client()
            .and_then(|(c, p)| rows::select_range(c, p, id, from, to));
        self.check(r)
    }

    fn progress(&mut self, id: &str) -> Option<ReadProgress> {
        let r = self
            .client()
            .and_then(|(c, p)| rows::select_session(c, p, id));
        let session = self.check(r).ok()??;
        self.streamed.store(0, std::sync::atomic::Ordering::Relaxed);
        Some(ReadProgress {
            unit: ProgressUnit::Events,
            total: session.next_seq,
            done: self.streamed.clone(),
        })
    }
}

/// A read-only transaction that sees one committed state throughout.
fn snapshot(c: &mut Db) -> Result<Tx<'_>> {
    c.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .map_err(pg_err)
}
