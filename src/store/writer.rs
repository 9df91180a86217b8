//! Write-behind (docs/formats.md §2): appends hand their events to a queue
//! and return; a background thread writes each session's pending events as
//! one batch once the batch window has passed. `flush` is the durability
//! barrier. A failed write keeps its events (in order) for the next try and
//! pauses automatic writing until the next append or flush.
//!
//! When the writer may start a round, a flush writes its session's events
//! on the flushing thread itself (waking the writer and waiting for its
//! answer would add two thread hand-offs to the barrier); otherwise it
//! waits for the round in progress. A round takes the batch of every
//! session with one (a group commit). On a backend that detaches its
//! writes ([`Backend::detaches_writes`]: a log file per session), rounds
//! overlap, up to [`MAX_ROUNDS`], and a flush's round takes its own
//! session only (a session is in one round at a time, so its batches stay
//! in order); elsewhere one round runs at a time.
//!
//! Appends never wait for the disk: the append path only takes the queue
//! lock to push `Arc`s. The writer holds that lock just long enough to take
//! the queued events (O(1) per session, or O(the batch) for a bounded
//! round; never O(the backlog): see `pending.rs`) and, after writing, to
//! record the result; serializing, compressing, fsyncing and dropping
//! written batches all happen outside it.
//!
//! Memory is bounded. When more than [`HIGH_WATER_EVENTS`] events are
//! pending while the last write failed (a stalled disk), the next append
//! first waits until everything is written and is refused, changing
//! nothing, if that write fails. On a working disk a backlog of a resident
//! session is the session's own events (shared, not copied): it costs the
//! queue 16 bytes an event, and an append never waits for it, as in the
//! reference, which has no cap at all. A windowed session evicts old
//! events, so its pending events may be held by the queue alone: when
//! windowed sessions' pending events hold more than [`HIGH_WATER_BYTES`]
//! of text, an append waits for the writer's next round only. Rounds take
//! at most [`ROUND_BYTES`] of a session's backlog, so such a wait is one
//! bounded write.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::backend::{Backend, Batch as BackendBatch, Events, Precompute};
pub use super::hurry::Hurry;
use crate::engine::session::Log;
use crate::engine::Event;
use crate::error::{Error, Result};
use crate::json::Value;

mod barrier;
mod gather;
mod pending;
mod precompute;
mod relay;
mod round;

use pending::Pending;

use crate::rule::Rule;
use round::run;
pub use round::ROUND_BYTES;

/// Pending events above which an append waits for a disk whose last
/// write failed.
pub const HIGH_WATER_EVENTS: usize = 100_000;

/// Bytes of pending text of windowed sessions above which an append
/// waits for the writer's next round.
pub const HIGH_WATER_BYTES: usize = 512 << 20;

/// Rounds in flight at once, at most, on a backend that detaches its
/// writes.
pub const MAX_ROUNDS: usize = 64;

/// The backend, shared by the writer thread and the store's reads.
pub type SharedBackend = Arc<Mutex<Box<dyn Backend>>>;

/// Lock the shared backend (a panic inside a backend leaves no broken
/// invariant the next call could trip over: every write is a transaction).
pub fn lock_backend(b: &SharedBackend) -> MutexGuard<'_, Box<dyn Backend>> {
    b.lock().unwrap_or_else(|p| p.into_inner())
}

struct State {
    sessions: HashMap<String, Pending>,
    /// Events queued and not yet written, and the bytes of their text.
    pending: usize,
    pending_bytes: usize,
    /// The part of `pending_bytes` queued for windowed sessions: the only
    /// pending text the queue alone may be keeping in memory.
    windowed_bytes: usize,
    /// The last write failed (cleared by the next successful one).
    failing: bool,
    /// When the current window closes (None: nothing scheduled).
    deadline: Option<Instant>,
    /// A flush wants everything written now.
    urgent: bool,
    paused: bool,
    stop: bool,
    /// Rounds in flight.
    rounds: usize,
    /// Threads waiting on [`Shared::done`]: a notify without one would
    /// still cost a system call on every synchronous write.
    done_waiters: usize,
    /// Flushing threads waiting for a round to end so that they may start
    /// one (their own sessions are in no round): woken by the end of any
    /// round. A flush whose session is in a round waits in its
    /// [`Pending::waiters`] instead, so that with many sessions a round's
    /// end wakes only the threads it concerns.
    slot_waiters: Vec<std::thread::Thread>,
    /// The backend has upkeep for the writer's next idle moment
    /// ([`Backend::has_upkeep`]), due by this time at the latest.
    upkeep: Option<Instant>,
    /// Rounds started so far (each round's number).
    round_ids: u64,
    /// The last round that ended (see `gather.rs`).
    last_round: gather::LastRound,
    /// A flush is gathering the next round: nobody else starts one.
    gathering: bool,
}

