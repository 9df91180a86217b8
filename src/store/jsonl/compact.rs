//! Compaction of a zstd log's trailing frames. A flush per step writes one
//! small frame per step, and small frames compress badly (each starts
//! with an empty history). Once enough of them pile up, the writer merges
//! the trailing run of small frames into frames of up to [`FULL_TEXT`]
//! bytes of text each: it writes a new file (the untouched prefix copied
//! byte for byte, then the merged frames), makes it durable, checks that
//! the log did not change meanwhile, and renames it over the log. No byte
//! of the log is rewritten in place: a crash leaves the old log or the new
//! one, and both hold the same records. The merged frames are ordinary
//! checksummed frames of whole lines: any reader of the format reads them.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use super::faults::{self, Point};
use super::fsio::{self, FileId};
use super::layout::{io_error, open_read, READ_BLOCK};
use super::scan::memchr;
use super::zstd_frames::{scan_stream, FrameDecoder};
use crate::error::{Error, Result, Status};
use crate::rule::Rule;
use crate::store::platform;

/// The text a merged frame holds at most (it ends at the last line end
/// before this size). About the window `zstd -3` keeps over a whole file,
/// so merged frames compress close to it.
pub const FULL_TEXT: usize = 4 << 20;

/// The zstd level of merged frames: `zstd`'s default, where appends use a
/// faster one (a merge runs once per [`FULL_TEXT`] of text at most, off the
/// path of any one step).
const MERGE_LEVEL: i32 = 3;

/// A frame at least this long (compressed), or holding at least 7/8 of
/// [`FULL_TEXT`] (merged frames end at a line end before it), is never
/// merged again.
pub const FULL_BYTES: u64 = 256 << 10;

/// Frames, and bytes of them, looked at from the end of a log read for
/// its trailing run.
const RUN_LOOKBACK: usize = 4096;
const RUN_LOOKBACK_BYTES: u64 = 32 << 20;

/// Fresh bytes (frames written since the last merge) that make a merge
/// due while a session is written: at least this many, and at least
/// [`WRITING_SHARE`]-th of the log, so the copies of the prefix cost a
/// bounded multiple of the log's size over its life.
const WRITING_MIN: u64 = 256 << 10;
const WRITING_SHARE: u64 = 8;

/// The same when the session is closed (nothing more is coming for now).
const CLOSING_MIN: u64 = 4 << 10;
const CLOSING_SHARE: u64 = 32;

/// What the writer knows of the frames at the end of a log it appends to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    /// The offset of the first frame of the trailing run of frames that a
    /// merge may take (shorter than [`FULL_BYTES`]), when known.
    pub from: Option<u64>,
    /// Bytes appended since the log was read or last merged.
    pub fresh: u64,
    /// The log's length after the last append, when known.
    pub len: Option<u64>,
}

impl Tail {
    /// A log read up to `len`, whose trailing run starts at `from` (`len`
    /// when it has none).
    pub fn read(from: Option<u64>, len: u64) -> Tail {
        Tail {
            from: Some(from.unwrap_or(len)),
            fresh: 0,
            len: Some(len),
        }
    }

    /// One batch was appended: the log grew from `before` to `after`.
    pub fn appended(&mut self, before: u64, after: u64) {
        if self.len != Some(before) {
            // Appends this state did not see (or a first one): the run is
            // known from here on.
            *self = Tail::default();
        }
        if after - before >= FULL_BYTES {
            self.from = Some(after);
        } else if self.from.is_none() {
            self.from = Some(before);
        }
        self.fresh += after - before;
        self.len = Some(after);
    }

    /// A merge is due: enough fresh bytes, while writing or at a close.
    pub fn due(&self, closing: bool) -> bool {
        let (Some(from), Some(len)) = (self.from, self.len) else {
            return false;
        };
        let (min, share) = if closing {
            (CLOSING_MIN, CLOSING_SHARE)
        } else {
            (WRITING_MIN, WRITING_SHARE)
        };
        from < len && self.fresh >= min.max(len / share)
    }
}

/// The start of the trailing run of `frames` (complete body frames of a
/// log, in order) shorter than [`FULL_BYTES`], looking at the last
/// [`RUN_LOOKBACK`] frames and [`RUN_LOOKBACK_BYTES`] at most; `None` when
/// the last frame is long.
pub fn trailing_run(frames: &[std::ops::Range<usize>]) -> Option<u64> {
    let (mut from, mut bytes) = (None, 0);
    for frame in frames.iter().rev().take(RUN_LOOKBACK) {
        bytes += frame.len() as u64;
        if frame.len() as u64 >= FULL_BYTES || bytes > RUN_LOOKBACK_BYTES {
            break;
        }
        from = Some(frame.start as u64);
    }
    from
}

/// A merge done: the log's new length and identity, where its trailing
/// run now starts, and whether its directory entry is durable yet.
#[derive(Debug)]
pub struct Merged {
    /// Where the merged frames start (the bytes before are unchanged).
    pub start: u64,
    /// The new tail of the log.
    pub tail: Tail,
    /// The new file.
    pub file: FileId,
    /// The rename is durable (the directory's fsync succeeded); until it
    /// is, nothing may be appended to the new file.
    pub dir_synced: bool,
}

