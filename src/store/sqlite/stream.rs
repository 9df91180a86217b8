//! The streaming read of a session's rows (a windowed open): one read
//! transaction, its pages of rows read on a thread of their own while the
//! calling thread decodes the page before and hands its events on. When
//! the calling thread falls behind, the reading thread decodes the pages
//! it cannot hand on yet, so both cores decode (as in a whole read).

use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender, TrySendError};

use rusqlite::Connection;

use super::load;
use super::row_buf::RowBuf;
use super::rows::{self, RawRow, Wtf8};
use super::schema::sql_err;
use super::sessions::{self, SessionRow};
use super::STREAM_PAGE;
use crate::error::{Error, Result};
use crate::json::Value;
use crate::store::backend::Stored;

/// Stream the events of `id` to `sink`: the session row, how many events
/// were read and the read's `data_version`; `None` when the session is
/// absent, or a row does not decode or breaks contiguity (the whole-log
/// read then decides and reports).
pub(super) fn stream(
    conn: &mut Connection,
    id: &str,
    sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
) -> Result<Option<(SessionRow, u64, i64)>> {
    std::thread::scope(|scope| {
        let (pages, rx) = sync_channel::<Page>(1);
        let (spent, reuse) = channel::<RowBuf>();
        scope.spawn(move || {
            let end = match read_pages(conn, id.as_bytes(), &pages, &reuse) {
                Ok(Some(data_version)) => Page::End(data_version),
                Ok(None) => return,
                Err(e) => Page::Failed(e),
            };
            let _ = pages.send(end);
        });
        let session = match rx.recv() {
            Ok(Page::Session(s)) => s,
            Ok(Page::Failed(e)) => return Err(e),
            _ => return Ok(None),
        };
        let mut next = 0u64;
        loop {
            match rx.recv() {
                Ok(Page::Rows(page)) => {
                    let Some(batch) = load::decode_page(&page, next) else {
                        return Ok(None);
                    };
                    let _ = spent.send(page);
                    next += batch.len() as u64;
                    sink(&session.header, batch)?;
                }
                Ok(Page::Decoded { first, events }) => {
                    // The page is contiguous from its first row: it
                    // continues the log when that row is the next seq.
                    if first != next {
                        return Ok(None);
                    }
                    next += events.len() as u64;
                    sink(&session.header, events)?;
                }
                Ok(Page::End(data_version)) => return Ok(Some((session, next, data_version))),
                Ok(Page::Failed(e)) => return Err(e),
                _ => return Ok(None),
            }
        }
    })
}

/// What the reading thread of a streaming read hands on, in order.
enum Page {
    /// The session row (sent first).
    Session(SessionRow),
    /// A page of rows, in seq order.
    Rows(RowBuf),
    /// A page of rows the reading thread decoded (contiguous from the
    /// seq of its first row, `first`): its events.
    Decoded { first: u64, events: Vec<Stored> },
    /// Every row read: the read transaction's `data_version`.
    End(i64),
    /// A read failed.
    Failed(Error),
}

/// The reading side of a streaming read: in one read transaction, the
/// session row of `id`, then its rows a page at a time (each page after
/// the last row's seq: rows never overlap). `Ok(None)`: no such session,
/// or the other side stopped.
fn read_pages(
    conn: &mut Connection,
    id: &[u8],
    pages: &SyncSender<Page>,
    reuse: &Receiver<RowBuf>,
) -> Result<Option<i64>> {
    let tx = conn.transaction().map_err(sql_err)?;
    let Some(session) = sessions::select(&tx, id)? else {
        return Ok(None);
    };
    if pages.send(Page::Session(session)).is_err() {
        return Ok(None);
    }
    let mut stmt = tx
        .prepare_cached(&format!(
            "SELECT {} FROM events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT {STREAM_PAGE}",
            rows::COLUMNS
        ))
        .map_err(sql_err)?;
    let mut after = -1i64;
    let mut spare = None;
    loop {
        let mut page = spare
            .take()
            .or_else(|| reuse.try_recv().ok())
            .unwrap_or_default();
        page.clear();
        let mut q = stmt.query((Wtf8(id), after)).map_err(sql_err)?;
        while let Some(row) = q.next().map_err(sql_err)? {
            let row = RawRow::from_row(row)?;
            after = row.seq as i64;
            page.push(&row);
        }
        if page.is_empty() {
            break;
        }
        match pages.try_send(Page::Rows(page)) {
            Ok(()) => {}
            Err(TrySendError::Full(Page::Rows(mut page))) => {
                // The other side is busy: decode the page here. A page that
                // does not decode ends the read (the other side answers
                // `None` when the channel closes without an end).
                let first = page.iter().next().map_or(0, |r| r.seq);
                let Some(events) = load::decode_page(&page, first) else {
                    return Ok(None);
                };
                page.clear();
                spare = Some(page);
                #[cfg(test)]
                DECODED_AHEAD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if pages.send(Page::Decoded { first, events }).is_err() {
                    return Ok(None);
                }
            }
            Err(_) => return Ok(None),
        }
    }
    drop(stmt);
    load::commit_read(tx).map(Some)
}

/// Pages decoded by a reading thread, in this test process.
#[cfg(test)]
static DECODED_AHEAD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many pages reading threads of this test process decoded.
#[cfg(test)]
pub(super) fn decoded_ahead() -> usize {
    DECODED_AHEAD.load(std::sync::atomic::Ordering::Relaxed)
}
