//! The whole-log read of one session (docs/formats.md §4.7): its rows are
//! selected in seq order and decoded, by a second thread as well when the
//! log is long ([`PARALLEL_FROM`]), then `scanRows` decides where the
//! valid prefix ends.
//!
//! The thread that reads the rows hands batches to a decoding thread and
//! decodes a batch itself whenever more than [`MAX_WAITING`] wait, so both
//! cores decode and the rows in flight stay bounded. Each batch keeps its
//! rows' seqs and outcomes, and its rows' buffer ([`RowBuf`]) goes back to
//! the reading thread to be filled again, so the whole log's rows are never
//! held at once and no row costs an allocation.
//!
//! Also the read of a range of a session's events (windowed sessions).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use rusqlite::Connection;

use super::row_buf::RowBuf;
use super::rows::{self, RawRow, Scan, Wtf8};
use super::schema::sql_err;
use crate::error::{Error, Result, Status};
use crate::rule::Rule;
use crate::store::backend::Stored;
use crate::store::chunk_rows::SQLITE_BOUNDS;

/// End the read transaction of a whole-session read; returns the
/// `data_version` it saw (see [`super::LastScan`]).
pub(super) fn commit_read(tx: rusqlite::Transaction<'_>) -> Result<i64> {
    let version = super::data_version(&tx)?;
    tx.commit().map_err(sql_err)?;
    Ok(version)
}

/// Rows per batch.
const BATCH: usize = 256;
/// Logs whose last seq reaches this decode on two threads from their first
/// row; shorter ones decode on this thread alone, each row as soon as it is
/// read (starting the thread and its heap would cost more than it saves).
const PARALLEL_FROM: u64 = if cfg!(test) { 4096 } else { 32768 };
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

impl Decoded {
    fn with_capacity(rows: usize) -> Decoded {
        Decoded {
            rows: Vec::with_capacity(rows),
            events: Vec::with_capacity(rows),
            last_turn_end: None,
        }
    }

    /// Decode `row` and add it.
    fn push(&mut self, row: &RawRow<'_>) {
        let from = self.events.len();
        let d = rows::decode_into(row, &mut self.events);
        if d.is_ok() && self.events[from..].iter().any(rows::is_turn_end) {
            self.last_turn_end = Some(self.rows.len());
        }
        self.rows.push((row.seq, d));
    }
}

fn decode(batch: &RowBuf) -> Decoded {
    let mut d = Decoded::with_capacity(batch.len());
    for row in batch.iter() {
        d.push(&row);
    }
    d
}

/// The events of a page of rows that continues the log at `next`, in
/// order, or `None` when a row does not decode or breaks contiguity (the
/// whole-log read then decides and reports).
pub(super) fn decode_page(page: &RowBuf, mut next: u64) -> Option<Vec<Stored>> {
    let mut out = Vec::with_capacity(page.len());
    for row in page.iter() {
        let n = rows::decode_into(&row, &mut out).ok()?;
        if row.seq != next || n == 0 {
            return None;
        }
        next += n as u64;
    }
    Some(out)
}

/// `scanRows` over every row of session `id` (`conn` inside a transaction).
pub fn scan_session(conn: &Connection, id: &[u8]) -> Result<Scan> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE session_id = ?1 ORDER BY seq",
            rows::COLUMNS
        ))
        .map_err(sql_err)?;
    let long = last_seq(conn, id)?.is_some_and(|last| last >= PARALLEL_FROM);
    let mut q = stmt.query([Wtf8(id)]).map_err(sql_err)?;
    let decoded = if long {
        decode_parallel(&mut q)?
    } else {
        // Each row is decoded as soon as it is read, straight from
        // SQLite's buffers.
        let mut all = Decoded::with_capacity(0);
        while let Some(row) = q.next().map_err(sql_err)? {
            all.push(&RawRow::from_row(row)?);
        }
        vec![all]
    };
    settle(decoded, 0)
}

