//! Writing: one session's batch by the guarded insert that continues its
//! stored log exactly, and a round of several sessions' plain appends in
//! one transaction (a group commit).

use std::collections::HashSet;
use std::sync::Arc;

use super::{header_id, rows, Known, PostgresBackend};
use crate::engine::Event;
use crate::error::Result;
use crate::json::Value;
use crate::rule::Rule;
use crate::store::backend::{Backend, Batch};

impl PostgresBackend {
    /// Write `events` (continuing the stored log) of session `id`; with
    /// `materialize`, create its row first. Events below `copy.1` are
    /// copied from the session `copy.0` inside the database.
    pub(super) fn write_batch(
        &mut self,
        header: &Value,
        events: &[Arc<Event>],
        materialize: bool,
        copy: Option<(&str, u64)>,
    ) -> Result<()> {
        self.writable("append")?;
        if events.is_empty() {
            return Ok(());
        }
        let id = header_id(header).to_string();
        self.lock(&id)?;
        let copy = copy.filter(|(parent, len)| {
            self.known
                .get(*parent)
                .is_some_and(|k| k.len >= *len && events[0].seq < *len)
        });
        let incarnation = match self.retry_incarnation.get(&id) {
            _ if !materialize => String::new(),
            Some(i) => i.clone(),
            None => crate::store::uuid::new_uuid()?,
        };
        let parent = copy.map(|(p, len)| (p, len, self.known[p].incarnation.clone()));
        let suspect = self.suspect.contains(&id);
        let r = self.client().and_then(|(c, p)| {
            rows::write_batch(
                c,
                p,
                rows::Batch {
                    id: &id,
                    header,
                    events,
                    incarnation: materialize.then_some(incarnation.as_str()),
                    parent: parent.as_ref().map(|(p, l, i)| (*p, *l, i.as_str())),
                    suspect,
                },
            )
        });
        match self.check(r) {
            Ok(()) => {
                self.suspect.remove(&id);
                let len = events[0].seq + events.len() as u64;
                if materialize {
                    self.retry_incarnation.remove(&id);
                    self.known.insert(id, Known { incarnation, len });
                } else if let Some(k) = self.known.get_mut(&id) {
                    k.len = len;
                }
                Ok(())
            }
            Err(e) => {
                if materialize {
                    // A retry of this creation must find its own row.
                    self.retry_incarnation.insert(id.clone(), incarnation);
                }
                match e.rule {
                    // The commit may have happened unseen: the next try
                    // checks the stored rows.
                    Rule::PostgresConnect | Rule::PostgresTimeout => {
                        self.suspect.insert(id);
                    }
                    // A stale writer never writes this session again:
                    // it lets the writer that moved it on have it.
                    Rule::PostgresAppendSeqMismatch | Rule::PostgresSessionMissing => {
                        self.release(&id);
                    }
                    _ => {}
                }
                Err(e)
            }
        }
    }

    /// Write a round of plain appends of several sessions in one
    /// transaction (a group commit). `None` when the round does not
    /// qualify (one batch, a creation or fork, a session whose last write
    /// is in doubt, a lock not yet held and refused) or when the
    /// transaction rolled back: the batches are then written one by one,
    /// which reports each batch's own outcome.
    pub(super) fn write_group(&mut self, batches: &[Batch<'_>]) -> Option<Vec<Result<()>>> {
        if batches.len() < 2 || self.read_only {
            return None;
        }
        let mut ids = HashSet::new();
        for b in batches {
            let id = header_id(b.header);
            if b.materialize
                || b.fork.is_some()
                || b.events.is_empty()
                || self.suspect.contains(id)
                || !ids.insert(id)
            {
                return None;
            }
        }
        for b in batches {
            self.lock(header_id(b.header)).ok()?;
        }
        let slices: Vec<_> = batches.iter().map(|b| b.events.to_slice()).collect();
        let items: Vec<(&str, &[Arc<Event>])> = batches
            .iter()
            .zip(&slices)
            .map(|(b, e)| (header_id(b.header), &e[..]))
            .collect();
        let r = self
            .client()
            .and_then(|(c, p)| rows::write_group(c, p, &items));
        match self.check(r) {
            Ok(()) => {
                for (id, events) in &items {
                    if let Some(k) = self.known.get_mut(*id) {
                        k.len = events[0].seq + events.len() as u64;
                    }
                }
                Some(items.iter().map(|_| Ok(())).collect())
            }
            Err(e) if matches!(e.rule, Rule::PostgresConnect | Rule::PostgresTimeout) => {
                // The commit may have happened unseen: every batch is in
                // doubt, and the next try of each checks the stored rows.
                for (id, _) in &items {
                    self.suspect.insert((*id).to_string());
                }
                Some(items.iter().map(|_| Err(e.clone())).collect())
            }
            Err(_) => None,
        }
    }
}