impl State {
    /// The queue of `id`, created if missing (without allocating a key
    /// when it exists).
    fn session(&mut self, id: &str) -> &mut Pending {
        if !self.sessions.contains_key(id) {
            self.sessions.insert(id.to_string(), Pending::default());
        }
        self.sessions.get_mut(id).expect("inserted above")
    }

    /// Count `n` newly queued events (of a windowed session or not) and
    /// open a window if none is open.
    fn queued(&mut self, n: usize, bytes: usize, windowed: bool, shared: &Shared) {
        self.pending += n;
        self.pending_bytes += bytes;
        if windowed {
            self.windowed_bytes += bytes;
        }
        self.paused = false;
        if self.deadline.is_none() {
            self.deadline = Some(Instant::now() + shared.window);
            shared.wake.notify_all();
        }
    }

    /// Whether another round may start now.
    fn can_start(&self, shared: &Shared) -> bool {
        self.rounds == 0 || (shared.overlap && self.rounds < MAX_ROUNDS)
    }

    /// Whether a round would write something for `only` (or for any
    /// session).
    fn writable(&self, only: Option<&str>) -> bool {
        self.sessions
            .iter()
            .any(|(id, p)| only.is_none_or(|o| o == id) && p.is_writable())
    }

    /// Count `n` events with `bytes` of text (of a windowed session or
    /// not) as no longer queued: written, or dropped with their session.
    fn unqueued(&mut self, n: usize, bytes: usize, windowed: bool) {
        self.pending = self.pending.saturating_sub(n);
        self.pending_bytes = self.pending_bytes.saturating_sub(bytes);
        if windowed {
            self.windowed_bytes = self.windowed_bytes.saturating_sub(bytes);
        }
    }
}

/// The high-water marks of a writer.
#[derive(Debug, Clone, Copy)]
struct Limits {
    events: usize,
    bytes: usize,
}

struct Shared {
    state: Mutex<State>,
    limits: Limits,
    wake: Condvar,
    done: Condvar,
    backend: SharedBackend,
    window: Duration,
    hurry: Arc<Hurry>,
    /// The backend detaches its writes: rounds may overlap.
    overlap: bool,
    /// Wakes a flush gathering a round when another flush arrives.
    gathered: Condvar,
    /// The flushes a round's end lets go on, woken by one another.
    relay: relay::Relay,
    /// What a flush does for its own events before its round, where rounds
    /// run one at a time ([`Backend::precompute`]).
    precompute: Option<Arc<dyn Precompute>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait on `done`, counted in [`State::done_waiters`].
    fn wait_done<'a>(&self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.done_waiters += 1;
        let mut st = self.done.wait(st).unwrap_or_else(|p| p.into_inner());
        st.done_waiters -= 1;
        st
    }

    /// Wake the waiters of `done`, if any (called with the state locked).
    fn notify_done(&self, st: &State) {
        if st.done_waiters > 0 {
            self.done.notify_all();
        }
    }
}

