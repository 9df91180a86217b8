//! Zstandard framing of a compressed JSONL log (docs/formats.md §3.4, §3.5):
//! one checksummed frame per written batch, a structural frame scan that
//! tells complete frames from a torn tail without decompressing, and
//! decoders for complete and torn frames.

use std::io::{self, Read, Write};
use std::ops::Range;

use crate::error::{Error, Result, Status};
use crate::rule::Rule;
use crate::store::backend::TornKind;

mod tail;

pub use tail::zeroed_end;

/// The compression level of written frames. The JSONL format fixes no
/// level (readers accept any valid frame); level 1 compresses session text
/// about twice as fast as 3 for a slightly larger file, and the writer
/// thread's compression is what bounds write-behind throughput.
pub const LEVEL: i32 = 1;

/// The magic number that starts every Zstandard frame.
pub const MAGIC: u32 = 0xFD2F_B528;

/// Append one frame holding `plain` (content checksum on) to `out`.
pub fn compress_frame(plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    compress_frame_at(plain, LEVEL, out)
}

/// [`compress_frame`] at zstd level `level`; the frame states its size.
pub fn compress_frame_at(plain: &[u8], level: i32, out: &mut Vec<u8>) -> io::Result<()> {
    let mut encoder = zstd::stream::Encoder::new(out, level)?;
    encoder.include_checksum(true)?;
    encoder.set_pledged_src_size(Some(plain.len() as u64))?;
    encoder.write_all(plain)?;
    encoder.finish()?;
    Ok(())
}

/// The result of a structural scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frames {
    /// Byte ranges of the complete frames, in order.
    pub complete: Vec<Range<usize>>,
    /// Where a torn tail starts (after the last complete frame), if there
    /// is one.
    pub torn_start: Option<usize>,
    /// What the torn tail is (with [`Frames::torn_start`]).
    pub torn_kind: Option<TornKind>,
}

/// How a scan treats damage after the complete frames it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// Damage refuses the scan (`DSH_E_CORRUPT`); only what a crash leaves
    /// is a torn tail.
    Refuse,
    /// The first damage found starts a torn tail
    /// ([`TornKind::Salvaged`]): the frames before it are kept.
    Salvage,
}

fn corrupt(rule: Rule, what: &str, at: usize) -> Error {
    Error::new(
        Status::Corrupt,
        rule,
        format!("corrupt Zstandard log: {what} at byte {at}"),
    )
}

/// Scan frame boundaries without decompressing, stopping after `limit`
/// complete frames when given. What follows the last complete frame is a
/// torn tail when a crash can leave it ([`tail::classify`]), else damage.
pub fn scan_frames(bytes: &[u8], limit: Option<usize>) -> Result<Frames> {
    let mut complete = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if limit.is_some_and(|l| complete.len() >= l) {
            break;
        }
        match frame_end(bytes, pos, 0) {
            Ok(Some(end)) => {
                complete.push(pos..end);
                pos = end;
            }
            other => {
                let kind = tail_at(bytes, pos, 0, other.err(), Damage::Refuse)?;
                return Ok(Frames {
                    complete,
                    torn_start: Some(pos),
                    torn_kind: Some(kind),
                });
            }
        }
    }
    Ok(Frames {
        complete,
        torn_start: None,
        torn_kind: None,
    })
}

/// [`scan_frames`] of a file read a block at a time by `read` (which
/// appends to the buffer it is given and says when the file ended): the
/// same frames (as file offsets), torn start and refusals, holding only
/// the frame being scanned. Also returns the bytes from the torn start (or
/// the end) to the end of the file.
pub fn scan_stream(read: impl FnMut(&mut Vec<u8>) -> Result<bool>) -> Result<(Frames, Vec<u8>)> {
    scan_stream_with(read, Damage::Refuse)
}

