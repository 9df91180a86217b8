//! The storage backend trait: one interface in front of memory, JSONL and
//! SQLite (docs/formats.md §1). Backends store and return what the engine
//! accepted; they never re-check an engine rule. Every method that writes
//! returns only when the write is durable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::engine::session::Log;
use crate::engine::Event;
use crate::error::{Error, Result};
use crate::json::{self, canon, Value};

/// The events of a [`Batch`]: appended ones, or a whole log handed over
/// shared (a new session's seed).
#[derive(Debug, Clone, Copy)]
pub enum Events<'a> {
    /// Events in seq order.
    Slice(&'a [Arc<Event>]),
    /// A session's whole log, shared with it rather than copied.
    Log(&'a Log),
}

impl Events<'_> {
    /// How many events.
    pub fn len(&self) -> usize {
        match self {
            Events::Slice(s) => s.len(),
            Events::Log(l) => l.len(),
        }
    }

    /// No event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The events as one slice (a log is copied into one).
    pub fn to_slice(&self) -> std::borrow::Cow<'_, [Arc<Event>]> {
        match self {
            Events::Slice(s) => std::borrow::Cow::Borrowed(s),
            Events::Log(l) => std::borrow::Cow::Owned(l.to_vec()),
        }
    }
}

/// One session's batch for [`Backend::write`].
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The session header (its id names the session).
    pub header: &'a Value,
    /// The events, continuing the stored log.
    pub events: Events<'a>,
    /// The log does not exist yet: create it with the header and these
    /// events atomically (never a header without events).
    pub materialize: bool,
    /// A fork child's parent and the length of the prefix the child shares
    /// with it, while the batch still reaches into that prefix: the events
    /// below that seq are the parent's of the same seqs, byte for byte, and
    /// a backend that can copy them inside the store may (PostgreSQL's
    /// `INSERT … SELECT`); the others write them.
    pub fork: Option<(&'a str, u64)>,
}

/// The part of a write that runs without its backend (see
/// [`Backend::prepare_write`]): it owns what it writes (file handles,
/// events) and touches no backend state.
pub trait Detached: Send {
    /// Write and sync.
    fn run(&mut self);
    /// The write as `Any`, for its backend's [`Backend::finish_write`].
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

/// A torn tail found by a read, to be cut by [`Backend::commit_repair`].
#[derive(Debug, Clone, PartialEq)]
pub struct Torn {
    /// Where the committed region ends.
    pub at: TornAt,
    /// How many events at the end of [`Loaded::events`] were decoded from
    /// the torn part (a torn zstd frame's readable prefix) and must be
    /// written again after the cut; usually 0.
    pub recovered: usize,
    /// What the read found there.
    pub why: TornKind,
    /// How much the cut takes: bytes from the marker to the end of the
    /// file (JSONL), rows from the marker on (SQLite).
    pub length: u64,
}

/// Where a torn tail begins, in its backend's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TornAt {
    /// A byte offset into the log file (JSONL): the bytes from it on are
    /// cut.
    Byte(u64),
    /// The seq of the first stored row that does not decode (SQLite): the
    /// rows from it on are cut.
    Row(u64),
}

impl TornAt {
    /// The offset or seq, whichever it is.
    pub fn value(self) -> u64 {
        match self {
            TornAt::Byte(v) | TornAt::Row(v) => v,
        }
    }
}

/// What a torn tail is: the kinds of tail a crash leaves, and damage a
/// salvage was asked to cut. Damage is never read as a torn tail
/// otherwise: it refuses the open (`DSH_E_CORRUPT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TornKind {
    /// Bytes after the last complete line of a plain log: a line being
    /// written.
    PartialLine,
    /// A Zstandard frame whose bytes end before its last block, every
    /// byte present decodable: a frame being written.
    IncompleteFrame,
    /// Zeros after the last complete frame: the file grew, its data never
    /// arrived.
    ZeroFilled,
    /// Rows after the last turn end that do not decode into the log
    /// (SQLite, as the reference reads them).
    UndecodableRows,
    /// Damage cut by an explicit salvage (a repair asked for it).
    Salvaged,
}

