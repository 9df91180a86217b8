//! The memory backend: sessions live as long as the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::backend::{header_id, Backend, Listed, Loaded, Torn};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::Value;

#[derive(Debug)]
struct Stored {
    header: Value,
    events: Vec<Arc<Event>>,
    revision: u64,
}

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

    fn list(&mut self) -> Result<Vec<Listed>> {
        Ok(self
            .sessions
            .values()
            .map(|s| Listed {
                header: s.header.clone(),
                revision: s.revision.to_string(),
            })
            .collect())
    }

    fn load(&mut self, id: &str) -> Result<Option<Loaded>> {
        Ok(self.sessions.get(id).map(|s| Loaded {
            header: s.header.clone(),
            events: s.events.iter().map(|e| e.to_value()).collect(),
            torn: None,
            revision: s.revision.to_string(),
        }))
    }

    fn revision(&mut self, id: &str) -> Result<Option<String>> {
        Ok(self.sessions.get(id).map(|s| s.revision.to_string()))
    }

    fn append(&mut self, header: &Value, events: &[Arc<Event>], materialize: bool) -> Result<()> {
        let id = header_id(header);
        if materialize {
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
                    revision: 1,
                },
            );
            return Ok(());
        }
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

    fn delete(&mut self, id: &str) -> Result<bool> {
        Ok(self.sessions.remove(id).is_some())
    }

    fn commit_repair(
        &mut self,
        header: &Value,
        _torn: Option<&Torn>,
        events: &[Arc<Event>],
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.append(header, events, false)
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
