//! What a store is opened with and what its calls take: [`StoreConfig`],
//! [`CreateOptions`], [`ForkOptions`], [`OpenOptions`] (the C ABI parses
//! its JSON texts into these), and the rules they follow whoever built them.

use std::path::PathBuf;
use std::sync::Arc;

use super::backend::Backend;
use super::hurry::Hurry;
#[cfg(feature = "jsonl")]
use super::jsonl::{Compression, JsonlBackend};
use super::memory::MemoryBackend;
#[cfg(feature = "postgres")]
use super::postgres::PostgresBackend;
#[cfg(feature = "sqlite")]
use super::sqlite::SqliteBackend;
use crate::engine::{Admission, Markers, Policy, Vocabulary};
use crate::error::{Error, Result};
use crate::json::{Object, Value};
use crate::rule::Rule;

/// Where a store keeps its sessions (its `Debug` leaves a PostgreSQL
/// URL's user, password and parameters out).
#[derive(Clone, PartialEq, Eq)]
pub enum BackendConfig {
    /// Sessions live in memory.
    Memory,
    /// One SQLite database file.
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// A directory of JSONL logs.
    Jsonl {
        /// The root directory.
        path: PathBuf,
        /// zstd frames (true, the default) or raw lines.
        zstd: bool,
    },
    /// One schema of a PostgreSQL database.
    Postgres {
        /// The `postgresql://` connection URL.
        url: String,
        /// The schema that holds the store's tables (default `dsh`).
        schema: String,
        /// How long a statement waits for the server's reply (or a read
        /// for its next rows) before the call fails with
        /// `postgres.timeout` (`"statementTimeoutMs"`, default
        /// [`DEFAULT_STATEMENT_TIMEOUT_MS`]).
        statement_timeout_ms: u64,
    },
}

impl std::fmt::Debug for BackendConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendConfig::Memory => f.write_str("Memory"),
            BackendConfig::Sqlite { path } => f.debug_struct("Sqlite").field("path", path).finish(),
            BackendConfig::Jsonl { path, zstd } => f
                .debug_struct("Jsonl")
                .field("path", path)
                .field("zstd", zstd)
                .finish(),
            BackendConfig::Postgres {
                url,
                schema,
                statement_timeout_ms,
            } => f
                .debug_struct("Postgres")
                .field("url", &redact_url(url))
                .field("schema", schema)
                .field("statement_timeout_ms", statement_timeout_ms)
                .finish(),
        }
    }
}

/// A connection URL without what comes before an `@` (user, password)
/// or from a `?` (parameters), for messages.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgresql", url));
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    format!("{scheme}://{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Status;
    use crate::store::{Store, BACKENDS};

    #[test]
    fn a_backend_the_build_lacks_is_refused_naming_the_ones_it_has() {
        let desktop = ["memory", "sqlite", "jsonl"];
        for name in desktop {
            check_built(name, &desktop).unwrap();
        }
        let e = check_built("postgres", &desktop).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        assert_eq!(e.rule, Rule::ConfigBackendNotBuilt);
        assert!(e.message.contains("no postgres backend"), "{e}");
        assert!(e.message.ends_with("it has: memory, sqlite, jsonl"), "{e}");
        let e = check_built("sqlite", &["memory", "postgres"]).unwrap_err();
        assert!(e.message.contains("no sqlite backend"), "{e}");
        assert!(e.message.ends_with("it has: memory, postgres"), "{e}");
    }

    /// Every backend of this build passes the check and every other one is
    /// refused, by `check` (the C ABI's and `Store::open`'s) and by
    /// `BackendConfig::open` (the CLI's), before anything is touched.
    /// `scripts/test.sh` runs it on a build without postgres too.
    #[test]
    fn this_build_refuses_exactly_the_backends_it_lacks() {
        let dir = std::env::temp_dir().join("dsh-config-backend-not-built");
        let configs = [
            StoreConfig::memory(),
            StoreConfig::sqlite(dir.join("never-created.db")),
            StoreConfig::jsonl(dir.join("never-created")),
            // Port 1 of a documentation address: a connection would fail
            // (or hang); a build without postgres must not try.
            StoreConfig::postgres("postgresql://u@192.0.2.1:1/db"),
        ];
        let mut refused = Vec::new();
        for config in configs {
            let name = config.backend.name();
            if BACKENDS.contains(&name) {
                config.check().unwrap();
                continue;
            }
            refused.push(name);
            let want = format!("it has: {}", BACKENDS.join(", "));
            for e in [
                config.check().unwrap_err(),
                Store::open(config.clone()).expect_err("refused"),
                config.backend.open().err().expect("refused"),
            ] {
                assert_eq!(e.status, Status::InvalidArgument, "{e}");
                assert_eq!(e.rule, Rule::ConfigBackendNotBuilt, "{e}");
                assert!(e.message.contains(&format!("no {name} backend")), "{e}");
                assert!(e.message.ends_with(&want), "{e}");
            }
        }
        assert!(!dir.exists(), "a refused backend created {}", dir.display());
        let lacking: &[&str] = &[
            #[cfg(not(feature = "sqlite"))]
            "sqlite",
            #[cfg(not(feature = "jsonl"))]
            "jsonl",
            #[cfg(not(feature = "postgres"))]
            "postgres",
        ];
        assert_eq!(refused, lacking);
    }

    #[test]
    fn a_postgres_configuration_prints_no_password() {
        let c =
            StoreConfig::postgres("postgresql://app:s3cr@t@db:5432/x?password=p2&sslmode=disable");
        let shown = format!("{c:?}");
        assert!(shown.contains("postgresql://db:5432/x"), "{shown}");
        for secret in ["s3cr", "p2", "app", "sslmode"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}

/// How a store is opened (the C ABI's `dsh_store_open` configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// The backend.
    pub backend: BackendConfig,
    /// The write-behind window in milliseconds (0 = write in the append).
    pub batch_window_ms: u64,
    /// How appends are admitted (`"admission"`, default strict).
    pub admission: Admission,
    /// The host's declared event types (`"eventTypes"`).
    pub vocabulary: Vocabulary,
    /// How the backend is opened (`"readOnly"`, `"locking"`).
    pub access: Access,
    /// `"trimHeap": true`: after an open, ask the C allocator to return the
    /// freed heap pages of the read to the system (glibc `malloc_trim`), a
    /// process-wide act the host opts into.
    pub trim_heap: bool,
}

/// How a store opens its backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    /// `"readOnly": true`: a reader beside the store's writer, in this
    /// process or another. It takes no lock and never writes: no repair,
    /// no end-seed marker; create, append, fork and delete are refused
    /// (`store.read-only`).
    pub read_only: bool,
    /// `"locking": "exclusive"` (SQLite): the writer keeps SQLite's
    /// exclusive lock for its whole life, so its WAL index lives in its own
    /// heap (no `-shm` mapping) and no reader can open the database beside
    /// it. The default, `"shared"`, admits readers.
    pub exclusive: bool,
}

