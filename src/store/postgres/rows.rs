//! Rows of the PostgreSQL backend: reading sessions and events back
//! (`postgres.row-session`, `postgres.row-event`), and writing one batch
//! as one guarded statement (`postgres.append-seq-mismatch`).

use std::borrow::Cow;
use std::sync::Arc;

use tokio_postgres::Statement;

use super::client::{Db, PgError, Tx};
use super::conn::{is_unique_violation, pg_err, Sql};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::{self, canon, JsString, Value};
use crate::rule::Rule;
use crate::store::backend::Stored;

/// The statements a connection prepares once.
pub struct Prepared {
    /// The texts (of the statements used rarely, unprepared).
    pub sql: Sql,
    insert_batch: Statement,
    select_session: Statement,
    select_log: Statement,
    select_range: Statement,
    /// `(key)`: take the advisory lock, waiting at most the connection's
    /// `lock_timeout`.
    pub lock: Statement,
}

impl Prepared {
    /// Prepare the statements of `sql` on `client`.
    pub fn new(client: &mut Db, sql: &Sql) -> Result<Prepared> {
        let mut p = |text: &str| client.prepare(text).map_err(pg_err);
        Ok(Prepared {
            insert_batch: p(&sql.insert_batch)?,
            select_session: p(&sql.select_session)?,
            select_log: p(&sql.select_log)?,
            select_range: p(&sql.select_range)?,
            lock: p("SELECT pg_advisory_lock(hashtextextended($1, 0))")?,
            sql: sql.clone(),
        })
    }
}

/// A `sessions` row.
#[derive(Debug)]
pub struct SessionRow {
    pub header: Value,
    pub incarnation: String,
    pub revision: i64,
    pub next_seq: u64,
}

fn row_session(id: &str, message: String) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::PostgresRowSession,
        format!("session \"{id}\": {message}"),
    )
}

fn row_event(id: &str, seq: u64, message: String) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::PostgresRowEvent,
        format!("session \"{id}\" event row at seq {seq}: {message}"),
    )
    .at_seq(seq)
}

/// A stored header: a JSON object whose `id` is the row's.
fn decode_header(id: &str, text: &str) -> Result<Value> {
    let header = json::parse(text)
        .map_err(|e| row_session(id, format!("stored header is not JSON: {}", e.message)))?;
    let matches = header
        .as_object()
        .and_then(|o| o.get("id"))
        .and_then(Value::as_str)
        == Some(id);
    if !matches {
        return Err(row_session(
            id,
            "stored header is not an object with this id".to_string(),
        ));
    }
    Ok(header)
}

fn decode_session(
    id: &str,
    header: &str,
    incarnation: String,
    revision: i64,
    next: i64,
) -> Result<SessionRow> {
    if !crate::store::uuid::is_uuid(&incarnation) {
        return Err(row_session(
            id,
            format!("stored incarnation {incarnation:?} is not a UUID"),
        ));
    }
    let next_seq = u64::try_from(next)
        .map_err(|_| row_session(id, format!("stored next_seq {next} is negative")))?;
    if revision < 0 {
        return Err(row_session(
            id,
            format!("stored revision {revision} is negative"),
        ));
    }
    Ok(SessionRow {
        header: decode_header(id, header)?,
        incarnation,
        revision,
        next_seq,
    })
}

/// The `sessions` row of `id`, if any.
pub fn select_session(c: &mut Db, p: &Prepared, id: &str) -> Result<Option<SessionRow>> {
    let Some(row) = c.query_opt(&p.select_session, &[&id]).map_err(pg_err)? else {
        return Ok(None);
    };
    decode_session(id, row.get(0), row.get(1), row.get(2), row.get(3)).map(Some)
}

/// A session listed, or its id and why its row does not read.
pub type ListedRow = std::result::Result<SessionRow, (String, Error)>;

