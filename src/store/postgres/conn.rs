//! The connection side of the PostgreSQL backend: the connection settings
//! a URL gives (with the store's timeouts and keepalives), the statements
//! of one schema, error mapping, and where a server is (named without its
//! password).

use std::time::Duration;

use tokio_postgres::error::SqlState;

use super::client::PgError;
use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// How long a connection attempt (socket to authentication) waits when
/// the URL does not say.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keepalives, unless the URL sets them: an idle connection whose peer
/// is gone is noticed (and opened again by the next call) within about
/// `KEEPALIVE_IDLE` plus the statement timeout (which is also the
/// connection's `tcp_user_timeout`), instead of the system's two hours.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;

/// `keepalives_idle` when the URL does not set it (tokio-postgres's
/// default).
const SYSTEM_KEEPALIVE_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

fn config_error(message: String) -> Error {
    Error::invalid_argument(Rule::ConfigInvalid, message)
}

/// The connection settings of `url` (`config.invalid` when it does not
/// parse; the message never repeats the URL, which may hold a password),
/// with the store's connect timeout and keepalives where it sets none.
pub fn parse_url(url: &str) -> Result<tokio_postgres::Config> {
    if !(url.starts_with("postgresql://") || url.starts_with("postgres://")) {
        return Err(config_error(
            "url must be a postgresql:// connection URL".to_string(),
        ));
    }
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| config_error(format!("url is not a valid PostgreSQL URL: {e}")))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_keepalives_idle() == SYSTEM_KEEPALIVE_IDLE {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if config.get_application_name().is_none() {
        config.application_name("dsh-session");
    }
    Ok(config)
}

/// The server's keepalives on a writer's connection, as `SET` statements
/// (empty when the URL's `options` set any `tcp_keepalives_*` itself): the
/// same probing as the client's, so that a writer whose host vanished
/// without closing its socket loses its connection, and with it the
/// sessions' advisory locks, after about `KEEPALIVE_IDLE + KEEPALIVE_RETRIES
/// × KEEPALIVE_INTERVAL` (25 s) instead of the server system's two hours.
/// The server ignores them on a Unix-domain socket.
pub fn server_keepalives(config: &tokio_postgres::Config) -> Vec<String> {
    if config
        .get_options()
        .is_some_and(|o| o.contains("tcp_keepalives"))
    {
        return Vec::new();
    }
    vec![
        format!("SET tcp_keepalives_idle = {}", KEEPALIVE_IDLE.as_secs()),
        format!(
            "SET tcp_keepalives_interval = {}",
            KEEPALIVE_INTERVAL.as_secs()
        ),
        format!("SET tcp_keepalives_count = {KEEPALIVE_RETRIES}"),
    ]
}

/// How `url` is shown in messages: `postgresql://host:port/db`, without
/// user, password or parameters (for a URL that does not parse, the text
/// without what comes before an `@` or from a `?`). Two URLs of the same
/// database show the same.
pub fn printable_url(url: &str) -> String {
    match parse_url(url) {
        Ok(config) => format!("postgresql://{}", target(&config)),
        Err(_) => crate::store::config::redact_url(url),
    }
}

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
/// is `postgres.connect`, anything the server refused `postgres.query`, a
/// reply that never came `postgres.timeout` (all `DSH_E_IO`: the data is
/// untouched, or the next write checks what was stored, and a retry may
/// succeed).
pub fn pg_err(e: PgError) -> Error {
    let e = match e {
        PgError::Server(e) => e,
        PgError::TimedOut(limit) => {
            return Error::new(
                Status::Io,
                Rule::PostgresTimeout,
                format!(
                    "PostgreSQL sent no reply within {} ms (statementTimeoutMs): the connection is given up, the next call connects again",
                    limit.as_millis()
                ),
            )
        }
        PgError::Runtime(e) => {
            return Error::new(
                Status::Io,
                Rule::PostgresConnect,
                format!("PostgreSQL connection failed: cannot start its runtime: {e}"),
            )
        }
    };
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
pub fn is_lock_timeout(e: &PgError) -> bool {
    e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE)
}

/// Whether `e` is the server's unique violation (a duplicate key).
pub fn is_unique_violation(e: &PgError) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// Where `config` points, without user or password: `host:port/dbname`.
pub fn target(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        // A Unix-domain socket directory (the variant exists on Unix only).
        #[cfg(unix)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_gets_the_store_timeouts_and_keepalives_unless_it_sets_them() {
        let c = parse_url("postgresql://u@db.example:5433/x").unwrap();
        assert_eq!(c.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
        assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
        let c = parse_url(
            "postgresql://u@db.example/x?connect_timeout=3&keepalives_idle=60&keepalives_interval=7&keepalives_retries=9",
        )
        .unwrap();
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(c.get_keepalives_interval(), Some(Duration::from_secs(7)));
        assert_eq!(c.get_keepalives_retries(), Some(9));
    }
}
