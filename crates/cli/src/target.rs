//! STORE arguments: which backend a path (or a PostgreSQL URL) holds,
//! opening it for reading without creating anything, and the
//! configuration of a writing store.

use std::fmt;
use std::path::{Path, PathBuf};

use super::args::{BackendKind, CompressionKind, StoreArgs};
use super::CliError;
use dsh_session::engine::{Policy, Vocabulary};
use dsh_session::error::{Error, Status};
use dsh_session::store::jsonl::Compression;
use dsh_session::store::postgres::{parse_url, printable_url};
use dsh_session::store::{
    check_schema_name, Access, Backend, BackendConfig, StoreConfig, DEFAULT_SCHEMA,
};
use dsh_session::Rule;

/// A store and its backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Where the store is, as messages name it: the path as given, or for
    /// a PostgreSQL store `postgresql://HOST:PORT/DB (schema NAME)`, the
    /// URL without its credentials and parameters.
    pub path: PathBuf,
    /// The backend.
    pub kind: BackendKind,
    /// zstd frames (JSONL only).
    pub zstd: bool,
    /// The host event types the store's sessions use (`--event-types`).
    pub event_types: Vec<String>,
    /// The connection of a PostgreSQL store (`None` for a path; `Some`
    /// exactly when `kind` is [`BackendKind::Postgres`]).
    postgres: Option<Postgres>,
}

/// A PostgreSQL store: the URL to connect with (never printed: it may
/// hold a password) and the schema that holds the store.
#[derive(Clone, PartialEq, Eq)]
pub struct Postgres {
    url: String,
    /// The schema.
    pub schema: String,
}

impl fmt::Debug for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Postgres")
            .field("url", &printable_url(&self.url))
            .field("schema", &self.schema)
            .finish()
    }
}

impl Postgres {
    /// True when `self` and `other` are the same schema of the same
    /// database (host, port and database name, whoever connects).
    fn same_place(&self, other: &Postgres) -> bool {
        if self.schema != other.schema {
            return false;
        }
        printable_url(&self.url) == printable_url(&other.url)
    }
}

/// Which argument of the command line a store is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A command's STORE (`--backend`, `--schema`).
    Store,
    /// `convert`'s SRC (`--from-backend`, `--from-schema`).
    Src,
    /// `convert`'s DST (`--to-backend`, `--to-schema`).
    Dst,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Store => "STORE",
            Side::Src => "SRC",
            Side::Dst => "DST",
        }
    }

    fn flag(self, what: &str) -> String {
        match self {
            Side::Store => format!("--{what}"),
            Side::Src => format!("--from-{what}"),
            Side::Dst => format!("--to-{what}"),
        }
    }
}

/// How a store was given: the path or URL and the flags that force how it
/// is read.
#[derive(Debug, Clone, Copy)]
pub struct Given<'a> {
    /// The path, or a `postgresql://` URL.
    pub path: &'a Path,
    /// `--backend`.
    pub backend: Option<BackendKind>,
    /// `--compression`.
    pub compression: Option<CompressionKind>,
    /// `--schema`.
    pub schema: Option<&'a str>,
    /// Which argument it is.
    pub side: Side,
}

/// Extensions that name a SQLite file.
const SQLITE_EXTENSIONS: [&str; 3] = ["sqlite", "sqlite3", "db"];

/// The URL `path` spells, when it is a `postgresql://` (or `postgres://`)
/// connection URL.
fn postgres_url(path: &Path) -> Option<&str> {
    path.to_str()
        .filter(|s| s.starts_with("postgresql://") || s.starts_with("postgres://"))
}

/// `url` without what may be secret: the credentials (everything before
/// the first `@`, as the URL parser reads them) and the parameters (a
/// `password=` among them): `postgresql://HOST:PORT/DB`.
fn kind_name(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Sqlite => "sqlite",
        BackendKind::Jsonl => "jsonl",
        BackendKind::Postgres => "postgres",
    }
}

