//! Byte scanning for canonical text: the next `"`, `\` or control byte
//! (and, for text not yet known to be UTF-8, the next non-ASCII byte), and
//! the check of one UTF-8 sequence.
//!
//! On x86_64 the scan reads 32 bytes per step with SSE2 (part of the
//! x86_64 baseline, so no runtime detection); elsewhere 16 bytes per step
//! as two SWAR words. Both end in the same bytewise loop. The canonical
//! string check reads stops through [`Stops`], which on x86_64 finds every
//! stop of 64 bytes in one pass and hands them out one by one.

/// `0x01` in every byte.
const LO: u64 = 0x0101_0101_0101_0101;
/// `0x80` in every byte.
const HI: u64 = 0x8080_8080_8080_8080;

/// Per byte of `x`: high bit set where the byte is `"`, `\` or below 0x20,
/// and also where it is 0x80 or above when `NON_ASCII`.
///
/// Borrows can only create false positives *above* a true positive, so the
/// lowest flagged byte is always exact.
#[inline(always)]
fn special_mask<const NON_ASCII: bool>(x: u64) -> u64 {
    let quote = x ^ (LO * u64::from(b'"'));
    let backslash = x ^ (LO * u64::from(b'\\'));
    let high = if NON_ASCII { x } else { 0 };
    (x.wrapping_sub(LO * 0x20) & !x
        | quote.wrapping_sub(LO) & !quote
        | backslash.wrapping_sub(LO) & !backslash
        | high)
        & HI
}

/// Little-endian word of an 8-byte slice.
#[inline(always)]
fn word(s: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(s);
    u64::from_le_bytes(w)
}

/// Whether the scan stops at byte `c`.
#[inline(always)]
fn is_stop<const NON_ASCII: bool>(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20 || (NON_ASCII && c >= 0x80)
}

/// Index of the first byte at or after `from` that is `"`, `\` or below
/// 0x20, or `b.len()` when there is none (also when `from > b.len()`).
/// Non-ASCII bytes are never flagged, which is right for UTF-8 input.
#[inline(always)]
pub(super) fn find_special(b: &[u8], from: usize) -> usize {
    find::<false>(b, from)
}

/// [`find_special`] that also stops at bytes of 0x80 and above (for bytes
/// whose UTF-8 is checked on the way, see [`utf8_char_end`]). The checks
/// use [`Stops`]; this one is the reference its tests compare with.
#[cfg(test)]
pub(super) fn find_special_or_non_ascii(b: &[u8], from: usize) -> usize {
    find::<true>(b, from)
}

