//! Event rows (docs/formats.md §4.4, §4.7): column validation
//! (`sqlite.row-event`), encoding a record into columns, decoding a row
//! into events (`codec.*`, `row.*`). The physical scan is `load.rs`.

use std::borrow::Cow;
use std::io::Read;

use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

use super::codec;
use crate::engine::event::{Event, MAX_SAFE, TURN_END};
use crate::error::{Error, Result, Status};
use crate::json::{self, canon, JsString, Object, Value};
use crate::rule::Rule;
use crate::store::backend::Stored;
use crate::store::chunk_rows::{self, SQLITE_BOUNDS};

/// The columns every event-row query selects, in [`RawRow::from_row`] order.
pub const COLUMNS: &str = "seq, type, time, data, source_event_seqs, surface_op, ignorable";

/// Data of at least this many UTF-8 bytes is considered for compression.
pub const COMPRESS_FROM: usize = 4096;
/// zstd level of compressed `data`.
const ZSTD_LEVEL: i32 = 3;
/// Decompression limit and JSON text limit of packed-row data.
const PACKED_DATA_LIMIT: usize = 1_048_576;

/// Text bound as SQLite TEXT without a UTF-8 check: WTF-8 bytes of a
/// [`JsString`] (lone surrogates survive the round trip).
#[derive(Debug, Clone, Copy)]
pub struct Wtf8<'a>(pub &'a [u8]);

impl ToSql for Wtf8<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0)))
    }
}

/// A `data` column value: JSON text, or a zstd frame of it (borrowed
/// from the event or packed row, or from a frame compressed ahead).
#[derive(Debug, Clone)]
pub enum Data<'a> {
    /// TEXT.
    Text(&'a str),
    /// BLOB: one zstd frame.
    Blob(Cow<'a, [u8]>),
}

impl ToSql for Data<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Data::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            Data::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

/// Whether `event`'s data is large enough to be considered for compression
/// (the values the compression helper and the flushing threads take on).
pub fn is_large(event: &Event) -> bool {
    event.data_text().len() >= COMPRESS_FROM
}

/// `encodeData`: TEXT below 4096 bytes, else a level-3 zstd frame when it is
/// strictly shorter than the text.
pub fn encode_data<'a>(
    text: &'a str,
    zstd: &mut zstd::bulk::Compressor<'static>,
) -> Result<Data<'a>> {
    if text.len() < COMPRESS_FROM {
        return Ok(Data::Text(text));
    }
    Ok(match compress_smaller(text, zstd)? {
        Some(frame) => Data::Blob(Cow::Owned(frame)),
        None => Data::Text(text),
    })
}

/// The level-3 zstd frame of `text` when it is strictly shorter than the
/// text (the compressed case of [`encode_data`]).
pub fn compress_smaller(
    text: &str,
    zstd: &mut zstd::bulk::Compressor<'static>,
) -> Result<Option<Vec<u8>>> {
    let frame = zstd.compress(text.as_bytes()).map_err(|e| {
        Error::new(
            Status::Io,
            Rule::IoSqlite,
            format!("zstd compression failed: {e}"),
        )
    })?;
    Ok((frame.len() < text.len()).then_some(frame))
}

/// A new compressor at the `encodeData` level.
pub fn compressor() -> Result<zstd::bulk::Compressor<'static>> {
    zstd::bulk::Compressor::new(ZSTD_LEVEL)
        .map_err(|e| Error::new(Status::Io, Rule::IoSqlite, format!("zstd: {e}")))
}

/// The surface columns of a scalar event row.
#[derive(Debug, Clone, PartialEq)]
pub struct SurfaceColumns<'a> {
    /// `source_event_seqs`: the varint blob, NULL when absent.
    pub sources: Option<Vec<u8>>,
    /// `surface_op`: JSON text, NULL when absent.
    pub op: Option<&'a str>,
    /// `ignorable`: 1, or NULL.
    pub ignorable: Option<i64>,
}

/// Encode the surface columns of a scalar event row.
pub fn surface_columns(e: &Event) -> Result<SurfaceColumns<'_>> {
    let sources = match &e.sources() {
        None => None,
        Some(Value::Array(seqs)) => Some(codec::encode_values(seqs)?),
        Some(_) => {
            return Err(Error::invalid_argument(
                Rule::CodecEncodeInvalid,
                "sourceEventSeqs must hold non-negative safe integers",
            ))
        }
    };
    Ok(SurfaceColumns {
        sources,
        op: e.op_text(),
        ignorable: e.ignorable.then_some(1),
    })
}

