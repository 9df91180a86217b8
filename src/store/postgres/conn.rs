//! The connection side of the PostgreSQL backend: the statements of one
//! schema, error mapping, and where a server is (named without its
//! password).

use crate::error::{Error, Status};
use crate::rule::Rule;

/// The statements of one store's schema (its name quoted once, here).
#[derive(Debug, Clone)]
pub struct Sql {
    schema: String,
    quoted: String,
    /// `(id, header, incarnation, revision, next_seq, created_at)`, no row
    /// when the id exists.
    pub insert_session: String,
    /// `(id)` → `header, incarnation, revision, next_seq`.
    pub select_session: String,
    /// → `id, header, incarnation, revision` of every session.
    pub select_sessions: String,
    /// `(id)` → `seq, event` of the whole log.
    pub select_log: String,
    /// `(id, from, to)` → `seq, event` with `from <= seq < to`.
    pub select_range: String,
    /// The guarded insert of a batch: `(id, first, n, seqs[], types[],
    /// times[], ops[], sources[], ignorables[], events[])`; it inserts
    /// nothing unless the session's `next_seq` is `first`, and moves
    /// `next_seq` and the revision with the rows, in one statement.
    pub insert_batch: String,
    /// `(child, parent, from, to)`: copy the parent's events
    /// `from <= seq < to` into the child, inside the database.
    pub copy_prefix: String,
    /// `(child, first, n)`: the guard of a copied batch (moves `next_seq`
    /// and the revision).
    pub advance: String,
    /// `(id)`: delete the events.
    pub delete_events: String,
    /// `(id)`: delete the session row.
    pub delete_session: String,
}

impl Sql {
    /// The statements of schema `schema` (already checked to be a plain
    /// identifier).
    pub fn new(schema: &str) -> Sql {
        let q = format!("\"{schema}\"");
        let insert_batch = format!(
            "WITH guard AS (UPDATE {q}.sessions SET next_seq = next_seq + $3, \
               revision = revision + 1 WHERE id = $1 AND next_seq = $2 RETURNING id) \
             INSERT INTO {q}.events \
               (session_id, seq, type, time, surface_op, source_event_seqs, ignorable, event) \
             SELECT guard.id, u.seq, u.type, u.time, u.op, u.src, u.ign, u.ev FROM guard, \
               unnest($4::bigint[], $5::text[], $6::bigint[], $7::text[], $8::text[], \
                      $9::boolean[], $10::text[]) AS u(seq, type, time, op, src, ign, ev)"
        );
        Sql {
            insert_session: format!(
                "INSERT INTO {q}.sessions (id, header, incarnation, revision, next_seq, created_at) \
                 VALUES ($1, $2, $3, 0, 0, $4) ON CONFLICT (id) DO NOTHING"
            ),
            select_session: format!(
                "SELECT header, incarnation, revision, next_seq FROM {q}.sessions WHERE id = $1"
            ),
            select_sessions: format!(
                "SELECT id, header, incarnation, revision FROM {q}.sessions ORDER BY id COLLATE \"C\""
            ),
            select_log: format!(
                "SELECT seq, event FROM {q}.events WHERE session_id = $1 ORDER BY seq"
            ),
            select_range: format!(
                "SELECT seq, event FROM {q}.events WHERE session_id = $1 AND seq >= $2 AND seq < $3 \
                 ORDER BY seq"
            ),
            insert_batch,
            copy_prefix: format!(
                "INSERT INTO {q}.events \
                   (session_id, seq, type, time, surface_op, source_event_seqs, ignorable, event) \
                 SELECT $1, seq, type, time, surface_op, source_event_seqs, ignorable, event \
                 FROM {q}.events WHERE session_id = $2 AND seq >= $3 AND seq < $4"
            ),
            advance: format!(
                "UPDATE {q}.sessions SET next_seq = next_seq + $3, revision = revision + 1 \
                 WHERE id = $1 AND next_seq = $2"
            ),
            delete_events: format!("DELETE FROM {q}.events WHERE session_id = $1"),
            delete_session: format!("DELETE FROM {q}.sessions WHERE id = $1"),
            schema: schema.to_string(),
            quoted: q,
        }
    }

    /// The schema's name.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The schema's name quoted for SQL text.
    pub fn q(&self) -> &str {
        &self.quoted
    }

    /// The advisory-lock key text of session `id`'s writer: unique per
    /// database, schema and id (a schema name has no `:`).
    pub fn lock_key(&self, id: &str) -> String {
        format!("dsh-session:{}:{id}", self.schema)
    }
}

/// A PostgreSQL error as a library error: a lost or refused connection
/// is `postgres.connect`, anything the server refused `postgres.query`
/// (both `DSH_E_IO`: the data is untouched and a retry may succeed).
pub fn pg_err(e: postgres::Error) -> Error {
    // The server ending the session (shutdown, an administrator's
    // terminate: class 57P) or a connection exception (class 08) lost
    // the connection, as a broken socket does.
    let lost = e.is_closed()
        || e.code()
            .is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08"));
    match e.as_db_error() {
        Some(db) if !lost => Error::new(
            Status::Io,
            Rule::PostgresQuery,
            format!(
                "PostgreSQL refused a statement: {} (SQLSTATE {})",
                db.message(),
                db.code().code()
            ),
        ),
        _ => Error::new(
            Status::Io,
            Rule::PostgresConnect,
            format!("PostgreSQL connection failed: {}", with_causes(&e)),
        ),
    }
}

/// `e` and the errors under it: "error connecting to server: Connection
/// refused (os error 111)".
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// Whether `e` is a lock wait that ran out (`lock_timeout`).
pub fn is_lock_timeout(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE)
}

/// Whether `e` is the server's unique violation (a duplicate key).
pub fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// Where `config` points, without user or password: `host:port/dbname`.
pub fn target(config: &postgres::Config) -> String {
    use postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}
