//! Reading a stored log a batch at a time, for the commands that need
//! only part of it: a session's summary for `list` (its length, open turn
//! and torn tail) and a range of events for `show`. The whole log is never
//! held: memory stays that of one batch (or of the range kept).

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

/// The stored events of `id` with `from <= seq < to`, as values, and
/// whether a torn tail follows the log (`None` when absent). A `seekable`
/// backend (SQLite) reads just the range; otherwise the log is streamed
/// (only the range is kept), or read whole when it cannot be.
pub fn range(
    backend: &mut dyn Backend,
    id: &str,
    (from, to): (u64, u64),
    seekable: bool,
    tick: &mut dyn FnMut(u64),
) -> Result<Option<(Vec<Value>, bool)>> {
    if seekable && backend.range_reads().is_some() {
        if backend.revision(id)?.is_none() {
            return Ok(None);
        }
        let reads = backend.range_reads().expect("checked above");
        let events = reads.load_range(id, from, to)?;
        tick(events.len() as u64);
        return Ok(Some((
            events.into_iter().map(Stored::into_value).collect(),
            false,
        )));
    }
    let mut kept = Vec::new();
    let mut seq = 0u64;
    let streamed = match backend.range_reads() {
        Some(reads) => reads.load_streaming(id, &mut |_, batch| {
            tick(batch.len() as u64);
            for e in batch {
                if (from..to).contains(&seq) {
                    kept.push(e.into_value());
                }
                seq += 1;
            }
            Ok(())
        })?,
        None => None,
    };
    if streamed.is_some() {
        return Ok(Some((kept, false)));
    }
    let Some(loaded) = backend.load(id)? else {
        return Ok(None);
    };
    tick(loaded.events.len() as u64);
    let torn = loaded.torn.is_some();
    let len = loaded.events.len() as u64;
    let (a, b) = (from.min(len) as usize, to.min(len) as usize);
    let values = loaded.events[a..b].iter().map(Stored::to_value).collect();
    Ok(Some((values, torn)))
}
