//! Reading a range of a JSONL log's events back without reading the whole
//! file (windowed sessions): resync points ("marks") remembered while the
//! log was read say where decoding may start.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::Path;

use zstd::zstd_safe::InBuffer;

use super::layout::{fill_from, io_error, READ_BLOCK};
use super::scan::Scanner;
use super::zstd_frames::StreamDecoder;
use super::Compression;
use crate::error::Result;
use crate::rule::Rule;
use crate::store::backend::Stored;

/// Keep a mark only this many events after the previous one.
const MARK_SPACING: u64 = 512;

/// Resync points of one log: `(index of the first event after it, byte
/// offset)`, both increasing. An offset is the start of a line (plain) or
/// of a zstd frame holding whole lines.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    points: Vec<(u64, u64)>,
    /// The file the offsets are in, when known: a log replaced by a merge
    /// of its frames (see [`super::compact`]) has other offsets.
    pub file: Option<super::fsio::FileId>,
}

impl Marks {
    /// Remember a resync point (ignored unless it is far enough past the
    /// last one).
    pub fn add(&mut self, index: u64, offset: u64) {
        match self.points.last() {
            Some(&(i, o)) if index < i + MARK_SPACING || offset <= o => {}
            _ => self.points.push((index, offset)),
        }
    }

    /// Remember `offset` as the resync point of the next event `scanner`
    /// scans, when the scanner is at a line start: an offset inside a line
    /// (a frame another writer cut there) is none.
    pub fn add_at_line_start(&mut self, scanner: &Scanner, offset: u64) {
        if scanner.at_line_start() {
            self.add(scanner.next_index(), offset);
        }
    }

    /// Forget the marks at or after `offset` (the file was cut there).
    pub fn cut(&mut self, offset: u64) {
        self.points.retain(|&(_, o)| o < offset);
    }

    /// The last mark at or before event `index`.
    fn before(&self, index: u64) -> Option<(u64, u64)> {
        let k = self.points.partition_point(|&(i, _)| i <= index);
        k.checked_sub(1).map(|k| self.points[k])
    }
}

/// Where a range read stopped: the open file, the decoder inside the frame
/// it was in, and the events it scanned past the range. The next read that
/// starts at or after them continues from here instead of decoding again
/// from a mark (a windowed session reads old chunks back in order, and a
/// frame holds several chunks).
pub struct Cursor {
    file: File,
    decoder: Option<StreamDecoder>,
    scanner: Scanner,
    /// The file offset scanning started at (plain logs).
    offset: u64,
    /// Input read from the file; `block[used..filled]` is not decoded yet.
    block: Vec<u8>,
    used: usize,
    filled: usize,
    /// The file offset of `block[0]`.
    at: u64,
    /// Plaintext out of the decoder; the decoder may hold more when its
    /// last step filled it.
    plain: Vec<u8>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("first", &self.first())
            .field("next", &self.scanner.next_index())
            .finish()
    }
}

impl Cursor {
    /// A cursor at resync point `(base, offset)` of the log at `path`.
    fn start(path: &Path, compression: Compression, base: u64, offset: u64) -> Result<Cursor> {
        let mut file =
            super::layout::open_read(path).map_err(|e| io_error(Rule::IoOpen, path, &e))?;
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| io_error(Rule::IoRead, path, &e))?;
        Ok(Cursor {
            file,
            decoder: match compression {
                Compression::None => None,
                Compression::Zstd => Some(StreamDecoder::new()?),
            },
            scanner: Scanner::starting_at(base),
            offset,
            block: vec![0u8; READ_BLOCK],
            used: 0,
            filled: 0,
            at: offset,
            plain: Vec::with_capacity(READ_BLOCK),
        })
    }

    /// The identity of the file the cursor reads.
    fn identity(&self) -> Option<super::fsio::FileId> {
        crate::store::platform::fstat(&self.file)
            .ok()
            .map(|m| m.id())
    }

    /// The index of the first event the cursor holds (or of the next one
    /// it will scan).
    fn first(&self) -> u64 {
        self.scanner.next_index() - self.scanner.events.len() as u64
    }

    /// Scan until event `to` is reached or the file ends (false then),
    /// dropping events before `from` and adding the marks met on the way.
    fn advance(&mut self, path: &Path, marks: &mut Marks, from: u64, to: u64) -> Result<bool> {
        while self.scanner.next_index() < to {
            let held = self.plain.len() == self.plain.capacity();
            if self.used == self.filled && !held {
                self.at += self.filled as u64;
                self.used = 0;
                self.filled = fill_from(&mut self.file, &mut self.block, path)?;
                if self.filled == 0 {
                    return Ok(false);
                }
                continue;
            }
            let input = &self.block[self.used..self.filled];
            match &mut self.decoder {
                None => {
                    self.scanner.feed(input)?;
                    self.used = self.filled;
                    // Any line start is a resync point.
                    marks.add(
                        self.scanner.next_index(),
                        self.offset + self.scanner.committed as u64,
                    );
                }
                Some(decoder) => {
                    let mut input = InBuffer::around(input);
                    let at = (self.at as usize) + self.used;
                    let ended = decoder.decode(&mut input, &mut self.plain, at)?;
                    self.used += input.pos();
                    self.scanner.feed(&self.plain)?;
                    if ended {
                        let offset = self.at + self.used as u64;
                        marks.add_at_line_start(&self.scanner, offset);
                    }
                }
            }
            let _ = self.scanner.take_before(from);
        }
        Ok(true)
    }
}

