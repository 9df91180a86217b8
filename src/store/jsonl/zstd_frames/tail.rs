//! What follows the last complete frame of a zstd log: the tail a crash
//! leaves, or damage. A crash during an append leaves a prefix of the
//! frame being written (its bytes end before its last block, and every
//! byte present decodes), or zeros where the file grew but the data never
//! arrived. Anything else there is damage and refuses the read: bytes that
//! are neither, an incomplete frame whose present blocks do not decode, and
//! an "incomplete" frame that is really a complete one with a damaged byte
//! in its structure (a block size grown by a flipped bit makes a frame end
//! past the end of the file, like a torn one), found by trying every value
//! of each byte that decides the frame's structure and checking the
//! content checksum of the frame so mended.

use super::{corrupt, decode_frame, StreamDecoder, MAGIC};
use crate::error::Result;
use crate::rule::Rule;
use crate::store::backend::TornKind;

/// Work the search for a mended frame may do (block headers parsed) before
/// it gives up and lets the frame be torn, as the reference reads it.
const MEND_BUDGET: u64 = 200_000_000;

/// Classify `tail`, the bytes from the first frame that is not complete
/// to the end of the file (at file offset `at`), when no complete frame
/// starts inside it: a torn tail of some kind, or the damage it is.
pub fn classify(tail: &[u8], at: usize) -> Result<TornKind> {
    if tail.iter().all(|&b| b == 0) {
        return Ok(TornKind::ZeroFilled);
    }
    let magic = MAGIC.to_le_bytes();
    let n = tail.len().min(4);
    if tail[..n] != magic[..n] {
        return Err(corrupt(
            Rule::ZstdBadMagic,
            "bytes after the last complete frame that are neither a frame being written nor zeros",
            at,
        ));
    }
    if n < 4 {
        return Ok(TornKind::IncompleteFrame);
    }
    if let Err(e) = decodes_as_far_as_it_goes(tail, at) {
        return Err(e.prefixed("an incomplete last frame is damaged, not torn: "));
    }
    if mendable(tail) {
        return Err(corrupt(
            Rule::ZstdDamagedFrame,
            "the last frame is complete but for one damaged byte of its structure (its \
             checksum matches once that byte is mended), not torn",
            at,
        ));
    }
    Ok(TornKind::IncompleteFrame)
}

/// Storage writes whole sectors: zeros a crash leaves where data never
/// arrived start at a multiple of this in the file.
pub const SECTOR: usize = 512;

/// Whether the complete last frame `frame` (at file offset `at`, ending at
/// the end of the file), which fails to decode, is a frame whose data
/// never fully arrived: from a sector boundary inside it to its end it is
/// all zeros (the run of zeros starts right at the boundary), and every
/// block before the zeros decodes. Returns where the zeros start in the
/// frame. A frame whose data before the boundary happened to end in a
/// zero byte reads as damage, which refuses: the safe side.
pub fn zeroed_end(frame: &[u8], at: usize) -> Option<usize> {
    let z = frame.iter().rposition(|&b| b != 0)? + 1;
    if z >= frame.len() || z <= 4 || (at + z) % SECTOR != 0 {
        return None;
    }
    decodes_as_far_as_it_goes(&frame[..z], at).ok()?;
    Some(z)
}

/// Feed the incomplete frame `frame` to a streaming decoder: every block
/// whose bytes are all there must decode.
fn decodes_as_far_as_it_goes(frame: &[u8], at: usize) -> Result<()> {
    let mut decoder = StreamDecoder::new()?;
    let mut input = zstd::zstd_safe::InBuffer::around(frame);
    let mut out = Vec::with_capacity(1 << 17);
    loop {
        let before = input.pos();
        let ended = decoder.decode(&mut input, &mut out, at)?;
        if ended || (input.pos() == frame.len() && out.len() < out.capacity()) {
            return Ok(());
        }
        if input.pos() == before && out.is_empty() {
            return Ok(());
        }
    }
}

/// The end of the frame header whose descriptor byte is `fhd` (the frame
/// starts at 0), and whether the frame carries a checksum; `None` for a
/// reserved bit.
fn header_end(fhd: u8) -> Option<(usize, bool)> {
    if fhd & 0x18 != 0 {
        return None;
    }
    let single_segment = fhd & 0x20 != 0;
    let dict_bytes = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_bytes = match fhd >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    Some((
        5 + usize::from(!single_segment) + dict_bytes + fcs_bytes,
        fhd & 0x04 != 0,
    ))
}

/// A block header's fields: (last, the offset after its payload).
fn block(h: [u8; 3], at: usize) -> Option<(bool, usize)> {
    let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
    let block_type = (h >> 1) & 3;
    if block_type == 3 {
        return None;
    }
    let payload = if block_type == 1 {
        1
    } else {
        (h >> 3) as usize
    };
    Some((h & 1 != 0, at + 3 + payload))
}

