//! One session's write-behind queue.
//!
//! Everything here runs under the queue lock that appends take, so every
//! operation the writer's rounds use is O(1) or O(the batch it takes),
//! never O(the backlog): the queue keeps its text byte count and each
//! queued event's text length next to the event, so neither a round's
//! budget nor the bookkeeping after a write dereferences queued events
//! (each one a likely cache miss). Events are queued in blocks of
//! [`BLOCK`], so a backlog of any length never reallocates or moves what
//! it holds: the append that crosses a power of two would otherwise copy
//! the whole queue into new pages. A block grows as it fills, so a short
//! queue stays small.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use crate::engine::session::Log;
use crate::engine::Event;
use crate::error::Error;
use crate::json::Value;

/// Queued events per block.
const BLOCK: usize = 4096;

/// A queued event and the length of its text.
type Item = (Arc<Event>, usize);

/// A piece of a seed: the shared log and the range of it taken.
type SeedPiece = (Arc<Log>, Range<usize>);

/// What one round takes from a queue: a piece of a seed, or the last
/// piece of a seed and events, or events, in seq order; and the bytes of
/// their text.
pub(super) struct Taken {
    seed: Option<SeedPiece>,
    blocks: VecDeque<Vec<Item>>,
    pub bytes: usize,
}

impl Taken {
    /// The taken events as one slice-able batch (seed first). Call outside
    /// the queue lock: it copies the handles of the batch.
    pub fn into_batch(self) -> Vec<Arc<Event>> {
        let queued: usize = self.blocks.iter().map(Vec::len).sum();
        let seeded = self.seed.as_ref().map_or(0, |(_, r)| r.len());
        let mut all = Vec::with_capacity(seeded + queued);
        if let Some((seed, range)) = self.seed {
            all.extend(seed.range(range));
        }
        for block in self.blocks {
            all.extend(block.into_iter().map(|(e, _)| e));
        }
        all
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
    /// the session rather than copied; what is left of it (from
    /// `seed_from`) comes before `blocks`.
    seed: Option<Arc<Log>>,
    /// The first event of `seed` not taken yet.
    seed_from: usize,
    /// The pieces rounds take of what is left of `seed`: each one's end
    /// and text bytes ([`seed_pieces`]); never empty while there is a seed.
    seed_pieces: VecDeque<(usize, usize)>,
    /// Queued events, in seq order, after `seed`: blocks of at most
    /// [`BLOCK`], none empty.
    blocks: VecDeque<Vec<Item>>,
    /// Events in `blocks`.
    queued: usize,
    /// The text bytes of `seed` and `blocks`.
    bytes: usize,
    /// The seq the next written event must have.
    pub next_seq: u64,
    /// Events handed to the writer so far / written durably so far.
    pub enqueued: u64,
    pub durable: u64,
    /// The number of the last round that took this session's events.
    pub round: u64,
    /// Flushes of this session in progress.
    pub flushing: usize,
    /// A fork child's parent and the length of the prefix it shares with
    /// it (writes past the prefix ignore it).
    pub fork: Option<(Arc<str>, u64)>,
    /// The last write failure not yet reported to a flush.
    pub failure: Option<Error>,
    /// How many flushes saw a failure (lets a waiting flush notice one).
    pub failures: u64,
    /// A round is writing a batch of this session (the next batch waits
    /// for its result).
    pub in_flight: bool,
    /// Flushing threads waiting for that round's result (woken by the
    /// round alone, not by every other round).
    pub waiters: Vec<std::thread::Thread>,
}

impl Pending {
    /// Events queued.
    pub fn queued(&self) -> usize {
        self.seed.as_ref().map_or(0, |s| s.len() - self.seed_from) + self.queued
    }

    /// Text bytes queued (O(1)).
    pub fn queued_bytes(&self) -> usize {
        self.bytes
    }

    /// Nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.seed.is_none() && self.queued == 0
    }

    /// Something is queued, the session is tracked and no round is
    /// writing it (a round can write it).
    pub fn is_writable(&self) -> bool {
        !self.is_empty() && self.header.is_some() && !self.in_flight
    }

    /// The queued events whose text length `wants` (read without touching
    /// the events), when at most `max` events are queued and no seed: a
    /// step's worth, never a backlog.
    pub fn queued_where(&self, max: usize, wants: impl Fn(usize) -> bool) -> Vec<Arc<Event>> {
        if self.seed.is_some() || self.queued > max {
            return Vec::new();
        }
        let items = self.blocks.iter().flatten();
        items
            .filter(|(_, len)| wants(*len))
            .map(|(e, _)| e.clone())
            .collect()
    }

