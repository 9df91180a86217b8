//! Reading a JSONL log (persistence.md §6.6): the stable-stat read, the
//! plain and zstd decoders, and the first-record read used by listing.

use std::fs::{self, File};
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::mpsc;

use super::faults::Point;
use super::header::{read_header, Mode};
use super::layout::{self, io_error, is_absent, revision_of};
use super::range::Marks;
use super::scan::{decode_line, memchr, Line, Scanner};
use super::zstd_frames::{decode_frame, decode_torn, scan_frames, FrameDecoder};
use super::Compression;
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::store::backend::Torn;

/// How often a read retries while the file keeps changing under it.
pub(super) const STABLE_TRIES: usize = 100;

/// A decoded log (before the identity check, which needs the path).
#[derive(Debug)]
pub struct Decoded {
    /// The header (events.md §8 key order, `delegationDepth` present).
    pub header: Value,
    /// The valid contiguous prefix.
    pub events: Vec<crate::store::backend::Stored>,
    /// The torn tail, if any.
    pub torn: Option<Torn>,
    /// Resync points inside the valid prefix (see [`Marks`]).
    pub marks: Marks,
}

/// Plain logs are fed to the scanner in pieces of about this size, cut at
/// line ends, each remembered as a resync point (small in tests, so small
/// logs get several).
const PIECE: usize = if cfg!(test) { 4096 } else { 1 << 20 };

/// Read all of `path` with the stat before and after agreeing; `None`
/// when the file is absent. Returns the bytes and the revision.
pub fn stable_read(path: &Path) -> Result<Option<(Vec<u8>, String)>> {
    for _ in 0..STABLE_TRIES {
        let Some(before) = layout::stat(path)? else {
            return Ok(None);
        };
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(io_error("io.read", path, &e)),
        };
        let Some(after) = layout::stat_at(Point::ReadRestat, path)? else {
            return Ok(None);
        };
        let (before, after) = (revision_of(&before), revision_of(&after));
        if before == after {
            return Ok(Some((bytes, after)));
        }
    }
    Err(unstable(path))
}

fn unstable(path: &Path) -> Error {
    Error::new(
        Status::Io,
        "io.read-unstable",
        format!(
            "{}: the log kept changing while it was read",
            path.display()
        ),
    )
}

/// [`stable_read`] and [`decode`] of a plain log in one pass: the file is
/// scanned a block at a time as it is read, so it is never held whole next
/// to its events (a plain log is as long as its text). A read during which
/// the file changed is thrown away and made again, as `stable_read` does;
/// a refusal counts only when the file did not change under it. `None`
/// when the file is absent.
pub fn stable_read_plain(
    path: &Path,
    mut check: impl FnMut(&Value) -> Result<()>,
) -> Result<Option<(Decoded, String)>> {
    for _ in 0..STABLE_TRIES {
        let Some(before) = layout::stat(path)? else {
            return Ok(None);
        };
        let read = match File::open(path) {
            Ok(file) => read_plain(file, path, &mut check),
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => Err(io_error("io.read", path, &e)),
        };
        let Some(after) = layout::stat_at(Point::ReadRestat, path)? else {
            return Ok(None);
        };
        let (before, after) = (revision_of(&before), revision_of(&after));
        if before == after {
            return read.map(|decoded| Some((decoded, after)));
        }
    }
    Err(unstable(path))
}

/// One pass of [`stable_read_plain`]: the header line, then the events,
/// [`PIECE`] bytes of the file at a time.
fn read_plain(
    mut file: File,
    path: &Path,
    check: &mut impl FnMut(&Value) -> Result<()>,
) -> Result<Decoded> {
    let mut block = vec![0u8; PIECE];
    // The header line so far, until its end is read.
    let mut head = Vec::new();
    let mut header = None;
    let mut scanner = Scanner::new();
    let mut marks = Marks::default();
    let mut total = 0;
    loop {
        let n = match file.read(&mut block) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("io.read", path, &e)),
        };
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
        marker: committed as u64,
        recovered: 0,
    });
    Ok(Decoded {
        header,
        events: scanner.events,
        torn,
        marks,
    })
}