/// The events `from..to` of the log at `path` (fewer when the log ends
/// first), decoded from `cursor` when it holds or precedes `from` and no
/// mark is closer, else from the last mark before `from`. New marks met on
/// the way are added to `marks`; `cursor` is left where this read stopped
/// (`None` at the end of the log). `None` when no mark precedes `from`.
///
/// Work and memory are bounded by what lies between the start and `to`:
/// compressed input streams through the decoder, decoding stops once `to`
/// is reached (inside a frame too: a frame written by another writer may
/// hold a whole session), and events before `from` are dropped as they are
/// scanned.
pub fn read_range(
    path: &Path,
    compression: Compression,
    marks: &mut Marks,
    cursor: &mut Option<Cursor>,
    from: u64,
    to: u64,
) -> Result<Option<Vec<Stored>>> {
    let mark = marks.before(from);
    let mut c = match cursor.take() {
        Some(c) if c.first() <= from && mark.is_none_or(|(i, _)| i <= c.scanner.next_index()) => c,
        _ => {
            let Some((base, offset)) = mark else {
                return Ok(None);
            };
            let c = Cursor::start(path, compression, base, offset)?;
            if marks.file.is_some_and(|f| Some(f) != c.identity()) {
                // Another file now: its offsets are unknown.
                *marks = Marks::default();
                return Ok(None);
            }
            c
        }
    };
    let more = c.advance(path, marks, from, to)?;
    let _ = c.scanner.take_before(from);
    let events = c.scanner.take_before(to);
    if more {
        *cursor = Some(c);
    }
    Ok(Some(events))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ev, header, TempRoot, BOTH};
    use super::super::JsonlBackend;
    use crate::store::backend::{Backend, RangeReads, Stored};

    /// Event `i`: runs of chunks (stored packed) between plugin events.
    fn event(i: u64) -> std::sync::Arc<crate::engine::Event> {
        if i % 7 < 4 {
            ev(&format!(
                r#"{{"type":"assistant/chunk","seq":{i},"time":5,"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"t{i}"}}}}}}"#
            ))
        } else {
            ev(&format!(
                r#"{{"type":"plugin/x","seq":{i},"time":5,"data":{{"i":{i}}}}}"#
            ))
        }
    }

    /// Append events `seqs` to log "r" of `b` as one batch (one frame).
    fn append(b: &mut JsonlBackend, seqs: std::ops::Range<u64>) {
        let batch: Vec<_> = seqs.clone().map(event).collect();
        b.append(&header("r", None), &batch, seqs.start == 0)
            .unwrap();
    }

    /// Each range read of `ranges` is the slice of `all` (a whole read).
    fn assert_slices(b: &mut JsonlBackend, all: &[Stored], ranges: &[(u64, u64)], what: &str) {
        for &(from, to) in ranges {
            let got = b.load_range("r", from, to).unwrap();
            let want = &all[(from as usize).min(all.len())..(to as usize).min(all.len())];
            assert_eq!(got, want, "{what} {from}..{to}");
        }
    }

    #[test]
    fn a_range_read_from_a_mark_is_the_slice_of_a_full_read() {
        for compression in BOTH {
            let root = TempRoot::new("range");
            let mut b = JsonlBackend::open(&root.0, compression).unwrap();
            let in_batches = |b: &mut JsonlBackend, from: u64, to: u64| {
                for start in (from..to).step_by(100) {
                    append(b, start..(start + 100).min(to));
                }
            };
            in_batches(&mut b, 0, 3000);
            let all = b.load("r").unwrap().unwrap().events;
            assert_eq!(all.len(), 3000);
            assert!(
                b.marks["r"].points.len() >= 4,
                "{compression:?}: {:?}",
                b.marks["r"]
            );
            let ranges = [
                (0, 10),
                (511, 513),
                (1000, 1100),
                (2990, 3000),
                (2500, 4000),
            ];
            assert_slices(&mut b, &all, &ranges, &format!("{compression:?}"));
            // Events appended after the read are found past the last mark,
            // and the marks met on the way are kept.
            in_batches(&mut b, 3000, 5000);
            let marks = b.marks["r"].points.len();
            let got = b.load_range("r", 4500, 4510).unwrap();
            assert_eq!(got.len(), 10);
            assert!(got.iter().zip(4500..).all(|(e, seq)| e.seq() == Some(seq)));
            assert!(b.marks["r"].points.len() > marks, "{compression:?}");
            assert_eq!(b.load_range("r", 4999, 5005).unwrap().len(), 1);
        }
    }

    #[test]
    fn a_range_inside_one_large_frame_is_decoded_from_its_start() {
        // One batch of 3000 events is one frame: the only marks are the
        // frame starts, so each read decodes from there, across many
        // reads and decode steps, and stops at `to`.
        for compression in BOTH {
            let root = TempRoot::new("range-one-frame");
            let mut b = JsonlBackend::open(&root.0, compression).unwrap();
            append(&mut b, 0..3000);
            let all = b.load("r").unwrap().unwrap().events;
            assert_eq!(all.len(), 3000);
            let ranges = [(0, 1), (1500, 1510), (2999, 3000), (2990, 3100)];
            assert_slices(&mut b, &all, &ranges, &format!("{compression:?}"));
            // A second batch: its frame start becomes a mark once a read
            // passes it.
            append(&mut b, 3000..3100);
            let got = b.load_range("r", 3050, 3060).unwrap();
            assert!(got.iter().zip(3050..).all(|(e, seq)| e.seq() == Some(seq)));
            assert_eq!(got.len(), 10);
            if compression == super::super::Compression::Zstd {
                let marks = &b.marks["r"].points;
                assert!(marks.iter().any(|&(i, _)| i == 3000), "{marks:?}");
            }
        }
    }

    #[test]
    fn reads_in_order_continue_from_where_the_last_one_stopped() {
        for compression in BOTH {
            let root = TempRoot::new("range-cursor");
            let mut b = JsonlBackend::open(&root.0, compression).unwrap();
            append(&mut b, 0..3000);
            append(&mut b, 3000..3300);
            let all = b.load("r").unwrap().unwrap().events;
            assert!(b.cursor.is_none(), "a whole read drops the cursor");
            let cursor_at = |b: &JsonlBackend| b.cursor.as_ref().map(|(_, c)| c.first());
            // In order, in chunks: each read leaves the cursor at its end.
            for from in (0..3300).step_by(256) {
                let to = from + 256;
                let got = b.load_range("r", from, to).unwrap();
                let want = &all[from as usize..(to as usize).min(all.len())];
                assert_eq!(got, want, "{compression:?} {from}..{to}");
                if to < 3300 {
                    assert_eq!(cursor_at(&b), Some(to), "{compression:?}");
                } else {
                    assert_eq!(cursor_at(&b), None, "the log's end drops it");
                }
            }
            // Backwards and with gaps: still the slices of a full read.
            let ranges = [(2000, 2100), (100, 120), (150, 151), (2999, 3001)];
            assert_slices(&mut b, &all, &ranges, &format!("{compression:?}"));
            assert_eq!(cursor_at(&b), Some(3001));
            b.delete("r").unwrap();
            assert!(b.cursor.is_none(), "a deleted log drops it");
        }
    }
}