impl StoreConfig {
    /// The admission and vocabulary of this store's sessions.
    pub fn policy(&self) -> Policy {
        Policy {
            admission: self.admission,
            vocabulary: Arc::new(self.vocabulary.clone()),
        }
    }
}

/// How long SQLite waits for another connection's lock (docs/formats.md §4.1).
pub const SQLITE_BUSY_TIMEOUT_MS: u32 = 5000;

/// How long a read-only SQLite open waits for the writer's lock: readers
/// of a WAL database wait only while the writer holds it exclusively (a
/// `"locking": "exclusive"` writer holds it for good).
pub const SQLITE_READER_BUSY_TIMEOUT_MS: u32 = 1000;

/// The schema of a PostgreSQL store whose configuration does not name one.
pub const DEFAULT_SCHEMA: &str = "dsh";

/// The default write-behind window.
pub const DEFAULT_BATCH_WINDOW_MS: u64 = 25;

/// How long a PostgreSQL statement waits for the server when the
/// configuration does not say (`"statementTimeoutMs"`).
pub const DEFAULT_STATEMENT_TIMEOUT_MS: u64 = 30_000;

fn config_error(message: impl Into<String>) -> Error {
    Error::invalid_argument(Rule::ConfigInvalid, message)
}

/// The rule for a backend this build lacks (`config.backend-not-built`):
/// `name` must be one of `built` (the build's [`BACKENDS`](super::BACKENDS)).
fn check_built(name: &str, built: &[&str]) -> Result<()> {
    if built.contains(&name) {
        return Ok(());
    }
    Err(not_built(name, built))
}

/// The refusal of the backend `name`, listing the backends `built`.
fn not_built(name: &str, built: &[&str]) -> Error {
    Error::invalid_argument(
        Rule::ConfigBackendNotBuilt,
        format!(
            "this build of dsh-session has no {name} backend (built without the \"{name}\" feature); it has: {}",
            built.join(", ")
        ),
    )
}

/// The rule for a write-behind window (`config.invalid`): at most
/// 2147483647 ms.
pub fn check_batch_window(ms: u64) -> Result<()> {
    if ms > i32::MAX as u64 {
        return Err(config_error(
            "batchWindowMs must be an integer between 0 and 2147483647",
        ));
    }
    Ok(())
}

/// The rule for a PostgreSQL statement timeout (`config.invalid`): 1 to
/// 2147483647 ms (a statement always has one).
pub fn check_statement_timeout(ms: u64) -> Result<()> {
    if ms == 0 || ms > i32::MAX as u64 {
        return Err(config_error(
            "statementTimeoutMs must be an integer between 1 and 2147483647",
        ));
    }
    Ok(())
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig::memory()
    }
}