impl TornKind {
    /// The kind's name in reports: `partial-line`, `incomplete-frame`,
    /// `zero-filled`, `undecodable-rows`, `salvaged`.
    pub fn as_str(self) -> &'static str {
        match self {
            TornKind::PartialLine => "partial-line",
            TornKind::IncompleteFrame => "incomplete-frame",
            TornKind::ZeroFilled => "zero-filled",
            TornKind::UndecodableRows => "undecodable-rows",
            TornKind::Salvaged => "salvaged",
        }
    }
}

/// What an open or a repair cut from a stored log, and where the copy of
/// what it cut is kept (see [`crate::store::quarantine`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    /// Where the cut began: the torn marker (a byte offset of a JSONL log,
    /// the seq of the first row of a SQLite session).
    pub at: u64,
    /// What was cut: bytes (JSONL) or rows (SQLite).
    pub length: u64,
    /// Why it was cut.
    pub why: TornKind,
    /// The quarantine file holding what was cut, written and synced
    /// before the cut.
    pub copy: std::path::PathBuf,
}

/// One stored event as read back.
#[derive(Debug, Clone)]
pub enum Stored {
    /// The event's JSON text as `JSON.stringify` writes it for a lossless
    /// value (a line checked with `canon::is_canonical`, or text this
    /// library wrote): it becomes the event's text, no tree is built.
    Canonical(Box<str>),
    /// The event as a JSON value (non-canonical text, expanded rows).
    Value(Value),
    /// An event already built from canonical text (no tree).
    Event(Event),
}

impl Stored {
    /// The event as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            Stored::Canonical(t) => json::parse(t).expect("checked canonical JSON"),
            Stored::Value(v) => v.clone(),
            Stored::Event(e) => e.to_value(),
        }
    }

    /// The event as a JSON value, consuming it.
    pub fn into_value(self) -> Value {
        match self {
            Stored::Canonical(t) => json::parse(&t).expect("checked canonical JSON"),
            Stored::Value(v) => v,
            Stored::Event(e) => e.to_value(),
        }
    }

    /// The stored `seq` when it is a non-negative safe integer.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Stored::Canonical(t) => crate::engine::event::plain_int(canon::member(t, "seq")?),
            Stored::Value(v) => v.as_object()?.get("seq")?.as_safe_u64(),
            Stored::Event(e) => Some(e.seq),
        }
    }

    /// Whether the stored `type` is the string `ty` (plain, escape-free).
    pub fn is_type(&self, ty: &str) -> bool {
        match self {
            Stored::Canonical(t) => {
                canon::member(t, "type")
                    .and_then(|q| q.strip_prefix('"'))
                    .and_then(|q| q.strip_suffix('"'))
                    == Some(ty)
            }
            Stored::Value(v) => v
                .as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_js_str)
                .is_some_and(|t| t == ty),
            Stored::Event(e) => e.ty == ty,
        }
    }
}

impl PartialEq for Stored {
    fn eq(&self, other: &Stored) -> bool {
        self.to_value() == other.to_value()
    }
}

impl PartialEq<Value> for Stored {
    fn eq(&self, other: &Value) -> bool {
        match self {
            Stored::Value(v) => v == other,
            Stored::Canonical(_) | Stored::Event(_) => self.to_value() == *other,
        }
    }
}

/// A stored session as read back.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The session header (docs/events.md §13 key order), as stored.
    pub header: Value,
    /// The events of the valid, contiguous prefix (seq 0, 1, …) in their
    /// stored key order. Not lossless-checked (restore mode).
    pub events: Vec<Stored>,
    /// A torn tail after that prefix, if any.
    pub torn: Option<Torn>,
    /// The revision token (changes exactly when the stored log changes).
    pub revision: String,
}