impl Target {
    /// Decide what a store holds: a `postgresql://` URL is a PostgreSQL
    /// store (in `--schema`, default `dsh`); otherwise `backend` and
    /// `compression` force, an existing file is SQLite, a directory JSONL,
    /// and a missing path is SQLite by extension, else JSONL. A JSONL
    /// encoding is detected from the logs inside (zstd when there are
    /// none). A URL that does not parse, a bad schema name, `--schema` on a
    /// path and a backend that contradicts the argument are usage errors.
    pub fn detect(given: Given<'_>) -> Result<Target, CliError> {
        let Given {
            path,
            backend,
            compression,
            schema,
            side,
        } = given;
        if let Some(url) = postgres_url(path) {
            return Target::postgres(url, backend, schema, side);
        }
        if backend == Some(BackendKind::Postgres) {
            return Err(CliError::usage(format!(
                "{} postgres needs a postgresql:// URL as {}",
                side.flag("backend"),
                side.name()
            )));
        }
        if schema.is_some() {
            return Err(CliError::usage(format!(
                "{} applies only to a PostgreSQL {} (a postgresql:// URL)",
                side.flag("schema"),
                side.name()
            )));
        }
        let kind = backend.unwrap_or_else(|| {
            if path.is_dir() {
                BackendKind::Jsonl
            } else if path.exists() {
                BackendKind::Sqlite
            } else {
                let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
                if SQLITE_EXTENSIONS.contains(&ext) {
                    BackendKind::Sqlite
                } else {
                    BackendKind::Jsonl
                }
            }
        });
        let zstd = match compression {
            Some(c) => c == CompressionKind::Zstd,
            None => dsh_session::store::jsonl::detect_compression(path) == Compression::Zstd,
        };
        Ok(Target {
            path: path.to_path_buf(),
            kind,
            zstd,
            event_types: Vec::new(),
            postgres: None,
        })
    }

    fn postgres(
        url: &str,
        backend: Option<BackendKind>,
        schema: Option<&str>,
        side: Side,
    ) -> Result<Target, CliError> {
        let shown = printable_url(url);
        if let Some(kind) = backend.filter(|k| *k != BackendKind::Postgres) {
            return Err(CliError::usage(format!(
                "{} {shown} is a PostgreSQL URL: {} {} does not apply",
                side.name(),
                side.flag("backend"),
                kind_name(kind)
            )));
        }
        // The library's messages never repeat the URL.
        parse_url(url)
            .map_err(|e| CliError::usage(format!("{} {shown}: {}", side.name(), e.message)))?;
        let schema = schema.unwrap_or(DEFAULT_SCHEMA);
        check_schema_name(schema)
            .map_err(|e| CliError::usage(format!("{}: {}", side.flag("schema"), e.message)))?;
        Ok(Target {
            path: PathBuf::from(format!("{shown} (schema {schema})")),
            kind: BackendKind::Postgres,
            zstd: false,
            event_types: Vec::new(),
            postgres: Some(Postgres {
                url: url.to_string(),
                schema: schema.to_string(),
            }),
        })
    }

    /// [`Target::detect`] from a command's store arguments.
    pub fn from_args(args: &StoreArgs) -> Result<Target, CliError> {
        let target = Target::detect(Given {
            path: &args.store,
            backend: args.backend,
            compression: args.compression,
            schema: args.schema.as_deref(),
            side: Side::Store,
        })?;
        Ok(Target {
            event_types: args.event_types.clone(),
            ..target
        })
    }

    /// The vocabulary `--event-types` declares.
    pub fn vocabulary(&self) -> Result<Vocabulary, CliError> {
        Vocabulary::new(&self.event_types).map_err(|e| CliError::usage(e.message))
    }

    /// The policy sessions of this store are read and written under: the
    /// store's admission with the declared event types.
    pub fn policy(&self) -> Result<Policy, CliError> {
        Ok(self.store_config()?.policy())
    }

    /// `"sqlite"`, `"jsonl (zstd)"`, `"jsonl (none)"` or `"postgres"`.
    pub fn describe(&self) -> String {
        match self.kind {
            BackendKind::Sqlite => "sqlite".to_string(),
            BackendKind::Postgres => "postgres".to_string(),
            BackendKind::Jsonl if self.zstd => "jsonl (zstd)".to_string(),
            BackendKind::Jsonl => "jsonl (none)".to_string(),
        }
    }