/// [`scan_stream`] that treats damage as `damage` says.
pub fn scan_stream_with(
    mut read: impl FnMut(&mut Vec<u8>) -> Result<bool>,
    damage: Damage,
) -> Result<(Frames, Vec<u8>)> {
    let mut buf = Vec::new();
    // The file offset of `buf[0]`, and the start of the frame being scanned.
    let mut base = 0;
    let mut pos = 0;
    let mut complete = Vec::new();
    let mut eof = false;
    loop {
        let (end, error) = match frame_end(&buf, pos, base) {
            Ok(end) => (end, None),
            Err(e) => (None, Some(e)),
        };
        match end {
            Some(end) => {
                complete.push(base + pos..base + end);
                pos = end;
            }
            None if !eof && error.is_none() => {
                buf.drain(..pos);
                base += pos;
                pos = 0;
                eof = read(&mut buf)?;
            }
            None => {
                // The tail is told from damage by all of it: the rest of
                // the file is read.
                while !eof {
                    eof = read(&mut buf)?;
                }
                let torn_start = (pos < buf.len()).then_some(base + pos);
                let torn_kind = match torn_start {
                    Some(_) => Some(tail_at(&buf, pos, base, error, damage)?),
                    None => None,
                };
                let rest = buf.split_off(pos);
                return Ok((
                    Frames {
                        complete,
                        torn_start,
                        torn_kind,
                    },
                    rest,
                ));
            }
        }
    }
}

/// What the bytes from `pos` to the end of `bytes` are, after the last
/// complete frame (`structural`: the structural error found at `pos`, if
/// any; `base`: the file offset of `bytes[0]`). A complete frame starting
/// after `pos` means what lies at `pos` is damaged committed data (a
/// flipped bit in a block size makes a frame swallow the ones after it):
/// `zstd.damaged-frame`, or the structural error. Alone at the end, the
/// tail a crash leaves is a torn tail of its kind; anything else is damage
/// too. Under [`Damage::Salvage`] damage is a torn tail as well.
fn tail_at(
    bytes: &[u8],
    pos: usize,
    base: usize,
    structural: Option<Error>,
    damage: Damage,
) -> Result<TornKind> {
    let found = match later_complete_frame(bytes, pos + 1) {
        Some(next) => Err(structural.unwrap_or_else(|| {
            corrupt(
                Rule::ZstdDamagedFrame,
                &format!(
                    "a damaged frame is followed by a complete frame at byte {}",
                    base + next
                ),
                base + pos,
            )
        })),
        None => tail::classify(&bytes[pos..], base + pos).map_err(|e| structural.unwrap_or(e)),
    };
    match (found, damage) {
        (Err(_), Damage::Salvage) => Ok(TornKind::Salvaged),
        (found, _) => found,
    }
}

/// The start of a structurally complete frame at or after `from`, if any.
fn later_complete_frame(bytes: &[u8], from: usize) -> Option<usize> {
    let magic = MAGIC.to_le_bytes();
    (from..bytes.len().saturating_sub(3))
        .filter(|&i| bytes[i..i + 4] == magic)
        .find(|&i| matches!(frame_end(bytes, i, 0), Ok(Some(_))))
}

