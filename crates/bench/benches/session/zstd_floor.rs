//! Floors of a zstd JSONL log written a flush at a time: the least any
//! writer of this format must do, measured on the same lines in the same
//! process. Each flush makes its events durable as one checksummed frame
//! of its own (a frame compresses only against itself), and a log that is
//! to end near `zstd -3` of its text must also hold its text in long
//! frames, which takes one more compression of every byte.
//!
//! * CPU: per flush, its frame at the appends' level (1); once per byte, a
//!   level-3 frame of up to 4 MiB of text made from the small frames read
//!   back (decoded). Nothing is written, checked or synced: a writer does
//!   at least this besides what the raw log does.
//! * Bytes: every flush's frame, plus the final log once (its long frames
//!   are written at least once, whatever the way).

use zstd::zstd_safe::{CCtx, CParameter, DCtx};

use crate::util::Secs;

/// The text a long frame holds at most (as the writer's merges).
const FULL_TEXT: usize = 4 << 20;

fn cctx(level: i32) -> CCtx<'static> {
    let mut c = CCtx::create();
    c.set_parameter(CParameter::CompressionLevel(level))
        .expect("zstd level");
    c.set_parameter(CParameter::ChecksumFlag(true))
        .expect("zstd checksum");
    c
}

/// The lines of `group` as a flush writes them: each followed by `\n`.
fn text_of(group: &[&str], out: &mut Vec<u8>) {
    out.clear();
    for l in group {
        out.extend_from_slice(l.as_bytes());
        out.push(b'\n');
    }
}

/// Compress `text` into `frame` (cleared) with `c`.
fn frame_of(c: &mut CCtx<'static>, text: &[u8], frame: &mut Vec<u8>) {
    frame.clear();
    frame.reserve(zstd::zstd_safe::compress_bound(text.len()));
    c.compress2(frame, text).expect("zstd compress");
}

/// The CPU of the calling thread per group of `groups` (flushes) that a
/// zstd writer spends at least besides the raw log's work: each group's
/// frame at level 1, and every byte once more at level 3 in frames of up
/// to [`FULL_TEXT`] made from the small frames decoded back.
pub fn step_cpu<'a, 'b: 'a>(groups: impl Iterator<Item = &'a [&'b str]>) -> Secs {
    let (mut fast, mut merge) = (cctx(1), cctx(3));
    let mut d = DCtx::create();
    let (mut text, mut frame, mut run, mut merged) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut small: Vec<Vec<u8>> = Vec::new();
    let mut n = 0usize;
    let t = crate::util::Timer::start();
    let mut flush_run = |small: &mut Vec<Vec<u8>>, run: &mut Vec<u8>, merged: &mut Vec<u8>| {
        run.clear();
        for f in small.drain(..) {
            let size = zstd::zstd_safe::get_frame_content_size(&f)
                .ok()
                .flatten()
                .expect("frames state their size") as usize;
            let at = run.len();
            run.resize(at + size, 0);
            d.decompress(&mut run[at..], &f).expect("zstd decode");
        }
        if !run.is_empty() {
            frame_of(&mut merge, run, merged);
        }
    };
    for group in groups {
        text_of(group, &mut text);
        frame_of(&mut fast, &text, &mut frame);
        small.push(std::mem::take(&mut frame));
        n += text.len();
        if n >= FULL_TEXT {
            flush_run(&mut small, &mut run, &mut merged);
            n = 0;
        }
    }
    flush_run(&mut small, &mut run, &mut merged);
    t.stop()
}

/// The bytes of every group's own frame at level 1 (what a writer of one
/// frame per flush writes before any merge).
pub fn flush_frames<'a, 'b: 'a>(groups: impl Iterator<Item = &'a [&'b str]>) -> u64 {
    let mut fast = cctx(1);
    let (mut text, mut frame) = (Vec::new(), Vec::new());
    let mut total = 0;
    for group in groups {
        text_of(group, &mut text);
        frame_of(&mut fast, &text, &mut frame);
        total += frame.len() as u64;
    }
    total
}