/// Parse blocks of `bytes` from the block header at `p` to the end of the
/// frame (with its checksum): its end, or `None` when the structure is
/// invalid or runs past the end of `bytes`. Counts headers in `work`.
fn close_from(bytes: &[u8], mut p: usize, checksum: bool, work: &mut u64) -> Option<usize> {
    loop {
        *work += 1;
        let h = bytes.get(p..p + 3)?;
        let (last, next) = block([h[0], h[1], h[2]], p)?;
        if next > bytes.len() {
            return None;
        }
        p = next;
        if last {
            let end = p + if checksum { 4 } else { 0 };
            return (end <= bytes.len()).then_some(end);
        }
    }
}

/// Whether the incomplete frame `frame` (every byte to the end of the
/// file) becomes a frame that ends exactly there, decodes and passes its
/// checksum once one byte of its structure (the frame header descriptor,
/// or a byte of one of the block headers read) takes another value.
fn mendable(frame: &[u8]) -> bool {
    let len = frame.len();
    let Some(&fhd) = frame.get(4) else {
        return false;
    };
    let mut work = 0u64;
    let verify = |at: usize, value: u8| {
        let mut mended = frame.to_vec();
        mended[at] = value;
        decode_frame(&mended, Rule::ZstdFrameDecode, 0).is_ok()
    };
    // A damaged descriptor: the header and every block move.
    for v in 0..=255u8 {
        let Some((start, checksum)) = header_end(v) else {
            continue;
        };
        // Without a checksum a mended frame cannot be told from a torn one.
        if v != fhd
            && checksum
            && close_from(frame, start, true, &mut work) == Some(len)
            && verify(4, v)
        {
            return true;
        }
    }
    let Some((start, checksum)) = header_end(fhd) else {
        return false;
    };
    if !checksum {
        return false;
    }
    // The block headers the forward parse reads: the damaged one is among
    // them (every header before it is true).
    let mut headers = Vec::new();
    let mut p = start;
    while p + 3 <= len {
        headers.push(p);
        match block([frame[p], frame[p + 1], frame[p + 2]], p) {
            Some((false, next)) if next <= len => p = next,
            _ => break,
        }
    }
    for &h in headers.iter().rev() {
        for b in 0..3 {
            let original = frame[h + b];
            for v in 0..=255u8 {
                if v == original {
                    continue;
                }
                if work > MEND_BUDGET {
                    return false;
                }
                let mut bytes = [frame[h], frame[h + 1], frame[h + 2]];
                bytes[b] = v;
                let end = match block(bytes, h) {
                    Some((true, next)) => Some(next + 4),
                    Some((false, next)) if next <= len => close_from(frame, next, true, &mut work),
                    _ => None,
                };
                work += 1;
                if end == Some(len) && verify(h + b, v) {
                    return true;
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::jsonl::zstd_frames::compress_frame_at;

    fn frame(n: usize) -> Vec<u8> {
        let mut text = String::new();
        let mut x = 7u64;
        for i in 0..n {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            text.push_str(&format!("{{\"seq\":{i},\"text\":\"{}\"}}\n", x >> 20));
        }
        let mut out = Vec::new();
        compress_frame_at(text.as_bytes(), 3, &mut out).unwrap();
        out
    }

    #[test]
    fn every_prefix_of_a_frame_is_torn_and_zeros_are_zero_filled() {
        let f = frame(400);
        for cut in 1..f.len() {
            assert_eq!(
                classify(&f[..cut], 0).unwrap(),
                TornKind::IncompleteFrame,
                "cut {cut}"
            );
        }
        assert_eq!(classify(&[0; 100], 0).unwrap(), TornKind::ZeroFilled);
        let mut padded = f[..f.len() / 2].to_vec();
        padded.extend_from_slice(&[0; 300]);
        assert_eq!(classify(&padded, 0).unwrap(), TornKind::IncompleteFrame);
    }

    #[test]
    fn a_frame_grown_past_the_end_by_a_damaged_block_size_is_damage() {
        let f = frame(4000);
        let (start, _) = header_end(f[4]).unwrap();
        let mut grown = 0;
        // Raise each bit of the first block header's size in turn.
        for bit in 3..24 {
            let mut d = f.clone();
            let byte = start + bit / 8;
            d[byte] ^= 1 << (bit % 8);
            if super::super::frame_end(&d, 0, 0).is_ok_and(|e| e.is_none()) {
                grown += 1;
                let e = classify(&d, 0).unwrap_err();
                assert!(
                    matches!(e.rule, Rule::ZstdDamagedFrame | Rule::ZstdFrameDecode),
                    "bit {bit}: {e}"
                );
            }
        }
        assert!(grown > 0);
    }

    #[test]
    fn bytes_that_are_no_frame_are_damage() {
        let e = classify(b"garbage after the frames", 0).unwrap_err();
        assert_eq!(e.rule, Rule::ZstdBadMagic);
        assert_eq!(
            classify(&[0x28, 0xb5], 0).unwrap(),
            TornKind::IncompleteFrame
        );
        assert_eq!(
            classify(&[0x28, 0x00], 0).unwrap_err().rule,
            Rule::ZstdBadMagic
        );
    }
}
