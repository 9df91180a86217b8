//! The writer's rounds: taking each session's pending batch (at most
//! [`ROUND_BYTES`] of text, in the background or for a flush), writing it
//! outside the queue lock and recording the result; and the background
//! thread's loop that runs a round once a batch window has passed or a
//! flush asks.

use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use super::pending::Taken;
use super::{check_continues, lock_backend, Shared, State};
use crate::engine::Event;
use crate::error::{Error, Result};
use crate::json::Value;
use crate::rule::Rule;
use crate::store::backend::{Batch, Events};

/// One session's batch taken from the queue.
struct Job {
    id: String,
    windowed: bool,
    header: Arc<Value>,
    materialized: bool,
    next_seq: u64,
    /// The parent and shared prefix of a fork child not written yet.
    fork: Option<(Arc<str>, u64)>,
    taken: Taken,
}

/// A [`Job`] whose events were taken out for the write.
struct Written {
    id: String,
    windowed: bool,
    header: Arc<Value>,
    materialized: bool,
    next_seq: u64,
    fork: Option<(Arc<str>, u64)>,
}

/// Text bytes one round takes from a session's queue, so a long backlog is
/// written in steps an append held back can wait for, and no single write
/// (one zstd frame on JSONL, one transaction on SQLite) holds a whole
/// backlog: a windowed read decodes a frame from its start.
pub const ROUND_BYTES: usize = 16 << 20;

/// How long backend upkeep waits for a moment with nothing queued before
/// it runs between two rounds anyway.
const UPKEEP_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Write every pending batch (of `only`, or of all sessions) once, each at
/// most [`ROUND_BYTES`] of text (or one longer event).
pub(super) fn write_round(
    shared: &Shared,
    mut st: MutexGuard<'_, State>,
    only: Option<&str>,
) -> Result<()> {
    let mut jobs = Vec::new();
    let round = st.round_ids + 1;
    for (id, p) in st.sessions.iter_mut() {
        if !p.is_writable() || only.is_some_and(|o| o != id) {
            continue;
        }
        let Some(header) = p.header.clone() else {
            continue;
        };
        let taken = p.take(ROUND_BYTES);
        p.in_flight = true;
        p.round = round;
        jobs.push(Job {
            id: id.clone(),
            windowed: p.windowed,
            header,
            materialized: p.materialized,
            next_seq: p.next_seq,
            fork: p.fork.clone().filter(|(_, prefix)| p.next_seq < *prefix),
            taken,
        });
    }
    if jobs.is_empty() {
        // Flushes that waited for this round (one being gathered) try
        // again: no round end will wake them.
        let wake = std::mem::take(&mut st.slot_waiters);
        drop(st);
        wake.iter().for_each(std::thread::Thread::unpark);
        return Ok(());
    }
    st.rounds += 1;
    st.round_ids = round;
    let (started, sessions) = (Instant::now(), jobs.len());
    drop(st);
    // Outside the queue lock: each batch becomes one slice, then all of
    // them are written in one backend write (a group commit: the backend
    // shares their durable work).
    let taken: Vec<(Written, usize, Vec<Arc<Event>>)> = jobs
        .into_iter()
        .map(|job| {
            let bytes = job.taken.bytes;
            let events = job.taken.into_batch();
            let written = Written {
                id: job.id,
                windowed: job.windowed,
                header: job.header,
                materialized: job.materialized,
                next_seq: job.next_seq,
                fork: job.fork,
            };
            (written, bytes, events)
        })
        .collect();
    let checked: Vec<Result<()>> = taken
        .iter()
        .map(|(job, _, events)| check_continues(&job.id, job.next_seq, events))
        .collect();
    let batches: Vec<Batch<'_>> = taken
        .iter()
        .zip(&checked)
        .filter(|(_, c)| c.is_ok())
        .map(|((job, _, events), _)| Batch {
            header: &job.header,
            events: Events::Slice(events),
            materialize: !job.materialized,
            fork: job
                .fork
                .as_ref()
                .map(|(parent, prefix)| (&**parent, *prefix)),
        })
        .collect();
    let (mut written_results, upkeep) = write_batches(shared, &batches);
    drop(batches);
    let mut results = Vec::with_capacity(taken.len());
    for ((job, bytes, events), check) in taken.into_iter().zip(checked) {
        let r = match check {
            Ok(()) => written_results.next().unwrap_or_else(|| Err(no_result())),
            Err(e) => Err(e),
        };
        results.push((job.id, job.windowed, events, bytes, r));
    }
    let mut written = Vec::with_capacity(results.len());
    let mut st = shared.lock();
    st.rounds -= 1;
    let ended = Instant::now();
    st.last_round = super::gather::LastRound {
        id: round,
        sessions,
        ended: Some(ended),
        took: ended - started,
    };
    if upkeep && st.upkeep.is_none() {
        // The writer's thread does it once nothing is queued (this round
        // may have been a flushing thread's), or after UPKEEP_WAIT when
        // appends never stop.
        st.upkeep = Some(Instant::now() + UPKEEP_WAIT);
        shared.wake.notify_all();
    }
    let mut first_error = None;
    // The flushes this round's end may let go on: those waiting for its
    // sessions, and those waiting for a round to start one of their own.
    let mut wake = std::mem::take(&mut st.slot_waiters);
    for (id, windowed, events, bytes, r) in results {
        let n = events.len();
        let Some(p) = st.sessions.get_mut(&id) else {
            // Discarded while the round ran: nothing to record.
            st.unqueued(n, bytes, windowed);
            continue;
        };
        p.in_flight = false;
        wake.append(&mut p.waiters);
        match r {
            Ok(()) => {
                p.materialized = true;
                p.next_seq += n as u64;
                p.durable += n as u64;
                p.failure = None;
                let windowed = p.windowed;
                st.unqueued(n, bytes, windowed);
                st.failing = false;
                written.push(events);
            }
            Err(e) => {
                p.put_back(events);
                p.failure = Some(e.clone());
                p.failures += 1;
                st.paused = true;
                st.failing = true;
                first_error.get_or_insert(e);
            }
        }
    }
    if st.pending == 0 {
        // Everything queued is written: the next event opens a window of
        // its own, however long ago the last one opened.
        st.deadline = None;
    }
    shared.notify_done(&st);
    drop(st);
    shared.relay.wake(wake);
    // Releasing the written events touches every one of them: not under
    // the lock appends take.
    drop(written);
    first_error.map_or(Ok(()), Err)
}