impl StoreConfig {
    /// A store of `backend` with the defaults: a 25 ms write-behind window,
    /// strict admission, no declared event types, a writer with shared
    /// locking, no heap trimming.
    pub fn new(backend: BackendConfig) -> StoreConfig {
        StoreConfig {
            backend,
            batch_window_ms: DEFAULT_BATCH_WINDOW_MS,
            admission: Admission::default(),
            vocabulary: Vocabulary::default(),
            access: Access::default(),
            trim_heap: false,
        }
    }

    /// Sessions in memory only.
    pub fn memory() -> StoreConfig {
        StoreConfig::new(BackendConfig::Memory)
    }

    /// Sessions in the SQLite database file `path`.
    pub fn sqlite(path: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig::new(BackendConfig::Sqlite { path: path.into() })
    }

    /// Sessions as JSONL logs of zstd frames under the directory `path`.
    pub fn jsonl(path: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig::new(BackendConfig::Jsonl {
            path: path.into(),
            zstd: true,
        })
    }

    /// Sessions in the schema `dsh` of the PostgreSQL database at `url`
    /// (`postgresql://user@host:port/db`), with the default statement
    /// timeout.
    pub fn postgres(url: impl Into<String>) -> StoreConfig {
        StoreConfig::new(BackendConfig::postgres(url, DEFAULT_SCHEMA))
    }

    /// This configuration as a reader beside the store's writer (see
    /// [`Access::read_only`]).
    pub fn read_only(mut self) -> StoreConfig {
        self.access.read_only = true;
        self
    }

    /// The rules a configuration follows whatever built it: a backend
    /// this build has (`config.backend-not-built`), then (`config.invalid`)
    /// a window of at most 2147483647 ms, a non-empty path without NUL, a
    /// PostgreSQL statement timeout of 1 to 2147483647 ms, exclusive locking
    /// on SQLite only, a reader on a backend that has a writer to read
    /// beside.
    pub fn check(&self) -> Result<()> {
        check_built(self.backend.name(), super::BACKENDS)?;
        check_batch_window(self.batch_window_ms)?;
        match &self.backend {
            BackendConfig::Memory => {}
            BackendConfig::Sqlite { path } | BackendConfig::Jsonl { path, .. } => {
                let text = path.as_os_str();
                if text.is_empty() || text.as_encoded_bytes().contains(&0) {
                    return Err(config_error("path must be a non-empty string"));
                }
            }
            BackendConfig::Postgres {
                url,
                schema,
                statement_timeout_ms,
            } => {
                if url.is_empty() || url.contains('\0') {
                    return Err(config_error("url must be a non-empty string"));
                }
                check_schema_name(schema)?;
                check_statement_timeout(*statement_timeout_ms)?;
            }
        }
        if self.access.exclusive && !matches!(self.backend, BackendConfig::Sqlite { .. }) {
            return Err(config_error("locking applies to the sqlite backend only"));
        }
        if self.access.read_only && self.backend == BackendConfig::Memory {
            return Err(config_error(
                "a memory store has no writer to read beside: readOnly needs sqlite, jsonl or postgres",
            ));
        }
        Ok(())
    }
}

impl BackendConfig {
    /// The store in `schema` of the PostgreSQL database at `url`, with the
    /// default statement timeout.
    pub fn postgres(url: impl Into<String>, schema: impl Into<String>) -> BackendConfig {
        BackendConfig::Postgres {
            url: url.into(),
            schema: schema.into(),
            statement_timeout_ms: DEFAULT_STATEMENT_TIMEOUT_MS,
        }
    }

    /// Open the backend this configuration names, as its writer (shared
    /// SQLite locking).
    pub fn open(&self) -> Result<Box<dyn Backend>> {
        self.open_with(Access::default(), None)
    }

    /// Open the backend this configuration names with `access`; a writer's
    /// backend counts the store's waiting flushes in `hurry`.
    pub fn open_with(&self, access: Access, hurry: Option<Arc<Hurry>>) -> Result<Box<dyn Backend>> {
        // (Unused when the build has neither file backend.)
        let _ = (&access, &hurry);
        match self {
            BackendConfig::Memory => Ok(Box::new(MemoryBackend::new())),
            #[cfg(feature = "sqlite")]
            BackendConfig::Sqlite { path } => open_sqlite(path, access, hurry),
            #[cfg(feature = "jsonl")]
            BackendConfig::Jsonl { path, zstd } => open_jsonl(path, *zstd, access, hurry),
            #[cfg(feature = "postgres")]
            BackendConfig::Postgres {
                url,
                schema,
                statement_timeout_ms,
            } => Ok(Box::new(PostgresBackend::open_with(
                url,
                schema,
                access.read_only,
                std::time::Duration::from_millis(*statement_timeout_ms),
            )?)),
            #[allow(unreachable_patterns)]
            other => Err(not_built(other.name(), super::BACKENDS)),
        }
    }

