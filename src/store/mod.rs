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
use restore::{check_stored_header, fast_event};
pub use restore::{
    restore, restore_for_reading, restore_lenient, restore_taking, Finding, Restored,
};
pub use session::LiveSession;

use crate::engine::seed::{self, SeedMode};
use crate::engine::session::Restoring;
use crate::engine::{upgrade, Event, Markers, Policy, Seed, Session};
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

    /// Open a stored session: load, upgrade, validate, repair durably, and
    /// hand it out. Returns the session and the closers repair appended.
    pub fn open_session(self: &Arc<Store>, id: &str) -> Result<Opened> {
        self.open_session_with(id, None)
    }

    /// [`Store::open_session`] keeping only about the last `keep` events
    /// resident: older ones are read back from storage when a call needs
    /// them (a fork, `events` or a derive reaching back, a rewrite of an
    /// old tool result). Everything is validated, folded and repaired as
    /// in a full open. A log stored in an older format, which the open
    /// rewrites in memory, and a memory store's log stay fully resident.
    pub fn open_session_windowed(self: &Arc<Store>, id: &str, keep: usize) -> Result<Opened> {
        self.open_session_with(id, Some(keep))
    }

    fn open_session_with(self: &Arc<Store>, id: &str, window: Option<usize>) -> Result<Opened> {
        // Reserved before anything reads the log: no other open, repair or
        // delete of this id runs until the handle is closed.
        let reserved = self.reserve(id, Rule::LoadLivePrepare, "open")?;
        if self.read_only {
            return self.open_for_reading(reserved);
        }
        // Events an earlier handle left queued (its close failed to write
        // them) go first, or the open fails: the log read below must be
        // what the queue continues.
        match self.drain(id) {
            Err(e) if e.status != Status::Conflict => return Err(e),
            _ => {}
        }
        let reserved = match window {
            Some(keep) => match self.open_streaming(reserved, keep)? {
                Ok(opened) => return Ok(opened),
                Err(reserved) => reserved,
            },
            None => reserved,
        };
        let mut loaded = lock_backend(&self.backend)
            .load(id)?
            .ok_or_else(|| not_found(id))?;
        let restored = restore_taking(id, &mut loaded, &self.policy)?;
        restore::check_before_repair(id, &restored.closers)?;
        let mut session = restored.session;
        // Everything after the stored prefix (recovered torn events, closers,
        // the end-seed marker) is written before the handle is returned.
        let tail: Vec<Arc<Event>> = session.events().range(restored.durable..).collect();
        let mut cut = None;
        if loaded.torn.is_some() || !tail.is_empty() {
            cut = lock_backend(&self.backend).commit_repair(
                &loaded.header,
                loaded.torn.as_ref(),
                &tail,
            )?;
        }
        drop(loaded);
        if let Some(keep) =
            window.filter(|_| restored.as_stored && self.kind != BackendKind::Memory)
        {
            let source = Arc::new(window::StoredEvents::new(self, id));
            session.set_window(source, keep);
        }
        self.return_freed_memory();
        let live = self.register(reserved, session, true, None)?;
        Ok(Opened {
            session: live,
            repaired: restored.closers,
            cut,
        })
    }

    /// A read-only store's open: the stored log as it is, up to its last
    /// complete record, nothing repaired or written (a windowed open reads
    /// the whole log too).
    fn open_for_reading(self: &Arc<Store>, reserved: ids::Reserved<'_>) -> Result<Opened> {
        let id = reserved.id();
        let mut loaded = lock_backend(&self.backend)
            .load(id)?
            .ok_or_else(|| not_found(id))?;
        let restored = restore_for_reading(id, &mut loaded, &self.policy)?;
        drop(loaded);
        self.return_freed_memory();
        let live = self.register(reserved, restored.session, true, None)?;
        Ok(Opened {
            session: live,
            repaired: Vec::new(),
            cut: None,
        })
    }

    /// With `"trimHeap": true`, give the heap pages freed by a large open
    /// (read buffers, decompressed frames, the stored rows) back to the
    /// system, so resident memory after an open tracks the session rather
    /// than the peak of reading it. Process-wide, so the host's choice.
    fn return_freed_memory(&self) {
        // Elsewhere than glibc there is no call for it: nothing to do.
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        let _ = self.trim_heap;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if self.trim_heap {
            // SAFETY: malloc_trim only releases free heap memory; no pointer
            // is involved and it is safe to call at any time from any thread.
            unsafe {
                libc::malloc_trim(0);
            }
        }
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

    /// The windowed open of a clean, current-format log streamed from the
    /// backend a batch at a time, so the whole log is never in memory.
    /// `None` sends the open down the whole-log path, which decides about
    /// (and reports) everything unusual: a torn tail, an older format, a
    /// rule broken, a backend that cannot stream.
    fn open_streaming<'s>(
        self: &'s Arc<Store>,
        reserved: ids::Reserved<'s>,
        keep: usize,
    ) -> Result<std::result::Result<Opened, ids::Reserved<'s>>> {
        let id = reserved.id().to_string();
        let id = id.as_str();
        let source: Arc<dyn crate::engine::window::EventSource> =
            Arc::new(window::StoredEvents::new(self, id));
        let start = |header: &Value| -> Result<Restoring> {
            check_stored_header(id, header)?;
            let mut r =
                Session::restoring(id, header.clone(), Markers::Required, self.policy.clone())?;
            r.set_window(source.clone(), keep);
            Ok(r)
        };
        // Two stages: this thread reads and decodes the stored log (the
        // backend's streaming read), a worker checks and folds each batch
        // as it comes, so the open keeps both cores busy as a full open
        // does. Anything unusual leaves the open to the whole-log path.
        let (streamed, restoring) = std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(Option<Value>, Vec<Stored>)>(2);
            let worker = scope.spawn(move || -> Result<Option<Restoring>> {
                let mut restoring: Option<Restoring> = None;
                for (header, batch) in rx {
                    let r = match (&mut restoring, header) {
                        (Some(r), _) => r,
                        (None, Some(h)) => restoring.insert(start(&h)?),
                        (None, None) => return Ok(None),
                    };
                    for item in batch {
                        let e = fast_event(item).map_err(|_| {
                            Error::new(Status::Internal, Rule::OpenNotStreamable, "an older format")
                        })?;
                        upgrade::check_known_types(
                            id,
                            std::iter::once(&*e),
                            &self.policy.vocabulary,
                        )?;
                        r.push(e)?;
                    }
                    r.evict_old();
                }
                Ok(restoring)
            });
            let mut first = true;
            let mut send = |header: &Value, batch: Vec<Stored>| -> Result<()> {
                let header = std::mem::take(&mut first).then(|| header.clone());
                tx.send((header, batch)).map_err(|_| {
                    Error::new(
                        Status::Internal,
                        Rule::OpenNotStreamable,
                        "the fold stopped",
                    )
                })
            };
            let streamed = {
                let mut backend = lock_backend(&self.backend);
                match backend.range_reads() {
                    Some(reads) => reads.load_streaming(id, &mut send),
                    None => Ok(None),
                }
            };
            drop(tx);
            let restoring = worker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (streamed, restoring)
        });
        let (Ok(Some(streamed)), Ok(restoring)) = (streamed, restoring) else {
            return Ok(Err(reserved));
        };
        let restoring = match restoring {
            Some(r) => r,
            None => match start(&streamed.header) {
                Ok(r) => r,
                Err(_) => return Ok(Err(reserved)),
            },
        };
        let stored = restoring.len();
        let finished = restoring.finish(now_ms());
        let Ok((mut session, closers)) = finished else {
            return Ok(Err(reserved));
        };
        if restore::check_before_repair(id, &closers).is_err() {
            // The whole-log open refuses, naming the rule.
            return Ok(Err(reserved));
        }
        // The closers and the end-seed marker are written before the
        // handle is returned, as in a full open.
        let tail = session
            .events_in(stored, session.events().len())
            .map_err(|e| e.prefixed("windowed open: "))?;
        if !tail.is_empty() {
            lock_backend(&self.backend).commit_repair(&streamed.header, None, &tail)?;
        }
        session.evict_old();
        self.return_freed_memory();
        let live = self.register(reserved, session, true, None)?;
        Ok(Ok(Opened {
            session: live,
            repaired: closers,
            cut: None,
        }))
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
