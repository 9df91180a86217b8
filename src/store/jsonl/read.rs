//! Reading a JSONL log (docs/formats.md §3.5): the stable-stat read, the
//! plain and zstd decoders, and the first-record read used by listing.

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use super::compact::{trailing_run, Tail};
use super::faults::Point;
use super::header::{read_header, Mode};
use super::layout::{self, fill_from, io_error, is_absent, revision_of, READ_BLOCK};
use super::pipeline::scan_frames_in_order;
use super::range::Marks;
use super::scan::{memchr, Scanner};
use super::zstd_frames::{
    decode_frame, decode_torn, scan_frames, scan_stream_with, zeroed_end, Damage,
};
use super::Compression;
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;
use crate::store::backend::{Torn, TornAt, TornKind};
use crate::store::platform;

/// How often a read retries while the file keeps changing under it.
pub(super) const STABLE_TRIES: usize = 100;

/// A decoded log (before the identity check, which needs the path).
#[derive(Debug)]
pub struct Decoded {
    /// The header (docs/events.md §13 key order, `delegationDepth` present).
    pub header: Value,
    /// The valid contiguous prefix.
    pub events: Vec<crate::store::backend::Stored>,
    /// The torn tail, if any.
    pub torn: Option<Torn>,
    /// Resync points inside the valid prefix (see [`Marks`]).
    pub marks: Marks,
    /// The frames at the end of a zstd log a merge may take (see
    /// [`super::compact`]), when the log ends in complete frames.
    pub tail: Option<super::compact::Tail>,
}

/// How a read treats a log that changes while it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// The stable-stat rule (docs/formats.md §3.5): the file must not change
    /// at all during the read; the read is made again until it does not.
    Stable,
    /// A reader beside the log's writer (`"readOnly": true`): the bytes
    /// the first stat saw are read, and the read stands when the file is
    /// still the same file, at least that long (the writer only appends
    /// to it). A record the writer is still writing reads as a torn tail.
    Prefix,
}

/// The stable-stat rule (docs/formats.md §3.5) around one read of `path`:
/// stat, `pass` over the opened file (and the length to read, all of it
/// for [`Reading::Stable`]), stat again, retried until both stats give the
/// same revision, or for [`Reading::Prefix`] the same file at least as
/// long (`io.read-unstable` after [`STABLE_TRIES`]). A refusal from `pass`
/// counts only when the file did not change under it. `None` when the
/// file is absent. Returns what `pass` made and the revision of what it
/// read.
fn stable<T>(
    path: &Path,
    reading: Reading,
    mut pass: impl FnMut(&File, u64) -> Result<T>,
) -> Result<Option<(T, String)>> {
    for _ in 0..STABLE_TRIES {
        let Some(before) = layout::stat(path)? else {
            return Ok(None);
        };
        let limit = match reading {
            Reading::Stable => u64::MAX,
            Reading::Prefix => before.len(),
        };
        let read = match layout::open_read(path) {
            Ok(file) => pass(&file, limit),
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => Err(io_error(Rule::IoRead, path, &e)),
        };
        let Some(after) = layout::stat_at(Point::ReadRestat, path)? else {
            return Ok(None);
        };
        let same = match reading {
            Reading::Stable => revision_of(&before) == revision_of(&after),
            Reading::Prefix => before.id() == after.id() && after.len() >= before.len(),
        };
        if same {
            return read.map(|made| Some((made, revision_of(&before))));
        }
    }
    Err(Error::new(
        Status::Io,
        Rule::IoReadUnstable,
        format!(
            "{}: the log kept changing while it was read",
            path.display()
        ),
    ))
}

/// The log at `path` read under the stable-stat rule ([`stable`], as
/// `reading` says) and decoded without holding the file: a plain log is
/// scanned a block at a time as it is read; a zstd log is scanned for its
/// frame structure a block at a time (refusing damage before anything is
/// decoded), then each frame is read again by offset and decoded. `check`
/// runs on the header before any event is scanned (the identity check).
/// Damage of a zstd log refuses, or under a salvage ([`Damage::Salvage`])
/// ends the frames read, the rest a torn tail ([`TornKind::Salvaged`]).
pub fn stable_read_with(
    path: &Path,
    compression: Compression,
    reading: Reading,
    damage: Damage,
    mut check: impl FnMut(&Value) -> Result<()>,
) -> Result<Option<(Decoded, String)>> {
    stable(path, reading, |file, limit| {
        use std::io::Read;
        let mut bytes = file.take(limit);
        match compression {
            Compression::None => read_plain(&mut bytes, path, &mut check),
            Compression::Zstd => read_zstd(file, &mut bytes, path, damage, &mut check),
        }
    })
}