/// Largest recorded frame size decompressed in one call (a bigger claim
/// takes the streaming path, which reads only what is there).
const MAX_INFLATE: usize = 64 << 20;

thread_local! {
    /// The reused decompression context of [`inflate`].
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// The reused output buffer of [`with_inflated`].
    static INFLATED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One `events` row after column validation, borrowing its columns (from
/// SQLite's row while the statement stands on it, or from a
/// [`RowBuf`](super::row_buf::RowBuf)).
#[derive(Debug, Clone, Copy)]
pub struct RawRow<'a> {
    /// `seq` (the first member's seq for a packed row).
    pub seq: u64,
    /// `type` (WTF-8, non-empty; a chunk tag for a packed row).
    pub(super) ty: &'a [u8],
    /// `time`: a safe integer.
    pub(super) time: i64,
    /// `data`.
    pub(super) data: RawData<'a>,
    /// `source_event_seqs`: the varint blob, when not NULL.
    pub(super) sources: Option<&'a [u8]>,
    /// `surface_op` text, when not NULL.
    pub(super) op: Option<&'a [u8]>,
    /// `ignorable`: NULL, 0 (a packed row) or 1.
    pub(super) ignorable: Option<i64>,
}

/// A row's `data` column.
#[derive(Debug, Clone, Copy)]
pub(super) enum RawData<'a> {
    /// TEXT.
    Text(&'a [u8]),
    /// BLOB: a zstd frame.
    Blob(&'a [u8]),
}

fn row_event(column: &str, what: &str) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::SqliteRowEvent,
        format!("stored events.{column} must be {what}"),
    )
}

fn corrupt(rule: Rule, message: impl Into<String>) -> Error {
    Error::new(Status::Corrupt, rule, message)
}

impl<'a> RawRow<'a> {
    /// Validate the columns of a row selected with [`COLUMNS`] (`sqlite.row-event`).
    pub fn from_row(row: &'a rusqlite::Row<'_>) -> Result<RawRow<'a>> {
        let get = |i: usize| row.get_ref(i).map_err(super::schema::sql_err);
        let seq = match get(0)? {
            ValueRef::Integer(n) if (0..=MAX_SAFE as i64).contains(&n) => n as u64,
            _ => return Err(row_event("seq", "a non-negative safe integer")),
        };
        let ty = match get(1)? {
            ValueRef::Text(t) if !t.is_empty() => t,
            _ => return Err(row_event("type", "non-empty text")),
        };
        let time = match get(2)? {
            ValueRef::Integer(n) if n.unsigned_abs() <= MAX_SAFE => n,
            _ => return Err(row_event("time", "a safe integer")),
        };
        let data = match get(3)? {
            ValueRef::Text(t) => RawData::Text(t),
            ValueRef::Blob(b) => RawData::Blob(b),
            _ => return Err(row_event("data", "TEXT or BLOB")),
        };
        let sources = match get(4)? {
            ValueRef::Null => None,
            ValueRef::Blob(b) => Some(b),
            _ => return Err(row_event("source_event_seqs", "NULL or BLOB")),
        };
        let op = match get(5)? {
            ValueRef::Null => None,
            ValueRef::Text(t) => Some(t),
            _ => return Err(row_event("surface_op", "NULL or TEXT")),
        };
        let ignorable = match get(6)? {
            ValueRef::Null => None,
            ValueRef::Integer(n @ (0 | 1)) => Some(n),
            _ => return Err(row_event("ignorable", "NULL, 0 or 1")),
        };
        Ok(RawRow {
            seq,
            ty,
            time,
            data,
            sources,
            op,
            ignorable,
        })
    }

    /// True for a packed row (`ignorable = 0`).
    pub fn is_packed(&self) -> bool {
        self.ignorable == Some(0)
    }
}

fn utf8(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|e| {
        corrupt(
            Rule::CodecUtf8,
            format!("stored data is not valid UTF-8: {e}"),
        )
    })
}

/// The JSON text of a `data` column: TEXT as is, a BLOB decompressed.
fn data_text<'a>(data: &RawData<'a>, limit: Option<usize>) -> Result<std::borrow::Cow<'a, str>> {
    Ok(match data {
        RawData::Text(t) => std::borrow::Cow::Borrowed(utf8(t)?),
        RawData::Blob(b) => {
            std::borrow::Cow::Owned(String::from_utf8(inflate(b, limit)?).map_err(|e| {
                corrupt(
                    Rule::CodecUtf8,
                    format!("stored data is not valid UTF-8: {}", e.utf8_error()),
                )
            })?)
        }
    })
}

