//! Parsing of the JSON configuration and option objects given at the ABI.

use std::path::PathBuf;
use std::sync::Arc;

use super::backend::Backend;
use super::hurry::Hurry;
use super::jsonl::{Compression, JsonlBackend};
use super::memory::MemoryBackend;
use super::sqlite::SqliteBackend;
use crate::engine::session::parse_input;
use crate::engine::{Admission, Markers, Policy, Vocabulary};
use crate::error::{Error, Result};
use crate::json::{JsString, Object, Value};

/// Where a store keeps its sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// A parsed `dsh_store_open` configuration.
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

/// How long SQLite waits for another connection's lock (persistence.md §7.1).
pub const SQLITE_BUSY_TIMEOUT_MS: u32 = 5000;

/// How long a read-only SQLite open waits for the writer's lock: readers
/// of a WAL database wait only while the writer holds it exclusively (a
/// `"locking": "exclusive"` writer holds it for good).
pub const SQLITE_READER_BUSY_TIMEOUT_MS: u32 = 1000;

/// The default write-behind window.
pub const DEFAULT_BATCH_WINDOW_MS: u64 = 25;

fn config_error(message: impl Into<String>) -> Error {
    Error::invalid_argument("config.invalid", message)
}

/// `arg.option-unknown` for the first key of `o` that `known` refuses
/// (`what` names the options: "unknown fork option …").
fn only_keys(o: &Object, what: &str, known: impl Fn(&JsString) -> bool) -> Result<()> {
    match o.iter().find(|(k, _)| !known(k)) {
        Some((k, _)) => Err(Error::invalid_argument(
            "arg.option-unknown",
            format!("unknown {what} option \"{}\"", k.to_string_lossy()),
        )),
        None => Ok(()),
    }
}

fn object_or_null(text: Option<&str>, what: &str) -> Result<Option<Object>> {
    let Some(text) = text else { return Ok(None) };
    let value = parse_input(text, what)?;
    if value.is_null() {
        return Ok(None);
    }
    value.into_object().map(Some).map_err(|_| {
        Error::invalid_argument(
            "arg.not-object",
            format!("{what} must be a JSON object or null"),
        )
    })
}

