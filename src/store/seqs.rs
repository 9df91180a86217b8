//! Seq continuity of what a backend is handed (docs/formats.md §2): a
//! batch must continue the stored log. The writer checks it once for every
//! backend; backends that keep their own idea of the next seq (JSONL)
//! check it again.

use crate::engine::session::Log;
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// [`check_contiguous`] for a session's log, whose events carry their
/// index as seq by construction: its first and last event must continue
/// the stored log (O(1), so a fork's shared seed is not walked).
pub fn check_log_ends(id: &str, next: u64, events: &Log) -> Result<()> {
    let n = events.len();
    match (events.first(), events.last()) {
        (Some(first), Some(last)) if first.seq == next && last.seq == next + n as u64 - 1 => Ok(()),
        (None, _) => Ok(()),
        _ => check_contiguous(id, next, events),
    }
}

/// `persist.append-seq-mismatch`: a batch must continue the stored log at `next`.
pub fn check_contiguous(
    id: &str,
    next: u64,
    events: impl IntoIterator<Item = impl AsRef<Event>>,
) -> Result<()> {
    for (i, e) in events.into_iter().enumerate() {
        let e = e.as_ref();
        if e.seq != next + i as u64 {
            return Err(Error::new(
                Status::Conflict,
                Rule::PersistAppendSeqMismatch,
                format!(
                    "append seq mismatch for \"{id}\": expected {} at index {i}, got {}",
                    next + i as u64,
                    e.seq
                ),
            ));
        }
    }
    Ok(())
}