/// Every `sessions` row, by id.
pub fn select_sessions(c: &mut Db, p: &Prepared) -> Result<Vec<ListedRow>> {
    let rows = c
        .query(p.sql.select_sessions.as_str(), &[])
        .map_err(pg_err)?;
    Ok(rows
        .iter()
        .map(|r| {
            let id: String = r.get(0);
            decode_session(&id, r.get(1), r.get(2), r.get(3), 0).map_err(|e| (id, e))
        })
        .collect())
}

/// One stored event: canonical text kept as is, other text as a value.
fn decode_event(id: &str, seq: i64, expected: u64, text: &str) -> Result<Stored> {
    let seq = u64::try_from(seq)
        .map_err(|_| row_event(id, expected, format!("seq {seq} is negative")))?;
    if seq != expected {
        return Err(row_event(
            id,
            seq,
            format!("the log has a gap: expected seq {expected}"),
        ));
    }
    let stored = if canon::is_canonical(text) {
        Stored::Canonical(text.into())
    } else {
        let v = json::parse(text)
            .map_err(|e| row_event(id, seq, format!("event is not JSON: {}", e.message)))?;
        Stored::Value(v)
    };
    if stored.seq() != Some(seq) {
        return Err(row_event(
            id,
            seq,
            "the event's seq differs from its row's".to_string(),
        ));
    }
    Ok(stored)
}

/// A whole log read back.
pub struct Log {
    pub events: Vec<Stored>,
    /// Every row held canonical text (so it equals what was written).
    pub canonical: bool,
}

/// The whole log of `id`, which its `sessions` row says has `next` events.
pub fn select_log(c: &mut Db, p: &Prepared, id: &str, next: u64) -> Result<Log> {
    let mut log = Log {
        events: Vec::with_capacity(next.min(1 << 20) as usize),
        canonical: true,
    };
    stream_log(c, p, id, next, usize::MAX, |batch| {
        log.events.extend(batch);
        Ok(())
    })?;
    log.canonical = log.events.iter().all(|s| matches!(s, Stored::Canonical(_)));
    Ok(log)
}

/// Read the log of `id` in seq order, handing `sink` batches of at most
/// `batch` events. A bad row, or a count other than `next`, is an error.
pub fn stream_log(
    c: &mut Db,
    p: &Prepared,
    id: &str,
    next: u64,
    batch: usize,
    mut sink: impl FnMut(Vec<Stored>) -> Result<()>,
) -> Result<()> {
    let mut rows = c.rows(&p.select_log, &[&id]).map_err(pg_err)?;
    let mut expected = 0u64;
    let mut buf = Vec::new();
    while let Some(row) = rows.next().map_err(pg_err)? {
        let stored = decode_event(id, row.get(0), expected, row.get(1))?;
        expected += 1;
        buf.push(stored);
        if buf.len() >= batch {
            sink(std::mem::take(&mut buf))?;
        }
    }
    if !buf.is_empty() {
        sink(buf)?;
    }
    if expected != next {
        return Err(row_event(
            id,
            expected,
            format!("the log has {expected} event rows, its session row says {next}"),
        ));
    }
    Ok(())
}

/// The events `from..to` of `id` (fewer when the log is shorter).
pub fn select_range(c: &mut Db, p: &Prepared, id: &str, from: u64, to: u64) -> Result<Vec<Stored>> {
    let (a, b) = (clamp(from), clamp(to));
    let rows = c.query(&p.select_range, &[&id, &a, &b]).map_err(pg_err)?;
    (from..)
        .zip(rows)
        .map(|(expected, row)| decode_event(id, row.get(0), expected, row.get(1)))
        .collect()
}

fn clamp(n: u64) -> i64 {
    n.min(i64::MAX as u64) as i64
}

/// The `type` column of an event: its type as text (the event's text is
/// what counts; a type that is not valid text is stored lossily).
fn type_column(ty: &JsString) -> Cow<'_, str> {
    match ty.as_str() {
        Some(t) if !t.contains('\0') => Cow::Borrowed(t),
        _ => Cow::Owned(ty.to_string_lossy().replace('\0', "\u{fffd}")),
    }
}

