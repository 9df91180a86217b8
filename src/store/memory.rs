//! The memory backend: sessions live as long as the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::backend::{header_id, Backend, Listed, Loaded, Stored as StoredEvent, Torn};
use super::seqs::check_log_ends;
use crate::engine::session::Log;
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;

#[derive(Debug)]
struct Stored {
    header: Value,
    events: Log,
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
                problem: None,
            })
            .collect())
    }

    fn load(&mut self, id: &str) -> Result<Option<Loaded>> {
        Ok(self.sessions.get(id).map(|s| Loaded {
            header: s.header.clone(),
            events: s
                .events
                .iter()
                .map(|e| StoredEvent::Canonical(e.text().into()))
                .collect(),
            torn: None,
            revision: s.revision.to_string(),
        }))
    }

    fn revision(&mut self, id: &str) -> Result<Option<String>> {
        Ok(self.sessions.get(id).map(|s| s.revision.to_string()))
    }

    fn append(&mut self, header: &Value, events: &[Arc<Event>], materialize: bool) -> Result<()> {
        self.append_log(header, &Log::from(events.to_vec()), materialize)
    }

    /// Shares the chunks of `events` (a fork's seed is not copied).
    fn append_log(&mut self, header: &Value, events: &Log, materialize: bool) -> Result<()> {
        let id = header_id(header);
        if materialize {
            if self.sessions.contains_key(id) {
                return Err(Error::new(
                    Status::Conflict,
                    Rule::PersistExistsStored,
                    format!("session \"{id}\" already has a persisted log; open it instead"),
                ));
            }
            check_log_ends(id, 0, events)?;
            self.sessions.insert(
                id.to_string(),
                Stored {
                    header: header.clone(),
                    events: events.clone(),
                    revision: 1,
                },
            );
            return Ok(());
        }
        let stored = self.sessions.get_mut(id).ok_or_else(|| {
            Error::new(
                Status::NotFound,
                Rule::LoadNotFound,
                format!("session \"{id}\" not found"),
            )
        })?;
        check_log_ends(id, stored.events.len() as u64, events)?;
        stored.events.extend(events.iter().cloned());
        stored.revision += 1;
        Ok(())
    }

    /// The parent's events are shared anyway: as [`Backend::append_log`].
    fn append_fork_log(
        &mut self,
        header: &Value,
        events: &Log,
        materialize: bool,
        _parent: &str,
        _prefix: u64,
    ) -> Result<()> {
        self.append_log(header, events, materialize)
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