    /// Queue `event`, whose text is `len` bytes long.
    pub fn push(&mut self, event: Arc<Event>, len: usize) {
        match self.blocks.back_mut() {
            Some(block) if block.len() < BLOCK => block.push((event, len)),
            _ => {
                // Grown as it fills (a queue of one event, the usual case
                // between two rounds, must not cost a whole block; many
                // sessions each have one), so only a block's own growth
                // ever moves, at most BLOCK items.
                self.blocks.push_back(vec![(event, len)]);
            }
        }
        self.queued += 1;
        self.bytes += len;
    }

    /// Queue a whole log cut into `pieces` ([`seed_pieces`]): shared when
    /// nothing is queued, else its events one by one.
    pub fn push_log(&mut self, log: Arc<Log>, pieces: Vec<(usize, usize)>) {
        if pieces.is_empty() {
            return; // an empty log
        }
        if self.is_empty() {
            self.bytes += pieces.iter().map(|&(_, b)| b).sum::<usize>();
            self.seed = Some(log);
            self.seed_from = 0;
            self.seed_pieces = pieces.into();
        } else {
            for e in log.iter() {
                let len = e.text().len();
                self.push(e.clone(), len);
            }
        }
    }

    /// Take the next piece of a seed, and when that ends it, queued
    /// events up to about `budget` bytes of text in all (at least one
    /// event when there is no seed piece); whole blocks move without
    /// touching their events.
    pub fn take(&mut self, budget: usize) -> Taken {
        let (seed, seed_bytes) = self.take_seed_piece();
        if self.seed.is_some() {
            self.bytes -= seed_bytes;
            return Taken {
                seed,
                blocks: VecDeque::new(),
                bytes: seed_bytes,
            };
        }
        let mut bytes = seed_bytes;
        let mut blocks = VecDeque::new();
        while let Some(front) = self.blocks.front_mut() {
            // The events of this block that fit, at least one overall.
            let n = front
                .iter()
                .take_while(|&&(_, len)| {
                    let fits = bytes == 0 || bytes + len <= budget;
                    if fits {
                        bytes += len;
                    }
                    fits
                })
                .count();
            if n == front.len() {
                blocks.extend(self.blocks.pop_front());
                continue;
            }
            if n > 0 {
                blocks.push_back(front.drain(..n).collect());
            }
            break;
        }
        self.queued -= blocks.iter().map(Vec::len).sum::<usize>();
        self.bytes -= bytes;
        Taken {
            seed,
            blocks,
            bytes,
        }
    }

    /// The next piece of the seed (with its bytes), if there is a seed;
    /// the seed is gone once its last piece is taken.
    fn take_seed_piece(&mut self) -> (Option<SeedPiece>, usize) {
        let Some(seed) = &self.seed else {
            return (None, 0);
        };
        let (end, bytes) = self
            .seed_pieces
            .pop_front()
            .expect("a seed has pieces left");
        let piece = (seed.clone(), self.seed_from..end);
        self.seed_from = end;
        if self.seed_pieces.is_empty() {
            self.seed = None;
            self.seed_from = 0;
        }
        (Some(piece), bytes)
    }

    /// Put a batch that failed back in front of what arrived meanwhile
    /// (the failure path: it may touch every event).
    pub fn put_back(&mut self, batch: Vec<Arc<Event>>) {
        let seed = self.seed.take();
        let seed_from = std::mem::take(&mut self.seed_from);
        self.seed_pieces.clear();
        let after = std::mem::take(&mut self.blocks);
        self.queued = 0;
        self.bytes = 0;
        let seeded = seed.iter().flat_map(|s| s.range(seed_from..));
        for e in batch.into_iter().chain(seeded) {
            let len = e.text().len();
            self.push(e, len);
        }
        for block in after {
            for (e, len) in block {
                self.push(e, len);
            }
        }
    }
}

/// Where the rounds cut a seed `log`: pieces of about `budget` bytes of
/// text (at least one event each), as (end, bytes), covering the whole log.
/// Computed before the queue lock is taken: it reads every event.
pub(super) fn seed_pieces(log: &Log, budget: usize) -> Vec<(usize, usize)> {
    let mut pieces = Vec::new();
    let mut bytes = 0;
    for (i, e) in log.iter().enumerate() {
        let len = e.text().len();
        if bytes > 0 && bytes + len > budget {
            pieces.push((i, bytes));
            bytes = 0;
        }
        bytes += len;
    }
    if !log.is_empty() {
        pieces.push((log.len(), bytes));
    }
    pieces
}
