//! Stores: a backend, its write-behind writer, the registry of live
//! sessions, the clock, and the lifecycle notices (docs/lifecycle.md §9).
//! `open` = load + upgrade + validate + repair, made durable before the
//! session is handed out.

pub mod backend;
pub mod chunk_rows;
mod config;
pub mod convert;
#[cfg(test)]
mod faults;
pub mod hurry;
mod ids;
mod inspect;
#[cfg(feature = "jsonl")]
pub mod jsonl;
#[cfg(any(feature = "jsonl", feature = "sqlite"))]
mod lockinfo;
pub mod memory;
mod open;
#[cfg(any(feature = "jsonl", feature = "sqlite"))]
pub(crate) mod platform;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "jsonl", feature = "sqlite"))]
pub mod quarantine;
mod restore;
pub mod seqs;
mod session;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod stream_read;
#[cfg(test)]
#[path = "tests/gather.rs"]
mod tests_gather;
#[cfg(test)]
#[path = "tests/group.rs"]
mod tests_group;
#[cfg(test)]
#[path = "tests/handles.rs"]
mod tests_handles;
#[cfg(all(test, feature = "jsonl"))]
#[path = "tests/overlap.rs"]
mod tests_overlap;
#[cfg(test)]
#[path = "tests/precompute.rs"]
mod tests_precompute;
pub mod uuid;
pub mod verify;
pub mod window;
pub mod writer;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

pub use backend::{
    Backend, BackendKind, Batch, Cut, Detached, Events, Listed, Loaded, ProgressUnit, RangeReads,
    ReadProgress, Stored, Torn, TornAt, TornKind,
};
pub use config::{
    check_batch_window, check_schema_name, check_session_id, check_statement_timeout, Access,
    BackendConfig, CreateOptions, ForkOptions, OpenOptions, StoreConfig, DEFAULT_BATCH_WINDOW_MS,
    DEFAULT_SCHEMA, DEFAULT_STATEMENT_TIMEOUT_MS, DEFAULT_WINDOW, HEADER_FIELDS,
    SQLITE_BUSY_TIMEOUT_MS, SQLITE_READER_BUSY_TIMEOUT_MS,
};
pub use inspect::{Inspection, RepairOptions, RepairReport, SessionSummary};
pub use restore::{
    restore, restore_for_reading, restore_lenient, restore_taking, Finding, Restored,
};
pub use session::LiveSession;

use crate::engine::seed::{self, SeedMode};
use crate::engine::{Event, Policy, Seed, Session};
use crate::error::{Error, Result, Status};
use crate::json::{Object, Value};
use crate::rule::Rule;
use writer::{lock_backend, SharedBackend, Writer};

/// The storage backends and encodings compiled into this build (cargo
/// features `jsonl`, `sqlite` and `postgres`; the first two bring zstd), in
/// the order `dsh_build_info` lists them.
pub const FEATURES: &[&str] = &[
    "memory",
    #[cfg(feature = "jsonl")]
    "jsonl",
    #[cfg(feature = "sqlite")]
    "sqlite",
    #[cfg(feature = "postgres")]
    "postgres",
    #[cfg(any(feature = "jsonl", feature = "sqlite"))]
    "zstd",
];

/// The backends compiled into this build, by their names in a store
/// configuration (`memory` always; `sqlite`, `jsonl` and `postgres` are
/// cargo features). A configuration naming another one is refused with
/// `config.backend-not-built`.
pub const BACKENDS: &[&str] = &[
    "memory",
    #[cfg(feature = "sqlite")]
    "sqlite",
    #[cfg(feature = "jsonl")]
    "jsonl",
    #[cfg(feature = "postgres")]
    "postgres",
];

/// The version of the SQLite library the `sqlite` backend is built with
/// (`"3.x.y"`), when the build has it.
pub fn sqlite_version() -> Option<&'static str> {
    #[cfg(feature = "sqlite")]
    return Some(rusqlite::version());
    #[cfg(not(feature = "sqlite"))]
    None
}

