//! Reading a range of a JSONL log's events back without reading the whole
//! file (windowed sessions): resync points ("marks") remembered while the
//! log was read say where decoding may start.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use zstd::zstd_safe::InBuffer;

use super::layout::io_error;
use super::scan::Scanner;
use super::zstd_frames::StreamDecoder;
use super::Compression;
use crate::error::Result;
use crate::store::backend::Stored;

/// Keep a mark only this many events after the previous one.
const MARK_SPACING: u64 = 512;

/// How much of the file one read takes (and the most plaintext one decode
/// step yields). Small in tests, so reads cut frames and lines.
const BLOCK: usize = if cfg!(test) { 4096 } else { 1 << 20 };

/// Resync points of one log: `(index of the first event after it, byte
/// offset)`, both increasing. An offset is the start of a line (plain) or
/// of a zstd frame holding whole lines.
#[derive(Debug, Clone, Default)]
pub struct Marks(Vec<(u64, u64)>);

impl Marks {
    /// Remember a resync point (ignored unless it is far enough past the
    /// last one).
    pub fn add(&mut self, index: u64, offset: u64) {
        match self.0.last() {
            Some(&(i, o)) if index < i + MARK_SPACING || offset <= o => {}
            _ => self.0.push((index, offset)),
        }
    }

    /// Forget the marks at or after `offset` (the file was cut there).
    pub fn cut(&mut self, offset: u64) {
        self.0.retain(|&(_, o)| o < offset);
    }

    /// The last mark at or before event `index`.
    fn before(&self, index: u64) -> Option<(u64, u64)> {
        let k = self.0.partition_point(|&(i, _)| i <= index);
        k.checked_sub(1).map(|k| self.0[k])
    }
}

/// The events `from..to` of the log at `path`, decoded from the last mark
/// before `from` on (fewer when the log ends first). New marks met on the
/// way are added to `marks`. `None` when no mark precedes `from`.
///
/// Work and memory are bounded by what lies between the mark and `to`:
/// compressed input streams through the decoder, decoding stops once `to`
/// is reached (inside a frame too: a frame written by another writer may
/// hold a whole session), and events before `from` are dropped as they are
/// scanned.
pub fn read_range(
    path: &Path,
    compression: Compression,
    marks: &mut Marks,
    from: u64,
    to: u64,
) -> Result<Option<Vec<Stored>>> {
    let Some((base, offset)) = marks.before(from) else {
        return Ok(None);
    };
    let mut file = File::open(path).map_err(|e| io_error("io.open", path, &e))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| io_error("io.read", path, &e))?;
    let mut scanner = Scanner::starting_at(base);
    let mut decoder = match compression {
        Compression::None => None,
        Compression::Zstd => Some(StreamDecoder::new()?),
    };
    let mut block = vec![0u8; BLOCK];
    let mut plain = Vec::with_capacity(BLOCK);
    // The file offset of `block`'s first byte.
    let mut at = offset;
    while scanner.next_index() < to {
        let n = match file.read(&mut block) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("io.read", path, &e)),
        };
        if n == 0 {
            break;
        }
        match &mut decoder {
            None => {
                scanner.feed(&block[..n])?;
                // Any line start is a resync point.
                marks.add(scanner.next_index(), offset + scanner.committed as u64);
                drop_before(&mut scanner, from);
            }
            Some(decoder) => {
                let mut input = InBuffer::around(&block[..n]);
                // Until the block is used up and the decoder holds nothing
                // more (a full output buffer may leave some behind).
                while scanner.next_index() < to
                    && (input.pos() < n || plain.len() == plain.capacity())
                {
                    let ended = decoder.decode(&mut input, &mut plain, at as usize)?;
                    scanner.feed(&plain)?;
                    if ended && scanner.at_line_start() {
                        // Frames hold whole lines: the next one is a resync
                        // point.
                        marks.add(scanner.next_index(), at + input.pos() as u64);
                    }
                    drop_before(&mut scanner, from);
                }
            }
        }
        at += n as u64;
    }
    let first = scanner.next_index() - scanner.events.len() as u64;
    let mut events = scanner.events;
    events.truncate(to.saturating_sub(first) as usize);
    events.drain(..(from.saturating_sub(first) as usize).min(events.len()));
    Ok(Some(events))
}

/// Drop the scanned events when all of them come before `from`.
fn drop_before(scanner: &mut Scanner, from: u64) {
    if scanner.next_index() <= from {
        scanner.take_events();
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ev, header, TempRoot, BOTH};
    use super::super::JsonlBackend;
    use crate::store::backend::Backend;

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

    #[test]
    fn a_range_read_from_a_mark_is_the_slice_of_a_full_read() {
        for compression in BOTH {
            let root = TempRoot::new("range");
            let mut b = JsonlBackend::open(&root.0, compression).unwrap();
            let h = header("r", None);
            let append = |b: &mut JsonlBackend, from: u64, to: u64| {
                for start in (from..to).step_by(100) {
                    let batch: Vec<_> = (start..(start + 100).min(to)).map(event).collect();
                    b.append(&h, &batch, start == 0).unwrap();
                }
            };
            append(&mut b, 0, 3000);
            let all = b.load("r").unwrap().unwrap().events;
            assert_eq!(all.len(), 3000);
            assert!(
                b.marks["r"].0.len() >= 4,
                "{compression:?}: {:?}",
                b.marks["r"]
            );
            for (from, to) in [
                (0, 10),
                (511, 513),
                (1000, 1100),
                (2990, 3000),
                (2500, 4000),
            ] {
                let got = b.load_range("r", from, to).unwrap();
                let want = &all[from as usize..(to as usize).min(all.len())];
                assert_eq!(got, want, "{compression:?} {from}..{to}");
            }
            // Events appended after the read are found past the last mark,
            // and the marks met on the way are kept.
            append(&mut b, 3000, 5000);
            let marks = b.marks["r"].0.len();
            let got = b.load_range("r", 4500, 4510).unwrap();
            assert_eq!(got.len(), 10);
            assert!(got.iter().zip(4500..).all(|(e, seq)| e.seq() == Some(seq)));
            assert!(b.marks["r"].0.len() > marks, "{compression:?}");
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
            let h = header("r", None);
            let batch: Vec<_> = (0..3000).map(event).collect();
            b.append(&h, &batch, true).unwrap();
            let all = b.load("r").unwrap().unwrap().events;
            assert_eq!(all.len(), 3000);
            for (from, to) in [(0, 1), (1500, 1510), (2999, 3000), (2990, 3100)] {
                let got = b.load_range("r", from, to).unwrap();
                let want = &all[from as usize..(to as usize).min(all.len())];
                assert_eq!(got, want, "{compression:?} {from}..{to}");
            }
            // A second batch: its frame start becomes a mark once a read
            // passes it.
            let more: Vec<_> = (3000..3100).map(event).collect();
            b.append(&h, &more, false).unwrap();
            let got = b.load_range("r", 3050, 3060).unwrap();
            assert!(got.iter().zip(3050..).all(|(e, seq)| e.seq() == Some(seq)));
            assert_eq!(got.len(), 10);
            if compression == super::super::Compression::Zstd {
                let marks = &b.marks["r"].0;
                assert!(marks.iter().any(|&(i, _)| i == 3000), "{marks:?}");
            }
        }
    }
}