fn parse(text: &str, what: &str) -> Result<Value> {
    json::parse(text).map_err(|e| {
        corrupt(
            Rule::CodecDataJson,
            format!("stored {what} is not valid JSON: {e}"),
        )
    })
}

/// Decompress one zstd value, failing (`codec.zstd`) beyond `limit` bytes.
fn inflate(frame: &[u8], limit: Option<usize>) -> Result<Vec<u8>> {
    // Frames this library writes record their size: decompress them in one
    // call with a reused context (a fresh streaming decoder per row costs
    // more than the row). Anything else, or any failure, takes the
    // streaming path below, which reports the precise error.
    if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(frame) {
        let fits = usize::try_from(size)
            .ok()
            .filter(|&n| limit.is_none_or(|l| n <= l) && n <= MAX_INFLATE);
        if let Some(size) = fits {
            let out = DECOMPRESSOR.with(|d| {
                let mut d = d.borrow_mut();
                if d.is_none() {
                    *d = zstd::bulk::Decompressor::new().ok();
                }
                d.as_mut()?.decompress(frame, size).ok()
            });
            if let Some(out) = out.filter(|o| o.len() == size) {
                return Ok(out);
            }
        }
    }
    let zerr = |e: std::io::Error| {
        corrupt(
            Rule::CodecZstd,
            format!("stored data failed zstd decompression: {e}"),
        )
    };
    let decoder = zstd::stream::read::Decoder::with_buffer(frame).map_err(zerr)?;
    let mut out = Vec::new();
    match limit {
        None => {
            let mut d = decoder;
            d.read_to_end(&mut out).map_err(zerr)?;
        }
        Some(limit) => {
            decoder
                .take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(zerr)?;
            if out.len() > limit {
                return Err(corrupt(
                    Rule::CodecZstd,
                    format!("stored data decompresses to more than {limit} bytes"),
                ));
            }
        }
    }
    Ok(out)
}

/// Decode a validated row into its events (scalar: one; packed: its members).
pub fn decode(row: &RawRow<'_>) -> Result<Vec<Stored>> {
    let mut out = Vec::new();
    decode_into(row, &mut out)?;
    Ok(out)
}

/// [`decode`], appending the row's events to `out`; returns how many. On
/// an error nothing is appended.
pub(super) fn decode_into(row: &RawRow<'_>, out: &mut Vec<Stored>) -> Result<usize> {
    if row.is_packed() {
        let events = decode_packed(row)?;
        let n = events.len();
        out.extend(events);
        return Ok(n);
    }
    if let Some(event) = canonical_event(row) {
        out.push(Stored::Event(event));
        return Ok(1);
    }
    out.push(decode_value(row)?);
    Ok(1)
}

/// A scalar row's event as a value (the path that reports damage).
fn decode_value(row: &RawRow<'_>) -> Result<Stored> {
    let sources = match row.sources {
        None => None,
        Some(blob) => Some(Value::Array(
            codec::decode(blob)?
                .into_iter()
                .map(|s| Value::Number(s as f64))
                .collect(),
        )),
    };
    let op = match row.op {
        None => None,
        Some(text) => Some(parse(utf8(text)?, "surface_op")?),
    };
    let data = parse(&data_text(&row.data, None)?, "data")?;
    let mut e = Object::with_capacity(7);
    e.insert_str("type", Value::String(JsString::from_wtf8(row.ty.to_vec())));
    e.insert_str("seq", Value::Number(row.seq as f64));
    e.insert_str("time", Value::Number(row.time as f64));
    e.insert_str("data", data);
    if let Some(s) = sources {
        e.insert_str("sourceEventSeqs", s);
    }
    if let Some(op) = op {
        e.insert_str("surfaceOp", op);
    }
    if row.ignorable == Some(1) {
        e.insert_str("ignorable", Value::Bool(true));
    }
    Ok(Stored::Value(Value::Object(e)))
}