    /// The backend's name in configurations: `"memory"`, `"sqlite"`,
    /// `"jsonl"`, `"postgres"`.
    pub fn name(&self) -> &'static str {
        match self {
            BackendConfig::Memory => "memory",
            BackendConfig::Sqlite { .. } => "sqlite",
            BackendConfig::Jsonl { .. } => "jsonl",
            BackendConfig::Postgres { .. } => "postgres",
        }
    }
}

#[cfg(feature = "sqlite")]
fn open_sqlite(
    path: &std::path::Path,
    access: Access,
    hurry: Option<Arc<Hurry>>,
) -> Result<Box<dyn Backend>> {
    if access.read_only {
        return Ok(Box::new(SqliteBackend::open_read_only(
            path,
            SQLITE_READER_BUSY_TIMEOUT_MS,
        )?));
    }
    let mut b = SqliteBackend::open_with_locking(path, SQLITE_BUSY_TIMEOUT_MS, access.exclusive)?;
    if let Some(h) = hurry {
        b.set_hurry(h);
    }
    Ok(Box::new(b))
}

#[cfg(feature = "jsonl")]
fn open_jsonl(
    path: &std::path::Path,
    zstd: bool,
    access: Access,
    hurry: Option<Arc<Hurry>>,
) -> Result<Box<dyn Backend>> {
    let compression = if zstd {
        Compression::Zstd
    } else {
        Compression::None
    };
    if access.read_only {
        return Ok(Box::new(JsonlBackend::open_read_only(path, compression)?));
    }
    let mut b = JsonlBackend::open(path, compression)?;
    if let Some(h) = hurry {
        b.set_hurry(h);
    }
    Ok(Box::new(b))
}

/// The rule for a PostgreSQL schema name (`config.invalid`): 1 to 63
/// lowercase letters, digits and `_`, not starting with a digit or `pg_`.
pub fn check_schema_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("pg_");
    if !ok {
        return Err(config_error(format!(
            "schema must be 1 to 63 lowercase letters, digits and _, not starting with a digit or pg_ (got {name:?})"
        )));
    }
    Ok(())
}

/// How a session is created (`dsh_session_create` options).
#[derive(Debug, Default)]
pub struct CreateOptions {
    /// The requested id.
    pub id: Option<String>,
    /// The seed, when one was given (an empty array counts).
    pub seed: Option<Vec<Value>>,
    /// Optional session header fields, in the header's key order.
    pub header_fields: Object,
    /// Legacy mode (message events without markers count as appends).
    pub markers: Markers,
}

/// The optional header fields a caller may set, in header key order.
pub const HEADER_FIELDS: [&str; 5] = [
    "cwd",
    "parentSession",
    "origin",
    "delegationDepth",
    "agentPreset",
];

impl CreateOptions {
    /// Options for a session with the id `id` (the other options default).
    pub fn with_id(id: impl Into<String>) -> CreateOptions {
        CreateOptions {
            id: Some(id.into()),
            ..CreateOptions::default()
        }
    }
}

fn bad_id() -> Error {
    Error::invalid_argument(
        Rule::ArgId,
        "session id must be a non-empty string of valid Unicode without NUL",
    )
}

/// The rule every session id a store is given follows (`arg.id`): not
/// empty, no NUL (ids are handed back to C as strings).
pub fn check_session_id(id: &str) -> Result<()> {
    if id.is_empty() || id.contains('\0') {
        return Err(bad_id());
    }
    Ok(())
}

/// Where a fork ends and what the child is called (`dsh_session_fork`).
#[derive(Debug, Default)]
pub struct ForkOptions {
    /// The child's id (minted when absent).
    pub id: Option<String>,
    /// The boundary; `None` means the source's last event.
    pub boundary: Option<Value>,
}

impl ForkOptions {
    /// Fork after the event `seq` (the boundary is the last event kept).
    pub fn at(seq: u64) -> ForkOptions {
        ForkOptions {
            id: None,
            boundary: Some(Value::Number(seq as f64)),
        }
    }

    /// These options with the child's id `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> ForkOptions {
        self.id = Some(id.into());
        self
    }
}

/// The number of events a windowed open keeps resident when its options
/// do not say (two chunks of the log).
pub const DEFAULT_WINDOW: usize = 2 * crate::engine::chunked::CHUNK;

/// How a windowed open keeps its window (`dsh_session_open_windowed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// How many of the newest events stay resident (at least).
    pub window: usize,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            window: DEFAULT_WINDOW,
        }
    }
}