/// The write-behind queue of one store.
pub struct Writer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// A writer over `backend` with a batch window (0 = write in the append).
    pub fn new(backend: SharedBackend, window_ms: u64) -> Writer {
        Writer::with_hurry(backend, window_ms, Arc::new(Hurry::default()))
    }

    /// [`Writer::new`] that counts waiting flushes in `hurry`, the hint
    /// the store gave the backend when it opened it.
    pub fn with_hurry(backend: SharedBackend, window_ms: u64, hurry: Arc<Hurry>) -> Writer {
        let limits = Limits {
            events: HIGH_WATER_EVENTS,
            bytes: HIGH_WATER_BYTES,
        };
        Writer::with_limits(backend, window_ms, limits, hurry)
    }

    /// [`Writer::with_hurry`] with other high-water marks (tests).
    fn with_limits(
        backend: SharedBackend,
        window_ms: u64,
        limits: Limits,
        hurry: Arc<Hurry>,
    ) -> Writer {
        let (overlap, precompute) = {
            let b = lock_backend(&backend);
            let overlap = b.detaches_writes();
            (overlap, b.precompute().filter(|_| !overlap))
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                sessions: HashMap::new(),
                pending: 0,
                pending_bytes: 0,
                windowed_bytes: 0,
                failing: false,
                deadline: None,
                urgent: false,
                paused: false,
                stop: false,
                rounds: 0,
                done_waiters: 0,
                slot_waiters: Vec::new(),
                upkeep: None,
                round_ids: 0,
                last_round: gather::LastRound::default(),
                gathering: false,
            }),
            limits,
            wake: Condvar::new(),
            done: Condvar::new(),
            backend,
            window: Duration::from_millis(window_ms),
            hurry,
            overlap,
            gathered: Condvar::new(),
            relay: relay::Relay::default(),
            precompute,
        });
        let thread = (window_ms > 0).then(|| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("dsh-writer".into())
                .spawn(move || run(&shared))
                .expect("spawn the dsh-session writer thread")
        });
        Writer { shared, thread }
    }

    /// Start tracking a live session. `stored` is the length of its log in
    /// the backend (0 and not materialized for a new session); `windowed`:
    /// the session evicts old events, so its backlog counts towards the
    /// byte mark.
    pub fn track(&self, id: &str, header: &Value, stored: Option<u64>, windowed: bool) {
        let header = Arc::new(header.clone());
        let mut st = self.shared.lock();
        let p = st.session(id);
        p.header = Some(header);
        p.windowed = windowed;
        p.materialized = stored.is_some();
        p.next_seq = stored.unwrap_or(0);
    }

    /// Record that the tracked session `id` is a fork child whose first
    /// `prefix` events are `parent`'s (a backend may copy them inside the
    /// store).
    pub fn track_fork(&self, id: &str, parent: &str, prefix: u64) {
        let mut st = self.shared.lock();
        st.session(id).fork = Some((parent.into(), prefix));
    }

    /// Stop tracking a session (after its final flush); with nothing left
    /// to write for it, the backend may release what it holds for it.
    pub fn forget(&self, id: &str) {
        let mut st = self.shared.lock();
        if st
            .sessions
            .get(id)
            .is_none_or(|p| p.is_empty() && !p.in_flight)
        {
            let removed = st.sessions.remove(id);
            drop(st);
            removed
                .into_iter()
                .flat_map(|p| p.waiters)
                .for_each(|t| t.unpark());
            // A round writing its last batch holds the backend until done.
            lock_backend(&self.shared.backend).release(id);
        }
    }

    /// Drop whatever is queued for a session that is not live any more
    /// (before it is deleted).
    pub fn discard(&self, id: &str) {
        let mut st = self.shared.lock();
        let removed = st.sessions.remove(id);
        if let Some(p) = &removed {
            st.unqueued(p.queued(), p.queued_bytes(), p.windowed);
        }
        drop(st);
        if let Some(p) = removed {
            p.waiters.iter().for_each(std::thread::Thread::unpark);
        }
    }

    /// Refuse early when the backlog is above the high-water mark (see the
    /// module documentation) and the disk cannot take it. Call before
    /// committing in the engine.
    pub fn reserve(&self) -> Result<()> {
        let limits = self.shared.limits;
        let mut st = self.shared.lock();
        loop {
            if st.failing && (st.pending >= limits.events || st.pending_bytes >= limits.bytes) {
                // A disk that fails: drain everything or refuse.
                drop(st);
                return self.flush_all();
            }
            if st.windowed_bytes < limits.bytes || self.thread.is_none() {
                return Ok(());
            }
            // Too much text pending that only the queue may hold: wait for
            // the writer's next (bounded) round, not for the whole backlog.
            st.urgent = true;
            self.shared.wake.notify_all();
            st = self.shared.wait_done(st);
        }
    }

    /// Queue committed events of `id` (in seq order). Never touches the disk,
    /// except with a zero batch window, where the events are written now.
    pub fn enqueue(&self, id: &str, events: &[Arc<Event>]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        if self.thread.is_none() {
            return self.write_now(id, Events::Slice(events));
        }
        let mut st = self.shared.lock();
        let p = st.session(id);
        let mut bytes = 0;
        for e in events {
            // Events the caller just made: their text length is in cache.
            let len = e.text().len();
            bytes += len;
            p.push(e.clone(), len);
        }
        p.enqueued += events.len() as u64;
        let windowed = p.windowed;
        st.queued(events.len(), bytes, windowed, &self.shared);
        Ok(())
    }

    /// Queue a whole log of `id` (a new session's seed): shared with the
    /// session, not copied, when nothing else is queued for it.
    pub fn enqueue_log(&self, id: &str, log: &Log) -> Result<()> {
        if log.is_empty() {
            return Ok(());
        }
        if self.thread.is_none() {
            return self.write_now(id, Events::Log(log));
        }
        // Cut into rounds outside the lock: each round writes one piece
        // (one frame on JSONL), however long the seed.
        let pieces = pending::seed_pieces(log, ROUND_BYTES);
        let bytes = pieces.iter().map(|&(_, b)| b).sum();
        let n = log.len();
        let log = Arc::new(log.clone());
        let mut st = self.shared.lock();
        let p = st.session(id);
        p.push_log(log, pieces);
        p.enqueued += n as u64;
        let windowed = p.windowed;
        st.queued(n, bytes, windowed, &self.shared);
        Ok(())
    }

    /// Zero window: write on the caller's thread; on failure nothing is kept
    /// (the caller undoes the append).
    fn write_now(&self, id: &str, events: Events<'_>) -> Result<()> {
        let mut st = self.shared.lock();
        while st.rounds > 0 {
            st = self.shared.wait_done(st);
        }
        let p = st.session(id);
        let fork = p.fork.clone();
        let (Some(header), materialized, next_seq) = (p.header.clone(), p.materialized, p.next_seq)
        else {
            return Err(Error::new(
                crate::Status::Internal,
                Rule::InternalUntracked,
                format!("session \"{id}\" is not tracked"),
            ));
        };
        st.rounds += 1;
        drop(st);
        let result = match events {
            Events::Slice(events) => check_continues(id, next_seq, events),
            // A session's own log is contiguous by construction: its ends
            // must continue the stored log, and it is handed over shared.
            Events::Log(log) => crate::store::seqs::check_log_ends(id, next_seq, log),
        }
        .and_then(|()| {
            let batch = BackendBatch {
                header: &header,
                events,
                materialize: !materialized,
                fork: fork
                    .as_ref()
                    .filter(|(_, prefix)| next_seq < *prefix)
                    .map(|(parent, prefix)| (&**parent, *prefix)),
            };
            let mut backend = lock_backend(&self.shared.backend);
            let result = backend.write(std::slice::from_ref(&batch)).pop();
            result.unwrap_or_else(|| Err(round::no_result()))
        });
        let mut st = self.shared.lock();
        st.rounds -= 1;
        if result.is_ok() {
            let p = st.session(id);
            p.materialized = true;
            p.next_seq += events.len() as u64;
            p.enqueued += events.len() as u64;
            p.durable += events.len() as u64;
        }
        self.shared.notify_done(&st);
        result
    }

    /// True when appends are written on the caller's thread (a batch
    /// window of 0), the only case where handing events over can fail.
    pub fn is_sync(&self) -> bool {
        self.thread.is_none()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.flush_all();
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `persist.append-seq-mismatch`: a batch must continue the stored log.
fn check_continues(id: &str, next: u64, events: &[Arc<Event>]) -> Result<()> {
    crate::store::seqs::check_contiguous(id, next, events)
}

#[cfg(test)]
mod tests;
