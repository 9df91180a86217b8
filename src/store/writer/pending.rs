//! One session's write-behind queue.
//!
//! Everything here runs under the queue lock that appends take, so every
//! operation the writer's rounds use is O(1) or O(the batch it takes),
//! never O(the backlog): the queue keeps its text byte count and each
//! queued event's text length next to the events, so neither a round's
//! budget nor the bookkeeping after a write dereferences queued events
//! (each one a likely cache miss).

use std::collections::VecDeque;
use std::sync::Arc;

use super::text_bytes;
use crate::engine::session::Log;
use crate::engine::Event;
use crate::error::Error;
use crate::json::Value;

/// What one round takes from a queue: a seed (whole), then events in seq
/// order, and the bytes of their text.
pub(super) struct Taken {
    pub seed: Option<Log>,
    pub events: VecDeque<Arc<Event>>,
    pub bytes: usize,
}

impl Taken {
    /// The taken events as one slice-able batch (seed first). Call outside
    /// the queue lock: it copies the handles of the batch.
    pub fn into_batch(self) -> Vec<Arc<Event>> {
        match self.seed {
            None => Vec::from(self.events),
            Some(seed) => {
                let mut all = Vec::with_capacity(seed.len() + self.events.len());
                all.extend(seed.iter().cloned());
                all.extend(self.events);
                all
            }
        }
    }
}

/// The queue of one session.
#[derive(Default)]
pub(super) struct Pending {
    pub header: Option<Arc<Value>>,
    pub materialized: bool,
    /// The session evicts old events (its backlog may be held by the
    /// queue alone).
    pub windowed: bool,
    /// A whole log handed over at once (a new session's seed), shared with
    /// the session rather than copied; it comes before `events`.
    seed: Option<Log>,
    /// The text bytes of `seed`.
    seed_bytes: usize,
    /// Queued events, in seq order, after `seed`.
    events: VecDeque<Arc<Event>>,
    /// The text length of each event of `events`.
    lens: VecDeque<usize>,
    /// The text bytes of `seed` and `events`.
    bytes: usize,
    /// The seq the next written event must have.
    pub next_seq: u64,
    /// Events handed to the writer so far / written durably so far.
    pub enqueued: u64,
    pub durable: u64,
    /// The last write failure not yet reported to a flush.
    pub failure: Option<Error>,
    /// How many flushes saw a failure (lets a waiting flush notice one).
    pub failures: u64,
}

impl Pending {
    /// Events queued.
    pub fn queued(&self) -> usize {
        self.seed.as_ref().map_or(0, Log::len) + self.events.len()
    }

    /// Text bytes queued (O(1)).
    pub fn queued_bytes(&self) -> usize {
        self.bytes
    }

    /// Nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.seed.is_none() && self.events.is_empty()
    }

    /// Queue `event`, whose text is `len` bytes long.
    pub fn push(&mut self, event: Arc<Event>, len: usize) {
        self.events.push_back(event);
        self.lens.push_back(len);
        self.bytes += len;
    }

    /// Queue a whole log of `bytes` of text: shared when nothing is
    /// queued, else its events one by one.
    pub fn push_log(&mut self, log: &Log, bytes: usize) {
        if self.is_empty() {
            self.seed = Some(log.clone());
            self.seed_bytes = bytes;
            self.bytes += bytes;
        } else {
            for e in log.iter() {
                let len = e.text().len();
                self.push(e.clone(), len);
            }
        }
    }

    /// Take everything queued, leaving the queue empty; with a `budget`,
    /// take queued events (after a seed, which goes whole) only up to
    /// about that many bytes of text, at least one.
    pub fn take(&mut self, budget: Option<usize>) -> Taken {
        let seed = self.seed.take();
        let seed_bytes = std::mem::take(&mut self.seed_bytes);
        let Some(budget) = budget else {
            self.lens.clear();
            return Taken {
                seed,
                events: std::mem::take(&mut self.events),
                bytes: std::mem::take(&mut self.bytes),
            };
        };
        let mut bytes = 0;
        let n = self
            .lens
            .iter()
            .take_while(|&&len| {
                let first = bytes == 0;
                let fits = first || bytes + len <= budget;
                if fits {
                    bytes += len;
                }
                fits
            })
            .count();
        let events = if n == self.events.len() {
            std::mem::take(&mut self.events)
        } else {
            self.events.drain(..n).collect()
        };
        self.lens.drain(..n);
        let bytes = seed_bytes + bytes;
        self.bytes -= bytes;
        Taken {
            seed,
            events,
            bytes,
        }
    }

    /// Put a batch that failed back in front of what arrived meanwhile
    /// (the failure path: it may touch every event).
    pub fn put_back(&mut self, batch: Vec<Arc<Event>>) {
        let mut events = VecDeque::from(batch);
        if let Some(seed) = self.seed.take() {
            events.extend(seed.iter().cloned());
        }
        self.seed_bytes = 0;
        events.append(&mut self.events);
        self.lens = events.iter().map(|e| e.text().len()).collect();
        self.bytes = text_bytes(&events);
        self.events = events;
    }
}