/// The JSON text of a scalar row's event in `append` key order, when its
/// stored `data` and `surface_op` are canonical JSON (what this library
/// writes): no value tree is built. `None` sends the row through the
/// value decoder, which reports any damage.
fn canonical_event(row: &RawRow<'_>) -> Option<Event> {
    let seq = Some(row.seq).filter(|&s| s <= MAX_SAFE)?;
    if row.time.unsigned_abs() > MAX_SAFE {
        return None;
    }
    // The surface columns are written into the event as text: the seqs
    // as the integers JSON spells them, `surface_op` as its canonical text.
    let sources = match row.sources {
        None => None,
        Some(blob) => {
            use std::fmt::Write;
            let seqs = codec::decode(blob).ok()?;
            let mut text = String::with_capacity(2 + seqs.len() * 8);
            text.push('[');
            for (i, s) in seqs.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                let _ = write!(text, "{s}");
            }
            text.push(']');
            Some(text)
        }
    };
    let op = match row.op {
        None => None,
        // UTF-8 and canonical form in one pass.
        Some(text) => Some(canon::canonical_str(text)?),
    };
    let event = |data: &[u8]| {
        Some(Event::with_canonical_texts(
            JsString::from_wtf8(row.ty.to_vec()),
            seq,
            row.time,
            canon::canonical_str(data)?,
            (sources.as_deref(), op),
            row.ignorable == Some(1),
        ))
    };
    match row.data {
        RawData::Text(t) => event(t),
        RawData::Blob(b) => with_inflated(b, event),
    }
}

/// `f` of the decompressed frame ([`inflate`] without a limit), decoded
/// into a buffer this thread reuses when the frame records its size.
fn with_inflated<R>(frame: &[u8], f: impl FnOnce(&[u8]) -> Option<R>) -> Option<R> {
    let size = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= MAX_INFLATE);
    let Some(size) = size else {
        return f(&inflate(frame, None).ok()?);
    };
    INFLATED.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.clear();
        buf.reserve(size);
        let done = DECOMPRESSOR.with(|d| {
            let mut d = d.borrow_mut();
            if d.is_none() {
                *d = zstd::bulk::Decompressor::new().ok();
            }
            d.as_mut()?.decompress_to_buffer(frame, &mut *buf).ok()
        });
        let result = match done {
            Some(n) if n == size => f(&buf),
            _ => inflate(frame, None).ok().and_then(|out| f(&out)),
        };
        if buf.capacity() > KEEP_INFLATED {
            *buf = Vec::new();
        }
        result
    })
}

/// The reused buffer of [`with_inflated`] is dropped beyond this size.
const KEEP_INFLATED: usize = 4 << 20;

fn decode_packed(row: &RawRow<'_>) -> Result<Vec<Stored>> {
    let tag = String::from_utf8_lossy(row.ty).into_owned();
    if !chunk_rows::is_tag(&tag) {
        return Err(corrupt(
            Rule::RowPackedTag,
            format!("malformed {tag} storage row: packed discriminator needs a chunk tag"),
        ));
    }
    if row.sources.is_some() || row.op.is_some() {
        return Err(corrupt(
            Rule::RowPackedSurfaceFields,
            format!("malformed {tag} storage row: packed surface fields must be null"),
        ));
    }
    let text = data_text(&row.data, Some(PACKED_DATA_LIMIT))?;
    if text.len() > PACKED_DATA_LIMIT {
        return Err(corrupt(
            Rule::RowTooLarge,
            format!("malformed {tag} storage row: data exceeds {PACKED_DATA_LIMIT} bytes"),
        ));
    }
    if let Some(events) = canon::canonical_str(text.as_bytes())
        .and_then(|data| chunk_rows::expand_canonical(&tag, row.seq, row.time, data, SQLITE_BOUNDS))
    {
        return Ok(events);
    }
    let data = parse(&text, "data")?;
    chunk_rows::expand(
        &tag,
        &Value::Number(row.seq as f64),
        &Value::Number(row.time as f64),
        &data,
        SQLITE_BOUNDS,
    )
}

/// The seq of the last event a packed row covers, if it decodes.
pub fn last_member(row: &RawRow<'_>) -> Option<u64> {
    decode(row)
        .ok()
        .map(|events| row.seq + events.len() as u64 - 1)
}

/// The result of a clean physical scan.
#[derive(Debug)]
pub struct Scan {
    /// Events of the valid contiguous prefix.
    pub events: Vec<Stored>,
    /// Seq of the first row of the torn tail, if any.
    pub torn_from: Option<u64>,
}

/// The stored event is a `turn/end`.
pub(super) fn is_turn_end(e: &Stored) -> bool {
    e.is_type(TURN_END)
}