/// The end of the frame starting at `start`, or `None` when it is torn.
/// Refusals name file offsets: `base` is the file offset of `bytes[0]`.
fn frame_end(bytes: &[u8], start: usize, base: usize) -> Result<Option<usize>> {
    let len = bytes.len();
    if len - start < 4 {
        return Ok(None);
    }
    let magic = u32::from_le_bytes([
        bytes[start],
        bytes[start + 1],
        bytes[start + 2],
        bytes[start + 3],
    ]);
    if magic != MAGIC {
        return Err(corrupt(
            Rule::ZstdBadMagic,
            "invalid frame magic",
            base + start,
        ));
    }
    let Some(&d) = bytes.get(start + 4) else {
        return Ok(None);
    };
    if d & 0x18 != 0 {
        return Err(corrupt(
            Rule::ZstdReservedBit,
            "reserved frame-header bit",
            base + start + 4,
        ));
    }
    let fcs_flag = d >> 6;
    let single_segment = d & 0x20 != 0;
    let checksum = d & 0x04 != 0;
    let dict_bytes = [0, 1, 2, 4][usize::from(d & 3)];
    let fcs_bytes = match fcs_flag {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut p = start + 5 + usize::from(!single_segment) + dict_bytes + fcs_bytes;
    loop {
        if p + 3 > len {
            return Ok(None);
        }
        let h = u32::from(bytes[p]) | u32::from(bytes[p + 1]) << 8 | u32::from(bytes[p + 2]) << 16;
        let last = h & 1 != 0;
        let block_type = (h >> 1) & 3;
        if block_type == 3 {
            return Err(corrupt(
                Rule::ZstdReservedBlock,
                "reserved block type",
                base + p,
            ));
        }
        let payload = if block_type == 1 {
            1
        } else {
            (h >> 3) as usize
        };
        p += 3 + payload;
        if p > len {
            return Ok(None);
        }
        if last {
            break;
        }
    }
    if checksum {
        p += 4;
        if p > len {
            return Ok(None);
        }
    }
    Ok(Some(p))
}

/// Decompress one complete frame, verifying its checksum (`zstd.frame-decode`).
pub fn decode_frame(frame: &[u8], rule: Rule, at: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    zstd::stream::read::Decoder::with_buffer(frame)
        .map(zstd::stream::read::Decoder::single_frame)
        .and_then(|mut d| d.read_to_end(&mut out))
        .map_err(|e| decode_error(rule, at, &e))?;
    Ok(out)
}

/// A reusable decoder of complete frames: one decompression context, and
/// the plaintext written into a buffer the caller keeps, so decoding a
/// long log neither reallocates per frame nor faults in fresh pages.
#[derive(Default)]
pub struct FrameDecoder {
    /// The context of frames decoded whole.
    context: Option<zstd::bulk::Decompressor<'static>>,
    /// The context of frames decoded in pieces (see [`FrameDecoder::pieces`]).
    stream: Option<StreamDecoder>,
    /// The piece [`FrameDecoder::each_piece`] decodes into (reused).
    piece: Vec<u8>,
}

/// Frames that state at most this much plaintext are decoded whole; longer
/// ones, and ones that do not state their size, in pieces (a frame written
/// by another writer may hold a whole session). Small in tests, so that
/// logs of a few lines take the piece path.
///
/// Small pieces keep both threads of a long open busy (see
/// `pipeline.rs`): the scanner starts after the first 2 MiB instead of a
/// whole 16 MiB round's frame, the decoding thread shares the lines of
/// every piece up to the last one, and the few buffers they pass back and
/// forth stay faulted in. A 100k-event open of 16 MiB frames: 0.28 -> 0.24 s,
/// peak 181 -> 160 MB.
pub const WHOLE_MAX: usize = if cfg!(test) { 4096 } else { 2 << 20 };

/// The plaintext of one piece of a frame decoded in pieces (about).
pub const PIECE: usize = WHOLE_MAX;

/// The pieces of one frame (see [`FrameDecoder::pieces`]).
pub struct FramePieces<'d, 'f> {
    decoder: &'d mut FrameDecoder,
    frame: &'f [u8],
    at: usize,
    /// The frame bytes decoded so far, once decoding in pieces started.
    pos: Option<usize>,
    done: bool,
}

impl FramePieces<'_, '_> {
    /// The frame's last piece was given.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next piece of the frame's plaintext into `out` (cleared
    /// first); false when the frame is done. The pieces of a frame
    /// concatenate to its plaintext; a short frame is one piece. Refusals
    /// as [`decode_frame`]'s (the content checksum, a single frame), also
    /// for a frame whose bytes end before its last block or go on after it.
    pub fn next_into(&mut self, out: &mut Vec<u8>) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let rule = Rule::ZstdFrameDecode;
        if self.pos.is_none() {
            // A short frame that states its size (the writer pledges it) is
            // decoded in one call into room reserved up front; anything else
            // (a long frame, no size, a size no block structure could
            // produce, no memory for it) streams.
            out.clear();
            let frame = self.frame;
            let whole = zstd::zstd_safe::get_frame_content_size(frame)
                .ok()
                .flatten()
                .filter(|&n| n <= WHOLE_MAX as u64)
                .filter(|&n| n <= (frame.len() as u64).saturating_mul(MAX_RATIO))
                .is_some_and(|n| out.try_reserve_exact(n as usize).is_ok());
            if let (true, Ok(context)) = (whole, self.decoder.context()) {
                self.done = true;
                return context
                    .decompress_to_buffer(frame, out)
                    .map(|_| true)
                    .map_err(|e| decode_error(rule, self.at, &e));
            }
            match &mut self.decoder.stream {
                Some(stream) => stream.reset(),
                slot @ None => *slot = Some(StreamDecoder::new()?),
            }
            self.pos = Some(0);
        }
        let stream = self.decoder.stream.as_mut().expect("made above");
        out.clear();
        out.reserve(PIECE);
        let mut input = zstd::zstd_safe::InBuffer::around(self.frame);
        input.set_pos(self.pos.unwrap_or(0));
        loop {
            let before = (input.pos(), out.len());
            if stream.decode_more(&mut input, out, self.at)? {
                self.done = true;
                if input.pos() != self.frame.len() {
                    let e = io::Error::other("bytes after the end of the frame");
                    return Err(decode_error(rule, self.at, &e));
                }
                break;
            }
            if out.len() == out.capacity() {
                break;
            }
            if (input.pos(), out.len()) == before {
                let e = io::Error::other("the frame's bytes end before its last block");
                return Err(decode_error(rule, self.at, &e));
            }
        }
        self.pos = Some(input.pos());
        Ok(true)
    }
}