/// One pass of [`stable_read_with`] over a plain log: the header line, then the events,
/// [`READ_BLOCK`] bytes of the file at a time.
fn read_plain(
    file: &mut impl std::io::Read,
    path: &Path,
    check: &mut impl FnMut(&Value) -> Result<()>,
) -> Result<Decoded> {
    let mut block = vec![0u8; READ_BLOCK];
    // The header line so far, until its end is read.
    let mut head = Vec::new();
    let mut header = None;
    let mut scanner = Scanner::new();
    let mut marks = Marks::default();
    let mut total = 0;
    loop {
        let n = fill_from(file, &mut block, path)?;
        if n == 0 {
            break;
        }
        total += n;
        let mut body = &block[..n];
        if header.is_none() {
            let Some(nl) = memchr(b'\n', body) else {
                head.extend_from_slice(body);
                continue;
            };
            head.extend_from_slice(&body[..=nl]);
            let h = read_header(&head, path, Mode::Load)?.expect("load mode");
            check(&h)?;
            header = Some(h);
            body = &body[nl + 1..];
        }
        // The end of the last accepted line is a resync point.
        marks.add(
            scanner.events.len() as u64,
            (head.len() + scanner.committed) as u64,
        );
        scanner.feed(body)?;
    }
    let header = header.ok_or_else(|| header_missing(path))?;
    let committed = head.len() + scanner.committed;
    marks.cut(committed as u64);
    let torn = (committed < total).then_some(Torn {
        at: TornAt::Byte(committed as u64),
        recovered: 0,
        why: TornKind::PartialLine,
        length: (total - committed) as u64,
    });
    let tail = None;
    Ok(Decoded {
        header,
        events: scanner.events,
        torn,
        marks,
        tail,
    })
}

fn header_missing(path: &Path) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::JsonlHeaderMissing,
        format!("empty or header-less session log {}", path.display()),
    )
}

fn header_frame_error(path: &Path) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::ZstdHeaderFrame,
        format!(
            "corrupt Zstandard log {}: first frame is not exactly one header line",
            path.display()
        ),
    )
}

/// True when `plain` is exactly one `\n`-terminated line.
fn is_one_line(plain: &[u8]) -> bool {
    memchr(b'\n', plain) == Some(plain.len().wrapping_sub(1))
}

/// One pass of [`stable_read_with`] over a zstd log.
fn read_zstd(
    file: &File,
    reader: &mut impl std::io::Read,
    path: &Path,
    damage: Damage,
    check: &mut impl FnMut(&Value) -> Result<()>,
) -> Result<Decoded> {
    let mut size = 0u64;
    let (mut frames, tail) = scan_stream_with(
        |buf| {
            let len = buf.len();
            buf.resize(len + READ_BLOCK, 0);
            let n = fill_from(reader, &mut buf[len..], path)?;
            buf.truncate(len + n);
            size += n as u64;
            Ok(n == 0)
        },
        damage,
    )?;
    let read_at = |range: &Range<usize>, buf: &mut Vec<u8>| {
        buf.clear();
        buf.resize(range.len(), 0);
        platform::read_exact_at(file, buf, range.start as u64)
            .map_err(|e| io_error(Rule::IoRead, path, &e))
    };
    let Some(first) = frames.complete.first() else {
        return Err(header_missing(path));
    };
    let mut head = Vec::new();
    read_at(first, &mut head)?;
    let plain = decode_frame(&head, Rule::ZstdFrameDecode, first.start)?;
    if !is_one_line(&plain) {
        return Err(header_frame_error(path));
    }
    let header = read_header(&plain, path, Mode::Load)?.expect("load mode");
    check(&header)?;
    let (mut scanner, mut marks) = (Scanner::new(), Marks::default());
    let mut salvaged = false;
    if let Err(e) = scan_body(&read_at, &frames.complete[1..], &mut scanner, &mut marks) {
        // A complete frame that does not decode is damage, never a torn
        // tail (it refuses, unless a salvage asked to keep the frames
        // before it), but for a last frame whose end never arrived: zeros
        // from a sector boundary on.
        if e.rule != Rule::ZstdFrameDecode {
            return Err(e);
        }
        let zeroed = match (frames.torn_start, frames.complete.last()) {
            (None, Some(last)) if frames.complete.len() > 1 => {
                let mut raw = Vec::new();
                read_at(last, &mut raw)?;
                zeroed_end(&raw, last.start).map(|z| (last.clone(), raw[..z].to_vec()))
            }
            _ => None,
        };
        if let Some((last, sent)) = zeroed {
            frames.complete.pop();
            (scanner, marks) = (Scanner::new(), Marks::default());
            scan_body(&read_at, &frames.complete[1..], &mut scanner, &mut marks)?;
            let committed = scanner.events.len();
            scanner.feed(&decode_torn(&sent))?;
            let torn = Torn {
                at: TornAt::Byte(last.start as u64),
                recovered: scanner.events.len() - committed,
                why: TornKind::ZeroFilled,
                length: size - last.start as u64,
            };
            return finish(header, scanner, marks, Some(torn), &frames.complete[1..]);
        }
        if damage == Damage::Refuse {
            return Err(e);
        }
        let good = first_undecodable(&read_at, &frames.complete[1..])?;
        let cut = frames.complete[1 + good].start;
        frames.complete.truncate(1 + good);
        (scanner, marks) = (Scanner::new(), Marks::default());
        scan_body(&read_at, &frames.complete[1..], &mut scanner, &mut marks)?;
        frames.torn_start = Some(cut);
        frames.torn_kind = Some(TornKind::Salvaged);
        salvaged = true;
    }
    check_whole_records(&scanner, path)?;
    let torn = match (frames.torn_start, frames.torn_kind) {
        (Some(start), Some(why)) => {
            let committed = scanner.events.len();
            // The readable prefix of a frame being written is written again
            // after the cut; nothing of damage a salvage cuts is trusted.
            if why == TornKind::IncompleteFrame && !salvaged {
                scanner.feed(&decode_torn(&tail))?;
            }
            Some(Torn {
                at: TornAt::Byte(start as u64),
                recovered: scanner.events.len() - committed,
                why,
                length: size - start as u64,
            })
        }
        _ => None,
    };
    finish(header, scanner, marks, torn, &frames.complete[1..])
}