/// One batch to write.
#[derive(Clone, Copy)]
pub struct Batch<'a> {
    pub id: &'a str,
    pub header: &'a Value,
    pub events: &'a [Arc<Event>],
    /// Create the session row first, with this incarnation.
    pub incarnation: Option<&'a str>,
    /// Copy events below `.1` from the session `.0` (of incarnation `.2`).
    pub parent: Option<(&'a str, u64, &'a str)>,
    /// The last write of this session may have committed unseen.
    pub suspect: bool,
}

/// Write `b` durably: one guarded statement for a plain append, one
/// transaction when the session row is created or a prefix is copied.
pub fn write_batch(c: &mut Db, p: &Prepared, b: Batch<'_>) -> Result<()> {
    if b.incarnation.is_none() && b.parent.is_none() {
        return insert_guarded(c, p, b.id, b.events, b.suspect);
    }
    let mut tx = c.begin("BEGIN").map_err(pg_err)?;
    let mut events = b.events;
    if let Some(incarnation) = b.incarnation {
        let created = b
            .header
            .as_object()
            .and_then(|o| o.get("createdAt"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0) as i64;
        let header = b.header.to_json();
        let n = tx
            .execute(
                p.sql.insert_session.as_str(),
                &[&b.id, &header, &incarnation, &created],
            )
            .map_err(pg_err)?;
        if n == 0 {
            // Stored already: only a retry of this very creation may go on.
            let row = select_session(&mut tx, p, b.id)?;
            if !(b.suspect && row.is_some_and(|r| r.incarnation == incarnation)) {
                return Err(Error::new(
                    Status::Conflict,
                    Rule::StoreDuplicateId,
                    format!("session \"{}\" already exists in the database", b.id),
                ));
            }
        }
    }
    if let Some((parent, len, incarnation)) = b.parent {
        events = copy_prefix(&mut tx, p, b, parent, len, incarnation)?;
    }
    if !events.is_empty() {
        insert_guarded(&mut tx, p, b.id, events, b.suspect)?;
    }
    tx.commit().map_err(pg_err)
}

/// Write the plain appends of several sessions in one transaction: one
/// commit (one WAL flush on the server) for a whole round. `Ok` means
/// every batch is stored. Any refusal or error rolls the whole
/// transaction back (the caller then writes the batches one by one, which
/// finds out which one failed and why), except a lost commit, whose
/// outcome is unknown.
pub fn write_group(c: &mut Db, p: &Prepared, items: &[(&str, &[Arc<Event>])]) -> Result<()> {
    let mut tx = c.begin("BEGIN").map_err(pg_err)?;
    for (id, events) in items {
        insert_guarded(&mut tx, p, id, events, false)?;
    }
    tx.commit().map_err(pg_err)
}

/// Copy the events of `b` below seq `len` from `parent` inside the
/// database, when `parent` is still the incarnation they came from and
/// holds them; return the events left to insert. A copy whose guard
/// refuses it is checked as a plain batch is ([`already_stored`]).
fn copy_prefix<'e>(
    tx: &mut Tx<'_>,
    p: &Prepared,
    b: Batch<'e>,
    parent: &str,
    len: u64,
    incarnation: &str,
) -> Result<&'e [Arc<Event>]> {
    let (child, events) = (b.id, b.events);
    let row = tx
        .query_opt(
            &format!(
                "SELECT incarnation, next_seq FROM {}.sessions WHERE id = $1 FOR SHARE",
                p.sql.q()
            ),
            &[&parent],
        )
        .map_err(pg_err)?;
    let holds =
        row.is_some_and(|r| r.get::<_, &str>(0) == incarnation && r.get::<_, i64>(1) >= clamp(len));
    let first = events[0].seq;
    if !holds || first >= len {
        return Ok(events);
    }
    let k = (len - first).min(events.len() as u64);
    let advanced = tx
        .execute(p.sql.advance.as_str(), &[&child, &clamp(first), &clamp(k)])
        .map_err(pg_err)?;
    if advanced == 0 {
        let stored = already_stored(tx, p, child, events, b.suspect)?;
        return Ok(&events[stored..]);
    }
    let copied = tx
        .execute(
            p.sql.copy_prefix.as_str(),
            &[&child, &parent, &clamp(first), &clamp(first + k)],
        )
        .map_err(|e| insert_err(e, child, first))?;
    if copied != k {
        return Err(row_event(
            parent,
            first,
            format!("a fork copied {copied} of the parent's {k} events"),
        ));
    }
    Ok(&events[k as usize..])
}

