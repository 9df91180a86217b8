//! Lossless copy of stored sessions between two backends (the
//! `dsh-session convert` command): JSONL ⇄ SQLite, raw ⇄ zstd JSONL.
//!
//! A session is read with [`Backend::load`] and written with
//! [`Backend::append`] in batches of [`BATCH`] events, so the destination
//! holds the same header and the same events (the same JSON values, in the
//! same key order) as the source; only the physical encoding changes
//! (packed chunk rows, compression, one frame or transaction per batch).
//! Nothing is validated beyond what the destination backend checks: a
//! session is copied as stored, damaged or not, except that a torn tail is
//! refused (it would be lost; repair the source first).
//!
//! The one header difference is the formats' own (docs/formats.md §8): a JSONL
//! header always carries `delegationDepth` (0 when absent), SQLite keeps it
//! absent.

use std::sync::Arc;

use super::backend::{header_id, Backend};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// Events per destination append (one zstd frame / one SQLite transaction).
pub const BATCH: usize = 8192;

/// What the copy reports while it works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// A session was read and is about to be written: its id and length.
    Session {
        /// The session id.
        id: &'a str,
        /// How many events it has.
        events: usize,
    },
    /// A batch of this many events was written durably.
    Events(usize),
}

/// The ids `src` lists, in its order.
pub fn session_ids(src: &mut dyn Backend) -> Result<Vec<String>> {
    src.list()?
        .into_iter()
        .map(|row| match row.problem {
            // Converting would lose the session: refuse.
            Some(e) => Err(e),
            None => Ok(header_id(&row.header).to_string()),
        })
        .collect()
}

/// `convert.exists` when any of `ids` is already stored in `dst`.
pub fn check_absent(dst: &mut dyn Backend, ids: &[String]) -> Result<()> {
    for id in ids {
        if dst.revision(id)?.is_some() {
            return Err(Error::new(
                Status::Conflict,
                Rule::ConvertExists,
                format!("session \"{id}\" is already stored in the destination; refusing to overwrite it"),
            ));
        }
    }
    Ok(())
}

/// Copy session `id` from `src` to `dst`; returns how many events were
/// written (0: the source holds a header without events, nothing is
/// written). `convert.exists` when `dst` already stores `id`,
/// `convert.torn-tail` when the source log has a torn tail. When a write
/// fails, what was written of this session is deleted again.
pub fn copy_session(
    src: &mut dyn Backend,
    dst: &mut dyn Backend,
    id: &str,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<usize> {
    check_absent(dst, &[id.to_string()])?;
    let loaded = src.load(id)?.ok_or_else(|| {
        Error::new(
            Status::NotFound,
            Rule::LoadNotFound,
            format!("session \"{id}\" not found in the source"),
        )
    })?;
    if let Some(torn) = &loaded.torn {
        return Err(Error::new(
            Status::Corrupt,
            Rule::ConvertTornTail,
            format!(
                "session \"{id}\" has a torn tail after seq {} in the source; repair it first (dsh-session repair)",
                (loaded.events.len() - torn.recovered) as i64 - 1
            ),
        ));
    }
    let total = loaded.events.len();
    progress(Step::Session { id, events: total });
    let header = loaded.header;
    let mut events = loaded.events.into_iter().enumerate();
    let mut written = 0;
    while written < total {
        let batch: Result<Vec<Arc<Event>>> = events
            .by_ref()
            .take(BATCH)
            .map(|(i, v)| {
                Event::from_envelope(
                    v.into_value(),
                    &format!("session \"{id}\" event at seq {i}"),
                )
                .map(Arc::new)
                .map_err(|e| e.at_index(i))
            })
            .collect();
        let result = batch.and_then(|batch| {
            dst.append(&header, &batch, written == 0)
                .map(|()| batch.len())
        });
        match result {
            Ok(n) => {
                written += n;
                progress(Step::Events(n));
            }
            Err(e) => {
                if written > 0 {
                    let _ = dst.delete(id);
                }
                return Err(e);
            }
        }
    }
    Ok(written)
}
