//! Navigation on trusted canonical text: skipping values, reading members
//! and elements without building a tree.

use super::find::find_special;
use crate::json::value::JsString;

/// The end (after the closing quote) of the string literal at `i` (which
/// holds `"`), trusting its escapes; `None` if unterminated.
///
/// Only quotes stop the search: a quote is the string's end when an even
/// number of backslashes precedes it (each `\\` pair is one escaped
/// backslash). Long texts escape a newline every few dozen bytes, and
/// stopping at each `\` would make skimming them several times slower.
/// The backslashes before a quote are counted back to the quote before it
/// at most, so every byte is read at most twice.
#[inline]
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        let q = j + memchr::memchr(b'"', b.get(j..)?)?;
        let run = b[..q].iter().rev().take_while(|&&c| c == b'\\').count();
        if run % 2 == 0 {
            return Some(q + 1);
        }
        j = q + 1;
    }
}

/// The end (exclusive) of the JSON value starting at byte `start` of
/// canonical `text`, or `None` when no value starts there or it is cut off.
///
/// Containers are skipped by bracket depth (strings, including their
/// escapes, are jumped over), so the text is trusted to be well formed.
pub fn skip_value(text: &str, start: usize) -> Option<usize> {
    let b = text.as_bytes();
    match *b.get(start)? {
        b'"' => string_end(b, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = start;
            loop {
                match *b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        b'-' | b'0'..=b'9' => {
            let mut j = start + 1;
            while let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') = b.get(j) {
                j += 1;
            }
            Some(j)
        }
        b't' if b.get(start..start + 4) == Some(b"true") => Some(start + 4),
        b'f' if b.get(start..start + 5) == Some(b"false") => Some(start + 5),
        b'n' if b.get(start..start + 4) == Some(b"null") => Some(start + 4),
        _ => None,
    }
}

/// Iterator over the members of a canonical object; see [`members`].
struct Members<'a> {
    text: &'a str,
    /// Index of the next key's opening quote; `None` when finished.
    pos: Option<usize>,
}

impl<'a> Members<'a> {
    fn step(&mut self, pos: usize) -> Option<(&'a str, &'a str)> {
        let b = self.text.as_bytes();
        if b.get(pos) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, pos)?;
        if b.get(key_end) != Some(&b':') {
            return None;
        }
        let value_end = skip_value(self.text, key_end + 1)?;
        let key = self.text.get(pos + 1..key_end - 1)?;
        let value = self.text.get(key_end + 1..value_end)?;
        if b.get(value_end) == Some(&b',') {
            self.pos = Some(value_end + 1);
        }
        Some((key, value))
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let pos = self.pos.take()?;
        self.step(pos)
    }
}

/// Iterator over the elements of a canonical array; see [`elements`].
struct Elements<'a> {
    text: &'a str,
    /// Index of the next element; `None` when finished.
    pos: Option<usize>,
}

impl<'a> Iterator for Elements<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let pos = self.pos.take()?;
        let end = skip_value(self.text, pos)?;
        if self.text.as_bytes().get(end) == Some(&b',') {
            self.pos = Some(end + 1);
        }
        self.text.get(pos..end)
    }
}

/// The members of canonical object text `obj` as (raw key text between the
/// quotes, value text) pairs, in text order; `None` when `obj` is not an
/// object.
///
/// The key is the raw text: escapes (`\n`, `\"`, `\u001f`, ...) are not
/// decoded.
pub fn members<'a>(obj: &'a str) -> Option<impl Iterator<Item = (&'a str, &'a str)> + 'a> {
    let b = obj.as_bytes();
    if b.first() != Some(&b'{') {
        return None;
    }
    let pos = (b.get(1) != Some(&b'}')).then_some(1);
    Some(Members { text: obj, pos })
}

/// The element texts of canonical array text `arr`, in order; `None` when
/// `arr` is not an array.
pub fn elements<'a>(arr: &'a str) -> Option<impl Iterator<Item = &'a str> + 'a> {
    let b = arr.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    let pos = (b.get(1) != Some(&b']')).then_some(1);
    Some(Elements { text: arr, pos })
}

/// The text of the value of member `key` of canonical object text `obj`;
/// `None` when `obj` is not an object or has no such member.
///
/// `key` is the plain (unescaped) key. It is compared with the raw key text,
/// escaped first in the rare case that it holds `"`, `\` or a control
/// character.
pub fn member<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
    if find_special(key.as_bytes(), 0) < key.len() {
        let quoted = JsString::from_str(key).to_json();
        let raw = &quoted[1..quoted.len() - 1];
        return members(obj)?.find(|&(k, _)| k == raw).map(|(_, v)| v);
    }
    members(obj)?.find(|&(k, _)| k == key).map(|(_, v)| v)
}

/// True when canonical value text `v` is a string other than `""`.
pub fn is_nonempty_string(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() > 2 && b[0] == b'"' && b[b.len() - 1] == b'"'
}

/// Walk the members of the canonical object starting at byte `start` of
/// `text` in one pass: `f(raw key, value start)` returns the end of that
/// member's value, found by skipping it ([`skip_value`]) or by walking into
/// it, so no byte is read twice. Returns the end of the object (after its
/// `}`); `None` when there is no object at `start`, when the text is
/// malformed, or when `f` returns `None` (which stops the walk).
pub fn walk_members<'a>(
    text: &'a str,
    start: usize,
    mut f: impl FnMut(&'a str, usize) -> Option<usize>,
) -> Option<usize> {
    let b = text.as_bytes();
    if b.get(start) != Some(&b'{') {
        return None;
    }
    let mut i = start + 1;
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, i)?;
        if b.get(key_end) != Some(&b':') {
            return None;
        }
        let key = text.get(i + 1..key_end - 1)?;
        let end = f(key, key_end + 1).filter(|&end| end > key_end + 1)?;
        match b.get(end) {
            Some(b',') => i = end + 1,
            Some(b'}') => return Some(end + 1),
            _ => return None,
        }
    }
}

/// [`walk_members`] for the elements of the canonical array at `start`:
/// `f(element start)` returns the end of the element.
pub fn walk_elements(
    text: &str,
    start: usize,
    mut f: impl FnMut(usize) -> Option<usize>,
) -> Option<usize> {
    let b = text.as_bytes();
    if b.get(start) != Some(&b'[') {
        return None;
    }
    let mut i = start + 1;
    if b.get(i) == Some(&b']') {
        return Some(i + 1);
    }
    loop {
        let end = f(i).filter(|&end| end > i)?;
        match b.get(end) {
            Some(b',') => i = end + 1,
            Some(b']') => return Some(end + 1),
            _ => return None,
        }
    }
}