#[inline(always)]
fn find<const NON_ASCII: bool>(b: &[u8], from: usize) -> usize {
    let mut i = from;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    while let Some(chunk) = b.get(i..i.saturating_add(32)) {
        let m = sse2::mask32::<NON_ASCII>(chunk);
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 32;
    }
    while let Some(chunk) = b.get(i..i.saturating_add(16)) {
        let (lo, hi) = chunk.split_at(8);
        let m0 = special_mask::<NON_ASCII>(word(lo));
        let m1 = special_mask::<NON_ASCII>(word(hi));
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
        let m = special_mask::<NON_ASCII>(word(chunk));
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if is_stop::<NON_ASCII>(c) {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// The stop bytes of a stretch of text found 64 bytes at a time and handed
/// out one by one: a string with an escape every few dozen bytes is read
/// by one vector pass per 64 bytes, not one per stop.
#[derive(Default)]
pub(super) struct Stops<const NON_ASCII: bool> {
    /// Where the current block starts.
    base: usize,
    /// Bit `k`: byte `base + k` is a stop byte.
    mask: u64,
    /// The block's length: 64, or 0 before the first block.
    len: usize,
}

impl<const NON_ASCII: bool> Stops<NON_ASCII> {
    /// Index of the first stop byte at or after `j` (as [`find`]), or
    /// `b.len()` when there is none.
    #[inline(always)]
    pub(super) fn next(&mut self, b: &[u8], mut j: usize) -> usize {
        loop {
            if j >= self.base && j < self.base + self.len {
                let m = self.mask & (!0u64 << (j - self.base));
                if m != 0 {
                    return self.base + m.trailing_zeros() as usize;
                }
                j = self.base + self.len;
            }
            match mask64::<NON_ASCII>(b, j) {
                Some(m) => (self.base, self.mask, self.len) = (j, m, 64),
                None => return find::<NON_ASCII>(b, j),
            }
        }
    }
}

/// The stop-byte mask of the 64 bytes from `j`, when there are 64.
#[inline(always)]
fn mask64<const NON_ASCII: bool>(b: &[u8], j: usize) -> Option<u64> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        let chunk = b.get(j..j.checked_add(64)?)?;
        let lo = sse2::mask32::<NON_ASCII>(&chunk[..32]);
        let hi = sse2::mask32::<NON_ASCII>(&chunk[32..]);
        Some(u64::from(lo) | u64::from(hi) << 32)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        let _ = (b, j);
        None
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    /// Bit `k` set where byte `k` of the 16 bytes in `v` is a stop byte.
    #[inline(always)]
    fn mask16<const NON_ASCII: bool>(v: __m128i) -> u32 {
        // SAFETY: register-only SSE2 instructions (no memory access); SSE2
        // is enabled on every x86_64 target (checked by the `cfg` above).
        unsafe {
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `v < 0x20` as `min(v, 0x1f) == v`.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            let hit = _mm_or_si128(_mm_or_si128(quote, backslash), control);
            let mut m = _mm_movemask_epi8(hit) as u32;
            if NON_ASCII {
                // The high bit of each byte: 0x80 and above.
                m |= _mm_movemask_epi8(v) as u32;
            }
            m & 0xffff
        }
    }

    /// Bit `k` set where byte `k` of `chunk` (32 bytes) is a stop byte.
    #[inline(always)]
    pub(super) fn mask32<const NON_ASCII: bool>(chunk: &[u8]) -> u32 {
        assert!(chunk.len() >= 32);
        // SAFETY: `chunk` holds at least 32 readable bytes (asserted), so
        // both unaligned 16-byte loads stay inside it; SSE2 is enabled
        // (the `cfg` of this module).
        let (a, b) = unsafe {
            let p = chunk.as_ptr().cast::<__m128i>();
            (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)))
        };
        mask16::<NON_ASCII>(a) | mask16::<NON_ASCII>(b) << 16
    }
}

/// The end of the UTF-8 sequence starting at `b[i]` (a byte of 0x80 or
/// above), or `None` when it is not a valid, shortest-form encoding of a
/// scalar value (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
#[inline]
pub(super) fn utf8_char_end(b: &[u8], i: usize) -> Option<usize> {
    let cont = |j: usize| b.get(j).is_some_and(|&c| c & 0xC0 == 0x80);
    let second = |lo: u8, hi: u8| b.get(i + 1).is_some_and(|&c| (lo..=hi).contains(&c));
    let ok = match *b.get(i)? {
        0xC2..=0xDF => return cont(i + 1).then_some(i + 2),
        0xE0 => second(0xA0, 0xBF) && cont(i + 2),
        0xE1..=0xEC | 0xEE..=0xEF => cont(i + 1) && cont(i + 2),
        0xED => second(0x80, 0x9F) && cont(i + 2),
        0xF0 => return (second(0x90, 0xBF) && cont(i + 2) && cont(i + 3)).then_some(i + 4),
        0xF1..=0xF3 => return (cont(i + 1) && cont(i + 2) && cont(i + 3)).then_some(i + 4),
        0xF4 => return (second(0x80, 0x8F) && cont(i + 2) && cont(i + 3)).then_some(i + 4),
        _ => false,
    };
    ok.then_some(i + 3)
}