fn insert_err(e: PgError, id: &str, first: u64) -> Error {
    if is_unique_violation(&e) {
        return Error::new(
            Status::Conflict,
            Rule::PostgresAppendSeqMismatch,
            format!("session \"{id}\" append at seq {first}: another writer stored these seqs"),
        );
    }
    pg_err(e)
}

/// The guarded insert of `events`; when the guard refuses, find out why.
fn insert_guarded(
    c: &mut Db,
    p: &Prepared,
    id: &str,
    events: &[Arc<Event>],
    suspect: bool,
) -> Result<()> {
    let first = events[0].seq;
    let n = events.len() as u64;
    let seqs: Vec<i64> = events.iter().map(|e| e.seq as i64).collect();
    let types: Vec<Cow<'_, str>> = events.iter().map(|e| type_column(&e.ty)).collect();
    let times: Vec<i64> = events.iter().map(|e| e.time).collect();
    let ops: Vec<Option<&str>> = events.iter().map(|e| e.op_text()).collect();
    let sources: Vec<Option<&str>> = events.iter().map(|e| e.sources_text()).collect();
    let ignorable: Vec<bool> = events.iter().map(|e| e.ignorable).collect();
    let texts: Vec<&str> = events.iter().map(|e| e.text()).collect();
    let inserted = c
        .execute(
            &p.insert_batch,
            &[
                &id,
                &clamp(first),
                &clamp(n),
                &seqs,
                &types,
                &times,
                &ops,
                &sources,
                &ignorable,
                &texts,
            ],
        )
        .map_err(|e| insert_err(e, id, first))?;
    if inserted == n {
        return Ok(());
    }
    let k = already_stored(c, p, id, events, suspect)?;
    if k == events.len() {
        return Ok(());
    }
    insert_guarded(c, p, id, &events[k..], false)
}

/// How many of `events` the database already holds, once the guard
/// refused them (the session's `next_seq` is not their first seq): when
/// the last write's commit was lost with its connection (`suspect`), the
/// rows it may have stored from the first seq on must be exactly these
/// events, byte for byte. Anything else is `postgres.append-seq-mismatch`
/// (another writer moved the log on) or `postgres.session-missing`.
fn already_stored(
    c: &mut Db,
    p: &Prepared,
    id: &str,
    events: &[Arc<Event>],
    suspect: bool,
) -> Result<usize> {
    let first = events[0].seq;
    let n = events.len() as u64;
    match select_session(c, p, id)?.map(|r| r.next_seq) {
        Some(next) if suspect && next > first && next <= first + n => {
            let k = (next - first) as usize;
            let have = select_range(c, p, id, first, next)?;
            let same = have.len() == k
                && have
                    .iter()
                    .zip(&events[..k])
                    .all(|(s, e)| matches!(s, Stored::Canonical(t) if **t == *e.text()));
            if !same {
                return Err(mismatch(id, first, next));
            }
            Ok(k)
        }
        Some(next) => Err(mismatch(id, first, next)),
        None => Err(Error::new(
            Status::Conflict,
            Rule::PostgresSessionMissing,
            format!("session \"{id}\" is no longer in the database (deleted by another store?)"),
        )),
    }
}

fn mismatch(id: &str, first: u64, next: u64) -> Error {
    Error::new(
        Status::Conflict,
        Rule::PostgresAppendSeqMismatch,
        format!(
            "session \"{id}\" append starts at seq {first}, stored next seq is {next} (another writer wrote this session)"
        ),
    )
}
