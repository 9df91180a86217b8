//! Encoding and writing one record batch (persistence.md §6.3, §6.5):
//! records joined by `\n` plus a final `\n`, plain or as exactly one
//! checksummed Zstandard frame. A large batch is serialized in chunks on
//! the calling thread while a helper thread compresses and writes the
//! previous chunk, so both cores work and memory stays bounded.

use std::fs::File;
use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::Arc;

use super::zstd_frames::{compress_frame, LEVEL};
use super::Compression;
use crate::engine::Event;
use crate::store::chunk_rows::{pack, Record, JSONL_BOUNDS};

/// Text per chunk handed to the writer thread.
const CHUNK: usize = 1 << 20;

/// Scratch buffers above this size are released after a batch.
const SCRATCH_KEEP: usize = 8 << 20;

/// Buffers reused between batches.
#[derive(Debug, Default)]
pub struct Scratch {
    text: String,
    frame: Vec<u8>,
}

impl Scratch {
    fn trim(&mut self) {
        if self.text.capacity() > SCRATCH_KEEP {
            self.text = String::new();
        }
        if self.frame.capacity() > SCRATCH_KEEP {
            self.frame = Vec::new();
        }
    }
}

fn push_record(record: &Record<'_>, out: &mut String) {
    match record {
        Record::Event(e) => e.write_json(out),
        Record::Row(row) => out.push_str(&row.to_json()),
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

/// Where chunks go: the file directly, or a streaming frame encoder.
enum Sink<'f> {
    Plain(&'f File),
    Zstd(&'f File, zstd::stream::Encoder<'static, Vec<u8>>),
}

impl<'f> Sink<'f> {
    fn new(file: &'f File, compression: Compression) -> io::Result<Sink<'f>> {
        Ok(match compression {
            Compression::None => Sink::Plain(file),
            Compression::Zstd => {
                let mut encoder = zstd::stream::Encoder::new(Vec::with_capacity(CHUNK), LEVEL)?;
                encoder.include_checksum(true)?;
                Sink::Zstd(file, encoder)
            }
        })
    }

    fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        match self {
            Sink::Plain(file) => {
                let mut f: &File = file;
                f.write_all(chunk)?;
                start_writeback(file);
                Ok(())
            }
            Sink::Zstd(file, encoder) => {
                encoder.write_all(chunk)?;
                let out = encoder.get_mut();
                if out.len() >= CHUNK {
                    let mut f: &File = file;
                    f.write_all(out)?;
                    out.clear();
                    start_writeback(file);
                }
                Ok(())
            }
        }
    }

    fn finish(self) -> io::Result<()> {
        match self {
            Sink::Plain(_) => Ok(()),
            Sink::Zstd(mut file, encoder) => file.write_all(&encoder.finish()?),
        }
    }
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
    scratch.text.clear();
    fill(&mut rest, &mut scratch.text);
    let result = if rest.len() == 0 {
        write_small(file, compression, scratch)
    } else {
        write_pipelined(
            file,
            compression,
            &mut rest,
            std::mem::take(&mut scratch.text),
        )
    };
    scratch.trim();
    result
}

fn write_small(mut file: &File, compression: Compression, scratch: &mut Scratch) -> io::Result<()> {
    match compression {
        Compression::None => file.write_all(scratch.text.as_bytes()),
        Compression::Zstd => {
            scratch.frame.clear();
            compress_frame(scratch.text.as_bytes(), &mut scratch.frame)?;
            file.write_all(&scratch.frame)
        }
    }
}

fn write_pipelined(
    file: &File,
    compression: Compression,
    rest: &mut std::slice::Iter<'_, Record<'_>>,
    first: String,
) -> io::Result<()> {
    std::thread::scope(|scope| {
        let (to_writer, chunks) = mpsc::sync_channel::<String>(2);
        let (give_back, spare) = mpsc::channel::<String>();
        let writer = scope.spawn(move || -> io::Result<()> {
            let mut sink = Sink::new(file, compression)?;
            for mut chunk in chunks {
                sink.write(chunk.as_bytes())?;
                chunk.clear();
                let _ = give_back.send(chunk);
            }
            sink.finish()
        });
        let mut text = first;
        loop {
            let next = spare
                .try_recv()
                .unwrap_or_else(|_| String::with_capacity(CHUNK + CHUNK / 4));
            // A send fails only when the writer stopped on an error.
            if to_writer.send(std::mem::replace(&mut text, next)).is_err() {
                break;
            }
            fill(rest, &mut text);
            if text.is_empty() {
                break;
            }
        }
        drop(to_writer);
        match writer.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