impl Loaded {
    /// The events as JSON values (tools that inspect a log value by value).
    pub fn values(&self) -> Vec<Value> {
        self.events.iter().map(Stored::to_value).collect()
    }
}

/// One row of `list`.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The session header.
    pub header: Value,
    /// The revision token.
    pub revision: String,
    /// Set when the session's stored header cannot be read: `header` then
    /// holds only its `id`, as far as it could be read, and the listing
    /// goes on with the other sessions.
    pub problem: Option<Error>,
}

/// Which backend a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Sessions in memory.
    Memory,
    /// One SQLite database file.
    Sqlite,
    /// A directory of JSONL logs.
    Jsonl,
    /// A schema of a PostgreSQL database.
    Postgres,
    /// A backend from outside the library.
    Other,
}

impl BackendKind {
    /// Its name in configurations: `"memory"`, `"sqlite"`, `"jsonl"`,
    /// `"postgres"` (`"other"` for a backend from outside the library).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Sqlite => "sqlite",
            BackendKind::Jsonl => "jsonl",
            BackendKind::Postgres => "postgres",
            BackendKind::Other => "other",
        }
    }
}

/// Work a flushing thread may do on its own session's queued events before
/// it waits for the round that writes them ([`Backend::precompute`]):
/// where rounds run one at a time, whatever the flushes do in parallel
/// beforehand is taken off the serial round.
pub trait Precompute: Send + Sync {
    /// Whether a queued event whose text is `text_len` bytes long is worth
    /// handing to [`Precompute::run`] (asked without reading the event).
    fn wants(&self, text_len: usize) -> bool;

    /// Do the work for `events` (queued events of one session, in seq
    /// order). Purely an optimisation: a round must write correctly
    /// whether or not this ran, finished, or ran for events it writes.
    fn run(&self, events: &[Arc<Event>]);
}

/// A place where session logs live.
pub trait Backend: Send {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Every materialized session (a created-but-never-appended one is absent).
    fn list(&mut self) -> Result<Vec<Listed>>;

    /// Read a stored session, or `None` when nothing is stored under `id`.
    fn load(&mut self, id: &str) -> Result<Option<Loaded>>;

    /// [`Backend::load`] for a salvage: damage a plain load refuses (a
    /// complete frame that fails its checksum, bytes that are no frame)
    /// ends the log's readable prefix instead, and what follows is a torn
    /// tail of kind [`TornKind::Salvaged`], cut (with a copy kept) by
    /// [`Backend::commit_repair`]. The default salvages nothing: it loads.
    fn load_salvaging(&mut self, id: &str) -> Result<Option<Loaded>> {
        self.load(id)
    }

    /// Whether a writer of session `id` is running elsewhere (another
    /// process, another store of this one) while this backend reads: the
    /// store's or session's writer lock is held. `None` when the backend
    /// cannot tell; the default.
    fn writer_running(&mut self, id: &str) -> Option<bool> {
        let _ = id;
        None
    }

    /// The current revision of `id`, or `None` when nothing is stored.
    fn revision(&mut self, id: &str) -> Result<Option<String>>;

    /// Write `batches` durably: one result per batch, in order. The
    /// batches are of different sessions, each continuing its stored log
    /// (or creating it, [`Batch::materialize`]). A backend may share the
    /// durable work of the batches (one transaction, syncs that run at
    /// once): that is what makes concurrent flushes of many sessions cost
    /// about one flush. Each batch stands or fails on its own: a failed
    /// batch stores nothing of itself and leaves the others' results as
    /// they are; a result is `Ok` only once its batch is durable.
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>>;

    /// Whether [`Backend::prepare_write`] detaches writes, so the writer
    /// may run several rounds (of different sessions) at once. The
    /// default: no, rounds run one at a time.
    fn detaches_writes(&self) -> bool {
        false
    }

