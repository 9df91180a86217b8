//! A session's log: contiguous events in chunks of [`CHUNK`], the sealed
//! ones packed and shared.
//!
//! The log is a run of sealed chunks of exactly [`CHUNK`] events followed
//! by a tail of fewer. When the tail fills it is sealed: a chunk of small
//! events is packed into one text buffer and a 40-byte slot per event
//! ([`Packed`]), so an event at rest costs its text and its slot instead
//! of two allocations (larger events stay as they are). A sealed chunk is
//! shared by every log that holds it (a fork's prefix, the memory store's
//! copy). Reading an event of a packed chunk makes it again (its text
//! copied, nothing parsed); the tail holds the events themselves, so the
//! newest events, which appends and the derive cache read, are handed out
//! shared.
//!
//! Costs, for a log of `n` events: [`Log::push`] O(1) amortized (sealing
//! copies a chunk's texts once); [`Log::prefix`] and [`Clone`] `n / CHUNK`
//! reference counts plus at most `CHUNK - 1` events of the chunk the
//! prefix ends in. Sealed chunks are never mutated.
//!
//! A windowed session evicts sealed chunks ([`Log::evict_chunk`]); reads
//! of their events answer `None` (or panic, for the iterators) until
//! [`Log::restore_chunk`] puts them back; [`View`](super::window::View)
//! reads them from storage instead.

use std::fmt;
use std::ops::RangeBounds;
use std::sync::Arc;

use super::chunked::{self, CHUNK};
use super::event::{Event, Packed};
use crate::json::JsString;

/// A session's log (see the [module documentation](self)).
#[derive(Clone, Default)]
pub struct Log {
    /// Full chunks, each exactly [`CHUNK`] events.
    chunks: Vec<Sealed>,
    /// The events after the last full chunk; always `< CHUNK` of them.
    tail: Vec<Arc<Event>>,
}

/// One full chunk.
#[derive(Clone)]
enum Sealed {
    /// Packed (the usual form).
    Packed(Arc<Packed>),
    /// The events themselves: a chunk that does not pack (see
    /// [`Packed::seal`]).
    Events(Arc<[Arc<Event>]>),
    /// Evicted by a windowed session.
    Evicted,
}

impl Sealed {
    fn of(events: Vec<Arc<Event>>) -> Sealed {
        match Packed::seal(&events) {
            Some(p) => Sealed::Packed(p),
            None => Sealed::Events(events.into()),
        }
    }
}

impl Log {
    /// An empty log. Does not allocate.
    pub const fn new() -> Log {
        Log {
            chunks: Vec::new(),
            tail: Vec::new(),
        }
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.chunks.len() * CHUNK + self.tail.len()
    }

