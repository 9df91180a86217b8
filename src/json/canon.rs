//! Canonical JSON text: a fast one-pass check and cheap navigation.
//!
//! The *canonical* text of a JSON value is exactly what
//! `JSON.stringify(JSON.parse(text))` produces, i.e. in this crate
//! `parse(text)?.to_json()`. Storing events as canonical text instead of
//! value trees needs two things, both provided here without building a tree:
//!
//! * [`is_canonical`]: a conservative one-pass test. `true` guarantees that
//!   the text is valid JSON, already canonical and lossless (no `-0`, no
//!   number overflowing to infinity). `false` means "maybe not"; the caller
//!   then takes the slow, always-correct tree path.
//! * [`skip_value`], [`member`], [`members`], [`elements`] and
//!   [`is_nonempty_string`]: navigation on text that is trusted to be
//!   canonical. On other text they never panic; they return `None` or an
//!   unspecified (but in-bounds) answer.
//!
//! Everything is iterative, so nesting depth is limited only by memory.

mod find;
mod nav;

#[cfg(test)]
use self::find::{find_special, find_special_or_non_ascii};
use self::find::{utf8_char_end, Stops};
pub use self::nav::{
    elements, is_nonempty_string, member, members, skip_value, walk_elements, walk_members,
};
use super::write::write_number;

// ---------------------------------------------------------------------------
// The canonical check
// ---------------------------------------------------------------------------

/// A stack keeping its first `N` items inline and spilling the rest to the
/// heap, so shallow documents allocate nothing.
///
/// `repr(C)` keeps `len` out of the bulk initialization of `inline`: a
/// merged `memset` there made the first read of `len` stall (store
/// forwarding from wide stores fails), costing ~20 ns per call.
#[repr(C)]
struct SmallStack<T: Copy, const N: usize> {
    len: usize,
    /// Items `N..len`.
    spill: Vec<T>,
    inline: [T; N],
}

