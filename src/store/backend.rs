//! The storage backend trait: one interface in front of memory, JSONL and
//! SQLite (persistence.md §3.1). Backends store and return what the engine
//! accepted; they never re-check an engine rule. Every method that writes
//! returns only when the write is durable.

use std::sync::Arc;

use crate::engine::Event;
use crate::error::Result;
use crate::json::Value;

/// A torn tail found by a read, to be cut by [`Backend::commit_repair`].
#[derive(Debug, Clone, PartialEq)]
pub struct Torn {
    /// Where the committed region ends: a byte offset (JSONL) or the seq of
    /// the first bad row (SQLite). Opaque to the store.
    pub marker: u64,
    /// How many events at the end of [`Loaded::events`] were decoded from
    /// the torn part (a torn zstd frame's readable prefix) and must be
    /// written again after the cut; usually 0.
    pub recovered: usize,
}

/// A stored session as read back.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The session header (events.md §8 key order), as stored.
    pub header: Value,
    /// The events of the valid, contiguous prefix (seq 0, 1, …) as JSON
    /// objects in their stored key order. Not lossless-checked (restore mode).
    pub events: Vec<Value>,
    /// A torn tail after that prefix, if any.
    pub torn: Option<Torn>,
    /// The revision token (changes exactly when the stored log changes).
    pub revision: String,
}

/// One row of `list`.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The session header.
    pub header: Value,
    /// The revision token.
    pub revision: String,
}

/// A place where session logs live.
pub trait Backend: Send {
    /// `"memory"`, `"jsonl"` or `"sqlite"`.
    fn name(&self) -> &'static str;

    /// Every materialized session (a created-but-never-appended one is absent).
    fn list(&mut self) -> Result<Vec<Listed>>;

    /// Read a stored session, or `None` when nothing is stored under `id`.
    fn load(&mut self, id: &str) -> Result<Option<Loaded>>;

    /// The current revision of `id`, or `None` when nothing is stored.
    fn revision(&mut self, id: &str) -> Result<Option<String>>;

    /// Append `events` (non-empty, continuing the stored log) to the log of
    /// the session `header` describes. With `materialize` the log does not
    /// exist yet: create it with the header and these events atomically.
    /// Durable when it returns; on failure nothing is stored.
    fn append(&mut self, header: &Value, events: &[Arc<Event>], materialize: bool) -> Result<()>;

    /// Remove a stored session (its log and header). Returns whether
    /// anything was stored under `id`.
    fn delete(&mut self, id: &str) -> Result<bool>;

    /// Cut the torn tail at `torn.marker` (if any), then append `events`
    /// durably. `events` starts with the `torn.recovered` events (when
    /// there are any), followed by repair closers and the end-seed marker.
    fn commit_repair(
        &mut self,
        header: &Value,
        torn: Option<&Torn>,
        events: &[Arc<Event>],
    ) -> Result<()>;
}

/// The `id` of a header object.
pub fn header_id(header: &Value) -> &str {
    header
        .as_object()
        .and_then(|h| h.get("id"))
        .and_then(Value::as_str)
        .unwrap_or("")
}