/// Merge the frames of the log at `path` from offset `tail.from` on.
/// `Ok(None)` when there is nothing to gain or the log is not what `tail`
/// says (nothing was changed then). An error before the rename leaves the
/// log as it was; after the rename, [`Merged::dir_synced`] says whether
/// the directory's fsync failed. Holds one frame of the run and one merged
/// frame at a time.
pub fn merge(path: &Path, tail: &Tail) -> Result<Option<Merged>> {
    let (Some(from), Some(len)) = (tail.from, tail.len) else {
        return Ok(None);
    };
    let old = open_read(path).map_err(|e| io_error(Rule::IoOpen, path, &e))?;
    let meta = platform::fstat(&old).map_err(|e| io_error(Rule::IoStat, path, &e))?;
    if meta.len() != len || from >= len {
        return Ok(None);
    }
    let identity = meta.id();
    let read_at = |at: u64, buf: &mut [u8]| {
        platform::read_exact_at(&old, buf, at).map_err(|e| io_error(Rule::IoRead, path, &e))
    };
    // The run's frames (offsets from `from`), scanned a block at a time.
    let mut at = from;
    let (frames, _) = scan_stream(|buf| {
        let want = (len - at).min(READ_BLOCK as u64) as usize;
        let start = buf.len();
        buf.resize(start + want, 0);
        read_at(at, &mut buf[start..])?;
        at += want as u64;
        Ok(at >= len)
    })?;
    if frames.torn_start.is_some() {
        return Ok(None);
    }
    let mut skip = 0;
    for r in &frames.complete {
        let mut head = [0u8; FRAME_HEADER_MAX];
        let head = &mut head[..r.len().min(FRAME_HEADER_MAX)];
        read_at(from + r.start as u64, head)?;
        let text = zstd::zstd_safe::get_frame_content_size(head).ok().flatten();
        if text.is_none_or(|n| n < FULL_TEXT as u64 / 8 * 7) {
            break;
        }
        skip += 1;
    }
    let run = &frames.complete[skip..];
    if run.len() < 2 {
        return Ok(None);
    }
    let start = from + run[0].start as u64;
    let temp = fsio::temp_beside(path);
    let written = write_merged(&old, start, &temp, path, |out| {
        let mut raw = Vec::new();
        let mut text = Vec::new();
        let mut decoder = FrameDecoder::new();
        for r in run {
            raw.resize(r.len(), 0);
            read_at(from + r.start as u64, &mut raw)?;
            decoder.decode_append(&raw, r.start, &mut text)?;
            while text.len() >= FULL_TEXT {
                // Cut after the last line end that keeps the frame within
                // FULL_TEXT, or after the first one past it (a longer line).
                let cut = memrchr(b'\n', &text[..FULL_TEXT])
                    .or_else(|| memchr(b'\n', &text[FULL_TEXT..]).map(|i| i + FULL_TEXT));
                let Some(nl) = cut else { break };
                out.push(&text[..=nl])?;
                text.drain(..=nl);
            }
        }
        if text.last() != Some(&b'\n') {
            // Not whole lines: a record split across frames by another writer.
            return Ok(false);
        }
        out.push(&text)?;
        // Nothing gained: leave the log as it is.
        Ok(out.written < len - start)
    });
    // Closed before the rename: Windows renames over no file that a
    // handle of this process holds.
    drop(old);
    let (merged, file) = match written {
        Ok(Some(done)) => done,
        Ok(None) => {
            let _ = fs::remove_file(&temp);
            return Ok(None);
        }
        Err(e) => {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
    };
    // The log must be as it was read: this backend is its only writer, so
    // anything else means the merge is stale.
    let now = platform::lstat(path).map_err(|e| io_error(Rule::IoStat, path, &e))?;
    if now.id() != identity || now.len() != len {
        let _ = fs::remove_file(&temp);
        return Ok(None);
    }
    // Write-through on Windows: durable when it returns.
    if let Err(e) = platform::rename_replace(&temp, path) {
        let _ = fs::remove_file(&temp);
        return Err(io_error(Rule::IoWrite, path, &e));
    }
    // From here on nothing fails: the log is the new file.
    let dir_synced = match path.parent() {
        Some(dir) => faults::hit(Point::CompactDirSync, dir)
            .map_err(|e| io_error(Rule::IoFsync, dir, &e))
            .and_then(|()| fsio::fsync_dir(dir))
            .is_ok(),
        None => true,
    };
    Ok(Some(Merged {
        start,
        tail: Tail {
            from: Some(start + merged.last_start),
            fresh: 0,
            len: Some(start + merged.written),
        },
        file,
        dir_synced,
    }))
}

/// The longest zstd frame header.
const FRAME_HEADER_MAX: usize = 18;

/// Write the new log at `temp`: `old`'s first `prefix` bytes, then what
/// `merge` pushes (`Ok(false)`: nothing worth writing), durably. Returns
/// what was merged and the new file's identity; `None` when `merge` gave
/// up.
fn write_merged(
    old: &File,
    prefix: u64,
    temp: &Path,
    path: &Path,
    merge: impl FnOnce(&mut Output) -> Result<bool>,
) -> Result<Option<(Output, FileId)>> {
    let failed = |e: io::Error| io_error(Rule::IoWrite, temp, &e);
    let file = fsio::create_temp(temp).map_err(failed)?;
    // Reads at an offset move the position on Windows: copy from the start.
    #[cfg(windows)]
    io::Seek::seek(&mut &*old, io::SeekFrom::Start(0)).map_err(failed)?;
    let copied = io::copy(&mut io::Read::take(old, prefix), &mut &file).map_err(failed)?;
    if copied != prefix {
        return Err(failed(io::Error::other(
            "the log ended before its copy did",
        )));
    }
    let mut out = Output {
        file,
        frame: Vec::new(),
        written: 0,
        last_start: 0,
        compressor: None,
        decoder: FrameDecoder::new(),
    };
    if !merge(&mut out)? {
        return Ok(None);
    }
    out.file.sync_all().map_err(failed)?;
    let meta = platform::fstat(&out.file).map_err(failed)?;
    faults::hit(Point::CompactRename, path).map_err(failed)?;
    Ok(Some((out, meta.id())))
}

/// The merged frames being written after the copied prefix.
struct Output {
    file: File,
    /// The frame being made (reused).
    frame: Vec<u8>,
    /// Bytes of merged frames written.
    written: u64,
    /// Where the last merged frame starts, from the first one.
    last_start: u64,
    /// The compression context of the merged frames, made on first use.
    compressor: Option<zstd::bulk::Compressor<'static>>,
    /// The decoder that checks each merged frame.
    decoder: FrameDecoder,
}

impl Output {
    /// Compress `text` (whole lines) as one more frame, checking that it
    /// decodes back to `text`, and write it.
    fn push(&mut self, text: &[u8]) -> Result<()> {
        let failed = |what: String| {
            Error::new(
                Status::Io,
                Rule::IoWrite,
                format!("merging zstd frames: {what}"),
            )
        };
        if self.compressor.is_none() {
            // Checksummed frames that state their size (a reader reserves
            // it up front).
            let made = zstd::bulk::Compressor::new(MERGE_LEVEL).and_then(|mut c| {
                c.include_checksum(true)?;
                c.include_contentsize(true)?;
                Ok(c)
            });
            self.compressor = Some(made.map_err(|e| failed(e.to_string()))?);
        }
        let compressor = self.compressor.as_mut().expect("made above");
        self.frame.clear();
        self.frame
            .reserve(zstd::zstd_safe::compress_bound(text.len()));
        compressor
            .compress_to_buffer(text, &mut self.frame)
            .map_err(|e| failed(e.to_string()))?;
        if !self.decoder.decodes_to(&self.frame, text)? {
            return Err(failed("a merged frame does not decode to its text".into()));
        }
        self.file
            .write_all(&self.frame)
            .map_err(|e| failed(e.to_string()))?;
        self.last_start = self.written;
        self.written += self.frame.len() as u64;
        Ok(())
    }
}

/// The last `byte` in `hay`.
fn memrchr(byte: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().rposition(|&b| b == byte)
}

/// Remove merge and publish leftovers (`<log>.<12 hex digits>.tmp`) of a
/// crashed writer beside the log at `path`. Other files are left alone.
pub fn remove_leftovers(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{}.", name.to_string_lossy());
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let ours = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .is_some_and(|hex| hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

impl super::JsonlBackend {
    /// Merge the trailing small frames of the log of `segment` (see
    /// [`merge`]). A merge that fails or gains nothing changes nothing and
    /// is tried again only after as many fresh bytes again: the appends it
    /// follows are durable either way.
    pub(super) fn merge_tail(&mut self, segment: &str) {
        let Some(state) = self.logs.get_mut(segment) else {
            return;
        };
        if state.in_flight {
            // Its append runs detached: merged at the next idle moment.
            self.merges_due.insert(segment.to_string());
            return;
        }
        if state.rollback.is_some() || state.dir_unsynced {
            return;
        }
        remove_leftovers(&state.path);
        // The append handle is reopened by path: after a rename it would
        // write to the old file (and Windows renames over no file that a
        // handle of this process holds).
        state.file = None;
        let merged = merge(&state.path, &state.tail);
        match merged {
            Ok(Some(m)) => {
                state.tail = m.tail;
                state.dir_unsynced = !m.dir_synced;
                if let Some(marks) = self.marks.get_mut(segment) {
                    marks.cut(m.start);
                    marks.file = Some(m.file);
                }
                self.forget_cursor(segment);
            }
            Ok(None) | Err(_) => state.tail.fresh = 0,
        }
    }
}