impl StoreConfig {
    /// Parse `config_json` (NULL or `null` = memory).
    pub fn parse(text: Option<&str>) -> Result<StoreConfig> {
        let mut config = StoreConfig {
            backend: BackendConfig::Memory,
            batch_window_ms: DEFAULT_BATCH_WINDOW_MS,
            admission: Admission::default(),
            vocabulary: Vocabulary::default(),
            access: Access::default(),
            trim_heap: false,
        };
        let Some(o) = object_or_null(text, "store configuration")? else {
            return Ok(config);
        };
        for (k, _) in o.iter() {
            let known = [
                "backend",
                "path",
                "compression",
                "batchWindowMs",
                "admission",
                "eventTypes",
                "readOnly",
                "locking",
                "trimHeap",
            ];
            if !known.iter().any(|n| k == *n) {
                return Err(config_error(format!(
                    "unknown store configuration key \"{}\"",
                    k.to_string_lossy()
                )));
            }
        }
        if let Some(w) = o.get("batchWindowMs") {
            match w.as_safe_u64().filter(|w| *w <= i32::MAX as u64) {
                Some(w) => config.batch_window_ms = w,
                None => {
                    return Err(config_error(
                        "batchWindowMs must be an integer between 0 and 2147483647",
                    ))
                }
            }
        }
        if let Some(a) = o.get("admission") {
            config.admission = a
                .as_str()
                .and_then(Admission::from_name)
                .ok_or_else(|| config_error("admission must be \"strict\" or \"reference\""))?;
        }
        if let Some(types) = o.get("eventTypes") {
            let names = types
                .as_array()
                .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
                .ok_or_else(|| {
                    Error::invalid_argument(
                        "config.event-type",
                        "eventTypes must be an array of event type names",
                    )
                })?;
            config.vocabulary = Vocabulary::new(names)?;
        }
        let path = match o.get("path") {
            None => None,
            Some(p) => match p.as_str() {
                Some(p) if !p.is_empty() && !p.contains('\0') => Some(PathBuf::from(p)),
                _ => return Err(config_error("path must be a non-empty string")),
            },
        };
        let backend = match o.get("backend") {
            None => "memory",
            Some(b) => b.as_str().ok_or_else(|| {
                config_error("backend must be \"memory\", \"sqlite\" or \"jsonl\"")
            })?,
        };
        let zstd = match o.get("compression").map(|c| c.as_str()) {
            None | Some(Some("zstd")) => true,
            Some(Some("none")) => false,
            _ => return Err(config_error("compression must be \"zstd\" or \"none\"")),
        };
        if let Some(t) = o.get("trimHeap") {
            config.trim_heap = t
                .as_bool()
                .ok_or_else(|| config_error("trimHeap must be true or false"))?;
        }
        if let Some(r) = o.get("readOnly") {
            config.access.read_only = r
                .as_bool()
                .ok_or_else(|| config_error("readOnly must be true or false"))?;
        }
        if let Some(l) = o.get("locking") {
            config.access.exclusive = match l.as_str() {
                Some("shared") => false,
                Some("exclusive") => true,
                _ => return Err(config_error("locking must be \"shared\" or \"exclusive\"")),
            };
            if backend != "sqlite" {
                return Err(config_error("locking applies to the sqlite backend only"));
            }
        }
        if config.access.read_only && backend == "memory" {
            return Err(config_error(
                "a memory store has no writer to read beside: readOnly needs sqlite or jsonl",
            ));
        }
        if backend != "jsonl" && o.contains_key("compression") {
            return Err(config_error(
                "compression applies to the jsonl backend only",
            ));
        }
        config.backend = match (backend, path) {
            ("memory", None) => BackendConfig::Memory,
            ("memory", Some(_)) => return Err(config_error("the memory backend takes no path")),
            ("sqlite", Some(path)) => BackendConfig::Sqlite { path },
            ("jsonl", Some(path)) => BackendConfig::Jsonl { path, zstd },
            ("sqlite" | "jsonl", None) => {
                return Err(config_error(format!(
                    "the {backend} backend needs a \"path\""
                )))
            }
            _ => {
                return Err(config_error(
                    "backend must be \"memory\", \"sqlite\" or \"jsonl\"",
                ))
            }
        };
        Ok(config)
    }
}

impl BackendConfig {
    /// Open the backend this configuration names, as its writer (shared
    /// SQLite locking).
    pub fn open(&self) -> Result<Box<dyn Backend>> {
        self.open_with(Access::default(), None)
    }

