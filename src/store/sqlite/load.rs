//! The whole-log read of one session (persistence.md §7.7): its rows are
//! selected in seq order and decoded, by a second thread as well once the
//! log is long, then `scanRows` decides where the valid prefix ends.
//!
//! The thread that reads the rows hands batches to a decoding thread and
//! decodes a batch itself whenever more than [`MAX_WAITING`] wait, so both
//! cores decode and the rows in flight stay bounded. Each batch keeps its
//! rows' seqs and outcomes and drops the rows, so the whole log's rows are
//! never held at once.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use rusqlite::Connection;

use super::rows::{self, RawRow, Scan, Wtf8};
use super::schema::sql_err;
use crate::error::{Error, Result, Status};
use crate::store::backend::Stored;

/// Rows per batch.
const BATCH: usize = 256;
/// A second thread starts once this many rows were decoded here: below
/// it, starting the thread and its heap cost more than they save.
const PARALLEL_FROM: usize = 8192;
/// Batches the reading thread lets wait before it decodes one itself.
const MAX_WAITING: usize = 2;

/// One batch of rows, decoded.
struct Decoded {
    /// Each row's seq and its event count, or why it does not decode.
    rows: Vec<(u64, Result<usize>)>,
    /// The events of the rows that decode, in order.
    events: Vec<Stored>,
    /// Index in `rows` of the last row holding a `turn/end`.
    last_turn_end: Option<usize>,
}

fn decode(batch: Vec<RawRow>) -> Decoded {
    let mut events = Vec::with_capacity(batch.len());
    let mut rows = Vec::with_capacity(batch.len());
    let mut last_turn_end = None;
    for (i, row) in batch.iter().enumerate() {
        let from = events.len();
        let d = rows::decode_into(row, &mut events);
        if d.is_ok() && events[from..].iter().any(rows::is_turn_end) {
            last_turn_end = Some(i);
        }
        rows.push((row.seq, d));
    }
    Decoded {
        rows,
        events,
        last_turn_end,
    }
}

/// `scanRows` over every row of session `id` (`conn` inside a transaction).
pub fn scan_session(conn: &Connection, id: &[u8]) -> Result<Scan> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE session_id = ?1 ORDER BY seq",
            rows::COLUMNS
        ))
        .map_err(sql_err)?;
    let mut q = stmt.query([Wtf8(id)]).map_err(sql_err)?;
    let mut next_batch = || -> Result<Vec<RawRow>> {
        let mut batch = Vec::with_capacity(BATCH);
        while batch.len() < BATCH {
            match q.next().map_err(sql_err)? {
                Some(row) => batch.push(RawRow::from_row(row)?),
                None => break,
            }
        }
        Ok(batch)
    };
    settle(decode_all(&mut next_batch)?, 0)
}

/// Every batch `next` yields (until an empty one), decoded, in order.
fn decode_all(next: &mut dyn FnMut() -> Result<Vec<RawRow>>) -> Result<Vec<Decoded>> {
    let mut done = Vec::new();
    while done.len() * BATCH < PARALLEL_FROM {
        let batch = next()?;
        if batch.is_empty() {
            return Ok(done);
        }
        done.push(decode(batch));
    }
    let queue = Queue::default();
    let first = done.len();
    let read = std::thread::scope(|s| {
        let worker = s.spawn(|| while queue.decode_one(true) {});
        let read = queue.feed(first, next);
        queue.close();
        while queue.decode_one(false) {}
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
        read
    });
    read?;
    let mut rest = std::mem::take(&mut queue.lock().done);
    rest.sort_unstable_by_key(|(i, _)| *i);
    done.extend(rest.into_iter().map(|(_, d)| d));
    Ok(done)
}

/// Batches between the reading thread and the decoding thread.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    /// Read and not yet decoded, with their index in the log.
    waiting: VecDeque<(usize, Vec<RawRow>)>,
    /// Decoded here, with their index (in any order).
    done: Vec<(usize, Decoded)>,
    /// Nothing more will be read.
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Read batches (numbered from `first`) into the queue until `next`
    /// yields an empty one, decoding the oldest whenever too many wait.
    fn feed(&self, first: usize, next: &mut dyn FnMut() -> Result<Vec<RawRow>>) -> Result<()> {
        for index in first.. {
            let batch = next()?;
            if batch.is_empty() {
                return Ok(());
            }
            let mut st = self.lock();
            st.waiting.push_back((index, batch));
            let too_many = st.waiting.len() > MAX_WAITING;
            drop(st);
            self.ready.notify_one();
            if too_many {
                self.decode_one(false);
            }
        }
        Ok(())
    }

    /// No more batches: wake a waiting decoder to finish.
    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Decode the oldest waiting batch; false when there is none and, with
    /// `wait`, none will come.
    fn decode_one(&self, wait: bool) -> bool {
        let mut st = self.lock();
        let (index, batch) = loop {
            if let Some(b) = st.waiting.pop_front() {
                break b;
            }
            if !wait || st.closed {
                return false;
            }
            st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
        };
        drop(st);
        let decoded = decode(batch);
        self.lock().done.push((index, decoded));
        true
    }
}

/// `scanRows(rows, base)` (§7.7) over decoded batches in seq order: a bad
/// row at or before the last row that decodes to a `turn/end` is
/// `load.corrupt-committed-row`, a later one starts the torn tail.
fn settle(batches: Vec<Decoded>, base: u64) -> Result<Scan> {
    let last_turn_end = batches
        .iter()
        .enumerate()
        .rev()
        .find_map(|(b, d)| d.last_turn_end.map(|i| (b, i)));
    let mut all = Vec::with_capacity(batches.iter().map(|d| d.events.len()).sum());
    let mut expected = base;
    for (b, d) in batches.into_iter().enumerate() {
        let mut events = d.events.into_iter();
        for (i, (seq, outcome)) in d.rows.into_iter().enumerate() {
            let cause = match outcome {
                Ok(n) if seq == expected => {
                    expected += n as u64;
                    all.extend(events.by_ref().take(n));
                    continue;
                }
                Ok(_) => None,
                Err(e) => Some(e),
            };
            if last_turn_end.is_some_and(|last| (b, i) <= last) {
                let prefix =
                    format!("corrupt session log: invalid committed physical row at seq {seq}");
                return Err(match cause {
                    Some(e) => e.wrapped(
                        Status::Corrupt,
                        "load.corrupt-committed-row",
                        &format!("{prefix}: "),
                    ),
                    None => Error::new(
                        Status::Corrupt,
                        "load.corrupt-committed-row",
                        format!("{prefix} (expected seq {expected})"),
                    ),
                });
            }
            return Ok(Scan {
                events: all,
                torn_from: Some(seq),
            });
        }
    }
    Ok(Scan {
        events: all,
        torn_from: None,
    })
}
