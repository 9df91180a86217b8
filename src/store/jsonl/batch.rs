//! Encoding and writing one record batch (docs/formats.md §3.2, §3.4):
//! records joined by `\n` plus a final `\n`, plain or as exactly one
//! checksummed Zstandard frame.
//!
//! Everything runs on the calling (writer) thread while appends may run:
//! on a small machine the other core belongs to the appending thread. While
//! a flush waits (nobody appends then), zstd compresses the frame on
//! [`Scratch::set_workers`] threads of its own as well. The batch is serialized into
//! a reused buffer; a batch of at most [`CHUNK`] bytes of text (the usual
//! case: one batch window) is compressed in a single call with a reused
//! compression context, straight from that buffer. A larger batch is
//! serialized and streamed into the same frame [`CHUNK`] bytes at a time,
//! so memory stays bounded whatever the batch size.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use zstd::zstd_safe::{self, CCtx, CParameter, InBuffer, OutBuffer, ResetDirective};

use super::zstd_frames::LEVEL;
use super::Compression;
use crate::engine::Event;
use crate::store::chunk_rows::{pack, Record, JSONL_BOUNDS};

/// Text serialized (and compressed) at a time.
const CHUNK: usize = 8 << 20;

/// Scratch buffers above this size are released after a batch.
const SCRATCH_KEEP: usize = CHUNK + CHUNK / 2;

/// Compressed output written to the file at a time when streaming.
const STREAM_OUT: usize = 1 << 20;

/// Buffers and the compression context, reused between batches.
#[derive(Default)]
pub struct Scratch {
    text: String,
    frame: Vec<u8>,
    cctx: Option<CCtx<'static>>,
    /// zstd worker threads wanted for the next frame (0: this thread only).
    workers: u32,
    /// zstd worker threads `cctx` is set to.
    applied: u32,
    /// `cctx` may have started its worker threads (a long frame was
    /// compressed with workers).
    started: bool,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("text", &self.text.capacity())
            .field("frame", &self.frame.capacity())
            .finish_non_exhaustive()
    }
}

fn zstd_error(code: zstd_safe::ErrorCode) -> io::Error {
    io::Error::other(format!(
        "zstd compression failed: {}",
        zstd_safe::get_error_name(code)
    ))
}

impl Scratch {
    /// Compress the next frames on `n` zstd worker threads besides this one
    /// (0: on this thread alone). zstd compresses a short frame on this
    /// thread whatever `n` is.
    pub fn set_workers(&mut self, n: u32) {
        self.workers = n;
    }

    fn trim(&mut self) {
        if self.text.capacity() > SCRATCH_KEEP {
            self.text = String::new();
        }
        if self.frame.capacity() > SCRATCH_KEEP {
            self.frame = Vec::new();
        }
    }

    /// The compression context, ready for a new frame: level [`LEVEL`],
    /// content checksum on.
    fn cctx(&mut self) -> io::Result<&mut CCtx<'static>> {
        if self.started && self.workers == 0 {
            // Back to this thread alone: free the worker threads and their
            // job buffers (about 10 MB), which setting the count to 0 keeps.
            self.cctx = None;
            self.started = false;
        }
        if self.cctx.is_none() {
            let mut cctx = CCtx::try_create().ok_or_else(|| io::Error::other("zstd: no memory"))?;
            cctx.set_parameter(CParameter::CompressionLevel(LEVEL))
                .map_err(zstd_error)?;
            cctx.set_parameter(CParameter::ChecksumFlag(true))
                .map_err(zstd_error)?;
            self.cctx = Some(cctx);
            self.applied = 0;
            self.started = false;
        }
        let cctx = self.cctx.as_mut().expect("created above");
        cctx.reset(ResetDirective::SessionOnly)
            .map_err(zstd_error)?;
        if self.applied != self.workers
            && cctx
                .set_parameter(CParameter::NbWorkers(self.workers))
                .is_ok()
        {
            // A refusal keeps the threads as they were: only speed differs.
            self.applied = self.workers;
        }
        Ok(cctx)
    }
}

fn push_record(record: &Record<'_>, out: &mut String) {
    match record {
        Record::Event(e) => e.write_json(out),
        Record::Row(row) => row.write_json(out),
    }
    out.push('\n');
}

