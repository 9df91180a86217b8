//! The SQLite backend's transactions and row-level helpers: the write
//! transaction, the logical tail of a session, and the inserts of packed
//! records (docs/formats.md §4.8).

use std::borrow::Cow;
use std::sync::Arc;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::row_buf::RowBuf;
use super::rows::{Data, RawRow, Wtf8};
use super::schema::{self, sql_err};
use super::sessions::{self, header_id_bytes};
use super::{ahead, early, rows, INSERT_EVENT};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::rule::Rule;
use crate::store::backend::Batch;
use crate::store::chunk_rows::Record;
use crate::store::chunk_rows::{pack, SQLITE_BOUNDS};
use crate::store::writer::Hurry;

/// `BEGIN IMMEDIATE`, then the schema re-validation; the transaction rolls
/// back when dropped uncommitted.
pub(super) fn write_tx(conn: &mut Connection) -> Result<Transaction<'_>> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    schema::validate_for_mutation(&tx)?;
    Ok(tx)
}

/// Rows per page of a streaming read.
pub(super) const STREAM_PAGE: usize = if cfg!(test) { 64 } else { 1024 };

pub(super) fn lossy(id: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(id)
}

/// Validated rows of `id` with `seq >= from`, in seq order.
pub(super) fn select_rows(conn: &Connection, id: &[u8], from: i64) -> Result<RowBuf> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq",
            rows::COLUMNS
        ))
        .map_err(sql_err)?;
    let mut q = stmt.query((Wtf8(id), from)).map_err(sql_err)?;
    let mut out = RowBuf::default();
    while let Some(row) = q.next().map_err(sql_err)? {
        out.push(&RawRow::from_row(row)?);
    }
    Ok(out)
}

/// The first seq of the physical span that holds the logical tail: the
/// earlier of the last two rows, or a packed predecessor (within 1023 seqs)
/// that covers it or fails to decode.
pub(super) fn tail_base(conn: &Connection, id: &[u8], start: i64) -> Result<i64> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 \
             AND ignorable = 0 AND type IN ('text-chunks', 'reasoning-chunks', 'tool-call-chunks') \
             ORDER BY seq",
            rows::COLUMNS
        ))
        .map_err(sql_err)?;
    let mut q = stmt
        .query((Wtf8(id), (start - 1023).max(0), start))
        .map_err(sql_err)?;
    while let Some(row) = q.next().map_err(sql_err)? {
        let row = RawRow::from_row(row)?;
        if rows::last_member(&row).is_none_or(|last| last >= start as u64) {
            return Ok(row.seq as i64);
        }
    }
    Ok(start)
}

