//! Reading a stored log a batch at a time, for the commands that need
//! only part of it: a session's summary for `list` (its length, open turn
//! and torn tail) and a range of events for `show`, handed over as they
//! are read. The whole log is never held (but for a log the stream leaves
//! to the whole read): memory stays that of one batch.

use dsh_session::engine::event::{TURN_END, TURN_START};
use dsh_session::error::Result;
use dsh_session::json::Value;
use dsh_session::store::{Backend, Stored};

/// What `list` shows of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Stored events (the valid prefix).
    pub events: u64,
    /// The turn number of the open turn, if the log ends inside one.
    pub open_turn: Option<Value>,
    /// A torn tail follows the valid prefix.
    pub torn: bool,
}

/// The open turn after `e`, given the open turn before it.
fn turn_after(e: &Stored, open: &mut Option<Value>) {
    if e.is_type(TURN_START) {
        let v = e.to_value();
        let turn = v
            .as_object()
            .and_then(|o| o.get("data"))
            .and_then(Value::as_object)
            .and_then(|d| d.get("turn"))
            .cloned()
            .unwrap_or_default();
        *open = Some(turn);
    } else if e.is_type(TURN_END) {
        *open = None;
    }
}

/// The open turn of a stored log (`data.turn` of an unclosed `turn/start`).
pub fn open_turn(events: &[Stored]) -> Option<Value> {
    let mut open = None;
    for e in events {
        turn_after(e, &mut open);
    }
    open
}

/// The summary of session `id` (`None` when absent), streamed when the
/// backend can; a log the stream leaves to the whole-log read (a torn or
/// damaged tail) is read whole. `tick` hears how many events each batch
/// held.
pub fn summary(
    backend: &mut dyn Backend,
    id: &str,
    tick: &mut dyn FnMut(u64),
) -> Result<Option<Summary>> {
    let mut s = Summary {
        events: 0,
        open_turn: None,
        torn: false,
    };
    let streamed = match backend.range_reads() {
        Some(reads) => reads.load_streaming(id, &mut |_, batch| {
            s.events += batch.len() as u64;
            tick(batch.len() as u64);
            for e in &batch {
                turn_after(e, &mut s.open_turn);
            }
            Ok(())
        })?,
        None => None,
    };
    if streamed.is_some() {
        return Ok(Some(s));
    }
    let Some(loaded) = backend.load(id)? else {
        return Ok(None);
    };
    tick(loaded.events.len() as u64);
    Ok(Some(Summary {
        events: loaded.events.len() as u64,
        open_turn: open_turn(&loaded.events),
        torn: loaded.torn.is_some(),
    }))
}

/// Whether a reader of events goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Hand over the next event.
    Go,
    /// Stop reading (the reader went away).
    Stop,
}

/// What [`range`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranged {
    /// No session `id`.
    Absent,
    /// The range was read; `torn`: a torn tail follows the log.
    Read {
        /// A torn tail follows the log.
        torn: bool,
    },
    /// The reader stopped it.
    Stopped,
}

/// How many events a seekable read asks for at a time.
const RANGE_PAGE: u64 = 4096;

/// Hand the stored events of `id` with `from <= seq < to` to `each` in
/// order, as they are read: a `seekable` backend (SQLite, PostgreSQL)
/// reads the range a page at a time; otherwise the log streams (events
/// before the range are passed over) or, when it cannot (a torn or
/// damaged tail), is read whole and the events not handed over yet
/// follow. Memory stays that of a batch. `tick` hears how many events
/// each batch held; `each` may stop the read.
pub fn range(
    backend: &mut dyn Backend,
    id: &str,
    (from, to): (u64, u64),
    seekable: bool,
    tick: &mut dyn FnMut(u64),
    each: &mut dyn FnMut(u64, Stored) -> Flow,
) -> Result<Ranged> {
    if seekable && backend.range_reads().is_some() {
        if backend.revision(id)?.is_none() {
            return Ok(Ranged::Absent);
        }
        let reads = backend.range_reads().expect("checked above");
        let mut at = from;
        while at < to {
            let end = to.min(at.saturating_add(RANGE_PAGE));
            let page = reads.load_range(id, at, end)?;
            let n = page.len() as u64;
            tick(n);
            for (i, e) in page.into_iter().enumerate() {
                if each(at + i as u64, e) == Flow::Stop {
                    return Ok(Ranged::Stopped);
                }
            }
            if n < end - at {
                break;
            }
            at = end;
        }
        return Ok(Ranged::Read { torn: false });
    }
    // The next seq of the log; `stopped`: `each` asked to stop.
    let mut seq = 0u64;
    let mut stopped = false;
    let streamed = match backend.range_reads() {
        Some(reads) => {
            let r = reads.load_streaming(id, &mut |_, batch| {
                tick(batch.len() as u64);
                for e in batch {
                    let at = seq;
                    seq += 1;
                    if at >= to {
                        break;
                    }
                    if at >= from && each(at, e) == Flow::Stop {
                        stopped = true;
                        break;
                    }
                }
                if stopped || seq >= to {
                    // Nothing more is wanted: end the read here.
                    stopped = true;
                    return Err(dsh_session::error::Error::new(
                        dsh_session::error::Status::Ok,
                        dsh_session::Rule::OpenNotStreamable,
                        "the range is read",
                    ));
                }
                Ok(())
            });
            match r {
                Err(_) if stopped && seq >= to => return Ok(Ranged::Read { torn: false }),
                Err(_) if stopped => return Ok(Ranged::Stopped),
                r => r?,
            }
        }
        None => None,
    };
    if streamed.is_some() {
        return Ok(Ranged::Read { torn: false });
    }
    // The whole read: the events from where the stream stopped.
    let Some(loaded) = backend.load(id)? else {
        return Ok(Ranged::Absent);
    };
    let torn = loaded.torn.is_some();
    let len = loaded.events.len() as u64;
    tick(len.saturating_sub(seq));
    let start = from.max(seq);
    for (i, e) in loaded.events.into_iter().enumerate() {
        let at = i as u64;
        if at < start {
            continue;
        }
        if at >= to || each(at, e) == Flow::Stop {
            break;
        }
    }
    Ok(Ranged::Read { torn })
}
