//! [`JsString`]: a JavaScript string (UTF-16 code units) stored as WTF-8.

use std::borrow::Borrow;
use std::fmt;

use super::write;

/// A JavaScript string: a sequence of UTF-16 code units, stored as WTF-8.
///
/// WTF-8 is UTF-8 extended so that an unpaired surrogate is encoded as a
/// 3-byte sequence `ED A0..BF xx`. A surrogate pair is always stored as the
/// 4-byte UTF-8 form of the astral character, so the encoding is canonical and
/// byte equality is code-unit equality. Byte order equals code-point order.
///
/// Equality, order and hash are those of the bytes, however they are held.
#[derive(Clone, Default)]
pub struct JsString(Bytes);

/// The WTF-8 bytes of a [`JsString`]: owned, or a static text shared by
/// every string equal to it (no allocation; see [`JsString::from_static`]).
#[derive(Clone)]
enum Bytes {
    Owned(Box<[u8]>),
    Static(&'static [u8]),
}

impl Default for Bytes {
    fn default() -> Bytes {
        Bytes::Static(b"")
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(b) => b,
            Bytes::Static(s) => s,
        }
    }
}

impl From<Box<[u8]>> for Bytes {
    #[inline]
    fn from(b: Box<[u8]>) -> Bytes {
        Bytes::Owned(b)
    }
}

impl From<&[u8]> for Bytes {
    #[inline]
    fn from(b: &[u8]) -> Bytes {
        Bytes::Owned(b.into())
    }
}

impl PartialEq for JsString {
    #[inline]
    fn eq(&self, other: &JsString) -> bool {
        *self.0 == *other.0
    }
}

impl Eq for JsString {}

impl std::hash::Hash for JsString {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (*self.0).hash(state);
    }
}

impl PartialOrd for JsString {
    fn partial_cmp(&self, other: &JsString) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for JsString {
    fn cmp(&self, other: &JsString) -> std::cmp::Ordering {
        (*self.0).cmp(&*other.0)
    }
}

/// A piece of a [`JsString`]: valid UTF-8 text or one unpaired surrogate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk<'a> {
    Text(&'a str),
    Surrogate(u16),
}

/// Splits WTF-8 into UTF-8 runs and lone surrogates.
pub(crate) struct Chunks<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Chunks<'a> {
    type Item = Chunk<'a>;

    fn next(&mut self) -> Option<Chunk<'a>> {
        let b = self.rest;
        if b.is_empty() {
            return None;
        }
        match surrogate_at(b, 0) {
            Some(unit) => {
                self.rest = &b[3..];
                Some(Chunk::Surrogate(unit))
            }
            None => {
                let end = next_surrogate(b, 1);
                self.rest = &b[end..];
                // Between surrogate encodings a JsString is valid UTF-8.
                match std::str::from_utf8(&b[..end]) {
                    Ok(s) => Some(Chunk::Text(s)),
                    Err(e) => {
                        debug_assert!(false, "JsString is not WTF-8");
                        let ok = &b[..e.valid_up_to()];
                        self.rest = &[];
                        Some(Chunk::Text(std::str::from_utf8(ok).unwrap_or_default()))
                    }
                }
            }
        }
    }
}

/// The surrogate code unit encoded at `b[i..i + 3]`, if any.
#[inline]
fn surrogate_at(b: &[u8], i: usize) -> Option<u16> {
    match b.get(i..i + 3) {
        Some(&[0xED, b1, b2]) if (0xA0..=0xBF).contains(&b1) && (b2 & 0xC0) == 0x80 => {
            Some(0xD000 | (u16::from(b1 & 0x3F) << 6) | u16::from(b2 & 0x3F))
        }
        _ => None,
    }
}

