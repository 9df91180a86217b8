//! The decoding pipeline of a zstd log's frames (docs/formats.md §3.5):
//! frames decoded whole or in pieces, on a second thread for long logs,
//! which also decodes lines from the back of the piece waiting for the
//! scanner; the scanner takes every line in log order.

use std::ops::Range;
use std::sync::mpsc;

use super::scan::{decode_line, memchr, Line, Scanner};
use super::zstd_frames::FrameDecoder;
use crate::error::Result;

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
pub(super) struct Frame {
    plain: Vec<u8>,
    from: usize,
    lines_rev: Vec<Line>,
}

impl Frame {
    /// A decoded piece, no line of it decoded yet.
    pub(super) fn new(plain: Vec<u8>) -> Frame {
        Frame {
            from: plain.len(),
            plain,
            lines_rev: Vec::new(),
        }
    }

    /// Scan this piece with `scanner`, taking the lines decoded ahead.
    pub(super) fn feed(&mut self, scanner: &mut Scanner) -> Result<()> {
        let lines = self.take_lines();
        scanner.feed_decoded(&self.plain, self.from, lines)
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
    pub(super) fn decode_back(&mut self, n: usize) -> bool {
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

/// Decode each complete frame of `ranges` (file offsets; `read` fills a
/// buffer with a range's bytes) and hand it to `scan`, in log order:
/// whole, or in pieces when it is long (see [`FrameDecoder::pieces`];
/// `scan` is told which piece is a frame's first). The first error in log
/// order wins: a frame's decode error is reported only after every earlier
/// frame was scanned without one, and nothing after an error is scanned.
/// Long logs decode the next piece on a scoped thread (joined on every
/// path) while `scan` runs on this one; when that thread is ahead, it
/// decodes the ready piece's lines from the back until the scanner takes
/// it, so both threads share the line work.
pub(super) fn scan_frames_in_order(
    read: impl Fn(&Range<usize>, &mut Vec<u8>) -> Result<()> + Sync,
    ranges: &[Range<usize>],
    mut scan: impl FnMut(&Range<usize>, bool, &mut Frame) -> Result<()>,
) -> Result<()> {
    let compressed: usize = ranges.iter().map(ExactSizeIterator::len).sum();
    if ranges.len() < PIPELINE_FRAMES || compressed < PIPELINE_BYTES {
        let mut decoder = FrameDecoder::new();
        let mut frame = Frame::new(Vec::new());
        let mut raw = Vec::new();
        for range in ranges {
            read(range, &mut raw)?;
            let mut pieces = decoder.pieces(&raw, range.start);
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
        let read = &read;
        s.spawn(move || {
            let mut decoder = FrameDecoder::new();
            let mut raw = Vec::new();
            for range in ranges {
                if let Err(e) = read(range, &mut raw) {
                    let _ = ready.send(Err(e));
                    return;
                }
                let mut pieces = decoder.pieces(&raw, range.start);
                let mut first = true;
                loop {
                    let mut buf = recycled.try_recv().unwrap_or_default();
                    let item = pieces.next_into(&mut buf).map(|_| Piece {
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
                    let sent = send_working(&ready, item, |item| match item {
                        Ok(piece) if !failed => piece.frame.decode_back(LINES_PER_STEP),
                        _ => false,
                    });
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

/// Send `item` on `tx`. While the channel is full, call `work` on it
/// (the sending thread shares the receiver's work instead of waiting)
/// until it says nothing is left to do, then wait. False when the
/// receiving side is gone.
pub(super) fn send_working<T>(
    tx: &mpsc::SyncSender<T>,
    mut item: T,
    mut work: impl FnMut(&mut T) -> bool,
) -> bool {
    loop {
        match tx.try_send(item) {
            Ok(()) => return true,
            Err(mpsc::TrySendError::Disconnected(_)) => return false,
            Err(mpsc::TrySendError::Full(mut back)) => {
                if !work(&mut back) {
                    return tx.send(back).is_ok();
                }
                item = back;
            }
        }
    }
}

/// A piece of a frame on its way to the scanner, and whether it is the
/// frame's first and last.
struct Piece {
    frame: Frame,
    first: bool,
    last: bool,
}

/// Lines the decoding thread decodes between two offers of a ready frame.
pub(super) const LINES_PER_STEP: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// Scanner state that must not depend on which thread decoded a line.
    fn outcome(sc: &Scanner) -> (Vec<String>, usize, usize, Option<crate::rule::Rule>, bool) {
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