impl FrameDecoder {
    /// A decoder whose context is made on first use.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// The plaintext of the complete frame `frame` (at file offset `at`),
    /// piece by piece: whole when it states at most [`WHOLE_MAX`] bytes,
    /// else in pieces of about [`PIECE`].
    pub fn pieces<'d, 'f>(&'d mut self, frame: &'f [u8], at: usize) -> FramePieces<'d, 'f> {
        FramePieces {
            decoder: self,
            frame,
            at,
            pos: None,
            done: false,
        }
    }

    /// Append the plaintext of the complete frame `frame` (at file offset
    /// `at`) to `out`, with this decoder's contexts: decoding many frames
    /// makes no context per frame (making one costs more than decoding a
    /// step's small frame). Refusals as [`FramePieces::next_into`]'s.
    pub fn decode_append(&mut self, frame: &[u8], at: usize, out: &mut Vec<u8>) -> Result<()> {
        self.each_piece(frame, at, |piece| {
            out.extend_from_slice(piece);
            true
        })
        .map(drop)
    }

    /// True when the complete frame `frame` decodes to exactly `text`
    /// (compared piece by piece, nothing else held); a frame that does not
    /// decode is an error.
    pub fn decodes_to(&mut self, frame: &[u8], text: &[u8]) -> Result<bool> {
        let mut at = 0;
        let same = self.each_piece(frame, 0, |piece| {
            let start = at;
            at += piece.len();
            text.get(start..at) == Some(piece)
        })?;
        Ok(same && at == text.len())
    }