    /// What a flushing thread may do before its round ([`Precompute`]);
    /// `None`, the default: nothing.
    fn precompute(&self) -> Option<Arc<dyn Precompute>> {
        None
    }

    /// For a backend whose writes of different sessions do not need it
    /// while they run (a log file each): the part of the write of
    /// `batches` that does need it (checks, opening the files), and the
    /// rest as a [`Detached`] write that runs without the backend, so the
    /// writes and syncs of several rounds overlap. The backend finishes it
    /// with [`Backend::finish_write`]. `None`, the default, has the batches
    /// written by [`Backend::write`], the backend held throughout.
    fn prepare_write(&mut self, batches: &[Batch<'_>]) -> Option<Box<dyn Detached>> {
        let _ = batches;
        None
    }

    /// Record what a [`Detached`] write from [`Backend::prepare_write`]
    /// did, after its [`Detached::run`]: one result per batch, as
    /// [`Backend::write`] gives them.
    /// The default, for a backend that detaches nothing, gives no result
    /// (the writer counts a batch without one as failed).
    fn finish_write(&mut self, detached: Box<dyn Detached>) -> Vec<Result<()>> {
        let _ = detached;
        Vec::new()
    }

    /// [`Backend::write`] of one batch of `events` for the session
    /// `header` describes (with `materialize`, its log is created).
    fn append(&mut self, header: &Value, events: &[Arc<Event>], materialize: bool) -> Result<()> {
        let batch = Batch {
            header,
            events: Events::Slice(events),
            materialize,
            fork: None,
        };
        self.write(std::slice::from_ref(&batch))
            .pop()
            .unwrap_or(Ok(()))
    }

    /// The store has nothing more to write for session `id` for now (it
    /// was closed with nothing pending): a backend that holds a per-session
    /// writer lock may let it go. The default does nothing.
    fn release(&mut self, id: &str) {
        let _ = id;
    }

    /// Whether the backend has upkeep to do once the writer is idle (see
    /// [`Backend::idle`]). Asked after each round; the default has none.
    fn has_upkeep(&self) -> bool {
        false
    }

    /// The writer has nothing queued: deferred upkeep may run now, on the
    /// writer's thread (a JSONL log merges its small frames). Upkeep never
    /// fails what was written; the default does nothing.
    fn idle(&mut self) {}

    /// The backend's reads of part of a log, when it has them (windowed
    /// sessions). `None`, the default, makes a windowed open read the
    /// whole log and a read-back slice a whole load.
    fn range_reads(&mut self) -> Option<&mut dyn RangeReads> {
        None
    }

    /// Remove a stored session (its log and header). Returns whether
    /// anything was stored under `id`.
    fn delete(&mut self, id: &str) -> Result<bool>;

    /// Cut the torn tail at `torn.marker` (if any), then append `events`
    /// durably. `events` starts with the `torn.recovered` events (when
    /// there are any), followed by repair closers and the end-seed marker.
    /// What is cut is first copied into a quarantine file beside the log
    /// (made durable before the cut); the cut and its copy are returned.
    fn commit_repair(
        &mut self,
        header: &Value,
        torn: Option<&Torn>,
        events: &[Arc<Event>],
    ) -> Result<Option<Cut>>;

    /// The quarantine files kept beside the log of `id` (what earlier
    /// repairs cut), oldest first. The default has none.
    fn quarantined(&mut self, id: &str) -> Result<Vec<std::path::PathBuf>> {
        let _ = id;
        Ok(Vec::new())
    }
}

/// What a backend that can read part of a log offers beyond [`Backend`]
/// (found through [`Backend::range_reads`]): a streaming read for the
/// windowed open, and range reads for the events a windowed session
/// reads back.
pub trait RangeReads {
    /// Stream the stored events of `id` to `sink` in batches, in order,
    /// without holding the whole log (windowed open). `Ok(None)` when the
    /// session is absent, or its log
    /// needs the whole-log read (a torn or damaged tail): the caller then
    /// uses [`Backend::load`], which decides and reports. A sink error
    /// stops the read and is returned.
    fn load_streaming(
        &mut self,
        id: &str,
        sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
    ) -> Result<Option<Streamed>>;

