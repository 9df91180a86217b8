//! A streaming read of a clean JSONL log (windowed open): the file is read
//! a block at a time and its events are handed on in batches, so the read
//! never holds the whole log. Anything unusual (a torn or damaged tail, a
//! file changing under the read) answers `None`, and the caller reads the
//! whole log the usual way, which reports exactly what is wrong.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::faults::{self, Point};
use super::header::{read_header, Mode};
use super::layout::{fill_from, io_error, revision_of, READ_BLOCK};
use super::pipeline::{send_working, Frame, LINES_PER_STEP};
use super::range::Marks;
use super::read::Reading;
use super::scan::{memchr, Scanner};
use super::zstd_frames::{decode_frame, scan_frames, StreamDecoder, MAGIC};
use super::Compression;
use crate::error::Result;
use crate::json::Value;
use crate::rule::Rule;
use crate::store::backend::Stored;
use zstd::zstd_safe::InBuffer;

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

/// What the reading thread hands the scanning one, in file order.
enum Msg {
    /// The header line (raw) or the header frame's plaintext (zstd).
    Header(Vec<u8>),
    /// A line starts at this file offset (a resync point).
    Mark(u64),
    /// Decoded log text, continuing the last, with the lines the reading
    /// thread decoded ahead while the scanner was busy; `mark`: a line may
    /// start at this file offset, just before the text (a resync point).
    Plain { mark: Option<u64>, text: Frame },
    /// The end of the file: whether every byte read was decoded and the
    /// last frame finished.
    End(bool),
    /// Something a streaming read does not take (no header, bad magic,
    /// bad data): the whole read names it.
    Unclean,
    /// A read failed.
    Failed(crate::error::Error),
}

/// Stream the events of the log at `path` to `sink` in batches. `check`
/// runs on the header before any event is read. `Ok(None)`: the log is
/// not clean (or changed while read, as `reading` counts a change; a
/// reader reads the bytes the first stat saw); nothing about it is
/// decided here.
///
/// Two threads: a reading one reads the file and decodes its frames
/// while this one scans the text and hands the events on, so the read
/// of a zstd log keeps both cores busy. `streamed` follows how many bytes
/// of the file were read (for a progress display).
pub fn stream_log(
    path: &Path,
    compression: Compression,
    (reading, streamed): (Reading, &AtomicU64),
    check: impl FnOnce(&Value) -> Result<()>,
    sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
) -> Result<Option<StreamEnd>> {
    use std::io::Read;
    let opened = super::layout::open_read(path).map_err(|e| io_error(Rule::IoOpen, path, &e))?;
    let first =
        crate::store::platform::fstat(&opened).map_err(|e| io_error(Rule::IoStat, path, &e))?;
    let before = revision_of(&first);
    let limit = match reading {
        Reading::Stable => u64::MAX,
        Reading::Prefix => first.len(),
    };
    let file = opened.take(limit);
    let scanned = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(2);
        scope.spawn(move || {
            let end = match produce(file, path, compression, &tx, streamed) {
                Ok(Some(clean)) => Msg::End(clean),
                Ok(None) => Msg::Unclean,
                Err(e) => Msg::Failed(e),
            };
            let _ = tx.send(end);
        });
        // Dropping `rx` on the way out stops the reading thread.
        consume(rx, path, check, sink)
    })?;
    let Some((header, marks)) = scanned else {
        return Ok(None);
    };
    let after =
        faults::hit(Point::StreamRestat, path).and_then(|()| crate::store::platform::lstat(path));
    let after = after.map_err(|e| io_error(Rule::IoStat, path, &e))?;
    let unchanged = match reading {
        Reading::Stable => revision_of(&after) == before,
        Reading::Prefix => after.id() == first.id() && after.len() >= first.len(),
    };
    Ok(unchanged.then_some(StreamEnd {
        header,
        revision: before,
        marks,
    }))
}

