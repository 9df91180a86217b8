//! The memory backend: sessions live as long as the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::backend::{Backend, Listed, Stored};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::Value;

/// Sessions kept in memory (events are shared with the live sessions, not copied).
#[derive(Debug, Default)]
pub struct MemoryBackend {
    sessions: BTreeMap<String, Stored>,
}

impl MemoryBackend {
    /// An empty memory backend.
    pub fn new() -> MemoryBackend {
        MemoryBackend::default()
    }
}

impl Backend for MemoryBackend {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn create(&mut self, id: &str, header: &Value, events: &[Arc<Event>]) -> Result<()> {
        if self.sessions.contains_key(id) {
            return Err(Error::new(
                Status::Conflict,
                "persist.exists-stored",
                format!("session \"{id}\" already has a persisted log; open it instead"),
            ));
        }
        check_contiguous(id, 0, events)?;
        self.sessions.insert(
            id.to_string(),
            Stored {
                header: header.clone(),
                events: events.to_vec(),
                revision: 0,
            },
        );
        Ok(())
    }

    fn append(&mut self, id: &str, events: &[Arc<Event>]) -> Result<()> {
        let stored = self.sessions.get_mut(id).ok_or_else(|| {
            Error::new(
                Status::NotFound,
                "load.not-found",
                format!("session \"{id}\" not found"),
            )
        })?;
        check_contiguous(id, stored.events.len() as u64, events)?;
        stored.events.extend_from_slice(events);
        stored.revision += 1;
        Ok(())
    }

    fn load(&mut self, id: &str) -> Result<Option<Stored>> {
        Ok(self.sessions.get(id).cloned())
    }

    fn list(&mut self) -> Result<Vec<Listed>> {
        Ok(self
            .sessions
            .values()
            .map(|s| Listed {
                header: s.header.clone(),
                length: s.events.len() as u64,
                revision: s.revision,
            })
            .collect())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// `persist.append-seq-mismatch`: a batch must continue the stored log at `next`.
pub fn check_contiguous(id: &str, next: u64, events: &[Arc<Event>]) -> Result<()> {
    for (i, e) in events.iter().enumerate() {
        if e.seq != next + i as u64 {
            return Err(Error::new(
                Status::Conflict,
                "persist.append-seq-mismatch",
                format!(
                    "append seq mismatch for \"{id}\": expected {} at index {i}, got {}",
                    next + i as u64,
                    e.seq
                ),
            ));
        }
    }
    Ok(())
}
