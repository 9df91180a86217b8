//! Events at rest, packed: a sealed chunk of a log keeps the texts of its
//! events in one buffer and a small fixed-size slot per event, instead of
//! two allocations per event. An [`Event`] is made again when a caller
//! reads one (its text copied, nothing parsed).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use super::{Event, Spans};
use crate::json::JsString;

/// Chunks whose events average more than this many bytes of text are not
/// packed: packing saves about 260 bytes an event (two allocations and the
/// envelope) and costs a copy of the text, so past a kilobyte an event it
/// saves little and the copy shows (an open of 100k 1.3 KB events took
/// 1.3–1.5× as long, mostly returning the freed texts to the system).
pub const PACK_AVERAGE_MAX: usize = 1024;

/// The events of one sealed chunk, packed (see the documentation of the
/// module `engine::event::packed`). Immutable; logs share it.
pub struct Packed {
    /// The canonical texts of the events, one after another.
    text: Box<str>,
    /// One slot per event, in seq order.
    slots: Box<[Slot]>,
    /// The distinct event types of the chunk (a slot holds an index).
    types: Box<[JsString]>,
    /// The seq of the first event (the others follow contiguously).
    first_seq: u64,
}

/// What an event keeps beside its text: 40 bytes.
#[derive(Clone, Copy)]
struct Slot {
    /// `time`.
    time: i64,
    /// Member ranges, relative to the event's text.
    at: Spans,
    /// Where the event's text ends in [`Packed::text`] (it starts where
    /// the previous one ends).
    end: u32,
    /// Index of the type in [`Packed::types`].
    ty: u16,
    /// `ignorable`.
    ignorable: bool,
    /// The [`Checked`](super::Checked) bits known when the chunk was packed.
    checked: u8,
}

impl Packed {
    /// The packed form of `events`, shared with every other log that seals
    /// the same events (the last event remembers the chunk it closes).
    /// `None` when they are not packed: texts of more than
    /// [`PACK_AVERAGE_MAX`] bytes on average, seqs that are not
    /// contiguous, or more than 65536 distinct types.
    pub fn seal(events: &[Arc<Event>]) -> Option<Arc<Packed>> {
        let last = events.last()?;
        if let Some(p) = last.sealed.get() {
            if p.holds(events) {
                return Some(p.clone());
            }
        }
        let p = Arc::new(Packed::pack(events)?);
        // A second packing of the same events (another log sealing them at
        // the same time) only loses the sharing, never correctness.
        let _ = last.sealed.set(p.clone());
        Some(p)
    }

    fn pack(events: &[Arc<Event>]) -> Option<Packed> {
        let first_seq = events.first()?.seq;
        let bytes: usize = events.iter().map(|e| e.text.len()).sum();
        // (A chunk's text stays far below 4 GiB: at most CHUNK events of
        // PACK_AVERAGE_MAX bytes.)
        if bytes > events.len() * PACK_AVERAGE_MAX {
            return None;
        }
        let mut text = String::with_capacity(bytes);
        let mut slots = Vec::with_capacity(events.len());
        let mut types: Vec<JsString> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            if e.seq != first_seq + i as u64 {
                return None;
            }
            let ty = match types.iter().rposition(|t| *t == e.ty) {
                Some(t) => t,
                None => {
                    types.push(e.ty.clone());
                    types.len() - 1
                }
            };
            text.push_str(&e.text);
            slots.push(Slot {
                time: e.time,
                at: e.at,
                end: text.len() as u32,
                ty: u16::try_from(ty).ok()?,
                ignorable: e.ignorable,
                checked: e.checked.load(Ordering::Relaxed),
            });
        }
        Some(Packed {
            text: text.into_boxed_str(),
            slots: slots.into_boxed_slice(),
            types: types.into_boxed_slice(),
            first_seq,
        })
    }

    /// True when this chunk is exactly `events`, packed.
    fn holds(&self, events: &[Arc<Event>]) -> bool {
        self.slots.len() == events.len()
            && events.first().is_some_and(|e| e.seq == self.first_seq)
            && events
                .iter()
                .enumerate()
                .all(|(i, e)| self.text(i) == &*e.text && e.seq == self.first_seq + i as u64)
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the chunk holds no events (a packed chunk never is).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.slots[i - 1].end as usize
        }
    }

    /// The canonical text of event `i`.
    ///
    /// # Panics
    ///
    /// When `i >= self.len()`.
    pub fn text(&self, i: usize) -> &str {
        &self.text[self.start(i)..self.slots[i].end as usize]
    }

    /// The type of event `i`.
    ///
    /// # Panics
    ///
    /// When `i >= self.len()`.
    pub fn ty(&self, i: usize) -> &JsString {
        &self.types[self.slots[i].ty as usize]
    }

    /// Event `i`, made again: its text copied, its index taken from the
    /// slot (nothing is parsed).
    ///
    /// # Panics
    ///
    /// When `i >= self.len()`.
    pub fn event(&self, i: usize) -> Arc<Event> {
        let s = &self.slots[i];
        Arc::new(Event {
            ty: self.types[s.ty as usize].clone(),
            seq: self.first_seq + i as u64,
            time: s.time,
            ignorable: s.ignorable,
            text: self.text(i).into(),
            at: s.at,
            checked: AtomicU8::new(s.checked),
            tree: OnceLock::new(),
            sealed: OnceLock::new(),
        })
    }

    /// Every event, made again, in order.
    pub fn events(&self) -> Vec<Arc<Event>> {
        (0..self.len()).map(|i| self.event(i)).collect()
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("first_seq", &self.first_seq)
            .field("len", &self.len())
            .field("bytes", &self.text.len())
            .finish()
    }
}

#[cfg(test)]
mod tests;
