//! Byte scanning for canonical text: the next `"`, `\` or control byte.

/// `0x01` in every byte.
const LO: u64 = 0x0101_0101_0101_0101;
/// `0x80` in every byte.
const HI: u64 = 0x8080_8080_8080_8080;

/// Per byte of `x`: high bit set where the byte is `"`, `\` or below 0x20.
///
/// Borrows can only create false positives *above* a true positive, so the
/// lowest flagged byte is always exact.
#[inline(always)]
fn special_mask(x: u64) -> u64 {
    let quote = x ^ (LO * u64::from(b'"'));
    let backslash = x ^ (LO * u64::from(b'\\'));
    (x.wrapping_sub(LO * 0x20) & !x
        | quote.wrapping_sub(LO) & !quote
        | backslash.wrapping_sub(LO) & !backslash)
        & HI
}

/// Little-endian word of an 8-byte slice.
#[inline(always)]
fn word(s: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(s);
    u64::from_le_bytes(w)
}

/// Index of the first byte at or after `from` that is `"`, `\` or below
/// 0x20, or `b.len()` when there is none (also when `from > b.len()`).
///
/// Scans 16 bytes per step as two SWAR words; non-ASCII bytes are never
/// flagged, which is right because the input is UTF-8.
#[inline(always)]
pub(super) fn find_special(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(chunk) = b.get(i..i.saturating_add(16)) {
        let (lo, hi) = chunk.split_at(8);
        let m0 = special_mask(word(lo));
        let m1 = special_mask(word(hi));
        if m0 | m1 != 0 {
            let off = if m0 != 0 {
                m0.trailing_zeros() / 8
            } else {
                8 + m1.trailing_zeros() / 8
            };
            return i + off as usize;
        }
        i += 16;
    }
    if let Some(chunk) = b.get(i..i.saturating_add(8)) {
        let m = special_mask(word(chunk));
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    b.len()
}
