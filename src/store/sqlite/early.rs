//! Large values compressed early, by the flushing threads themselves.
//!
//! With one writer, a round's work is serial: while it runs, the flushes it
//! serves wait for it, parked. Compressing the large `data` values of a
//! round (`encodeData`'s level-3 frames) was the largest part of a round
//! with many sessions. A flush now compresses its own session's large
//! queued values before it waits for the round that writes them
//! ([`Early::run`], through the writer's [`Precompute`] hook), so the
//! flushes of many sessions compress in parallel and the round inserts the
//! frames they left here ([`Early::take`]).
//!
//! A frame is kept with a weak handle of its event, whose address is the
//! key: the weak handle keeps the address from being reused, so a frame is
//! only ever taken for the very event it was made from (an event's text
//! never changes). A frame a round never takes (its round had started,
//! or its session went away) is dropped [`KEEP_ROUNDS`] rounds later, and
//! the map holds at most [`MAX_FRAMES`], so its memory is bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::rows;
use crate::engine::Event;
use crate::store::backend::Precompute;

/// Most frames kept at once.
const MAX_FRAMES: usize = 1024;

/// Rounds after which a frame not taken is dropped.
const KEEP_ROUNDS: u64 = 4;

/// The most large values a flush compresses early. A batch with more is
/// the compression helper's (`ahead.rs`), which shares it with the
/// writer instead of making the flush do all of it first.
const MAX_VALUES: usize = super::ahead::MIN_ITEMS - 1;

/// Most spare compressors kept.
const MAX_SPARE: usize = 8;

/// A large value's frame made early, as a round takes it: `None`, none was
/// made; `Some(None)`, the text is stored as is (its frame was not
/// shorter).
pub type Frame = Option<Option<Vec<u8>>>;

/// A frame and its event.
struct Entry {
    event: Weak<Event>,
    /// `None`: the frame was not shorter than the text (stored as TEXT).
    frame: Option<Vec<u8>>,
    /// The round it was made in.
    round: u64,
}

#[derive(Default)]
struct Frames {
    map: HashMap<usize, Entry>,
    /// Rounds written so far.
    round: u64,
}

/// Frames compressed early, shared by the backend and the flushing threads.
#[derive(Default)]
pub struct Early {
    frames: Mutex<Frames>,
    /// Compressors not in use (one per flush compressing at once).
    spare: Mutex<Vec<zstd::bulk::Compressor<'static>>>,
}

fn key(e: &Arc<Event>) -> usize {
    Arc::as_ptr(e) as usize
}

impl Early {
    fn frames(&self) -> MutexGuard<'_, Frames> {
        self.frames.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A round begins: drop the frames no round took for a while.
    pub fn next_round(&self) {
        let mut f = self.frames();
        f.round += 1;
        if !f.map.is_empty() {
            let oldest = f.round.saturating_sub(KEEP_ROUNDS);
            f.map.retain(|_, e| e.round >= oldest);
        }
    }

    /// The early [`Frame`] of each of `events`, taken out of the map.
    pub fn take(&self, events: &[&Arc<Event>]) -> Vec<Frame> {
        let mut f = self.frames();
        if f.map.is_empty() {
            return vec![None; events.len()];
        }
        events
            .iter()
            .map(|e| {
                let entry = f.map.remove(&key(e))?;
                std::ptr::eq(entry.event.as_ptr(), Arc::as_ptr(e)).then_some(entry.frame)
            })
            .collect()
    }

    fn compressor(&self) -> Option<zstd::bulk::Compressor<'static>> {
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).pop();
        spare.or_else(|| rows::compressor().ok())
    }
}

impl Precompute for Early {
    fn wants(&self, text_len: usize) -> bool {
        // An event's text holds its data: a shorter one has no large data.
        text_len >= rows::COMPRESS_FROM
    }

    fn run(&self, events: &[Arc<Event>]) {
        let large: Vec<&Arc<Event>> = events.iter().filter(|e| rows::is_large(e)).collect();
        if large.is_empty() || large.len() > MAX_VALUES {
            return;
        }
        {
            let f = self.frames();
            if f.map.len() + large.len() > MAX_FRAMES {
                return;
            }
        }
        let Some(mut zstd) = self.compressor() else {
            return;
        };
        let mut made = Vec::with_capacity(large.len());
        for e in large {
            // A failure is the round's to report: it compresses the value.
            let Ok(frame) = rows::compress_smaller(e.data_text(), &mut zstd) else {
                break;
            };
            made.push((e, frame));
        }
        {
            let mut f = self.frames();
            let round = f.round;
            for (e, frame) in made {
                let entry = Entry {
                    event: Arc::downgrade(e),
                    frame,
                    round,
                };
                f.map.insert(key(e), entry);
            }
        }
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < MAX_SPARE {
            spare.push(zstd);
        }
    }
}

#[cfg(test)]
#[path = "tests/early.rs"]
mod tests;