/// Fill `out` with records until it holds at least [`CHUNK`] bytes or the
/// records run out.
fn fill<'a, 'b: 'a>(records: &mut std::slice::Iter<'a, Record<'b>>, out: &mut String) {
    for record in records.by_ref() {
        push_record(record, out);
        if out.len() >= CHUNK {
            break;
        }
    }
}

/// The whole storage text of `events` (tests and small writes).
#[cfg(test)]
pub fn batch_text(events: &[Arc<Event>]) -> String {
    let mut out = String::new();
    for record in pack(events, JSONL_BOUNDS) {
        push_record(&record, &mut out);
    }
    out
}

/// Ask the kernel to start writing dirty pages of `file` back now, so the
/// final fsync has less left to wait for. Advisory; errors are ignored.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the descriptor is valid while `file` is borrowed; the call
    // only schedules I/O on it and touches no memory of ours.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File) {}

/// Write the batch of `events` at the end of `file` (opened for append):
/// the plain records, or exactly one new frame. Not synced.
pub fn write_batch(
    file: &File,
    events: &[Arc<Event>],
    compression: Compression,
    scratch: &mut Scratch,
) -> io::Result<()> {
    let records = pack(events, JSONL_BOUNDS);
    let mut rest = records.iter();
    let mut text = std::mem::take(&mut scratch.text);
    text.clear();
    fill(&mut rest, &mut text);
    // zstd hands a frame's jobs to its worker threads (starting them) only
    // beyond this many bytes.
    const WORKERS_FROM: usize = 512 << 10;
    let long = rest.len() > 0 || text.len() > WORKERS_FROM;
    let result = match compression {
        Compression::None => write_plain(file, &mut rest, &mut text),
        Compression::Zstd if rest.len() == 0 => write_frame(file, &text, scratch),
        Compression::Zstd => write_stream(file, &mut rest, &mut text, scratch),
    };
    scratch.started |= long && scratch.applied > 0 && compression == Compression::Zstd;
    scratch.text = text;
    scratch.trim();
    result
}

/// Plain records, [`CHUNK`] bytes at a time.
fn write_plain(
    mut file: &File,
    rest: &mut std::slice::Iter<'_, Record<'_>>,
    text: &mut String,
) -> io::Result<()> {
    loop {
        file.write_all(text.as_bytes())?;
        if rest.len() == 0 {
            return Ok(());
        }
        start_writeback(file);
        text.clear();
        fill(rest, text);
    }
}

/// The whole batch text as one frame, compressed in one call.
fn write_frame(mut file: &File, text: &str, scratch: &mut Scratch) -> io::Result<()> {
    let mut frame = std::mem::take(&mut scratch.frame);
    frame.clear();
    frame.reserve(zstd_safe::compress_bound(text.len()));
    let result = scratch
        .cctx()
        .and_then(|cctx| {
            cctx.compress2(&mut frame, text.as_bytes())
                .map_err(zstd_error)
        })
        .and_then(|_| file.write_all(&frame));
    scratch.frame = frame;
    result
}

