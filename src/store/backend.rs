//! The storage backend trait: one interface in front of memory, JSONL and
//! SQLite. Backends only store and return what the engine accepted; they
//! never re-check an engine rule.

use std::sync::Arc;

use crate::engine::Event;
use crate::error::Result;
use crate::json::Value;

/// A stored session as read back.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The session header.
    pub header: Value,
    /// The whole log.
    pub events: Vec<Arc<Event>>,
    /// The revision token (changes exactly when the log changes).
    pub revision: u64,
}

/// One row of `list`.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The session header.
    pub header: Value,
    /// The number of stored events.
    pub length: u64,
    /// The revision token.
    pub revision: u64,
}

/// A place where session logs live.
pub trait Backend: Send {
    /// `"memory"`, `"jsonl"` or `"sqlite"`.
    fn name(&self) -> &'static str;

    /// Store a new session: its header and its initial events (a seed).
    /// Refuses an id that is already stored (`persist.exists-stored`).
    fn create(&mut self, id: &str, header: &Value, events: &[Arc<Event>]) -> Result<()>;

    /// Append events that continue the stored log exactly
    /// (`persist.append-seq-mismatch` otherwise; nothing is written then).
    fn append(&mut self, id: &str, events: &[Arc<Event>]) -> Result<()>;

    /// Read a stored session, or `None` when the id is unknown.
    fn load(&mut self, id: &str) -> Result<Option<Stored>>;

    /// Every stored session.
    fn list(&mut self) -> Result<Vec<Listed>>;

    /// Make everything appended so far durable.
    fn flush(&mut self) -> Result<()>;
}