/// Index of the next surrogate encoding at or after `from` (or `b.len()`).
fn next_surrogate(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        if b[i] == 0xED && surrogate_at(b, i).is_some() {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// Appends code point (or lone surrogate) `cp` in generalized UTF-8.
#[inline]
pub(super) fn push_wtf8(buf: &mut Vec<u8>, cp: u32) {
    if cp < 0x80 {
        buf.push(cp as u8);
    } else if cp < 0x800 {
        buf.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]);
    } else if cp < 0x10000 {
        buf.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    } else {
        buf.extend_from_slice(&[
            0xF0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    }
}

impl JsString {
    /// A string holding exactly the text `s`.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(s: &str) -> JsString {
        JsString(s.as_bytes().into())
    }

    /// A string holding the static text `s`, without allocating (for
    /// strings many values share, such as event types).
    pub const fn from_static(s: &'static str) -> JsString {
        JsString(Bytes::Static(s.as_bytes()))
    }

    /// True when the bytes are held without an allocation of their own.
    pub fn is_static(&self) -> bool {
        matches!(self.0, Bytes::Static(_))
    }

    /// Wraps bytes the caller guarantees to be well-formed WTF-8.
    #[inline]
    pub(super) fn from_wtf8_trusted(bytes: Box<[u8]>) -> JsString {
        JsString(bytes.into())
    }

    /// Builds a string from WTF-8 bytes, e.g. the concatenation of
    /// [`as_wtf8`](Self::as_wtf8) slices. Concatenation follows JavaScript: a
    /// high surrogate meeting a low surrogate becomes one astral character.
    /// Bytes that are not WTF-8 at all become U+FFFD.
    pub fn from_wtf8(bytes: impl Into<Vec<u8>>) -> JsString {
        let bytes = bytes.into();
        match Self::try_from_wtf8(&bytes) {
            Some(_) => JsString(bytes.into_boxed_slice().into()),
            None => JsString::from_utf16(&wtf8_to_utf16_lossy(&bytes)),
        }
    }

    /// Strict variant of [`from_wtf8`](Self::from_wtf8): `None` unless the
    /// bytes are well-formed WTF-8 (no encoded surrogate pair).
    pub fn try_from_wtf8(bytes: &[u8]) -> Option<JsString> {
        let mut i = 0;
        let mut prev_high = false;
        while i < bytes.len() {
            if let Some(unit) = surrogate_at(bytes, i) {
                if prev_high && unit >= 0xDC00 {
                    return None;
                }
                prev_high = unit < 0xDC00;
                i += 3;
            } else {
                let end = next_surrogate(bytes, i + 1);
                std::str::from_utf8(&bytes[i..end]).ok()?;
                prev_high = false;
                i = end;
            }
        }
        Some(JsString(bytes.into()))
    }

    /// A string from UTF-16 code units (unpaired surrogates allowed).
    pub fn from_utf16(units: &[u16]) -> JsString {
        let mut buf = Vec::with_capacity(units.len());
        for r in char::decode_utf16(units.iter().copied()) {
            match r {
                Ok(c) => push_wtf8(&mut buf, c as u32),
                Err(e) => push_wtf8(&mut buf, u32::from(e.unpaired_surrogate())),
            }
        }
        JsString(buf.into_boxed_slice().into())
    }

    /// The text, or `None` when the string contains an unpaired surrogate.
    #[inline]
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The WTF-8 bytes.
    #[inline]
    pub fn as_wtf8(&self) -> &[u8] {
        &self.0
    }

    /// True for `""`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Length in WTF-8 bytes.
    #[inline]
    pub fn len_wtf8(&self) -> usize {
        self.0.len()
    }

    /// Length in UTF-16 code units (JavaScript `length`).
    pub fn len_utf16(&self) -> usize {
        self.code_units_u16().count()
    }

    /// The UTF-16 code units.
    pub fn code_units_u16(&self) -> impl Iterator<Item = u16> + '_ {
        self.chunks().flat_map(|c| {
            let (text, unit) = match c {
                Chunk::Text(t) => (t, None),
                Chunk::Surrogate(u) => ("", Some(u)),
            };
            text.encode_utf16().chain(unit)
        })
    }

    /// Each UTF-16 code unit as its own one-unit string (JavaScript `s[i]`);
    /// an astral character yields its two halves as lone surrogates.
    pub fn code_units(&self) -> impl Iterator<Item = JsString> + '_ {
        self.code_units_u16().map(|u| {
            let mut buf = Vec::with_capacity(3);
            push_wtf8(&mut buf, u32::from(u));
            JsString(buf.into_boxed_slice().into())
        })
    }

    /// JavaScript `s[0]`: the first code unit as a string, `None` for `""`.
    pub fn first_code_unit(&self) -> Option<JsString> {
        self.code_units().next()
    }

    /// The text with every unpaired surrogate replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for c in self.chunks() {
            match c {
                Chunk::Text(t) => out.push_str(t),
                Chunk::Surrogate(_) => out.push('\u{FFFD}'),
            }
        }
        out
    }

    /// The text as a `String`, or the string back when it holds a lone surrogate.
    pub fn into_string(self) -> Result<String, JsString> {
        let bytes = match self.0 {
            Bytes::Owned(b) => b.into_vec(),
            Bytes::Static(s) => s.to_vec(),
        };
        String::from_utf8(bytes).map_err(|e| JsString(e.into_bytes().into_boxed_slice().into()))
    }

    /// JSON text of this string (`JSON.stringify`).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(self.0.len() + 2);
        write::write_string(self, &mut out);
        out
    }

    /// Append the JSON text of this string (`JSON.stringify`) to `out`.
    pub fn write_json(&self, out: &mut String) {
        write::write_string(self, out);
    }

    pub(super) fn chunks(&self) -> Chunks<'_> {
        Chunks { rest: &self.0 }
    }
}