/// The scanning side: the header, then the text, into events handed to
/// `sink`; the header and resync points when the log is clean.
fn consume(
    rx: std::sync::mpsc::Receiver<Msg>,
    path: &Path,
    check: impl FnOnce(&Value) -> Result<()>,
    sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
) -> Result<Option<(Value, Marks)>> {
    let mut scanner = Scanner::new();
    let mut marks = Marks::default();
    let header = match rx.recv() {
        Ok(Msg::Header(text)) => match read_header(&text, path, Mode::Load)? {
            Some(h) => h,
            None => return Ok(None),
        },
        Ok(Msg::Failed(e)) => return Err(e),
        _ => return Ok(None),
    };
    check(&header)?;
    loop {
        match rx.recv() {
            Ok(Msg::Mark(offset)) => marks.add_at_line_start(&scanner, offset),
            Ok(Msg::Plain { mark, mut text }) => {
                if let Some(offset) = mark {
                    marks.add_at_line_start(&scanner, offset);
                }
                text.feed(&mut scanner)?;
                if !hand_on(&mut scanner, &header, sink)? {
                    return Ok(None);
                }
            }
            // Clean: every byte decoded, the last frame finished, the last
            // line complete and accepted.
            Ok(Msg::End(true))
                if scanner.at_line_start() && scanner.committed == scanner.consumed =>
            {
                return Ok(Some((header, marks)));
            }
            Ok(Msg::Failed(e)) => return Err(e),
            _ => return Ok(None),
        }
    }
}

/// Send decoded text to the scanning side; while the channel is full,
/// decode lines from the back of the text, so the reading thread shares
/// the line work once it is ahead (as a whole read's decoding thread
/// does, `pipeline.rs`). False when the scanning side stopped.
fn offer(tx: &std::sync::mpsc::SyncSender<Msg>, mark: Option<u64>, text: Vec<u8>) -> bool {
    let msg = Msg::Plain {
        mark,
        text: Frame::new(text),
    };
    send_working(tx, msg, |msg| match msg {
        Msg::Plain { text, .. } => text.decode_back(LINES_PER_STEP),
        _ => false,
    })
}

