//! A streaming read of a clean JSONL log (windowed open): the file is read
//! a block at a time and its events are handed on in batches, so the read
//! never holds the whole log. Anything unusual (a torn or damaged tail, a
//! file changing under the read) answers `None`, and the caller reads the
//! whole log the usual way, which reports exactly what is wrong.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::faults::{self, Point};
use super::header::{read_header, Mode};
use super::layout::{io_error, revision_of};
use super::range::Marks;
use super::scan::{memchr, Scanner};
use super::zstd_frames::{complete_frames, decode_frame, scan_frames};
use super::Compression;
use crate::error::Result;
use crate::json::Value;
use crate::store::backend::Stored;

/// How much of the file one read takes, and how much plain text one
/// decoding step of a zstd frame yields.
const BLOCK: usize = 1 << 20;

/// What a streaming read ends with.
#[derive(Debug)]
pub struct StreamEnd {
    /// The header.
    pub header: Value,
    /// The revision of the file read (stable over the whole read).
    pub revision: String,
    /// Resync points met on the way.
    pub marks: Marks,
}

/// Hand the events scanned so far on to `sink`; false when the scanner
/// met damage (the log is not clean).
fn hand_on(
    scanner: &mut Scanner,
    header: &Value,
    sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
) -> Result<bool> {
    if scanner.issue.is_some() {
        return Ok(false);
    }
    let batch = scanner.take_events();
    if !batch.is_empty() {
        sink(header, batch)?;
    }
    Ok(true)
}

/// Fill `buf` from `r`; the number of bytes read (0 at the end).
fn fill_from(r: &mut impl Read, buf: &mut [u8], path: &Path) -> Result<usize> {
    loop {
        match r.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("io.read", path, &e)),
        }
    }
}

/// Stream the events of the log at `path` to `sink` in batches. `check`
/// runs on the header before any event is read. `Ok(None)`: the log is
/// not clean (or changed while read); nothing about it is decided here.
pub fn stream_log(
    path: &Path,
    compression: Compression,
    check: impl FnOnce(&Value) -> Result<()>,
    sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
) -> Result<Option<StreamEnd>> {
    let mut file = File::open(path).map_err(|e| io_error("io.open", path, &e))?;
    let before = revision_of(&file.metadata().map_err(|e| io_error("io.stat", path, &e))?);
    let mut block = vec![0u8; BLOCK];
    let mut plain = vec![0u8; BLOCK];
    let mut pending: Vec<u8> = Vec::new();
    // File offset of `pending[0]`.
    let mut at = 0u64;
    let mut header: Option<Value> = None;
    let mut check = Some(check);
    let mut scanner = Scanner::new();
    let mut marks = Marks::default();
    loop {
        let n = fill_from(&mut file, &mut block, path)?;
        let eof = n == 0;
        pending.extend_from_slice(&block[..n]);
        let mut used = 0;
        if header.is_none() {
            let line_end = match compression {
                Compression::None => memchr(b'\n', &pending).map(|i| (0..i + 1, i + 1)),
                Compression::Zstd => {
                    let frames = scan_frames(&pending, Some(1))?;
                    match frames.complete.first() {
                        Some(r) => {
                            let plain = decode_frame(&pending[r.clone()], "zstd.frame-decode", 0)?;
                            if memchr(b'\n', &plain) != Some(plain.len().wrapping_sub(1)) {
                                return Ok(None);
                            }
                            let end = r.end;
                            let h = read_header(&plain, path, Mode::Load)?;
                            header = h;
                            Some((0..0, end))
                        }
                        None => None,
                    }
                }
            };
            let Some((line, end)) = line_end else {
                if eof {
                    return Ok(None);
                }
                continue;
            };
            if compression == Compression::None {
                header = read_header(&pending[line], path, Mode::Load)?;
            }
            let Some(h) = &header else {
                return Ok(None);
            };
            (check.take().expect("checked once"))(h)?;
            used = end;
        }
        let h = header.as_ref().expect("read above");
        match compression {
            Compression::None => {
                if scanner.at_line_start() {
                    marks.add(scanner.next_index(), at + used as u64);
                }
                scanner.feed(&pending[used..])?;
                used = pending.len();
            }
            Compression::Zstd => {
                // Frames still incomplete wait for more bytes; one that
                // never completes leaves the read unclean at the end.
                let frames = complete_frames(&pending[used..])?;
                let base = used;
                for r in &frames {
                    marks.add(scanner.next_index(), at + (base + r.start) as u64);
                    // A frame (up to a whole write batch) is decoded a block
                    // at a time, its events handed on as they come.
                    let frame = &pending[base + r.start..base + r.end];
                    let mut decoder = zstd::stream::read::Decoder::with_buffer(frame)
                        .map_err(|e| io_error("io.read", path, &e))?
                        .single_frame();
                    loop {
                        let n = fill_from(&mut decoder, &mut plain, path)?;
                        if n == 0 {
                            break;
                        }
                        scanner.feed(&plain[..n])?;
                        if !hand_on(&mut scanner, h, sink)? {
                            return Ok(None);
                        }
                    }
                    used = base + r.end;
                }
            }
        }
        pending.drain(..used);
        at += used as u64;
        if !hand_on(&mut scanner, h, sink)? {
            return Ok(None);
        }
        if eof {
            break;
        }
    }
    let clean =
        pending.is_empty() && scanner.at_line_start() && scanner.committed == scanner.consumed;
    let after = faults::hit(Point::StreamRestat, path).and_then(|()| std::fs::metadata(path));
    let after = revision_of(&after.map_err(|e| io_error("io.stat", path, &e))?);
    match header {
        Some(header) if clean && after == before => Ok(Some(StreamEnd {
            header,
            revision: after,
            marks,
        })),
        _ => Ok(None),
    }
}