/// The seq of the last row of session `id` (an index lookup).
fn last_seq(conn: &Connection, id: &[u8]) -> Result<Option<u64>> {
    let mut stmt = conn
        .prepare_cached("SELECT seq FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1")
        .map_err(sql_err)?;
    let mut q = stmt.query([Wtf8(id)]).map_err(sql_err)?;
    let Some(row) = q.next().map_err(sql_err)? else {
        return Ok(None);
    };
    // A seq of another type is reported by the row scan itself.
    Ok(row
        .get::<_, i64>(0)
        .ok()
        .and_then(|s| u64::try_from(s).ok()))
}

/// Every row `q` yields, decoded on this thread and a second one, in
/// batches in order.
fn decode_parallel(q: &mut rusqlite::Rows<'_>) -> Result<Vec<Decoded>> {
    let queue = Queue::default();
    let read = std::thread::scope(|s| {
        let worker = s.spawn(|| while queue.decode_one(true) {});
        let read = queue.feed(q);
        queue.close();
        while queue.decode_one(false) {}
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
        read
    });
    read?;
    let mut done = std::mem::take(&mut queue.lock().done);
    done.sort_unstable_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, d)| d).collect())
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
    waiting: VecDeque<(usize, RowBuf)>,
    /// Decoded and cleared, for the reading thread to fill again.
    free: Vec<RowBuf>,
    /// Decoded here, with their index (in any order).
    done: Vec<(usize, Decoded)>,
    /// Nothing more will be read.
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Read rows in batches into the queue until `q` has no more,
    /// decoding the oldest batch whenever too many wait. Each batch is
    /// filled into a buffer a decoded batch gave back, when there is one.
    fn feed(&self, q: &mut rusqlite::Rows<'_>) -> Result<()> {
        let mut batch = RowBuf::default();
        for index in 0.. {
            while batch.len() < BATCH {
                match q.next().map_err(sql_err)? {
                    Some(row) => batch.push(&RawRow::from_row(row)?),
                    None => break,
                }
            }
            if batch.is_empty() {
                return Ok(());
            }
            let mut st = self.lock();
            st.waiting.push_back((index, batch));
            batch = st.free.pop().unwrap_or_default();
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
        let mut batch = batch;
        let decoded = decode(&batch);
        batch.clear();
        let mut st = self.lock();
        st.done.push((index, decoded));
        st.free.push(batch);
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
                let err = match cause {
                    Some(e) => e.wrapped(
                        Status::Corrupt,
                        Rule::LoadCorruptCommittedRow,
                        &format!("{prefix}: "),
                    ),
                    None => Error::new(
                        Status::Corrupt,
                        Rule::LoadCorruptCommittedRow,
                        format!("{prefix} (expected seq {expected})"),
                    ),
                };
                return Err(err.at_seq(seq));
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

/// The most events one packed row holds (schema 17).
const MAX_PACKED: u64 = match SQLITE_BOUNDS.max_members {
    Some(n) => n as u64,
    None => panic!("SQLite rows have a member bound"),
};

/// The stored events of `id` with seqs `from..to` (fewer when the log ends
/// first): the rows from [`MAX_PACKED`] − 1 seqs before `from` (a packed
/// row starting that early may cover it), of which only packed rows before
/// `from` are decoded.
pub(super) fn load_range(conn: &Connection, id: &str, from: u64, to: u64) -> Result<Vec<Stored>> {
    if from >= to {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
            rows::COLUMNS
        ))
        .map_err(sql_err)?;
    let low = from.saturating_sub(MAX_PACKED - 1).min(i64::MAX as u64) as i64;
    let high = to.min(i64::MAX as u64) as i64;
    let mut q = stmt
        .query((Wtf8(id.as_bytes()), low, high))
        .map_err(sql_err)?;
    let mut out = Vec::with_capacity((to - from).min(1 << 16) as usize);
    while let Some(row) = q.next().map_err(sql_err)? {
        let row = RawRow::from_row(row)?;
        let first = row.seq;
        if first < from && !row.is_packed() {
            continue; // one event, before the range
        }
        for (i, e) in rows::decode(&row)?.into_iter().enumerate() {
            let seq = first + i as u64;
            if (from..to).contains(&seq) {
                out.push(e);
            }
        }
    }
    Ok(out)
}
