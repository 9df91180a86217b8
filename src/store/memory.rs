//! The memory backend: sessions live as long as the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::backend::{
    header_id, Backend, Batch, Cut, Events, Listed, Loaded, Stored as StoredEvent, Torn,
};
use super::seqs::{check_contiguous, check_log_ends};
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

    /// The seq an append to `header`'s session continues at: 0 for a new
    /// log (`materialize`, which must not exist yet), else the stored
    /// length. Checks only; nothing changes.
    fn next_seq(&self, header: &Value, materialize: bool) -> Result<u64> {
        let id = header_id(header);
        match (materialize, self.sessions.get(id)) {
            (true, None) => Ok(0),
            (true, Some(_)) => Err(Error::new(
                Status::Conflict,
                Rule::PersistExistsStored,
                format!("session \"{id}\" already has a persisted log; open it instead"),
            )),
            (false, Some(s)) => Ok(s.events.len() as u64),
            (false, None) => Err(Error::new(
                Status::NotFound,
                Rule::LoadNotFound,
                format!("session \"{id}\" not found"),
            )),
        }
    }

    /// The stored session `header` names, made for a new log, its revision
    /// moved on. Call after [`MemoryBackend::next_seq`] passed.
    fn stored(&mut self, header: &Value, materialize: bool) -> &mut Stored {
        let id = header_id(header).to_string();
        let stored = self.sessions.entry(id).or_insert_with(|| Stored {
            header: header.clone(),
            events: Log::new(),
            revision: 0,
        });
        if materialize {
            stored.header = header.clone();
        }
        stored.revision += 1;
        stored
    }
}

impl MemoryBackend {
    fn write_one(&mut self, b: &Batch<'_>) -> Result<()> {
        let next = self.next_seq(b.header, b.materialize)?;
        let id = header_id(b.header);
        match b.events {
            Events::Slice(events) => {
                check_contiguous(id, next, events)?;
                self.stored(b.header, b.materialize)
                    .events
                    .extend(events.iter().cloned());
            }
            Events::Log(log) => {
                check_log_ends(id, next, log)?;
                let stored = self.stored(b.header, b.materialize);
                if stored.events.is_empty() {
                    stored.events = log.clone();
                } else {
                    stored.events.extend(log.iter());
                }
            }
        }
        Ok(())
    }
}

impl Backend for MemoryBackend {
    fn kind(&self) -> crate::store::backend::BackendKind {
        crate::store::backend::BackendKind::Memory
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
            events: (0..s.events.len())
                .filter_map(|i| s.events.text(i))
                .map(|text| StoredEvent::Canonical(text.into()))
                .collect(),
            torn: None,
            revision: s.revision.to_string(),
        }))
    }

    fn revision(&mut self, id: &str) -> Result<Option<String>> {
        Ok(self.sessions.get(id).map(|s| s.revision.to_string()))
    }

    /// Keeps the events themselves: the log packs them as the session's
    /// log does, and a sealed chunk is shared with it, not packed twice; a
    /// whole log handed over (a seed, a fork's) shares its chunks.
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        batches.iter().map(|b| self.write_one(b)).collect()
    }

    fn delete(&mut self, id: &str) -> Result<bool> {
        Ok(self.sessions.remove(id).is_some())
    }

    fn commit_repair(
        &mut self,
        header: &Value,
        _torn: Option<&Torn>,
        events: &[Arc<Event>],
    ) -> Result<Option<Cut>> {
        if !events.is_empty() {
            self.append(header, events, false)?;
        }
        Ok(None)
    }
}