    /// True when the store already holds something a backend would use: a
    /// non-empty file or a non-empty directory, or a PostgreSQL schema
    /// with at least one session (read without creating anything; a
    /// server that cannot be reached, or a schema that is not a store,
    /// fails).
    pub fn holds_data(&self) -> Result<bool, Error> {
        if self.postgres.is_some() {
            return match self.open_existing() {
                Ok(mut b) => Ok(!b.list()?.is_empty()),
                Err(e) if e.rule == Rule::CliNoStore => Ok(false),
                Err(e) => Err(e),
            };
        }
        Ok(match std::fs::metadata(&self.path) {
            Err(_) => false,
            Ok(m) if m.is_dir() => std::fs::read_dir(&self.path)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true),
            Ok(m) => m.len() > 0,
        })
    }

    /// Open the backend of an existing store for reading, beside its
    /// writer if an app holds it (the library's `"readOnly": true`: no
    /// lock, no repair, no write). Refuses (`cli.no-store`) a path that
    /// does not exist, an empty SQLite file, a JSONL path that is not a
    /// directory or a PostgreSQL schema that holds no store (cause
    /// `store.not-found`), so that reading never creates a store.
    pub fn open_existing(&self) -> Result<Box<dyn Backend>, Error> {
        let reader = Access {
            read_only: true,
            ..Access::default()
        };
        if self.postgres.is_some() {
            return match self.backend_config().open_with(reader, None) {
                Ok(b) => Ok(b),
                Err(e) if e.rule == Rule::StoreNotFound => {
                    let mut no = Error::new(
                        Status::Io,
                        Rule::CliNoStore,
                        format!(
                            "no store at {}: expected a schema that holds a dsh-session store (reading never creates one)",
                            self.path.display()
                        ),
                    );
                    no.cause = Some(Rule::StoreNotFound);
                    Err(no)
                }
                Err(e) => Err(e),
            };
        }
        let meta = std::fs::metadata(&self.path);
        let ok = match (&meta, self.kind) {
            (Ok(m), BackendKind::Sqlite) => m.is_file() && m.len() > 0,
            (Ok(m), BackendKind::Jsonl) => m.is_dir() && looks_like_jsonl_root(&self.path),
            (Ok(_), BackendKind::Postgres) | (Err(_), _) => false,
        };
        if !ok {
            let what = match self.kind {
                BackendKind::Sqlite => "a non-empty SQLite file",
                BackendKind::Jsonl => "a JSONL directory",
                BackendKind::Postgres => "a postgresql:// URL",
            };
            let found = match &meta {
                Ok(m) if m.is_dir() => "a directory that holds no session log and files of its own",
                Ok(m) if m.is_file() && m.len() == 0 => "an empty file",
                Ok(_) => "something else",
                Err(_) => "nothing",
            };
            return Err(Error::new(
                Status::Io,
                Rule::CliNoStore,
                format!(
                    "not a store: {} is {found}; expected {what}",
                    self.path.display()
                ),
            ));
        }
        self.backend_config().open_with(reader, None)
    }

    /// Where the library finds this store.
    fn backend_config(&self) -> BackendConfig {
        match (&self.postgres, self.kind) {
            (Some(pg), _) => BackendConfig::postgres(&pg.url, &pg.schema),
            (None, BackendKind::Sqlite) => BackendConfig::Sqlite {
                path: self.path.clone(),
            },
            (None, _) => BackendConfig::Jsonl {
                path: self.path.clone(),
                zstd: self.zstd,
            },
        }
    }

    /// Open (creating when missing) the backend of this store, as its
    /// writer.
    pub fn open(&self) -> Result<Box<dyn Backend>, Error> {
        self.backend_config().open()
    }

    /// The configuration of a store on this target that writes inside
    /// each append (`batch_window_ms` 0), with the declared event types.
    pub fn store_config(&self) -> Result<StoreConfig, CliError> {
        let mut config = StoreConfig::new(self.backend_config());
        config.batch_window_ms = 0;
        config.vocabulary = self.vocabulary()?;
        Ok(config)
    }

    /// The file errors about session `id` should name: its JSONL log, or
    /// the database file.
    pub fn file_of(&self, id: Option<&str>) -> PathBuf {
        if self.kind == BackendKind::Jsonl {
            if let Some(log) = id.and_then(|id| {
                dsh_session::store::jsonl::log_paths(&self.path, id)
                    .into_iter()
                    .next()
            }) {
                return log;
            }
        }
        self.path.clone()
    }

    /// True when `self` and `other` name the same existing file or
    /// directory, or the same schema of the same PostgreSQL database.
    pub fn same_place(&self, other: &Target) -> bool {
        match (&self.postgres, &other.postgres) {
            (Some(a), Some(b)) => return a.same_place(b),
            (None, None) => {}
            _ => return false,
        }
        match (self.path.canonicalize(), other.path.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => self.path == other.path,
        }
    }
}

/// Whether the directory `root` can be a JSONL store: it holds a session
/// log in the store's layout, or nothing but directories (a store with no
/// session yet, or whose sessions were deleted; dotfiles are passed over).
/// A directory with files of its own and no log (a project checkout, a
/// home directory) is no store.
fn looks_like_jsonl_root(root: &std::path::Path) -> bool {
    if !dsh_session::store::jsonl::session_ids(root).is_empty() {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return false;
    };
    entries.flatten().all(|e| {
        e.file_name().to_string_lossy().starts_with('.') || e.file_type().is_ok_and(|t| t.is_dir())
    })
}