/// The complete frames of a log hold whole records only
/// (`zstd.torn-record-in-frame`).
fn check_whole_records(scanner: &Scanner, path: &Path) -> Result<()> {
    if !scanner.at_line_start() || scanner.committed < scanner.consumed || scanner.issue.is_some() {
        return Err(Error::new(
            Status::Corrupt,
            Rule::ZstdTornRecordInFrame,
            format!(
                "corrupt Zstandard log {}: a complete frame contains a torn record",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// The decoded zstd log: its events, and what a merge may take of the
/// complete frames `body` after the header frame when nothing is torn.
fn finish(
    header: Value,
    scanner: Scanner,
    marks: Marks,
    torn: Option<Torn>,
    body: &[Range<usize>],
) -> Result<Decoded> {
    let tail = match (&torn, body.last()) {
        (None, Some(last)) => Some(Tail::read(trailing_run(body), last.end as u64)),
        _ => None,
    };
    Ok(Decoded {
        header,
        events: scanner.events,
        torn,
        marks,
        tail,
    })
}

/// How many of the complete frames `body` decode, in order, before the
/// first that does not.
fn first_undecodable(
    read_at: &impl Fn(&Range<usize>, &mut Vec<u8>) -> Result<()>,
    body: &[Range<usize>],
) -> Result<usize> {
    let mut raw = Vec::new();
    for (i, range) in body.iter().enumerate() {
        read_at(range, &mut raw)?;
        if decode_frame(&raw, Rule::ZstdFrameDecode, range.start).is_err() {
            return Ok(i);
        }
    }
    Ok(body.len())
}

/// Decode and scan the complete frames `body` in order (see
/// [`scan_frames_in_order`]), marking each frame start that is a line start.
fn scan_body(
    read_at: &(impl Fn(&Range<usize>, &mut Vec<u8>) -> Result<()> + Sync),
    body: &[Range<usize>],
    scanner: &mut Scanner,
    marks: &mut Marks,
) -> Result<()> {
    scan_frames_in_order(read_at, body, |range, first, frame| {
        if first {
            marks.add_at_line_start(scanner, range.start as u64);
        }
        frame.feed(scanner)
    })
}

/// Read only the header of a log for listing: `None` when the file is
/// absent, has no complete first line/frame, or that line is not a
/// header. Retired fields and malformed header frames still refuse.
pub fn read_first_header(path: &Path, compression: Compression) -> Result<Option<Value>> {
    let mut file = match layout::open_read(path) {
        Ok(f) => f,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(io_error(Rule::IoOpen, path, &e)),
    };
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 8192];
    loop {
        let n = fill_from(&mut file, &mut chunk, path)?;
        let eof = n == 0;
        buf.extend_from_slice(&chunk[..n]);
        match compression {
            Compression::None => {
                if let Some(nl) = memchr(b'\n', &buf) {
                    return read_header(&buf[..=nl], path, Mode::List);
                }
            }
            Compression::Zstd => {
                let frames = scan_frames(&buf, Some(1))?;
                if let Some(first) = frames.complete.first() {
                    let plain = decode_frame(&buf[first.clone()], Rule::ZstdHeaderFrameDecode, 0)?;
                    if !is_one_line(&plain) {
                        return Err(header_frame_error(path));
                    }
                    return read_header(&plain, path, Mode::List);
                }
            }
        }
        if eof {
            return Ok(None);
        }
        if chunk.len() < 1 << 20 {
            chunk.resize(chunk.len() * 2, 0);
        }
    }
}
