//! The store side of windowed sessions: an [`EventSource`] that reads a
//! session's stored events back through the backend.

use std::sync::{Arc, Weak};

use super::backend::Stored;
use super::restore::fast_event;
use super::writer::lock_backend;
use super::Store;
use crate::engine::window::EventSource;
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// Reads the events of one stored session back (see
/// [`Store::open_session_windowed`]).
#[derive(Debug)]
pub struct StoredEvents {
    store: Weak<Store>,
    id: String,
}

impl StoredEvents {
    /// A source over session `id` of `store`.
    pub fn new(store: &Arc<Store>, id: &str) -> StoredEvents {
        StoredEvents {
            store: Arc::downgrade(store),
            id: id.to_string(),
        }
    }

    fn read(&self, store: &Store, from: u64, to: u64) -> Result<Vec<Stored>> {
        let mut backend = lock_backend(&store.backend);
        match backend.range_reads() {
            Some(reads) => reads.load_range(&self.id, from, to),
            None => Ok(super::backend::slice_of(backend.load(&self.id)?, from, to)),
        }
    }
}

/// An engine event from a stored record read back: taken exactly as the
/// open took it ([`fast_event`]; a windowed session's log passed it).
pub(super) fn event_of(stored: Stored) -> Result<Arc<Event>> {
    fast_event(stored).map_err(|_| {
        Error::new(
            Status::Corrupt,
            Rule::WindowReloadMismatch,
            "an event read back from storage is not one the open accepted",
        )
    })
}

impl EventSource for StoredEvents {
    fn load(&self, from: u64, to: u64) -> Result<Vec<Arc<Event>>> {
        let store = self.store.upgrade().ok_or_else(|| {
            Error::new(
                Status::Closed,
                Rule::StoreClosed,
                "the store of this windowed session is closed",
            )
        })?;
        let mut got = self.read(&store, from, to)?;
        if (got.len() as u64) < to - from {
            // Events the writer still holds: make them durable, then read.
            store.writer().flush(&self.id)?;
            got = self.read(&store, from, to)?;
        }
        got.into_iter().map(event_of).collect()
    }
}

#[cfg(all(test, any(feature = "jsonl", feature = "sqlite")))]
mod tests;