    /// Open the backend this configuration names with `access`; a writer's
    /// backend counts the store's waiting flushes in `hurry`.
    pub fn open_with(&self, access: Access, hurry: Option<Arc<Hurry>>) -> Result<Box<dyn Backend>> {
        match self {
            BackendConfig::Memory => Ok(Box::new(MemoryBackend::new())),
            BackendConfig::Sqlite { path } if access.read_only => Ok(Box::new(
                SqliteBackend::open_read_only(path, SQLITE_READER_BUSY_TIMEOUT_MS)?,
            )),
            BackendConfig::Sqlite { path } => {
                let mut b = SqliteBackend::open_with_locking(
                    path,
                    SQLITE_BUSY_TIMEOUT_MS,
                    access.exclusive,
                )?;
                if let Some(h) = hurry {
                    b.set_hurry(h);
                }
                Ok(Box::new(b))
            }
            BackendConfig::Jsonl { path, zstd } => {
                let compression = if *zstd {
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
        }
    }
}

/// Parsed `dsh_session_create` options.
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
const HEADER_FIELDS: [&str; 5] = [
    "cwd",
    "parentSession",
    "origin",
    "delegationDepth",
    "agentPreset",
];

impl CreateOptions {
    /// Parse `options_json` (NULL or `null` = defaults).
    pub fn parse(text: Option<&str>) -> Result<CreateOptions> {
        let mut opts = CreateOptions::default();
        let Some(mut o) = object_or_null(text, "session options")? else {
            return Ok(opts);
        };
        only_keys(&o, "session", |k| {
            k == "id" || k == "seed" || k == "legacy" || HEADER_FIELDS.iter().any(|f| k == *f)
        })?;
        opts.id = o.remove("id").map(|v| session_id(&v)).transpose()?;
        if let Some(seed) = o.remove("seed") {
            let seed = seed.into_array().map_err(|_| {
                Error::invalid_argument("arg.seed", "seed must be an array of events")
            })?;
            opts.seed = Some(seed);
        }
        match o.remove("legacy") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => opts.markers = Markers::LegacyAppend,
            Some(_) => {
                return Err(Error::invalid_argument(
                    "arg.legacy",
                    "legacy must be a boolean",
                ))
            }
        }
        for f in HEADER_FIELDS {
            if let Some(v) = o.remove(f) {
                opts.header_fields.insert_str(f, v);
            }
        }
        Ok(opts)
    }
}

/// A session id option: a non-empty string of valid Unicode without NUL
/// (ids are handed back to C as strings).
fn session_id(v: &Value) -> Result<String> {
    let id = v.as_str().ok_or_else(bad_id)?;
    check_session_id(id)?;
    Ok(id.to_string())
}

fn bad_id() -> Error {
    Error::invalid_argument(
        "arg.id",
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

/// Parsed `dsh_session_fork` options and boundary.
#[derive(Debug, Default)]
pub struct ForkOptions {
    /// The child's id (minted when absent).
    pub id: Option<String>,
    /// The boundary; `None` means the source's last event.
    pub boundary: Option<Value>,
}

impl ForkOptions {
    /// Parse `options_json` (NULL or `null` = defaults) together with the
    /// integer boundary argument: `-1` means "the last event" unless the
    /// options carry `"boundary"` (any JSON value, for boundaries an
    /// integer cannot express); giving both is `arg.boundary`.
    pub fn parse(text: Option<&str>, boundary: i64) -> Result<ForkOptions> {
        let mut opts = ForkOptions::default();
        if let Some(mut o) = object_or_null(text, "fork options")? {
            only_keys(&o, "fork", |k| k == "id" || k == "boundary")?;
            opts.id = o.remove("id").map(|v| session_id(&v)).transpose()?;
            opts.boundary = o.remove("boundary");
        }
        match (opts.boundary.is_some(), boundary) {
            (true, -1) | (false, -1) => {}
            (true, _) => {
                return Err(Error::invalid_argument(
                    "arg.boundary",
                    "give the boundary either as the argument or as the \"boundary\" option (with the argument -1)",
                ))
            }
            (false, b) => opts.boundary = Some(Value::Number(b as f64)),
        }
        Ok(opts)
    }
}

/// The number of events a windowed open keeps resident when its options
/// do not say (two chunks of the log).
pub const DEFAULT_WINDOW: usize = 2 * crate::engine::chunked::CHUNK;

/// Parsed `dsh_session_open_windowed` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// How many of the newest events stay resident (at least).
    pub window: usize,
}

impl OpenOptions {
    /// Parse `options_json` (NULL or `null` = defaults): `{"window": n}`
    /// with `n` a non-negative safe integer.
    pub fn parse(text: Option<&str>) -> Result<OpenOptions> {
        let mut opts = OpenOptions {
            window: DEFAULT_WINDOW,
        };
        if let Some(o) = object_or_null(text, "open options")? {
            only_keys(&o, "open", |k| k == "window")?;
            if let Some(v) = o.get("window") {
                let n = v.as_safe_u64().ok_or_else(|| {
                    Error::invalid_argument(
                        "arg.window",
                        format!(
                            "\"window\" must be a non-negative safe integer, got {}",
                            v.to_json()
                        ),
                    )
                })?;
                opts.window = usize::try_from(n).unwrap_or(usize::MAX);
            }
        }
        Ok(opts)
    }
}