    /// The stored events of `id` with seqs `from..to` (fewer when the log
    /// is shorter), read back for a windowed session.
    fn load_range(&mut self, id: &str, from: u64, to: u64) -> Result<Vec<Stored>>;

    /// For a progress display of the next streaming read of `id`: how
    /// long its log is, cheaply found before reading it, and a counter the
    /// read advances as it goes (from its own threads), reset here. `None`
    /// when the backend cannot tell, or `id` is absent; the default.
    fn progress(&mut self, id: &str) -> Option<ReadProgress> {
        let _ = id;
        None
    }
}

/// What [`ReadProgress`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressUnit {
    /// Events handed on (SQLite, PostgreSQL).
    Events,
    /// Bytes of the log file read (JSONL, whose event count is not known
    /// before the file is read).
    Bytes,
}

/// The length of a stored log and how far a streaming read of it has got
/// ([`RangeReads::progress`]).
#[derive(Debug, Clone)]
pub struct ReadProgress {
    /// What `total` and `done` count.
    pub unit: ProgressUnit,
    /// The whole log: its events (the last stored row's seq + 1, fewer
    /// when that row is a packed run) or the bytes of its file.
    pub total: u64,
    /// How far the read has got, in the same unit.
    pub done: Arc<AtomicU64>,
}

impl ReadProgress {
    /// How far the read has got.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
}

/// What a streaming read ([`RangeReads::load_streaming`]) ends with.
#[derive(Debug, Clone)]
pub struct Streamed {
    /// The header.
    pub header: Value,
    /// The revision of what was read.
    pub revision: String,
}

/// The events `from..to` of a whole loaded log (fewer when it is shorter).
pub fn slice_of(loaded: Option<Loaded>, from: u64, to: u64) -> Vec<Stored> {
    let Some(loaded) = loaded else {
        return Vec::new();
    };
    let len = loaded.events.len() as u64;
    let (a, b) = (from.min(len) as usize, to.min(len) as usize);
    loaded.events.into_iter().skip(a).take(b - a).collect()
}

/// The `id` of a header object.
pub fn header_id(header: &Value) -> &str {
    header
        .as_object()
        .and_then(|h| h.get("id"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// For test backends that wrap another (`self.$inner`) to change its
/// writes: a backend from outside the library ([`BackendKind::Other`])
/// whose listing, reads, delete and repair are the inner backend's.
#[cfg(test)]
macro_rules! wrapped_backend {
    ($inner:ident) => {
        fn kind(&self) -> $crate::store::backend::BackendKind {
            $crate::store::backend::BackendKind::Other
        }
        fn list(&mut self) -> $crate::error::Result<Vec<$crate::store::backend::Listed>> {
            self.$inner.list()
        }
        fn load(
            &mut self,
            id: &str,
        ) -> $crate::error::Result<Option<$crate::store::backend::Loaded>> {
            self.$inner.load(id)
        }
        fn revision(&mut self, id: &str) -> $crate::error::Result<Option<String>> {
            self.$inner.revision(id)
        }
        fn delete(&mut self, id: &str) -> $crate::error::Result<bool> {
            self.$inner.delete(id)
        }
        fn commit_repair(
            &mut self,
            header: &$crate::json::Value,
            torn: Option<&$crate::store::backend::Torn>,
            events: &[std::sync::Arc<$crate::engine::Event>],
        ) -> $crate::error::Result<Option<$crate::store::backend::Cut>> {
            self.$inner.commit_repair(header, torn, events)
        }
    };
}
#[cfg(test)]
pub(crate) use wrapped_backend;