    /// True when the log holds no events.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.tail.is_empty()
    }

    /// Appends `e` (its seq should be the log's length). O(1) amortized.
    pub fn push(&mut self, e: Arc<Event>) {
        self.tail.push(e);
        if self.tail.len() == CHUNK {
            let full = std::mem::take(&mut self.tail);
            self.chunks.push(Sealed::of(full));
        }
    }

    /// Removes every event.
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.tail.clear();
    }

    /// The event at `i`, shared when the log holds it as an event (the
    /// tail), made again from its packed chunk otherwise; `None` when `i`
    /// is out of range or evicted.
    pub fn get(&self, i: usize) -> Option<Arc<Event>> {
        match self.chunks.get(i / CHUNK) {
            Some(Sealed::Packed(p)) => Some(p.event(i % CHUNK)),
            Some(Sealed::Events(c)) => Some(c[i % CHUNK].clone()),
            Some(Sealed::Evicted) => None,
            None => self.tail.get(i - self.chunks.len() * CHUNK).cloned(),
        }
    }

    /// The event at `i` when the log holds it as an event object (not
    /// packed, not evicted): no copy is made.
    pub fn resident(&self, i: usize) -> Option<&Arc<Event>> {
        match self.chunks.get(i / CHUNK) {
            Some(Sealed::Events(c)) => Some(&c[i % CHUNK]),
            Some(_) => None,
            None => self.tail.get(i - self.chunks.len() * CHUNK),
        }
    }

    /// The canonical text of event `i` (nothing is copied); `None` when
    /// out of range or evicted.
    pub fn text(&self, i: usize) -> Option<&str> {
        match self.chunks.get(i / CHUNK) {
            Some(Sealed::Packed(p)) => Some(p.text(i % CHUNK)),
            Some(Sealed::Events(c)) => Some(c[i % CHUNK].text()),
            Some(Sealed::Evicted) => None,
            None => self
                .tail
                .get(i - self.chunks.len() * CHUNK)
                .map(|e| e.text()),
        }
    }

    /// The type of event `i` (read in place); `None` when out of range or
    /// evicted.
    pub fn ty(&self, i: usize) -> Option<&JsString> {
        match self.chunks.get(i / CHUNK) {
            Some(Sealed::Packed(p)) => Some(p.ty(i % CHUNK)),
            Some(Sealed::Events(c)) => Some(&c[i % CHUNK].ty),
            Some(Sealed::Evicted) => None,
            None => self.tail.get(i - self.chunks.len() * CHUNK).map(|e| &e.ty),
        }
    }

    /// The first event, or `None` when empty (or evicted).
    pub fn first(&self) -> Option<Arc<Event>> {
        self.get(0)
    }

    /// The last event, or `None` when empty. (The last event is always
    /// resident: the tail, or the last full chunk, which is never evicted
    /// while it holds the last event.)
    pub fn last(&self) -> Option<Arc<Event>> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// An iterator over every event, front to back.
    ///
    /// # Panics
    ///
    /// The iterator panics when it reaches an evicted chunk.
    pub fn iter(&self) -> Events<'_> {
        self.range(..)
    }

    /// An iterator over the events in `range`.
    ///
    /// # Panics
    ///
    /// Like slice indexing, when the range is out of bounds; the iterator
    /// panics when it reaches an evicted chunk.
    pub fn range<R: RangeBounds<usize>>(&self, range: R) -> Events<'_> {
        let (front, back) = chunked::bounds(range, self.len());
        Events {
            log: self,
            front,
            back,
        }
    }

    /// The number of full chunks (resident or evicted).
    pub fn full_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The events of full chunk `k` (made again when packed); `None` when
    /// it is evicted or `k` is not a full chunk.
    pub fn chunk(&self, k: usize) -> Option<Arc<[Arc<Event>]>> {
        match self.chunks.get(k)? {
            Sealed::Packed(p) => Some(p.events().into()),
            Sealed::Events(c) => Some(c.clone()),
            Sealed::Evicted => None,
        }
    }

    /// True when this log and `other` hold full chunk `k` as one shared
    /// allocation (a fork's prefix, a store's copy of a session's log).
    pub fn shares_chunk(&self, k: usize, other: &Log) -> bool {
        match (self.chunks.get(k), other.chunks.get(k)) {
            (Some(Sealed::Packed(a)), Some(Sealed::Packed(b))) => Arc::ptr_eq(a, b),
            (Some(Sealed::Events(a)), Some(Sealed::Events(b))) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// True when full chunk `k` is evicted.
    pub fn is_evicted(&self, k: usize) -> bool {
        matches!(self.chunks.get(k), Some(Sealed::Evicted))
    }

    /// Drop this log's reference to full chunk `k` (other logs sharing it
    /// keep theirs). The log keeps its length; see the [module
    /// documentation](self).
    ///
    /// # Panics
    ///
    /// When `k` is not a full chunk.
    pub fn evict_chunk(&mut self, k: usize) {
        assert!(k < self.chunks.len(), "chunk {k} is not a full chunk");
        self.chunks[k] = Sealed::Evicted;
    }

    /// Put the events of full chunk `k` back (see [`Log::evict_chunk`]).
    ///
    /// # Panics
    ///
    /// When `k` is not a full chunk or `events` does not hold exactly
    /// [`CHUNK`] events.
    pub fn restore_chunk(&mut self, k: usize, events: &[Arc<Event>]) {
        assert!(k < self.chunks.len(), "chunk {k} is not a full chunk");
        assert_eq!(events.len(), CHUNK, "a restored chunk holds CHUNK events");
        self.chunks[k] = Sealed::of(events.to_vec());
    }

    /// Shortens the log to `len` events; does nothing when `len >=
    /// self.len()`. When `len` falls inside a full chunk, its first `len %
    /// CHUNK` events become the new tail (the chunk itself is not changed).
    ///
    /// # Panics
    ///
    /// When the new tail would come from an evicted chunk.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        let (full, rem) = (len / CHUNK, len % CHUNK);
        if full < self.chunks.len() {
            self.tail = self.head_of(full, rem);
            self.chunks.truncate(full);
        } else {
            self.tail.truncate(rem);
        }
    }

    /// A new log holding the events `[0, len)`, sharing every full chunk
    /// inside it.
    ///
    /// # Panics
    ///
    /// When `len > self.len()`, or when the prefix ends inside an evicted
    /// chunk.
    pub fn prefix(&self, len: usize) -> Log {
        assert!(
            len <= self.len(),
            "prefix length {len} is out of range for a log of {} events",
            self.len()
        );
        let (full, rem) = (len / CHUNK, len % CHUNK);
        Log {
            chunks: self.chunks[..full].to_vec(),
            tail: self.head_of(full, rem),
        }
    }

    /// Every event, in a `Vec`.
    ///
    /// # Panics
    ///
    /// When a chunk is evicted.
    pub fn to_vec(&self) -> Vec<Arc<Event>> {
        self.iter().collect()
    }

    /// The first `rem` events of chunk `k` (or of the tail) as a new tail.
    fn head_of(&self, k: usize, rem: usize) -> Vec<Arc<Event>> {
        if rem == 0 {
            return Vec::new();
        }
        match self.chunks.get(k) {
            Some(Sealed::Packed(p)) => (0..rem).map(|i| p.event(i)).collect(),
            Some(Sealed::Events(c)) => c[..rem].to_vec(),
            Some(Sealed::Evicted) => panic!("chunk {k} of the log is evicted"),
            None => self.tail[..rem].to_vec(),
        }
    }
}

