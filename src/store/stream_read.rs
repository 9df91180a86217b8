//! A stored session read a batch at a time outside a [`super::Store`]:
//! the windowed open's streaming path over a backend its caller holds
//! (the command-line tool's reading commands, which never write). The log
//! streams through the same checks, admission, fold and crash-repair
//! planning as an open, keeping only a window of it resident; evicted
//! events are read back through the backend when a later call needs them.

use std::sync::Arc;

use super::backend::{slice_of, ReadProgress, Stored};
use super::now_ms;
use super::restore::{check_before_repair, check_stored_header};
use super::window::event_of;
use super::writer::{lock_backend, SharedBackend};
use crate::engine::session::Restoring;
use crate::engine::window::EventSource;
use crate::engine::{upgrade, Event, Markers, Policy, Session};
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;

/// Reads the stored events of one session back through a shared backend
/// (the [`EventSource`] of a session [`read_streaming`] returns).
pub struct BackendEvents {
    backend: SharedBackend,
    id: String,
}

impl std::fmt::Debug for BackendEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendEvents")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl BackendEvents {
    /// A source over session `id` of `backend`.
    pub fn new(backend: SharedBackend, id: &str) -> BackendEvents {
        BackendEvents {
            backend,
            id: id.to_string(),
        }
    }
}

impl EventSource for BackendEvents {
    fn load(&self, from: u64, to: u64) -> Result<Vec<Arc<Event>>> {
        let mut backend = lock_backend(&self.backend);
        let got = match backend.range_reads() {
            Some(reads) => reads.load_range(&self.id, from, to)?,
            None => slice_of(backend.load(&self.id)?, from, to),
        };
        got.into_iter().map(event_of).collect()
    }
}

/// A session [`read_streaming`] read.
#[derive(Debug)]
pub struct StreamedRead {
    /// The stored header.
    pub header: Value,
    /// The revision of what was read.
    pub revision: String,
    /// The session, windowed: the stored events, then (in memory only)
    /// the closers crash repair would append and the end-seed marker.
    pub session: Session,
    /// The closers crash repair would append.
    pub closers: Vec<Arc<Event>>,
    /// How many events were read from storage.
    pub stored: usize,
}

/// A streaming read that could not go on: the caller reads the whole log.
fn not_streamable(why: &str) -> Error {
    Error::new(Status::Internal, Rule::OpenNotStreamable, why)
}

/// Read session `id` of `backend` a batch at a time, keeping about the
/// last `keep` events resident (whole chunks of the log), as the
/// windowed open of a store does; `each` sees every batch of stored
/// events once it was admitted and folded. Nothing is written.
///
/// `Ok(None)` when the log needs the whole-log read (the session is
/// absent, the backend cannot stream, the log has a torn or damaged tail,
/// an event in an older format or of a type outside the policy's vocabulary, breaks a
/// rule, or ends in a turn whose closers a reread would refuse): the
/// caller then reads it whole (the store's `restore` and friends), which
/// decides and reports exactly as an open. `each` may have seen batches
/// by then.
pub fn read_streaming(
    backend: &SharedBackend,
    id: &str,
    policy: &Policy,
    keep: usize,
    each: &mut dyn FnMut(&[Arc<Event>]),
) -> Result<Option<StreamedRead>> {
    let source: Arc<dyn EventSource> = Arc::new(BackendEvents::new(backend.clone(), id));
    let start = |header: &Value| -> Result<Restoring> {
        check_stored_header(id, header)?;
        let mut r = Session::restoring(id, header.clone(), Markers::Required, policy.clone())?;
        r.set_window(source.clone(), keep);
        Ok(r)
    };
    let mut restoring: Option<Restoring> = None;
    let mut sink = |header: &Value, batch: Vec<Stored>| -> Result<()> {
        let r = match &mut restoring {
            Some(r) => r,
            None => restoring.insert(start(header)?),
        };
        let mut events = Vec::with_capacity(batch.len());
        for item in batch {
            let e = fast_event_or_stop(item)?;
            upgrade::check_known_types(id, std::iter::once(&*e), &policy.vocabulary)?;
            r.push(e.clone())?;
            events.push(e);
        }
        each(&events);
        drop(events);
        r.evict_old();
        Ok(())
    };
    let streamed = {
        let mut b = lock_backend(backend);
        match b.range_reads() {
            Some(reads) => reads.load_streaming(id, &mut sink),
            None => return Ok(None),
        }
    };
    // Anything that stopped the read is for the whole-log read to report.
    let Ok(Some(streamed)) = streamed else {
        return Ok(None);
    };
    let restoring = match restoring {
        Some(r) => r,
        None => match start(&streamed.header) {
            Ok(r) => r,
            Err(_) => return Ok(None),
        },
    };
    let stored = restoring.len();
    let Ok((mut session, closers)) = restoring.finish(now_ms()) else {
        return Ok(None);
    };
    if check_before_repair(id, &closers).is_err() {
        return Ok(None);
    }
    session.evict_old();
    Ok(Some(StreamedRead {
        header: streamed.header,
        revision: streamed.revision,
        session,
        closers,
        stored,
    }))
}

/// A stored event as the restore's fast path takes it, or the error that
/// stops a streaming read (an older format is for the whole-log read).
fn fast_event_or_stop(item: Stored) -> Result<Arc<Event>> {
    super::restore::fast_event(item).map_err(|_| not_streamable("an older format"))
}

/// [`super::RangeReads::progress`] of session `id`, when the backend has
/// range reads and can tell.
pub fn read_progress(backend: &SharedBackend, id: &str) -> Option<ReadProgress> {
    lock_backend(backend).range_reads()?.progress(id)
}

// The tests read the same sessions through SQLite and JSONL.
#[cfg(all(test, feature = "sqlite", feature = "jsonl"))]
mod tests;
