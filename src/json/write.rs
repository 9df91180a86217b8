//! `JSON.stringify` (no indentation), byte for byte, with an explicit stack.

use super::string::Chunk;
use super::value::{JsString, Object, Value};

/// Output length after which `Debug` stops writing.
pub(super) const DEBUG_LIMIT: usize = 512;

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Index of the first byte at or after `from` that is `"`, `\` or below
/// 0x20 (or `b.len()`). These are the bytes both the parser and the writer
/// must stop at inside a string.
#[inline]
pub(super) fn find_special(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i + 8 <= b.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&b[i..i + 8]);
        let x = u64::from_le_bytes(word);
        let quote = x ^ (LO * u64::from(b'"'));
        let backslash = x ^ (LO * u64::from(b'\\'));
        // Per byte: high bit set where the byte is < 0x20, == '"' or == '\'.
        // False positives can only appear above a true one, so the lowest
        // flagged byte is exact.
        let hit = (x.wrapping_sub(LO * 0x20) & !x
            | quote.wrapping_sub(LO) & !quote
            | backslash.wrapping_sub(LO) & !backslash)
            & HI;
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    b.len()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_u_escape(out: &mut String, unit: u16) {
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(char::from(HEX[usize::from((unit >> shift) & 0xF)]));
    }
}

fn write_escaped(t: &str, out: &mut String) {
    let b = t.as_bytes();
    let mut start = 0;
    loop {
        let i = find_special(b, start);
        // `i` is an ASCII position, hence a char boundary.
        out.push_str(&t[start..i]);
        let Some(&c) = b.get(i) else { return };
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0C => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => push_u_escape(out, u16::from(c)),
        }
        start = i + 1;
    }
}

/// Appends the JSON string literal of `s`.
pub(super) fn write_string(s: &JsString, out: &mut String) {
    out.reserve(s.len_wtf8() + 2);
    out.push('"');
    let b = s.as_wtf8();
    // Every surrogate encoding starts with the byte 0xED (`contains` on
    // bytes is a memchr), so most strings take this path.
    if !b.contains(&0xED) {
        // SAFETY: WTF-8 without a surrogate encoding is valid UTF-8.
        write_escaped(unsafe { std::str::from_utf8_unchecked(b) }, out);
        out.push('"');
        return;
    }
    for chunk in s.chunks() {
        match chunk {
            Chunk::Text(t) => write_escaped(t, out),
            Chunk::Surrogate(u) => push_u_escape(out, u),
        }
    }
    out.push('"');
}

/// Appends ECMAScript `Number::toString(n)`; non-finite numbers as `null`.
pub(super) fn write_number(n: f64, out: &mut String) {
    if !n.is_finite() {
        out.push_str("null");
    } else if n == 0.0 {
        out.push('0'); // also for -0
    } else if n.trunc() == n && n.abs() < 9_007_199_254_740_992.0 {
        // Below 2^53 the exact integer digits are the shortest round-trip form.
        let mut buf = [0u8; 20];
        let mut pos = buf.len();
        let mut m = n.abs() as u64;
        while m > 0 {
            pos -= 1;
            buf[pos] = b'0' + (m % 10) as u8;
            m /= 10;
        }
        if n < 0.0 {
            out.push('-');
        }
        out.extend(buf[pos..].iter().map(|&d| char::from(d)));
    } else {
        out.push_str(ryu_js::Buffer::new().format_finite(n));
    }
}

enum Frame<'a> {
    Array(std::slice::Iter<'a, Value>),
    Object(std::slice::Iter<'a, (JsString, Value)>),
}

/// Appends `JSON.stringify(v)`. Stops early (returning false) once `out`
/// is longer than `limit`.
pub(super) fn write_value(v: &Value, out: &mut String, limit: usize) -> bool {
    run(v, Vec::new(), out, limit)
}

/// Appends `JSON.stringify(o)`; see [`write_value`].
pub(super) fn write_object(o: &Object, out: &mut String, limit: usize) -> bool {
    let mut it = o.as_slice().iter();
    match it.next() {
        None => {
            out.push_str("{}");
            true
        }
        Some((k, v)) => {
            out.push('{');
            write_string(k, out);
            out.push(':');
            run(v, vec![Frame::Object(it)], out, limit)
        }
    }
}

fn run<'a>(mut cur: &'a Value, mut stack: Vec<Frame<'a>>, out: &mut String, limit: usize) -> bool {
    loop {
        if out.len() > limit {
            return false;
        }
        match cur {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(n) => write_number(*n, out),
            Value::String(s) => write_string(s, out),
            Value::Array(a) => {
                let mut it = a.iter();
                if let Some(first) = it.next() {
                    out.push('[');
                    stack.push(Frame::Array(it));
                    cur = first;
                    continue;
                }
                out.push_str("[]");
            }
            Value::Object(o) => {
                let mut it = o.as_slice().iter();
                if let Some((k, first)) = it.next() {
                    out.push('{');
                    write_string(k, out);
                    out.push(':');
                    stack.push(Frame::Object(it));
                    cur = first;
                    continue;
                }
                out.push_str("{}");
            }
        }
        // `cur` is complete: close finished containers, find the next value.
        loop {
            match stack.last_mut() {
                None => return true,
                Some(Frame::Array(it)) => {
                    if let Some(next) = it.next() {
                        out.push(',');
                        cur = next;
                        break;
                    }
                    out.push(']');
                }
                Some(Frame::Object(it)) => {
                    if let Some((k, next)) = it.next() {
                        out.push(',');
                        write_string(k, out);
                        out.push(':');
                        cur = next;
                        break;
                    }
                    out.push('}');
                }
            }
            stack.pop();
        }
    }
}

/// Truncates debug output to [`DEBUG_LIMIT`] and marks an incomplete text.
pub(super) fn finish_debug(out: &mut String, complete: bool) {
    if out.len() > DEBUG_LIMIT {
        let mut cut = DEBUG_LIMIT;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    } else if !complete {
        out.push_str("...");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: f64) -> String {
        Value::Number(v).to_json()
    }

    #[test]
    fn number_formatting_matches_ecmascript() {
        for (v, text) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (0.0, "0"),
            (-0.0, "0"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (123456789012345680000.0, "123456789012345680000"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9007199254740991.0, "9007199254740991"),
            (-9007199254740991.0, "-9007199254740991"),
            (9007199254740992.0, "9007199254740992"),
            (18446744073709551616.0, "18446744073709552000"),
            (-42.0, "-42"),
            (100.0, "100"),
            (1755650000000.0, "1755650000000"),
            (0.3, "0.3"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::INFINITY, "null"),
            (f64::NEG_INFINITY, "null"),
            (f64::NAN, "null"),
        ] {
            assert_eq!(n(v), text, "{v:e}");
        }
    }

    #[test]
    fn string_escaping() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        let expect = "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\"";
        assert_eq!(Value::str(&all_controls).to_json(), expect);
        assert_eq!(
            Value::str("a\"b\\c/d\u{7f}é\u{2028}\u{2029}😀").to_json(),
            "\"a\\\"b\\\\c/d\u{7f}é\u{2028}\u{2029}😀\""
        );
        let s = JsString::from_utf16(&[0xD800, 0x61, 0xDFFF, 0xDBFF, 0xDC00]);
        assert_eq!(s.to_json(), "\"\\ud800a\\udfff\u{10fc00}\"");
        // Escapes straddling the 8-byte scan blocks.
        for k in 0..20 {
            let text = format!("{}\"{}", "x".repeat(k), "y".repeat(k));
            assert_eq!(
                Value::str(&text).to_json(),
                format!("\"{}\\\"{}\"", "x".repeat(k), "y".repeat(k))
            );
        }
    }

    #[test]
    fn find_special_agrees_with_bytewise_scan() {
        let bytes: Vec<u8> = (0u8..=255).chain(0u8..=255).rev().collect();
        for from in 0..bytes.len() {
            let slow = (from..bytes.len())
                .find(|&i| matches!(bytes[i], b'"' | b'\\' | 0..=0x1f))
                .unwrap_or(bytes.len());
            assert_eq!(find_special(&bytes, from), slow);
        }
        let plain = b"abcdefghijklmnopqrstuvwxyz0123456789\x80\xff~";
        assert_eq!(find_special(plain, 0), plain.len());
    }

    #[test]
    fn containers() {
        let v = Value::obj([
            (
                "a",
                Value::Array(vec![Value::Null, true.into(), false.into(), 1.5.into()]),
            ),
            ("b", Value::obj([])),
            ("c", Value::Array(vec![])),
            (
                "d",
                Value::obj([("e", Value::Array(vec![Value::obj([("f", "g".into())])]))]),
            ),
        ]);
        assert_eq!(
            v.to_json(),
            r#"{"a":[null,true,false,1.5],"b":{},"c":[],"d":{"e":[{"f":"g"}]}}"#
        );
        assert_eq!(v.as_object().unwrap().to_json(), v.to_json());
        assert_eq!(Object::new().to_json(), "{}");
        let mut out = String::from("x=");
        v.write_json(&mut out);
        assert_eq!(out, format!("x={}", v.to_json()));
    }

    #[test]
    fn debug_is_truncated_json() {
        assert_eq!(
            format!("{:?}", Value::obj([("a", 1.0.into())])),
            r#"{"a":1}"#
        );
        let big = Value::Array((0..1000).map(|i| Value::from(i as u64)).collect());
        let d = format!("{big:?}");
        assert!(d.len() <= DEBUG_LIMIT + 3 && d.ends_with("..."), "{d}");
        let big_str = Value::str(&"é".repeat(1000));
        assert!(format!("{big_str:?}").ends_with("..."));
        assert_eq!(format!("{:?}", JsString::from("a\"")), r#""a\"""#);
    }
}
