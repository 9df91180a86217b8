//! STORE paths: which backend a path holds, opening it for reading
//! without creating anything, and the configuration of a writing store.

use std::path::{Path, PathBuf};

use super::args::{BackendKind, CompressionKind, StoreArgs};
use super::CliError;
use dsh_session::engine::Vocabulary;
use dsh_session::error::{Error, Status};
use dsh_session::store::jsonl::{Compression, JsonlBackend};
use dsh_session::store::sqlite::SqliteBackend;
use dsh_session::store::{
    Backend, BackendConfig, StoreConfig, SQLITE_BUSY_TIMEOUT_MS, SQLITE_READER_BUSY_TIMEOUT_MS,
};
use dsh_session::Rule;

/// A store path and its backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The path as given.
    pub path: PathBuf,
    /// The backend.
    pub kind: BackendKind,
    /// zstd frames (JSONL only).
    pub zstd: bool,
    /// The host event types the store's sessions use (`--event-types`).
    pub event_types: Vec<String>,
}

/// Extensions that name a SQLite file.
const SQLITE_EXTENSIONS: [&str; 3] = ["sqlite", "sqlite3", "db"];

impl Target {
    /// Decide what `path` holds: `backend` and `compression` force; an
    /// existing file is SQLite, a directory JSONL; a missing path is SQLite
    /// by extension, else JSONL. A JSONL encoding is detected from the logs
    /// inside (zstd when there are none).
    pub fn detect(
        path: &Path,
        backend: Option<BackendKind>,
        compression: Option<CompressionKind>,
    ) -> Target {
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
        Target {
            path: path.to_path_buf(),
            kind,
            zstd,
            event_types: Vec::new(),
        }
    }

    /// [`Target::detect`] from a command's store arguments.
    pub fn from_args(args: &StoreArgs) -> Target {
        Target {
            event_types: args.event_types.clone(),
            ..Target::detect(&args.store, args.backend, args.compression)
        }
    }

    /// The vocabulary `--event-types` declares.
    pub fn vocabulary(&self) -> Result<Vocabulary, CliError> {
        Vocabulary::new(&self.event_types).map_err(|e| CliError::usage(e.message))
    }

    /// `"sqlite"`, `"jsonl (zstd)"` or `"jsonl (none)"`.
    pub fn describe(&self) -> String {
        match self.kind {
            BackendKind::Sqlite => "sqlite".to_string(),
            BackendKind::Jsonl if self.zstd => "jsonl (zstd)".to_string(),
            BackendKind::Jsonl => "jsonl (none)".to_string(),
        }
    }

    /// True when the path already holds something a backend would use: a
    /// non-empty file or a non-empty directory.
    pub fn holds_data(&self) -> bool {
        match std::fs::metadata(&self.path) {
            Err(_) => false,
            Ok(m) if m.is_dir() => std::fs::read_dir(&self.path)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true),
            Ok(m) => m.len() > 0,
        }
    }

    /// Open the backend of an existing store for reading, beside its
    /// writer if an app holds it (the library's `"readOnly": true`: no
    /// lock, no repair, no write). Refuses (`cli.no-store`) a path that
    /// does not exist, an empty SQLite file or a JSONL path that is not a
    /// directory, so that reading never creates a store.
    pub fn open_existing(&self) -> Result<Box<dyn Backend>, Error> {
        let meta = std::fs::metadata(&self.path);
        let ok = match (&meta, self.kind) {
            (Ok(m), BackendKind::Sqlite) => m.is_file() && m.len() > 0,
            (Ok(m), BackendKind::Jsonl) => m.is_dir(),
            (Err(_), _) => false,
        };
        if !ok {
            let what = match self.kind {
                BackendKind::Sqlite => "a non-empty SQLite file",
                BackendKind::Jsonl => "a JSONL directory",
            };
            return Err(Error::new(
                Status::Io,
                Rule::CliNoStore,
                format!("no store at {}: expected {what}", self.path.display()),
            ));
        }
        Ok(match self.kind {
            BackendKind::Sqlite => Box::new(SqliteBackend::open_read_only(
                &self.path,
                SQLITE_READER_BUSY_TIMEOUT_MS,
            )?),
            BackendKind::Jsonl => Box::new(JsonlBackend::open_read_only(
                &self.path,
                self.compression(),
            )?),
        })
    }

    fn compression(&self) -> Compression {
        if self.zstd {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// Open (creating when missing) the backend of this path.
    pub fn open(&self) -> Result<Box<dyn Backend>, Error> {
        Ok(match self.kind {
            BackendKind::Sqlite => {
                Box::new(SqliteBackend::open(&self.path, SQLITE_BUSY_TIMEOUT_MS)?)
            }
            BackendKind::Jsonl => Box::new(JsonlBackend::open(&self.path, self.compression())?),
        })
    }

    /// The configuration of a store on this target that writes inside
    /// each append (`batch_window_ms` 0), with the declared event types.
    pub fn store_config(&self) -> Result<StoreConfig, CliError> {
        let backend = match self.kind {
            BackendKind::Sqlite => BackendConfig::Sqlite {
                path: self.path.clone(),
            },
            BackendKind::Jsonl => BackendConfig::Jsonl {
                path: self.path.clone(),
                zstd: self.zstd,
            },
        };
        let mut config = StoreConfig::new(backend);
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

    /// True when `self` and `other` name the same existing file or directory.
    pub fn same_place(&self, other: &Target) -> bool {
        match (self.path.canonicalize(), other.path.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => self.path == other.path,
        }
    }
}