fn header_missing(path: &Path) -> Error {
    Error::new(
        Status::Corrupt,
        "jsonl.header-missing",
        format!("empty or header-less session log {}", path.display()),
    )
}

fn header_frame_error(path: &Path) -> Error {
    Error::new(
        Status::Corrupt,
        "zstd.header-frame",
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

/// Decode a whole zstd log read by [`stable_read`]. `check` runs on the
/// header before any event is scanned (the identity check).
pub fn decode_zstd(
    bytes: &[u8],
    path: &Path,
    check: impl FnOnce(&Value) -> Result<()>,
) -> Result<Decoded> {
    let frames = scan_frames(bytes, None)?;
    let Some(first) = frames.complete.first() else {
        return Err(header_missing(path));
    };
    let plain = decode_frame(&bytes[first.clone()], "zstd.frame-decode", first.start)?;
    if !is_one_line(&plain) {
        return Err(header_frame_error(path));
    }
    let header = read_header(&plain, path, Mode::Load)?.expect("load mode");
    check(&header)?;
    let mut scanner = Scanner::new();
    let mut marks = Marks::default();
    scan_frames_in_order(bytes, &frames.complete[1..], |range, first, frame| {
        // A frame start is a resync point when it starts a line (another
        // writer may cut frames inside lines).
        if first && scanner.at_line_start() {
            marks.add(scanner.events.len() as u64, range.start as u64);
        }
        let lines = frame.take_lines();
        scanner.feed_decoded(&frame.plain, frame.from, lines)
    })?;
    if !scanner.at_line_start() || scanner.committed < scanner.consumed || scanner.issue.is_some() {
        return Err(Error::new(
            Status::Corrupt,
            "zstd.torn-record-in-frame",
            format!(
                "corrupt Zstandard log {}: a complete frame contains a torn record",
                path.display()
            ),
        ));
    }
    let torn = match frames.torn_start {
        None => None,
        Some(start) => {
            let committed = scanner.events.len();
            scanner.feed(&decode_torn(&bytes[start..]))?;
            Some(Torn {
                marker: start as u64,
                recovered: scanner.events.len() - committed,
            })
        }
    };
    Ok(Decoded {
        header,
        events: scanner.events,
        torn,
        marks,
    })
}

/// Logs with at least this many event frames, holding at least
/// [`PIPELINE_BYTES`] of compressed frames, are decoded on a second thread
/// while this one scans. Smaller ones are not worth the thread: its heap
/// keeps the freed decode buffers, which for a small log is a large part
/// of the memory the session needs (a 10k-event open grew 1.2x -> 2.2x).
const PIPELINE_FRAMES: usize = 2;

/// See [`PIPELINE_FRAMES`].
const PIPELINE_BYTES: usize = if cfg!(test) { 1 } else { 16 << 20 };

/// A decoded frame on its way to the scanner: its plaintext, and the
/// complete lines from byte `from` on that the decoding thread decoded
/// already (in reverse order) while the scanner was busy.
struct Frame {
    plain: Vec<u8>,
    from: usize,
    lines_rev: Vec<Line>,
}

impl Frame {
    fn new(plain: Vec<u8>) -> Frame {
        Frame {
            from: plain.len(),
            plain,
            lines_rev: Vec::new(),
        }
    }

    /// The lines decoded ahead, in order.
    fn take_lines(&mut self) -> Vec<Line> {
        let mut lines = std::mem::take(&mut self.lines_rev);
        lines.reverse();
        lines
    }

    /// Decode up to `n` more complete lines, from the back; false when no
    /// line is left that may be decoded here. Only lines after the first
    /// `\n` qualify (the first may continue the previous frame's last
    /// line), and none after the last one (it may continue in the next).
    fn decode_back(&mut self, n: usize) -> bool {
        let Some(first_nl) = memchr(b'\n', &self.plain) else {
            return false;
        };
        if self.lines_rev.is_empty() {
            // Start at the end of the last complete line.
            self.from = memchr::memrchr(b'\n', &self.plain).map_or(0, |i| i + 1);
        }
        for _ in 0..n {
            if self.from <= first_nl + 1 {
                return false;
            }
            let end = self.from - 1; // the `\n` of the line before `from`
            let start = memchr::memrchr(b'\n', &self.plain[..end]).map_or(0, |i| i + 1);
            self.lines_rev.push(decode_line(&self.plain[start..end]));
            self.from = start;
        }
        true
    }
}

/// Decode each complete frame of `ranges` and hand it to `scan`, in log
/// order: whole, or in pieces when it is long (see [`FrameDecoder::pieces`];
/// `scan` is told which piece is a frame's first). The first error in log
/// order wins: a frame's decode error is reported only after every earlier
/// frame was scanned without one, and nothing after an error is scanned.
/// Long logs decode the next piece on a scoped thread (joined on every
/// path) while `scan` runs on this one; when that thread is ahead, it
/// decodes the ready piece's lines from the back until the scanner takes
/// it, so both threads share the line work.
fn scan_frames_in_order(
    bytes: &[u8],
    ranges: &[Range<usize>],
    mut scan: impl FnMut(&Range<usize>, bool, &mut Frame) -> Result<()>,
) -> Result<()> {
    let compressed: usize = ranges.iter().map(ExactSizeIterator::len).sum();
    if ranges.len() < PIPELINE_FRAMES || compressed < PIPELINE_BYTES {
        let mut decoder = FrameDecoder::new();
        let mut frame = Frame::new(Vec::new());
        for range in ranges {
            let mut pieces = decoder.pieces(&bytes[range.clone()], range.start);
            let mut first = true;
            while pieces.next_into(&mut frame.plain)? {
                frame.from = frame.plain.len();
                scan(range, first, &mut frame)?;
                first = false;
            }
        }
        return Ok(());
    }
    std::thread::scope(|s| {
        // One decoded piece waits while the next is decoded and this thread
        // scans a third; scanned buffers go back to the decoder for reuse.
        let (ready, decoded) = mpsc::sync_channel::<Result<Piece>>(1);
        let (recycle, recycled) = mpsc::channel::<Vec<u8>>();
        s.spawn(move || {
            let mut decoder = FrameDecoder::new();
            for range in ranges {
                let mut pieces = decoder.pieces(&bytes[range.clone()], range.start);
                let mut first = true;
                loop {
                    let mut buf = recycled.try_recv().unwrap_or_default();
                    let mut item = pieces.next_into(&mut buf).map(|_| Piece {
                        frame: Frame::new(buf),
                        first,
                        last: pieces.is_done(),
                    });
                    first = false;
                    let (failed, last) = match &item {
                        Ok(piece) => (false, piece.last),
                        Err(_) => (true, true),
                    };
                    // Until the scanner takes the piece, decode its lines.
                    let mut more = !failed;
                    let sent = loop {
                        if !more {
                            break ready.send(item).is_ok();
                        }
                        match ready.try_send(item) {
                            Ok(()) => break true,
                            Err(mpsc::TrySendError::Disconnected(_)) => break false,
                            Err(mpsc::TrySendError::Full(back)) => {
                                item = back;
                                if let Ok(piece) = &mut item {
                                    more = piece.frame.decode_back(LINES_PER_STEP);
                                }
                            }
                        }
                    };
                    // A closed channel means the scan stopped at an error.
                    if !sent || failed {
                        return;
                    }
                    if last {
                        break;
                    }
                }
            }
        });
        let mut ranges = ranges.iter();
        let mut range = ranges.next();
        while let Some(r) = range {
            let mut piece = decoded
                .recv()
                .expect("the decoder sends every piece until an error")?;
            scan(r, piece.first, &mut piece.frame)?;
            if piece.last {
                range = ranges.next();
            }
            // The decoder may have finished already; the buffer is then freed.
            let _ = recycle.send(piece.frame.plain);
        }
        Ok(())
    })
}

/// A piece of a frame on its way to the scanner, and whether it is the
/// frame's first and last.
struct Piece {
    frame: Frame,
    first: bool,
    last: bool,
}

/// Lines the decoding thread decodes between two offers of a ready frame.
const LINES_PER_STEP: usize = 16;

/// Read only the header of a log for listing: `None` when the file is
/// absent, has no complete first line/frame, or that line is not a
/// header. Retired fields and malformed header frames still refuse.
pub fn read_first_header(path: &Path, compression: Compression) -> Result<Option<Value>> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(io_error("io.open", path, &e)),
    };
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 8192];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("io.read", path, &e)),
        };
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
                    let plain = decode_frame(&buf[first.clone()], "zstd.header-frame-decode", 0)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// Scanner state that must not depend on which thread decoded a line.
    fn outcome(sc: &Scanner) -> (Vec<String>, usize, usize, Option<&'static str>, bool) {
        let texts = sc.events.iter().map(|e| e.to_value().to_json()).collect();
        let issue = sc.issue.as_ref().map(|e| e.rule);
        (texts, sc.committed, sc.consumed, issue, sc.at_line_start())
    }

    /// Lines decoded ahead from the back of each frame are taken exactly
    /// as if the scanner had decoded them: cut anywhere (inside lines and
    /// UTF-8 sequences), with damaged lines, a seq gap and a torn end.
    #[test]
    fn lines_decoded_ahead_scan_like_lines_decoded_in_order() {
        let mut r = Rng(0x5EED_F00D);
        for round in 0..200 {
            let mut text = String::new();
            let mut seq = 0u64;
            for i in 0..r.below(60) {
                let line = match r.below(20) {
                    0 => "{not json".to_string(),
                    1 => {
                        seq += 2; // a gap
                        format!(r#"{{"type":"x/e","seq":{seq},"time":1,"data":{{}}}}"#)
                    }
                    2 => format!(
                        r#"{{"type":"turn/end","seq":{seq},"time":1,"data":{{"turn":{i}}}}}"#
                    ),
                    _ => {
                        format!(r#"{{"type":"x/é","seq":{seq},"time":1,"data":{{"t":"€{i}\n"}}}}"#)
                    }
                };
                seq += 1;
                text.push_str(&line);
                text.push('\n');
            }
            if r.below(3) == 0 {
                text.push_str(r#"{"type":"x/torn","se"#);
            }
            let bytes = text.as_bytes();
            // Cut into frames at random byte positions.
            let mut cuts = vec![0, bytes.len()];
            for _ in 0..r.below(6) {
                cuts.push(r.below(bytes.len() + 1));
            }
            cuts.sort_unstable();
            let mut plain = Scanner::new();
            let mut ahead = Scanner::new();
            let mut failed = (false, false);
            for w in cuts.windows(2) {
                let chunk = &bytes[w[0]..w[1]];
                failed.0 |= plain.feed(chunk).is_err();
                let mut frame = Frame::new(chunk.to_vec());
                let steps = r.below(4);
                for _ in 0..steps {
                    if !frame.decode_back(1 + r.below(3)) {
                        break;
                    }
                }
                let lines = frame.take_lines();
                failed.1 |= ahead.feed_decoded(&frame.plain, frame.from, lines).is_err();
                if failed.0 || failed.1 {
                    break;
                }
            }
            assert_eq!(failed.0, failed.1, "round {round}");
            assert_eq!(outcome(&plain), outcome(&ahead), "round {round}");
        }
    }
}