/// A batch larger than [`CHUNK`]: one frame, fed [`CHUNK`] bytes of text
/// at a time; compressed output goes to the file as it fills up.
fn write_stream(
    mut file: &File,
    rest: &mut std::slice::Iter<'_, Record<'_>>,
    text: &mut String,
    scratch: &mut Scratch,
) -> io::Result<()> {
    use zstd_safe::zstd_sys::ZSTD_EndDirective::{ZSTD_e_continue, ZSTD_e_end};
    let mut frame = std::mem::take(&mut scratch.frame);
    frame.clear();
    frame.reserve(STREAM_OUT);
    let result = (|| {
        let cctx = scratch.cctx()?;
        loop {
            let last = rest.len() == 0;
            let mode = if last { ZSTD_e_end } else { ZSTD_e_continue };
            let mut input = InBuffer::around(text.as_bytes());
            loop {
                let pos = frame.len();
                // The output buffer sets `frame`'s length as it is written.
                let left = cctx
                    .compress_stream2(
                        &mut OutBuffer::around_pos(&mut frame, pos),
                        &mut input,
                        mode,
                    )
                    .map_err(zstd_error)?;
                if frame.capacity() - frame.len() < STREAM_OUT / 4 || (last && left == 0) {
                    file.write_all(&frame)?;
                    frame.clear();
                    start_writeback(file);
                }
                let done = input.pos() == text.len();
                if done && (!last || left == 0) {
                    break;
                }
            }
            if last {
                return Ok(());
            }
            text.clear();
            fill(rest, text);
        }
    })();
    if result.is_err() {
        // A failed frame leaves the context mid-frame: start over next time.
        scratch.cctx = None;
    }
    scratch.frame = frame;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Rule;
    use crate::store::jsonl::zstd_frames::{decode_frame, scan_frames};

    fn events(n: u64, text_len: usize) -> Vec<Arc<Event>> {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|seq| {
                let text: String = (0..text_len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        char::from(b'a' + (seed % 26) as u8)
                    })
                    .collect();
                let json = format!(
                    r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"text":"{text}"}}}}"#
                );
                Arc::new(
                    Event::from_envelope(crate::json::parse(&json).unwrap(), "test").unwrap(),
                )
            })
            .collect()
    }

    fn temp_file(tag: &str) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!(
            "dsh-batch-{tag}-{}-{}",
            std::process::id(),
            super::super::fsio::random_hex12()
        ));
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .unwrap();
        (path, file)
    }

    #[test]
    fn small_and_streamed_batches_are_one_checksummed_frame_each() {
        // The second batch is larger than one chunk: it is streamed.
        let small = events(50, 300);
        let big = events(9_000, 1_000);
        assert!(batch_text(&big).len() > CHUNK);
        let (path, file) = temp_file("frames");
        let mut scratch = Scratch::default();
        for batch in [&small, &big, &small] {
            write_batch(&file, batch, Compression::Zstd, &mut scratch).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let frames = scan_frames(&bytes, None).unwrap();
        assert_eq!(frames.complete.len(), 3);
        assert_eq!(frames.torn_start, None);
        for (r, batch) in frames.complete.iter().zip([&small, &big, &small]) {
            assert_ne!(bytes[r.start + 4] & 0x04, 0, "content checksum");
            let plain = decode_frame(&bytes[r.clone()], Rule::ZstdFrameDecode, 0).unwrap();
            assert_eq!(plain, batch_text(batch).into_bytes());
        }
    }

    #[test]
    fn frames_compressed_on_worker_threads_are_the_same_records() {
        // Medium: one call, long enough that zstd hands out jobs; big: streamed.
        let small = events(50, 300);
        let medium = events(2_500, 1_000);
        let big = events(9_000, 1_000);
        assert!(batch_text(&medium).len() > 2 << 20);
        let plan: [(&Vec<Arc<Event>>, u32); 6] = [
            (&medium, 2),
            (&small, 2),
            (&big, 2),
            (&medium, 0),
            (&big, 1),
            (&small, 0),
        ];
        let (path, file) = temp_file("workers");
        let mut scratch = Scratch::default();
        for (batch, workers) in plan {
            scratch.set_workers(workers);
            write_batch(&file, batch, Compression::Zstd, &mut scratch).unwrap();
            assert_eq!(scratch.applied, workers, "zstd took the worker count");
            if workers == 0 {
                assert!(!scratch.started, "threads of a long frame are let go");
            } else if batch_text(batch).len() > 512 << 10 {
                assert!(scratch.started);
            }
        }
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let frames = scan_frames(&bytes, None).unwrap();
        assert_eq!(frames.complete.len(), plan.len());
        for (r, (batch, _)) in frames.complete.iter().zip(plan) {
            assert_ne!(bytes[r.start + 4] & 0x04, 0, "content checksum");
            let plain = decode_frame(&bytes[r.clone()], Rule::ZstdFrameDecode, 0).unwrap();
            assert_eq!(plain, batch_text(batch).into_bytes());
        }
    }

    #[test]
    fn plain_batches_are_their_records() {
        let small = events(50, 300);
        let big = events(9_000, 1_000);
        let (path, file) = temp_file("plain");
        let mut scratch = Scratch::default();
        for batch in [&small, &big] {
            write_batch(&file, batch, Compression::None, &mut scratch).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(bytes, (batch_text(&small) + &batch_text(&big)).into_bytes());
    }
}