/// Write `batches` in one backend write: detached when the backend
/// detaches it (the backend is not held while it runs, so rounds
/// overlap), else with the backend held throughout. The results, and
/// whether the backend has upkeep to do.
fn write_batches(shared: &Shared, batches: &[Batch<'_>]) -> (std::vec::IntoIter<Result<()>>, bool) {
    let mut backend = lock_backend(&shared.backend);
    let Some(mut detached) = backend.prepare_write(batches) else {
        let results = backend.write(batches);
        return (results.into_iter(), backend.has_upkeep());
    };
    drop(backend);
    detached.run();
    let mut backend = lock_backend(&shared.backend);
    let results = backend.finish_write(detached);
    (results.into_iter(), backend.has_upkeep())
}

/// A backend gave no result for a batch: counted as a failed write, so
/// nothing unconfirmed is ever acknowledged.
pub(super) fn no_result() -> Error {
    Error::new(
        crate::Status::Internal,
        Rule::InternalNoResult,
        "the backend gave no result for a batch; it is kept queued",
    )
}

pub(super) fn run(shared: &Shared) {
    let mut st = shared.lock();
    loop {
        if st.stop {
            return;
        }
        let upkeep_due = st
            .upkeep
            .is_some_and(|at| st.pending == 0 || Instant::now() >= at);
        if upkeep_due && st.rounds == 0 {
            st.upkeep = None;
            drop(st);
            lock_backend(&shared.backend).idle();
            st = shared.lock();
            continue;
        }
        let due = st.urgent || st.deadline.is_some_and(|d| Instant::now() >= d);
        if due && (st.gathering || st.rounds > 0 && !(st.can_start(shared) && st.writable(None))) {
            // Other rounds (a flushing thread's) are writing all there is,
            // or no other may start, or a flush is gathering one.
            st = shared.wait_done(st);
            continue;
        }
        if due && !st.paused {
            if st.urgent {
                // A flush is waiting: gather its round as a flush does.
                st = shared.gather(st);
                if !st.can_start(shared) {
                    continue;
                }
            }
            st.urgent = false;
            st.deadline = None;
            let took_all = !st.sessions.values().any(|p| p.queued_bytes() > ROUND_BYTES);
            let _ = write_round(shared, st, None);
            st = shared.lock();
            if st.sessions.values().any(|p| !p.is_empty()) && !st.paused {
                if !took_all {
                    // A backlog left by a bounded round: its window is over.
                    st.deadline = Some(Instant::now());
                } else if st.deadline.is_none() {
                    st.deadline = Some(Instant::now() + shared.window);
                }
            }
            continue;
        }
        if due && st.paused {
            // Reported to whoever flushes; wait for new work or a flush.
            st.urgent = false;
            st.deadline = None;
            shared.notify_done(&st);
        }
        st = match st.deadline {
            Some(d) if !st.paused => {
                let timeout = d.saturating_duration_since(Instant::now());
                shared
                    .wake
                    .wait_timeout(st, timeout)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
            _ => shared.wake.wait(st).unwrap_or_else(|p| p.into_inner()),
        };
    }
}