impl<T: Copy, const N: usize> SmallStack<T, N> {
    #[inline(always)]
    fn new(fill: T) -> Self {
        SmallStack {
            len: 0,
            spill: Vec::new(),
            inline: [fill; N],
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn push(&mut self, v: T) {
        if self.len < N {
            self.inline[self.len] = v;
        } else {
            self.spill.push(v);
        }
        self.len += 1;
    }

    /// Item `i` (`i < len`).
    #[inline]
    fn get(&self, i: usize) -> T {
        if i < N {
            self.inline[i]
        } else {
            self.spill[i - N]
        }
    }

    #[inline]
    fn last(&self) -> Option<T> {
        self.len.checked_sub(1).map(|i| self.get(i))
    }

    #[inline]
    fn truncate(&mut self, n: usize) {
        if n < self.len {
            self.len = n;
            self.spill.truncate(n.saturating_sub(N));
        }
    }

    #[inline]
    fn pop(&mut self) {
        self.truncate(self.len.saturating_sub(1));
    }
}

/// Frame marker of an open array; an open object's frame holds the index of
/// its first key in the key stack instead.
const ARRAY: u32 = u32::MAX;

/// Byte range (start, end) of a key's raw text. `u32` halves the inline
/// stack; longer texts are refused up front.
type Span = (u32, u32);

/// Objects with at most this many keys are checked for duplicates pairwise.
const PAIRWISE_KEYS: usize = 16;

/// True only if `text` is valid JSON that is already canonical
/// (`parse(text)?.to_json() == text`) and lossless (no `-0`, no number that
/// overflows to infinity).
///
/// Conservative: some canonical texts are rejected (strings with surrogate
/// escapes, objects with keys starting with an ASCII digit); callers then
/// fall back to the tree path. Everything `JSON.stringify` emits for
/// ordinary agent data (any non-control Unicode, the standard escapes,
/// integers, decimals, literals, nested containers) is accepted.
///
/// One pass, no recursion. No allocation for documents up to 32 levels deep,
/// with up to 32 keys open at a time, no object of more than 16 keys and no
/// integer of 16 or more digits. Texts of 4 GiB or more are refused.
pub fn is_canonical(text: &str) -> bool {
    check::<false>(text.as_bytes(), |_, _, _| {})
}

/// [`is_canonical`] of bytes not yet known to be UTF-8: the UTF-8 check
/// runs in the same pass (only non-ASCII bytes inside strings need it), and
/// the text comes back as `&str` when it is valid UTF-8 and canonical.
pub fn canonical_str(bytes: &[u8]) -> Option<&str> {
    if !check::<true>(bytes, |_, _, _| {}) {
        return None;
    }
    // SAFETY: the check accepts only valid UTF-8 (every byte outside a
    // string literal is ASCII; inside one, `canonical_string_end` checks
    // each non-ASCII sequence with `utf8_char_end`).
    Some(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// The byte ranges of one top-level member: `(key text, value text)`,
/// the key without its quotes.
pub type MemberSpan = ((usize, usize), (usize, usize));

/// [`canonical_str`] of an object text that also returns its members'
/// byte ranges, found in the same single pass. `None` when the bytes are
/// not UTF-8, not canonical or not an object.
pub fn canonical_object(bytes: &[u8]) -> Option<(&str, Vec<MemberSpan>)> {
    if bytes.first() != Some(&b'{') {
        return None;
    }
    let mut out = Vec::with_capacity(8);
    let ok = check::<true>(bytes, |key, start, end| {
        out.push(((key.0 as usize, key.1 as usize), (start, end)));
    });
    if !ok {
        return None;
    }
    // SAFETY: as in `canonical_str`.
    Some((unsafe { std::str::from_utf8_unchecked(bytes) }, out))
}

/// [`is_canonical`] of an object text that also returns its members as
/// `(raw key text, value text)` pairs, found in the same single pass.
/// `None` when the text is not canonical or not an object.
pub fn canonical_members(text: &str) -> Option<Vec<(&str, &str)>> {
    if !text.starts_with('{') {
        return None;
    }
    let mut out = Vec::with_capacity(8);
    let ok = check::<false>(text.as_bytes(), |key, start, end| {
        out.push((&text[key.0 as usize..key.1 as usize], &text[start..end]));
    });
    ok.then_some(out)
}

/// The single pass behind [`is_canonical`]; `member(key, start, end)` is
/// called for each member of a top-level object once its value ended.
///
/// With `UTF8` the bytes are not known to be UTF-8 and are checked on the
/// way; without it they are (they come from a `&str`).
fn check<const UTF8: bool>(b: &[u8], mut member: impl FnMut(Span, usize, usize)) -> bool {
    if b.len() >= ARRAY as usize {
        return false;
    }
    // Open containers: `ARRAY` or the key-stack index of the object's first key.
    let mut frames: SmallStack<u32, 32> = SmallStack::new(0);
    // The raw text of every key of every open object.
    let mut keys: SmallStack<Span, 32> = SmallStack::new((0, 0));
    // Formatting buffer for long integers; large-object key sorting buffer.
    let mut num_buf = String::new();
    let mut spans: Vec<Span> = Vec::new();
    // The top-level member whose value is being read: its key and start.
    let mut pending: Option<(Span, usize)> = None;
    let mut i = 0;
    'value: loop {
        match b.get(i) {
            Some(b'"') => match canonical_string_end::<UTF8>(b, i) {
                Some(end) => i = end,
                None => return false,
            },
            Some(b'-' | b'0'..=b'9') => match canonical_number_end(b, i, &mut num_buf) {
                Some(end) => i = end,
                None => return false,
            },
            Some(b'{') => {
                if b.get(i + 1) == Some(&b'}') {
                    i += 2;
                } else {
                    frames.push(keys.len() as u32);
                    match canonical_key::<UTF8>(b, i + 1) {
                        Some((span, next)) => {
                            keys.push(span);
                            if frames.len() == 1 {
                                pending = Some((span, next));
                            }
                            i = next;
                        }
                        None => return false,
                    }
                    continue 'value;
                }
            }
            Some(b'[') => {
                if b.get(i + 1) == Some(&b']') {
                    i += 2;
                } else {
                    frames.push(ARRAY);
                    i += 1;
                    continue 'value;
                }
            }
            Some(b't') if b.get(i..i + 4) == Some(b"true") => i += 4,
            Some(b'f') if b.get(i..i + 5) == Some(b"false") => i += 5,
            Some(b'n') if b.get(i..i + 4) == Some(b"null") => i += 4,
            _ => return false,
        }
        // A value ends at `i`: continue or close the enclosing containers.
        loop {
            let Some(top) = frames.last() else {
                return i == b.len();
            };
            if frames.len() == 1 {
                if let Some((key, start)) = pending.take() {
                    member(key, start, i);
                }
            }
            match b.get(i) {
                Some(b',') if top == ARRAY => {
                    i += 1;
                    continue 'value;
                }
                Some(b',') => match canonical_key::<UTF8>(b, i + 1) {
                    Some((span, next)) => {
                        keys.push(span);
                        if frames.len() == 1 {
                            pending = Some((span, next));
                        }
                        i = next;
                        continue 'value;
                    }
                    None => return false,
                },
                Some(b']') if top == ARRAY => {
                    frames.pop();
                    i += 1;
                }
                Some(b'}') if top != ARRAY => {
                    if !keys_unique(b, &keys, top as usize, &mut spans) {
                        return false;
                    }
                    keys.truncate(top as usize);
                    frames.pop();
                    i += 1;
                }
                _ => return false,
            }
        }
    }
}

/// The end (after the closing quote) of the canonical string literal at `i`
/// (which holds `"`), or `None` if it is not canonical.
#[inline]
fn canonical_string_end<const UTF8: bool>(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    let mut stops = Stops::<UTF8>::default();
    loop {
        j = stops.next(b, j);
        match *b.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j = canonical_escape_end(b, j)?,
            c if UTF8 && c >= 0x80 => j = utf8_char_end(b, j)?,
            _ => return None, // a raw control character
        }
    }
}

/// The end of the escape at `j` (a backslash) if it is one that
/// `JSON.stringify` emits: `\" \\ \b \f \n \r \t`, or `\u00XX` in lowercase
/// hex for the other control characters.
#[inline]
fn canonical_escape_end(b: &[u8], j: usize) -> Option<usize> {
    match *b.get(j + 1)? {
        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => Some(j + 2),
        b'u' => {
            let &[b'0', b'0', hi @ (b'0' | b'1'), lo] = b.get(j + 2..j + 6)? else {
                return None;
            };
            let lo = match lo {
                b'0'..=b'9' => lo - b'0',
                b'a'..=b'f' => lo - b'a' + 10,
                _ => return None,
            };
            let unit = (hi - b'0') << 4 | lo;
            // These have short escapes.
            if matches!(unit, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D) {
                None
            } else {
                Some(j + 6)
            }
        }
        _ => None,
    }
}

/// A canonical key at `i` followed by `:`. Returns the span of its raw text
/// and the index after the colon. Keys starting with an ASCII digit are
/// refused: array-index keys are reordered by JavaScript.
#[inline]
fn canonical_key<const UTF8: bool>(b: &[u8], i: usize) -> Option<(Span, usize)> {
    if b.get(i) != Some(&b'"') || b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let end = canonical_string_end::<UTF8>(b, i)?;
    if b.get(end) != Some(&b':') {
        return None;
    }
    // `b.len() < u32::MAX`, checked by the caller.
    Some((((i + 1) as u32, (end - 1) as u32), end + 1))
}

/// The end of the canonical number token at `i` (which holds `-` or a
/// digit): a valid JSON number equal to ECMAScript `Number::toString` of its
/// double, finite and not negative zero.
#[inline]
fn canonical_number_end(b: &[u8], i: usize, buf: &mut String) -> Option<usize> {
    let digits = i + usize::from(b[i] == b'-');
    let mut j = digits;
    while let Some(b'0'..=b'9') = b.get(j) {
        j += 1;
    }
    let more = matches!(b.get(j), Some(b'.' | b'e' | b'E' | b'+' | b'-'));
    if !more && (1..=15).contains(&(j - digits)) {
        // -?(0|[1-9][0-9]{0,14}): exact in a double, so canonical, except
        // for leading zeros and `-0`.
        return (b[digits] != b'0' || (j == digits + 1 && digits == i)).then_some(j);
    }
    if let Some(end) = plain_decimal_end(b, digits, j) {
        return Some(end);
    }
    while let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') = b.get(j) {
        j += 1;
    }
    // Digits, signs, points and exponents only: ASCII.
    let token = std::str::from_utf8(&b[i..j]).ok()?;
    let n: f64 = token.parse().ok()?;
    // A zero here is spelled other than `0` (e.g. `0.0`, `-0`, `1e-400`).
    if !n.is_finite() || n == 0.0 {
        return None;
    }
    // The token must equal the writer's own spelling (hence it is also valid
    // JSON syntax).
    if !more {
        // An integer of 16 or more digits (rare): format it with the writer.
        buf.clear();
        write_number(n, buf);
        return (buf.as_str() == token).then_some(j);
    }
    // A fraction or exponent, e.g. a decimal. The writer spells integers
    // below 2^53 with digits only, which cannot equal this token; anything
    // else with `ryu-js`, formatted here on the stack without allocating.
    if n.trunc() == n && n.abs() < 9_007_199_254_740_992.0 {
        return None;
    }
    (ryu_js::Buffer::new().format_finite(n) == token).then_some(j)
}

/// Fast path for decimals like `0.25` or `-12.5`: the end of the token if
/// it is `(0|[1-9][0-9]*)\.[0-9]*[1-9]` (integer digits at `digits..int_end`)
/// with at most 15 significant digits and, below 1, at most 5 zeros after the
/// point. Such a token is canonical: a decimal of at most 15 significant
/// digits is the only one of at most 15 digits that rounds to its double
/// (`DBL_DIG`), so it is the shortest round-trip spelling, and for
/// 1e-6 <= |x| < 1e21 ECMAScript spells it in plain positional notation.
/// `None` means "not this shape", not "not canonical".
#[inline]
fn plain_decimal_end(b: &[u8], digits: usize, int_end: usize) -> Option<usize> {
    let int_digits = int_end - digits;
    if b.get(int_end) != Some(&b'.') || int_digits == 0 {
        return None;
    }
    let int_zero = b[digits] == b'0';
    if int_zero && int_digits > 1 {
        return None;
    }
    let frac = int_end + 1;
    let mut end = frac;
    while let Some(b'0'..=b'9') = b.get(end) {
        end += 1;
    }
    if end == frac
        || b[end - 1] == b'0'
        || matches!(b.get(end), Some(b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    let zeros = if int_zero {
        b[frac..end].iter().take_while(|&&c| c == b'0').count()
    } else {
        0
    };
    let significant = if int_zero {
        end - frac - zeros
    } else {
        int_digits + end - frac
    };
    (significant <= 15 && zeros <= 5).then_some(end)
}

/// True when the keys `from..` of `keys` (one object's keys) are distinct.
/// Canonical escapes are unique, so raw text equality is key equality.
fn keys_unique<const N: usize>(
    b: &[u8],
    keys: &SmallStack<Span, N>,
    from: usize,
    spans: &mut Vec<Span>,
) -> bool {
    let key = |(s, e): Span| &b[s as usize..e as usize];
    let n = keys.len() - from;
    if n <= PAIRWISE_KEYS {
        for x in from + 1..keys.len() {
            let kx = key(keys.get(x));
            for y in from..x {
                let ky = key(keys.get(y));
                // Cheap rejections before the `memcmp`.
                if ky.len() == kx.len() && ky.first() == kx.first() && ky == kx {
                    return false;
                }
            }
        }
        return true;
    }
    spans.clear();
    spans.extend((from..keys.len()).map(|x| keys.get(x)));
    spans.sort_unstable_by(|&p, &q| key(p).cmp(key(q)));
    spans.windows(2).all(|w| key(w[0]) != key(w[1]))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bytes;
#[cfg(test)]
mod tests_nav;