    /// Hand each piece of the complete frame `frame` to `take`, in order,
    /// while it returns true; false when it stopped the decoding.
    fn each_piece(
        &mut self,
        frame: &[u8],
        at: usize,
        mut take: impl FnMut(&[u8]) -> bool,
    ) -> Result<bool> {
        let mut piece = std::mem::take(&mut self.piece);
        let mut pieces = self.pieces(frame, at);
        let result = loop {
            match pieces.next_into(&mut piece) {
                Ok(true) if take(&piece) => {}
                Ok(true) => break Ok(false),
                Ok(false) => break Ok(true),
                Err(e) => break Err(e),
            }
        };
        piece.clear();
        self.piece = piece;
        result
    }

    fn context(&mut self) -> io::Result<&mut zstd::bulk::Decompressor<'static>> {
        if self.context.is_none() {
            self.context = Some(zstd::bulk::Decompressor::new()?);
        }
        Ok(self.context.as_mut().expect("just made"))
    }
}

/// A streaming decoder of a run of frames, fed the file as it is read:
/// the plaintext comes out in pieces of at most the output buffer's
/// capacity, and the end of each frame is reported, so a reader can stop
/// inside a frame (a windowed read wants a few events, not the whole
/// frame) and knows where the next frame starts.
pub struct StreamDecoder {
    context: zstd::zstd_safe::DCtx<'static>,
}

impl StreamDecoder {
    /// A fresh decoder, at the start of a frame.
    pub fn new() -> Result<StreamDecoder> {
        let context = zstd::zstd_safe::DCtx::try_create().ok_or_else(|| {
            Error::new(
                Status::Internal,
                Rule::ZstdContext,
                "no memory for a Zstandard decompression context",
            )
        })?;
        Ok(StreamDecoder { context })
    }

    /// Back to the start of a frame (after one left half decoded).
    pub fn reset(&mut self) {
        let _ = self
            .context
            .reset(zstd::zstd_safe::ResetDirective::SessionOnly);
    }

    /// Decode from `input` into `out` (cleared first) until `out` is full
    /// or `input` is used up, or a frame ends. Returns true when a frame
    /// ended (at `input.pos()`; `out` then ends with its last byte). Bad
    /// data (a checksum, a block) is `zstd.frame-decode`, `at` being the
    /// file offset of `input`'s first byte.
    pub fn decode(
        &mut self,
        input: &mut zstd::zstd_safe::InBuffer<'_>,
        out: &mut Vec<u8>,
        at: usize,
    ) -> Result<bool> {
        out.clear();
        self.decode_more(input, out, at)
    }

    /// [`StreamDecoder::decode`] that appends to `out` (into its spare
    /// capacity) instead of clearing it.
    pub fn decode_more(
        &mut self,
        input: &mut zstd::zstd_safe::InBuffer<'_>,
        out: &mut Vec<u8>,
        at: usize,
    ) -> Result<bool> {
        let from = input.pos();
        let pos = out.len();
        let mut output = zstd::zstd_safe::OutBuffer::around_pos(out, pos);
        match self.context.decompress_stream(&mut output, input) {
            Ok(hint) => Ok(hint == 0),
            Err(code) => {
                let e = io::Error::other(zstd::zstd_safe::get_error_name(code));
                Err(decode_error(Rule::ZstdFrameDecode, at + from, &e))
            }
        }
    }
}

/// No zstd block expands more than this: 128 KiB of content from an RLE
/// block of 4 bytes (the frame-size sanity bound of [`FrameDecoder`]).
const MAX_RATIO: u64 = 1 << 15;

fn decode_error(rule: Rule, at: usize, e: &io::Error) -> Error {
    Error::new(
        Status::Corrupt,
        rule,
        format!("corrupt Zstandard log: frame at byte {at} failed to decode: {e}"),
    )
}

/// The plaintext a torn frame yields before its bytes run out (or its
/// data turns out bad): every block that could be decoded.
pub fn decode_torn(frame: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(decoder) = zstd::stream::read::Decoder::with_buffer(frame) else {
        return out;
    };
    let mut decoder = decoder.single_frame();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match decoder.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests;