/// What a store tells its observer.
#[derive(Debug, Clone, Copy)]
pub enum Notice<'a> {
    /// A session was created or opened, with this header.
    Created(&'a Value),
    /// An event was committed.
    Event(&'a Event),
    /// A flush completed, or failed with this error.
    Flush(std::result::Result<(), &'a Error>),
    /// A session handle was closed.
    Disposed,
}

/// An opened session: the handle, what crash repair appended to its log,
/// and what it cut from it.
#[derive(Debug)]
pub struct Opened {
    /// The live session.
    pub session: Arc<LiveSession>,
    /// The closers crash repair appended (durable before the open
    /// returned; the `session/end-seed` marker is not among them).
    pub repaired: Vec<Arc<Event>>,
    /// The torn tail the open cut, if any, and where the copy of its bytes
    /// is kept.
    pub cut: Option<Cut>,
}

/// A host callback: `(session id, notice)`.
pub type Observer = Arc<dyn Fn(&str, Notice<'_>) + Send + Sync>;

/// The wall clock in epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

struct StoreState {
    live: HashSet<String>,
    next_id: u64,
    observer: Option<Observer>,
}

/// A store: shared by its handle and every session opened from it.
pub struct Store {
    state: Mutex<StoreState>,
    backend: SharedBackend,
    writer: Writer,
    kind: BackendKind,
    policy: Policy,
    /// Opened with `"readOnly": true`: reads only, beside the writer.
    read_only: bool,
    /// `"trimHeap": true`: trim the C heap after an open.
    trim_heap: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.kind)
            .finish_non_exhaustive()
    }
}

/// `store.read-only`: `what` would write to a store opened read-only.
fn read_only(what: &str) -> Error {
    Error::new(
        Status::Conflict,
        Rule::StoreReadOnly,
        format!("{what}: the store is open read-only (\"readOnly\": true); open it without readOnly to write"),
    )
}

pub(crate) fn not_found(id: &str) -> Error {
    Error::new(
        Status::NotFound,
        Rule::LoadNotFound,
        format!("session \"{id}\" not found"),
    )
}

impl Store {
    /// Open a store (`config.invalid` when `config` breaks a rule of
    /// [`StoreConfig::check`]).
    pub fn open(config: StoreConfig) -> Result<Arc<Store>> {
        config.check()?;
        let hurry = Arc::new(hurry::Hurry::default());
        let backend = config
            .backend
            .open_with(config.access, Some(hurry.clone()))?;
        Ok(Store::over(backend, &config, hurry))
    }

    /// A store over an opened `backend`, configured by `config` (whose
    /// backend it is).
    fn over(
        backend: Box<dyn Backend>,
        config: &StoreConfig,
        hurry: Arc<hurry::Hurry>,
    ) -> Arc<Store> {
        let kind = backend.kind();
        let backend: SharedBackend = Arc::new(Mutex::new(backend));
        let window = if kind == BackendKind::Memory {
            0
        } else {
            config.batch_window_ms
        };
        Arc::new(Store {
            state: Mutex::new(StoreState {
                live: HashSet::new(),
                next_id: 0,
                observer: None,
            }),
            writer: Writer::with_hurry(backend.clone(), window, hurry),
            backend,
            kind,
            policy: config.policy(),
            read_only: config.access.read_only,
            trim_heap: config.trim_heap,
        })
    }

    fn lock(&self) -> MutexGuard<'_, StoreState> {
        // No code runs user callbacks while holding this lock, so a poisoned
        // lock still guards consistent data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Install (or with `None` remove) the lifecycle observer.
    pub fn set_observer(&self, observer: Option<Observer>) {
        self.lock().observer = observer;
    }

    pub(crate) fn observer(&self) -> Option<Observer> {
        self.lock().observer.clone()
    }

    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// Which backend the store runs on.
    pub fn backend_kind(&self) -> BackendKind {
        self.kind
    }

    /// The name of the backend (`"sqlite"`, …; see [`BackendKind::name`]).
    pub fn backend_name(&self) -> &'static str {
        self.kind.name()
    }

    /// The admission and vocabulary of this store's sessions.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Create a session (docs/c-api.md `dsh_session_create`).
    pub fn create(self: &Arc<Store>, opts: CreateOptions) -> Result<Arc<LiveSession>> {
        self.check_writable("create")?;
        let now = now_ms();
        let reserved = match &opts.id {
            Some(id) => {
                config::check_session_id(id)?;
                self.reserve_new(id, Rule::StoreDuplicateId)?
            }
            None => self.mint_id()?,
        };
        let id = reserved.id().to_string();
        let mut header = Object::new();
        header.insert_str("version", Value::Number(seed::FORMAT_VERSION as f64));
        header.insert_str("id", Value::str(&id));
        header.insert_str("createdAt", Value::Number(now as f64));
        for (k, v) in opts.header_fields.iter() {
            header.insert(k.clone(), v.clone());
        }
        let header = Value::Object(header);
        let session = match opts.seed {
            Some(seed) => Session::from_seed(
                &id,
                header,
                Seed::Values(seed),
                SeedMode::Snapshot,
                (opts.markers, self.policy.clone()),
                now,
            )?,
            None => Session::new(&id, header, opts.markers, self.policy.clone())?,
        };
        session.check_seed_policy()?;
        self.register(reserved, session, false, None)
    }

    /// Fork `source` at `boundary` into a new session of this store.
    pub fn fork(
        self: &Arc<Store>,
        source: &Session,
        boundary: Option<&Value>,
        child_id: Option<String>,
    ) -> Result<Arc<LiveSession>> {
        self.check_writable("fork")?;
        let named = match &child_id {
            Some(id) => {
                config::check_session_id(id)?;
                let reserved = self
                    .reserve_new(id, Rule::ForkChildExists)
                    .map_err(|e| e.with_code("SESSION_ALREADY_EXISTS"))?;
                Some(reserved)
            }
            None => None,
        };
        let len = source.fork_len(boundary)?;
        let reserved = match named {
            Some(reserved) => reserved,
            None => self.mint_id()?,
        };
        let child = source.fork(len, reserved.id(), now_ms())?;
        self.register(reserved, child, false, Some((source.id(), len as u64)))
    }

    /// Make `session` live under its `reserved` id and, for a new one
    /// (not `stored`), queue its whole log (a seed, if any) for writing;
    /// an opened one is already on disk. A new fork child of `fork.0`
    /// shares its first `fork.1` events with it.
    fn register(
        self: &Arc<Store>,
        reserved: ids::Reserved<'_>,
        session: Session,
        stored: bool,
        fork: Option<(&str, u64)>,
    ) -> Result<Arc<LiveSession>> {
        let id = session.id().to_string();
        debug_assert_eq!(id, reserved.id());
        let stored_len = stored.then_some(session.events().len() as u64);
        self.writer
            .track(&id, session.header(), stored_len, session.is_windowed());
        if let Some((parent, prefix)) = fork {
            self.writer.track_fork(&id, parent, prefix);
        }
        if !stored {
            if let Err(e) = self.writer.enqueue_log(&id, session.events()) {
                self.writer.forget(&id);
                return Err(e);
            }
        }
        reserved.keep();
        let header = session.header().clone();
        let live = Arc::new(LiveSession::new(self.clone(), session));
        live.notify(Notice::Created(&header));
        Ok(live)
    }

    /// Write what is queued for `id`; a conflict (the stored log moved on
    /// under another writer) drops it, since no retry could write it.
    pub(crate) fn drain(&self, id: &str) -> Result<()> {
        let result = self.writer.flush(id);
        if result.as_ref().is_err_and(|e| e.status == Status::Conflict) {
            self.writer.discard(id);
        }
        result
    }

    pub(crate) fn release(&self, id: &str) {
        self.writer.forget(id);
        self.lock().live.remove(id);
    }

    /// Refuse `what` on a read-only store (`store.read-only`).
    pub(crate) fn check_writable(&self, what: &str) -> Result<()> {
        if self.read_only {
            Err(read_only(what))
        } else {
            Ok(())
        }
    }

    /// True for a store opened with `"readOnly": true`.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Remove a stored session that is not open. Its queued writes (if a
    /// failed drain left any) are dropped with it.
    pub fn delete(&self, id: &str) -> Result<()> {
        self.check_writable("delete")?;
        let _reserved = self.reserve(id, Rule::StoreDeleteLive, "delete")?;
        self.writer.discard(id);
        if lock_backend(&self.backend).delete(id)? {
            Ok(())
        } else {
            Err(not_found(id))
        }
    }

    /// Drain every pending write.
    pub fn flush(&self) -> Result<()> {
        self.writer.flush_all()
    }
}