/// The reading side: read `file` a block at a time and send the header,
/// then the log text with the offsets where lines may start. `Some(clean)`
/// at the end of the file; `None` when the log is not one a streaming read
/// takes, or the scanning side stopped.
fn produce(
    mut file: impl std::io::Read,
    path: &Path,
    compression: Compression,
    tx: &std::sync::mpsc::SyncSender<Msg>,
    streamed: &AtomicU64,
) -> Result<Option<bool>> {
    let send = |m: Msg| tx.send(m).is_ok();
    let mut block = vec![0u8; READ_BLOCK];
    let mut decoder = StreamDecoder::new()?;
    // At the start of a zstd frame (after the header frame's end, and after
    // each frame the decoder finished).
    let mut frame_start = true;
    let mut pending: Vec<u8> = Vec::new();
    // File offset of `pending[0]`.
    let mut at = 0u64;
    let mut header_done = false;
    // A resync point waiting for the text after it.
    let mut mark: Option<u64> = None;
    loop {
        let n = fill_from(&mut file, &mut block, path)?;
        let eof = n == 0;
        pending.extend_from_slice(&block[..n]);
        let mut used = 0;
        if !header_done {
            let found = match compression {
                Compression::None => {
                    memchr(b'\n', &pending).map(|i| (pending[..i + 1].to_vec(), i + 1))
                }
                Compression::Zstd => match scan_frames(&pending, Some(1))?.complete.first() {
                    Some(r) => {
                        let plain = decode_frame(&pending[r.clone()], Rule::ZstdFrameDecode, 0)?;
                        if memchr(b'\n', &plain) != Some(plain.len().wrapping_sub(1)) {
                            return Ok(None);
                        }
                        Some((plain, r.end))
                    }
                    None => None,
                },
            };
            let Some((text, end)) = found else {
                if eof {
                    return Ok(None);
                }
                continue;
            };
            if !send(Msg::Header(text)) {
                return Ok(None);
            }
            header_done = true;
            used = end;
        }
        match compression {
            Compression::None => {
                let text = pending[used..].to_vec();
                if !offer(tx, Some(at + used as u64), text) {
                    return Ok(None);
                }
                used = pending.len();
            }
            Compression::Zstd => {
                // Frames are decoded as their bytes arrive, never held
                // whole (a frame written by another writer may hold a whole
                // session); their text is handed on as it comes.
                let mut input = InBuffer::around(&pending[used..]);
                // The last decode filled its buffer: the decoder may hold
                // more text even when the input is used up.
                let mut full = false;
                let mut plain = Vec::with_capacity(READ_BLOCK);
                loop {
                    let rest = &pending[used + input.pos()..];
                    if frame_start {
                        if rest.len() < 4 {
                            break; // its magic number is not here yet
                        }
                        if rest[..4] != MAGIC.to_le_bytes() {
                            return Ok(None); // the whole read names it
                        }
                        // The mark goes with the frame's first text; a
                        // frame that gave none sends its own.
                        let start = at + (used + input.pos()) as u64;
                        if let Some(m) = mark.replace(start) {
                            if !send(Msg::Mark(m)) {
                                return Ok(None);
                            }
                        }
                    } else if rest.is_empty() && !full {
                        break; // the decoder holds no more text: read on
                    }
                    // Bad data is for the whole read to name.
                    let Ok(ended) = decoder.decode(&mut input, &mut plain, 0) else {
                        return Ok(None);
                    };
                    streamed.store(at + (used + input.pos()) as u64, Ordering::Relaxed);
                    full = plain.len() == plain.capacity();
                    // A small piece (a frame of one step) goes as a copy, a
                    // large one as the buffer itself.
                    let text = if plain.len() < READ_BLOCK / 4 {
                        plain.clone()
                    } else {
                        std::mem::replace(&mut plain, Vec::with_capacity(READ_BLOCK))
                    };
                    if !text.is_empty() && !offer(tx, mark.take(), text) {
                        return Ok(None);
                    }
                    frame_start = ended;
                }
                used += input.pos();
            }
        }
        pending.drain(..used);
        at += used as u64;
        streamed.store(at, Ordering::Relaxed);
        if eof {
            if let Some(m) = mark {
                if !send(Msg::Mark(m)) {
                    return Ok(None);
                }
            }
            return Ok(Some(pending.is_empty() && frame_start));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ev, header, TempRoot};
    use super::super::zstd_frames::compress_frame;
    use super::super::{Compression, JsonlBackend};
    use crate::rule::Rule;
    use crate::store::backend::{Backend, RangeReads, Stored};
    use crate::test_rng::Rng;

    /// Event `i` (with non-ASCII text, so cuts fall inside characters).
    fn event(i: u64) -> std::sync::Arc<crate::engine::Event> {
        ev(&format!(
            r#"{{"type":"plugin/x","seq":{i},"time":5,"data":{{"text":"é€{i} {}"}}}}"#,
            "z".repeat((i as usize * 37) % 300)
        ))
    }

    /// Rewrite the log at `path` as its header frame and the body cut into
    /// frames at `cuts` (byte offsets into the body), with `extra` bytes
    /// inserted before frame `k` when given.
    fn reframe(path: &std::path::Path, cuts: &[usize], extra: Option<(usize, &[u8])>) {
        let plain = zstd::stream::decode_all(&std::fs::read(path).unwrap()[..]).unwrap();
        let header_end = plain.iter().position(|&c| c == b'\n').unwrap() + 1;
        let (head, body) = plain.split_at(header_end);
        let mut out = Vec::new();
        compress_frame(head, &mut out).unwrap();
        let mut bounds = vec![0, body.len()];
        bounds.extend_from_slice(cuts);
        bounds.sort_unstable();
        bounds.dedup();
        for (k, w) in bounds.windows(2).enumerate() {
            if let Some((at, bytes)) = extra {
                if at == k {
                    out.extend_from_slice(bytes);
                }
            }
            compress_frame(&body[w[0]..w[1]], &mut out).unwrap();
        }
        std::fs::write(path, out).unwrap();
    }

    /// A sink that takes its time, so the reading thread gets ahead and
    /// decodes lines of the pieces it waits to hand on.
    fn slow_sink(batch: &[Stored]) {
        if !batch.is_empty() {
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
    }

    fn streamed(root: &TempRoot, slow: bool) -> Option<Vec<Stored>> {
        let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
        let mut got = Vec::new();
        let end = b
            .load_streaming("s", &mut |_, batch| {
                if slow {
                    slow_sink(&batch);
                }
                got.extend(batch);
                Ok(())
            })
            .unwrap();
        end.map(|_| got)
    }

    #[test]
    fn a_log_streams_like_a_whole_read_whatever_its_frames() {
        let root = TempRoot::new("stream-frames");
        let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
        let events: Vec<_> = (0..3000).map(event).collect();
        b.append(&header("s", None), &events, true).unwrap();
        drop(b);
        let path = root.0.join("_no-cwd/s/session.jsonl.zstd");
        let body_len = {
            let plain = zstd::stream::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap();
            plain.len() - plain.iter().position(|&c| c == b'\n').unwrap() - 1
        };
        let mut r = Rng(0x57_4EA4);
        for round in 0..20 {
            // Frames cut anywhere: inside lines and characters, empty ones
            // dropped, one frame far longer than a read or a decoding step.
            let cuts: Vec<usize> = (0..r.below(8)).map(|_| r.below(body_len)).collect();
            reframe(&path, &cuts, None);
            let whole = JsonlBackend::open(&root.0, Compression::Zstd)
                .unwrap()
                .load("s")
                .unwrap()
                .unwrap();
            assert_eq!(whole.events.len(), 3000);
            // A scanner that keeps up, and one that falls behind (lines
            // then decoded ahead on the reading thread).
            let slow = round % 2 == 1;
            let got = streamed(&root, slow).unwrap_or_else(|| panic!("round {round}: not clean"));
            assert_eq!(got, whole.events, "round {round} {cuts:?}");
            // The resync points kept by either read are right: range reads
            // from them give slices of the whole read.
            for streaming in [true, false] {
                let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
                if streaming {
                    b.load_streaming("s", &mut |_, batch| {
                        if slow {
                            slow_sink(&batch);
                        }
                        Ok(())
                    })
                    .unwrap()
                    .unwrap();
                } else {
                    b.load("s").unwrap().unwrap();
                }
                for (from, to) in [(0, 3), (1500, 1510), (2999, 3000)] {
                    let range = b.load_range("s", from, to).unwrap();
                    let want = &whole.events[from as usize..to as usize];
                    assert_eq!(range, want, "round {round} {streaming}");
                }
            }
        }
        // A skippable frame, or a frame whose data is damaged: the stream
        // leaves it to the whole read, which names it.
        let skippable = [0x50, 0x2a, 0x4d, 0x18, 1, 0, 0, 0, 0];
        reframe(&path, &[body_len / 2], Some((1, &skippable)));
        assert!(streamed(&root, false).is_none());
        assert!(streamed(&root, true).is_none());
        let err = JsonlBackend::open(&root.0, Compression::Zstd)
            .unwrap()
            .load("s")
            .unwrap_err();
        assert_eq!(err.rule, Rule::ZstdBadMagic);
        reframe(&path, &[body_len / 2], None);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 40] ^= 0x55;
        std::fs::write(&path, bytes).unwrap();
        assert!(streamed(&root, false).is_none());
        assert!(streamed(&root, true).is_none());
        assert!(JsonlBackend::open(&root.0, Compression::Zstd)
            .unwrap()
            .load("s")
            .is_err());
    }
}
