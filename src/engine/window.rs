//! Windowed sessions: a log whose older chunks are evicted from memory and
//! read back from storage when a call needs them (issue 5, item 4).
//!
//! The engine stays free of I/O: the store hands a session an
//! [`EventSource`] that reads stored events back, and [`View`] is the one
//! place that decides between a resident chunk and a read.

use std::fmt;
use std::sync::Arc;

use super::chunked::CHUNK;
use super::event::Event;
use super::session::Log;
use crate::error::{Error, Result, Status};
use crate::json::JsString;
use crate::rule::Rule;

/// Reads a session's stored events back (implemented by the store).
pub trait EventSource: Send + Sync + fmt::Debug {
    /// The events with seqs `from..to`, in seq order. Every one of them was
    /// appended before, so a store that cannot produce exactly these events
    /// reports an error.
    fn load(&self, from: u64, to: u64) -> Result<Vec<Arc<Event>>>;
}

/// How a windowed session keeps its log: the last `keep` events (rounded
/// up to whole chunks) stay resident, older chunks come from `source`.
#[derive(Debug, Clone)]
pub struct Window {
    /// Where evicted events are read back from.
    pub source: Arc<dyn EventSource>,
    /// How many of the newest events stay resident (at least).
    pub keep: usize,
}

/// Read access to a log some of whose chunks may be evicted.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The log, possibly with evicted chunks.
    pub log: &'a Log,
    /// Where evicted chunks come from (`None`: the log is fully resident).
    pub window: Option<&'a Window>,
}

fn reload_error(message: String) -> Error {
    Error::new(Status::Corrupt, Rule::WindowReloadMismatch, message)
}

impl<'a> View<'a> {
    /// The events of full chunk `k`: from the log when it holds them
    /// (shared, or made again from a packed chunk), otherwise read back
    /// and checked (exactly [`CHUNK`] events with the expected seqs).
    pub fn chunk(&self, k: usize) -> Result<Arc<[Arc<Event>]>> {
        if let Some(c) = self.log.chunk(k) {
            return Ok(c);
        }
        let window = match self.window {
            Some(w) if k < self.log.full_chunks() => w,
            _ => {
                return Err(Error::new(
                    Status::Internal,
                    Rule::WindowNoSource,
                    format!("chunk {k} of the log is neither resident nor readable"),
                ))
            }
        };
        let from = (k * CHUNK) as u64;
        let events = window.source.load(from, from + CHUNK as u64)?;
        if events.len() != CHUNK {
            return Err(reload_error(format!(
                "reading events {from}..{} back from storage gave {} events",
                from + CHUNK as u64,
                events.len()
            )));
        }
        if let Some((i, e)) = events
            .iter()
            .enumerate()
            .find(|(i, e)| e.seq != from + *i as u64)
        {
            return Err(reload_error(format!(
                "reading event {} back from storage gave seq {}",
                from + i as u64,
                e.seq
            )));
        }
        Ok(Arc::from(events))
    }

    /// Call `f` on every event of `a..b`, in order; each evicted chunk is
    /// read once.
    pub fn visit_range(&self, a: usize, b: usize, mut f: impl FnMut(&Arc<Event>)) -> Result<()> {
        let mut i = a;
        while i < b {
            let k = i / CHUNK;
            let end = ((k + 1) * CHUNK).min(b);
            if self.log.is_evicted(k) {
                let chunk = self.chunk(k)?;
                chunk[i - k * CHUNK..end - k * CHUNK]
                    .iter()
                    .for_each(&mut f);
            } else {
                self.log.range(i..end).for_each(|e| f(&e));
            }
            i = end;
        }
        Ok(())
    }

    /// Call `f(position, event)` for the event of every seq in `seqs` (in
    /// no particular order); each evicted chunk they fall in is read once.
    pub fn visit_seqs(&self, seqs: &[u64], mut f: impl FnMut(usize, &Event)) -> Result<()> {
        let mut missing = Vec::new();
        for (i, &seq) in seqs.iter().enumerate() {
            match self.log.get(seq as usize) {
                Some(e) => f(i, &e),
                None => missing.push((seq, i)),
            }
        }
        missing.sort_unstable();
        let mut rest = &missing[..];
        while let Some(&(seq, _)) = rest.first() {
            let k = seq as usize / CHUNK;
            let chunk = self.chunk(k)?;
            let n = rest
                .iter()
                .take_while(|(s, _)| *s as usize / CHUNK == k)
                .count();
            for &(s, i) in &rest[..n] {
                f(i, &chunk[s as usize % CHUNK]);
            }
            rest = &rest[n..];
        }
        Ok(())
    }

    /// The event at index `i` (read back if evicted).
    pub fn event(&self, i: usize) -> Result<Arc<Event>> {
        if let Some(e) = self.log.get(i) {
            return Ok(e.clone());
        }
        Ok(self.chunk(i / CHUNK)?[i % CHUNK].clone())
    }

    /// The last event before index `len` whose type satisfies `pred`,
    /// walking back a chunk at a time (types are read in place; evicted
    /// chunks are read back as it goes).
    pub fn rfind(
        &self,
        len: usize,
        pred: impl Fn(&JsString) -> bool,
    ) -> Result<Option<Arc<Event>>> {
        let mut end = len;
        while end > 0 {
            let k = (end - 1) / CHUNK;
            let start = k * CHUNK;
            let found = if self.log.is_evicted(k) {
                let chunk = self.chunk(k)?;
                chunk[..end - start]
                    .iter()
                    .rev()
                    .find(|e| pred(&e.ty))
                    .cloned()
            } else {
                (start..end)
                    .rev()
                    .find(|&i| self.log.ty(i).is_some_and(&pred))
                    .and_then(|i| self.log.get(i))
            };
            if found.is_some() {
                return Ok(found);
            }
            end = start;
        }
        Ok(None)
    }

    /// The first `len` events as a fully resident log (evicted chunks read
    /// back; resident ones shared).
    pub fn resident_prefix(&self, len: usize) -> Result<Log> {
        let (full, rem) = (len / CHUNK, len % CHUNK);
        if rem > 0 && self.log.is_evicted(full) {
            // The prefix ends inside an evicted chunk: its head is read too.
            let mut log = self.resident_prefix(full * CHUNK)?;
            log.extend(self.chunk(full)?[..rem].iter().cloned());
            return Ok(log);
        }
        let mut log = self.log.prefix(len);
        for k in 0..log.full_chunks() {
            if log.is_evicted(k) {
                log.restore_chunk(k, &self.chunk(k)?);
            }
        }
        Ok(log)
    }
}