/// The next logical seq of `id` (0 for no rows); `sqlite.append-torn-tail`
/// when the physical tail does not decode into a contiguous run.
fn logical_next(conn: &Connection, id: &[u8]) -> Result<u64> {
    let mut stmt = conn
        .prepare_cached("SELECT seq FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 2")
        .map_err(sql_err)?;
    let last: Vec<i64> = stmt
        .query_map([Wtf8(id)], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(sql_err)?;
    let Some(&start) = last.last() else {
        return Ok(0);
    };
    let base = tail_base(conn, id, start)?;
    let tail = select_rows(conn, id, base)?;
    let mut expected = base as u64;
    for row in tail.iter() {
        let torn = |cause: Option<Error>| {
            let message = format!(
                "session \"{}\" has an invalid physical tail at seq {}",
                lossy(id),
                row.seq
            );
            let err = match cause {
                Some(e) => e.wrapped(
                    Status::Corrupt,
                    Rule::SqliteAppendTornTail,
                    &format!("{message}: "),
                ),
                None => Error::new(Status::Corrupt, Rule::SqliteAppendTornTail, message),
            };
            err.at_seq(row.seq)
        };
        match rows::decode(&row) {
            Ok(events) if row.seq == expected => expected += events.len() as u64,
            Ok(_) => return Err(torn(None)),
            Err(e) => return Err(torn(Some(e))),
        }
    }
    Ok(expected)
}

/// Every event of the batch continues the log at `next`.
pub(super) fn check_seqs(next: u64, events: &[Arc<Event>], rule: Rule, what: &str) -> Result<()> {
    for (i, e) in events.iter().enumerate() {
        let want = next + i as u64;
        if e.seq != want {
            let message = if i == 0 {
                format!("{what} starts at seq {}, stored next seq is {next}", e.seq)
            } else {
                format!(
                    "{what} is not contiguous: expected seq {want} at index {i}, got {}",
                    e.seq
                )
            };
            return Err(Error::new(Status::Conflict, rule, message));
        }
    }
    Ok(())
}

/// Insert storage records (scalar rows and packed rows, §7.4). The large
/// values of events (in order) come from `early` when it has them, else
/// from `ahead` when given (see [`ahead::Job::of`]).
pub(super) fn insert_records(
    conn: &Connection,
    id: &[u8],
    records: &[Record<'_>],
    zstd: &mut zstd::bulk::Compressor<'static>,
    early: &[early::Frame],
    ahead: Option<&ahead::Job>,
) -> Result<()> {
    let mut stmt = conn.prepare_cached(INSERT_EVENT).map_err(sql_err)?;
    let (mut large, mut helped) = (0, 0);
    for record in records {
        match record {
            Record::Event(e) => {
                let text = e.data_text();
                let data = if text.len() < rows::COMPRESS_FROM {
                    Data::Text(text)
                } else {
                    large += 1;
                    match (early.get(large - 1).and_then(Option::as_ref), ahead) {
                        (Some(Some(frame)), _) => Data::Blob(Cow::Borrowed(frame)),
                        (Some(None), _) => Data::Text(text),
                        (None, Some(job)) => {
                            helped += 1;
                            job.take(helped - 1, zstd)?
                        }
                        (None, None) => rows::encode_data(text, zstd)?,
                    }
                };
                let surface = rows::surface_columns(e)?;
                stmt.execute((
                    Wtf8(id),
                    e.seq as i64,
                    Wtf8(e.ty.as_wtf8()),
                    e.time,
                    data,
                    surface.sources,
                    surface.op,
                    surface.ignorable,
                ))
                .map_err(sql_err)?;
            }
            Record::Row(row) => {
                let data = rows::encode_data(&row.data, zstd)?;
                let none: Option<&str> = None;
                stmt.execute((
                    Wtf8(id),
                    row.seq0 as i64,
                    row.tag,
                    row.time0,
                    data,
                    none,
                    none,
                    0i64,
                ))
                .map_err(sql_err)?;
            }
        }
    }
    Ok(())
}

/// Tells the helper a job is over when the append returns, however it does.
struct Finish<'j>(pub(super) Option<&'j ahead::Job>);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if let Some(job) = self.0 {
            job.finish();
        }
    }
}

/// Write one batch inside the open transaction (or savepoint) `conn`:
/// check that it continues the stored log (`known`: its next seq, when
/// the caller knows it), materialize the session's row when asked, bump
/// its revision and insert its records. Returns the session's next seq.
pub(super) fn write_batch(
    conn: &Connection,
    b: &Batch<'_>,
    events: &[Arc<Event>],
    known: Option<u64>,
    zstd: &mut zstd::bulk::Compressor<'static>,
    ahead: &mut ahead::Ahead,
    hurry: Option<&Arc<Hurry>>,
) -> Result<u64> {
    let id = header_id_bytes(b.header);
    let incarnation = if b.materialize {
        Some(crate::store::uuid::new_uuid()?)
    } else {
        None
    };
    let records = pack(events, SQLITE_BOUNDS);
    let large: Vec<&Arc<Event>> = records
        .iter()
        .filter_map(|r| match r {
            Record::Event(e) if rows::is_large(e) => Some(*e),
            _ => None,
        })
        .collect();
    let early = ahead.early.take(&large);
    let late = large.iter().zip(&early).filter(|(_, f)| f.is_none());
    let job = ahead::Job::of(late.map(|(e, _)| *e), hurry);
    if let Some(job) = &job {
        ahead.offer(job);
    }
    let _finish = Finish(job.as_deref());
    let next = match known {
        Some(n) => n,
        None => logical_next(conn, id)?,
    };
    let what = format!("session \"{}\" append", lossy(id));
    check_seqs(next, events, Rule::SqliteAppendSeqMismatch, &what)?;
    if let Some(incarnation) = &incarnation {
        sessions::upsert(conn, b.header, incarnation)?;
    }
    sessions::bump_revision(conn, id)?;
    insert_records(conn, id, &records, zstd, &early, job.as_deref())?;
    Ok(next + events.len() as u64)
}