/// An iterator over events of a [`Log`] ([`Log::iter`], [`Log::range`]).
#[derive(Clone)]
pub struct Events<'a> {
    log: &'a Log,
    front: usize,
    back: usize,
}

impl Events<'_> {
    fn at(&self, i: usize) -> Arc<Event> {
        match self.log.get(i) {
            Some(e) => e,
            None => panic!("event {i} of the log is evicted"),
        }
    }
}

impl Iterator for Events<'_> {
    type Item = Arc<Event>;

    fn next(&mut self) -> Option<Arc<Event>> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.at(self.front - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<Arc<Event>> {
        self.front = self.front.saturating_add(n).min(self.back);
        self.next()
    }
}

impl DoubleEndedIterator for Events<'_> {
    fn next_back(&mut self) -> Option<Arc<Event>> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.at(self.back)
        })
    }
}

impl ExactSizeIterator for Events<'_> {}

impl<'a> IntoIterator for &'a Log {
    type Item = Arc<Event>;
    type IntoIter = Events<'a>;

    /// Same as [`Log::iter`].
    fn into_iter(self) -> Events<'a> {
        self.iter()
    }
}

impl Extend<Arc<Event>> for Log {
    /// Appends every event, in order.
    fn extend<I: IntoIterator<Item = Arc<Event>>>(&mut self, iter: I) {
        for e in iter {
            self.push(e);
        }
    }
}

impl FromIterator<Arc<Event>> for Log {
    /// A log of the events, in order.
    fn from_iter<I: IntoIterator<Item = Arc<Event>>>(iter: I) -> Log {
        let mut log = Log::new();
        log.extend(iter);
        log
    }
}

impl From<Vec<Arc<Event>>> for Log {
    /// A log of the vector's events.
    fn from(v: Vec<Arc<Event>>) -> Log {
        v.into_iter().collect()
    }
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Log")
            .field("len", &self.len())
            .field("full_chunks", &self.chunks.len())
            .finish()
    }
}

#[cfg(test)]
mod tests;