fn wtf8_to_utf16_lossy(bytes: &[u8]) -> Vec<u16> {
    let mut units = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(unit) = surrogate_at(bytes, i) {
            units.push(unit);
            i += 3;
        } else {
            let end = next_surrogate(bytes, i + 1);
            units.extend(String::from_utf8_lossy(&bytes[i..end]).encode_utf16());
            i = end;
        }
    }
    units
}

impl From<&str> for JsString {
    fn from(s: &str) -> JsString {
        JsString::from_str(s)
    }
}

impl From<String> for JsString {
    fn from(s: String) -> JsString {
        JsString(s.into_bytes().into_boxed_slice().into())
    }
}

impl PartialEq<str> for JsString {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other.as_bytes()
    }
}

impl PartialEq<&str> for JsString {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == *other.as_bytes()
    }
}

impl PartialEq<String> for JsString {
    fn eq(&self, other: &String) -> bool {
        *self.0 == *other.as_bytes()
    }
}

impl PartialEq<JsString> for str {
    fn eq(&self, other: &JsString) -> bool {
        other == self
    }
}

impl PartialEq<JsString> for &str {
    fn eq(&self, other: &JsString) -> bool {
        other == *self
    }
}

impl Borrow<[u8]> for JsString {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for JsString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// Lossy text (unpaired surrogates shown as U+FFFD).
impl fmt::Display for JsString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.chunks() {
            match c {
                Chunk::Text(t) => f.write_str(t)?,
                Chunk::Surrogate(_) => f.write_str("\u{FFFD}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        let s = JsString::from_str("héllo");
        assert_eq!(s.as_str(), Some("héllo"));
        assert_eq!(s.len_wtf8(), 6);
        assert_eq!(s.len_utf16(), 5);
        assert!(!s.is_empty() && JsString::default().is_empty());
        assert_eq!(s, "héllo");
        assert_eq!(s, *"héllo");
        assert_eq!(s, String::from("héllo"));
        assert!("héllo" == s);
        assert_eq!(JsString::from(String::from("x")), JsString::from("x"));
        let [a, b, c, d] = ["a", "b", "\u{ffff}", "😀"].map(JsString::from);
        assert!(a < b && b < c && c < d);
        assert_eq!(s.clone().into_string(), Ok(String::from("héllo")));
        assert_eq!(s.to_string(), "héllo");
    }

    #[test]
    fn lone_surrogates() {
        let s = JsString::from_utf16(&[0x61, 0xD800, 0x62]);
        assert_eq!(s.as_wtf8(), b"a\xed\xa0\x80b");
        assert_eq!(s.as_str(), None);
        assert_eq!(s.to_string_lossy(), "a\u{fffd}b");
        assert_eq!(s.to_string(), "a\u{fffd}b");
        assert_eq!(s.code_units_u16().collect::<Vec<_>>(), [0x61, 0xD800, 0x62]);
        assert!(s.clone().into_string().is_err());
        let astral = JsString::from("😀x");
        let units: Vec<JsString> = astral.code_units().collect();
        assert_eq!(
            units,
            [
                JsString::from_utf16(&[0xD83D]),
                JsString::from_utf16(&[0xDE00]),
                JsString::from("x")
            ]
        );
        assert_eq!(astral.first_code_unit().unwrap().as_wtf8(), b"\xed\xa0\xbd");
        assert_eq!(JsString::default().first_code_unit(), None);
        assert_eq!(astral.len_utf16(), 3);
    }

    #[test]
    fn wtf8_construction() {
        let high = JsString::from_utf16(&[0xD83D]);
        let low = JsString::from_utf16(&[0xDE00]);
        assert!(JsString::try_from_wtf8(high.as_wtf8()).is_some());
        let mut joined = high.as_wtf8().to_vec();
        joined.extend_from_slice(low.as_wtf8());
        // Concatenation joins the halves, as in JavaScript.
        assert_eq!(JsString::try_from_wtf8(&joined), None);
        assert_eq!(JsString::from_wtf8(joined), JsString::from("😀"));
        assert_eq!(
            JsString::from_wtf8(b"a\xffb".as_slice()),
            JsString::from("a\u{fffd}b")
        );
        assert_eq!(JsString::try_from_wtf8(b"\xed\xa0"), None);
        assert_eq!(
            JsString::try_from_wtf8(b"\xed\x9f\xbf").unwrap(),
            JsString::from("\u{d7ff}")
        );
        let lone = JsString::from_wtf8(b"x\xed\xb0\x80".to_vec());
        assert_eq!(lone.code_units_u16().collect::<Vec<_>>(), [0x78, 0xDC00]);
    }
}
