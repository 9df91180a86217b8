//! `JSON.parse`: strict RFC 8259 grammar, one pass over the bytes, an
//! explicit stack instead of recursion.

use super::string::push_wtf8;
use super::value::{JsString, Object, Value};
use super::write::find_special;

/// A syntax error: what was wrong and the byte offset where it was found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} at byte {offset}")]
pub struct ParseError {
    /// Byte offset in the input where the error was detected.
    pub offset: usize,
    /// What was wrong, without the offset (e.g. `invalid escape`).
    pub message: String,
}

/// Parses JSON text exactly as JavaScript `JSON.parse` would (numbers to the
/// nearest double, strings as UTF-16 code units, JavaScript key order).
pub fn parse(text: &str) -> Result<Value, ParseError> {
    parse_checked(text).map(|(v, _)| v)
}

/// [`parse`], also telling whether the value is certainly lossless: `true`
/// when no number literal was negative zero or infinite. (`false` only
/// means "maybe not": a bad number may have been shadowed by a later
/// duplicate key, so the caller then walks the value.)
pub fn parse_checked(text: &str) -> Result<(Value, bool), ParseError> {
    let mut p = Parser {
        text,
        b: text.as_bytes(),
        i: 0,
        suspicious: false,
    };
    let v = p.run()?;
    Ok((v, !p.suspicious))
}

/// [`parse`] for bytes; input that is not UTF-8 is an error.
pub fn parse_bytes(bytes: &[u8]) -> Result<Value, ParseError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(e) => Err(ParseError {
            offset: e.valid_up_to(),
            message: "invalid UTF-8".into(),
        }),
    }
}

/// An open container: where its children start in the shared buffers.
enum Frame {
    Array(usize),
    Object(usize),
}

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    /// A number literal parsed to negative zero or an infinity.
    suspicious: bool,
}

fn err<T>(offset: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        offset,
        message: message.into(),
    })
}

#[inline]
fn hex_digit(c: u8) -> Option<u16> {
    match c {
        b'0'..=b'9' => Some(u16::from(c - b'0')),
        b'a'..=b'f' => Some(u16::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(c - b'A' + 10)),
        _ => None,
    }
}

impl<'a> Parser<'a> {
    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn unexpected<T>(&self, expected: &str) -> Result<T, ParseError> {
        match self.text[self.i..].chars().next() {
            None => err(
                self.i,
                format!("unexpected end of input, expected {expected}"),
            ),
            Some(c) => err(
                self.i,
                format!("unexpected character {c:?}, expected {expected}"),
            ),
        }
    }

    fn run(&mut self) -> Result<Value, ParseError> {
        let mut stack: Vec<Frame> = Vec::new();
        // Children of all open containers, innermost last.
        let mut elems: Vec<Value> = Vec::new();
        let mut entries: Vec<(JsString, Value)> = Vec::new();
        'value: loop {
            self.skip_ws();
            let mut v = match self.peek() {
                Some(b'"') => Value::String(self.string()?),
                Some(b'-' | b'0'..=b'9') => Value::Number(self.number()?),
                Some(b'{') => {
                    self.i += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                        Value::Object(Object::new())
                    } else {
                        stack.push(Frame::Object(entries.len()));
                        entries.push((self.key()?, Value::Null));
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.i += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.i += 1;
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Frame::Array(elems.len()));
                        continue 'value;
                    }
                }
                Some(b't') => self.literal("true", Value::Bool(true))?,
                Some(b'f') => self.literal("false", Value::Bool(false))?,
                Some(b'n') => self.literal("null", Value::Null)?,
                _ => return self.unexpected("a JSON value"),
            };
            // `v` is complete: hand it to its parent, closing finished parents.
            loop {
                match stack.last() {
                    None => {
                        self.skip_ws();
                        if self.i < self.b.len() {
                            return self.unexpected("end of input");
                        }
                        return Ok(v);
                    }
                    Some(&Frame::Array(start)) => {
                        elems.push(v);
                        self.skip_ws();
                        match self.peek() {
                            Some(b',') => {
                                self.i += 1;
                                continue 'value;
                            }
                            Some(b']') => {
                                self.i += 1;
                                stack.pop();
                                v = Value::Array(elems.drain(start..).collect());
                            }
                            _ => return self.unexpected("',' or ']'"),
                        }
                    }
                    Some(&Frame::Object(start)) => {
                        if let Some(last) = entries.last_mut() {
                            last.1 = v;
                        }
                        self.skip_ws();
                        match self.peek() {
                            Some(b',') => {
                                self.i += 1;
                                self.skip_ws();
                                entries.push((self.key()?, Value::Null));
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.i += 1;
                                stack.pop();
                                let own = entries.drain(start..).collect();
                                v = Value::Object(Object::from_entries(own));
                            }
                            _ => return self.unexpected("',' or '}'"),
                        }
                    }
                }
            }
        }
    }

    /// A property name and its `:` (at a non-whitespace position).
    fn key(&mut self) -> Result<JsString, ParseError> {
        if self.peek() != Some(b'"') {
            return self.unexpected("a string property name");
        }
        let k = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return self.unexpected("':'");
        }
        self.i += 1;
        Ok(k)
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, ParseError> {
        let end = self.i + word.len();
        if self.b.get(self.i..end) == Some(word.as_bytes()) {
            self.i = end;
            Ok(v)
        } else {
            self.unexpected("a JSON value")
        }
    }

    /// A number literal at `self.i` (which holds `-` or a digit).
    fn number(&mut self) -> Result<f64, ParseError> {
        let b = self.b;
        let start = self.i;
        let digits = |mut i: usize| {
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
            i
        };
        let neg = b[start] == b'-';
        let int_start = start + usize::from(neg);
        let mut i = match b.get(int_start) {
            Some(b'0') => int_start + 1,
            Some(b'1'..=b'9') => digits(int_start + 1),
            _ => return err(int_start, "expected a digit"),
        };
        if let Some(b'0'..=b'9') = b.get(i) {
            return err(int_start, "leading zero in number");
        }
        let int_end = i;
        if b.get(i) == Some(&b'.') {
            let j = digits(i + 1);
            if j == i + 1 {
                return err(i + 1, "expected a digit after '.'");
            }
            i = j;
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let j = digits(i);
            if j == i {
                return err(i, "expected a digit in exponent");
            }
            i = j;
        }
        self.i = i;
        if i == int_end && int_end - int_start <= 15 {
            // Fast path: an integer below 10^15 is exact in a double.
            let m = b[int_start..int_end]
                .iter()
                .fold(0u64, |m, &d| m * 10 + u64::from(d - b'0'));
            let f = m as f64;
            if neg && m == 0 {
                self.suspicious = true;
            }
            return Ok(if neg { -f } else { f });
        }
        // Correctly rounded; overflows to ±inf and underflows to ±0.
        match self.text[start..i].parse::<f64>() {
            Ok(f) => {
                if !f.is_finite() || (f == 0.0 && f.is_sign_negative()) {
                    self.suspicious = true;
                }
                Ok(f)
            }
            Err(_) => err(start, "invalid number"),
        }
    }

    /// A string literal at `self.i` (which holds `"`).
    fn string(&mut self) -> Result<JsString, ParseError> {
        let b = self.b;
        let start = self.i + 1;
        let mut i = find_special(b, start);
        if b.get(i) == Some(&b'"') {
            self.i = i + 1;
            return Ok(JsString::from_wtf8_trusted(b[start..i].into()));
        }
        let mut buf: Vec<u8> = Vec::with_capacity(i - start + 16);
        buf.extend_from_slice(&b[start..i]);
        loop {
            match b.get(i) {
                Some(b'"') => {
                    self.i = i + 1;
                    return Ok(JsString::from_wtf8_trusted(buf.into_boxed_slice()));
                }
                Some(b'\\') => i = self.escape(i, &mut buf)?,
                Some(_) => return err(i, "control character in string"),
                None => return err(i, "unterminated string"),
            }
            let j = find_special(b, i);
            buf.extend_from_slice(&b[i..j]);
            i = j;
        }
    }

    /// Four hex digits at `at`.
    fn hex4(&self, at: usize) -> Option<u16> {
        let h = self.b.get(at..at + 4)?;
        h.iter()
            .try_fold(0u16, |acc, &c| Some(acc << 4 | hex_digit(c)?))
    }

    /// The escape at `i` (a backslash); returns the index after it.
    fn escape(&self, i: usize, buf: &mut Vec<u8>) -> Result<usize, ParseError> {
        let simple = match self.b.get(i + 1) {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0C,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                let Some(unit) = self.hex4(i + 2) else {
                    return err(i, "invalid \\u escape");
                };
                let next = i + 6;
                if (0xD800..0xDC00).contains(&unit) && self.b.get(next..next + 2) == Some(b"\\u") {
                    if let Some(low @ 0xDC00..=0xDFFF) = self.hex4(next + 2) {
                        let cp = 0x10000
                            + ((u32::from(unit) - 0xD800) << 10)
                            + (u32::from(low) - 0xDC00);
                        push_wtf8(buf, cp);
                        return Ok(next + 6);
                    }
                }
                // Any other unit, including a lone surrogate, stands alone.
                push_wtf8(buf, u32::from(unit));
                return Ok(next);
            }
            None => return err(i, "unterminated string"),
            Some(_) => return err(i, "invalid escape"),
        };
        buf.push(simple);
        Ok(i + 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(text: &str) -> f64 {
        parse(text).unwrap().as_f64().unwrap()
    }

    fn rt(text: &str) -> String {
        parse(text).unwrap().to_json()
    }

    #[test]
    fn scalars_at_top_level() {
        assert_eq!(parse("null").unwrap(), Value::Null);
        assert_eq!(parse(" true ").unwrap(), Value::Bool(true));
        assert_eq!(parse("\t\r\nfalse\n").unwrap(), Value::Bool(false));
        assert_eq!(parse("\"x\"").unwrap(), Value::str("x"));
        assert_eq!(num("42"), 42.0);
        assert_eq!(rt(" [ 1 , { \"a\" : [ ] } , { } ] "), r#"[1,{"a":[]},{}]"#);
    }

    #[test]
    fn invalid_inputs() {
        for text in [
            "",
            " ",
            "{",
            "[",
            "[1,]",
            "[1 2]",
            "{\"a\":1,}",
            "01",
            "-01",
            "1.",
            ".5",
            "+1",
            "-",
            "1e",
            "1e+",
            "1.e5",
            "\"\\x\"",
            "\"a\u{1}b\"",
            "\"\n\"",
            "\"\t\"",
            "\"abc",
            "\"\\",
            "\"\\u12\"",
            "\"\\uZZZZ\"",
            "tru",
            "nul",
            "truex",
            "1 2",
            "{\"a\" 1}",
            "{a:1}",
            "{'a':1}",
            "NaN",
            "Infinity",
            "-Infinity",
            "[1]]",
            "{}}",
            "// c\n1",
            "/*c*/1",
            "\u{a0}1",
            "\u{feff}1",
            "[,1]",
            "{,}",
            "{\"a\"}",
            "{\"a\":}",
            "0x10",
            "1_000",
        ] {
            assert!(parse(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn error_offsets_and_messages() {
        let e = parse("[1,]").unwrap_err();
        assert_eq!(e.offset, 3);
        assert!(e.to_string().ends_with("at byte 3"), "{e}");
        assert_eq!(parse("1 2").unwrap_err().offset, 2);
        assert_eq!(parse("\"ab\u{1}\"").unwrap_err().offset, 3);
        assert_eq!(parse("01").unwrap_err().offset, 0);
        assert_eq!(parse("\"\\q\"").unwrap_err().offset, 1);
        assert_eq!(parse("").unwrap_err().offset, 0);
        assert!(parse_bytes(b"[\"\xff\"]").is_err());
        assert_eq!(parse_bytes(b"[1]").unwrap().to_json(), "[1]");
    }

    #[test]
    fn numbers_round_like_javascript() {
        assert_eq!(num("0"), 0.0);
        assert_eq!(num("-5"), -5.0);
        assert_eq!(num("1.5"), 1.5);
        assert_eq!(num("1E2"), 100.0);
        assert_eq!(num("1e-2"), 0.01);
        assert_eq!(num("1.0"), 1.0);
        assert_eq!(num("999999999999999"), 999_999_999_999_999.0);
        assert_eq!(num("9007199254740993"), 9_007_199_254_740_992.0);
        assert_eq!(rt("9007199254740993"), "9007199254740992");
        assert_eq!(rt("18446744073709551616"), "18446744073709552000");
        assert_eq!(rt("-9223372036854775809"), "-9223372036854776000");
        assert_eq!(num("0.1"), 0.1);
        assert_eq!(num("2.2250738585072011e-308"), 2.225_073_858_507_201e-308);
        assert_eq!(num("5e-324"), 5e-324);
        assert_eq!(num("1e99999999999999999999"), f64::INFINITY);
    }

    #[test]
    fn overflow_and_negative_zero() {
        for (text, expect) in [
            ("1e400", f64::INFINITY),
            ("-1e400", f64::NEG_INFINITY),
            ("1E309", f64::INFINITY),
        ] {
            let v = parse(text).unwrap();
            assert_eq!(v.as_f64(), Some(expect));
            assert!(!v.is_lossless());
            assert_eq!(v.to_json(), "null");
        }
        let v = parse("1e-400").unwrap();
        assert!(v.as_f64().unwrap() == 0.0 && v.as_f64().unwrap().is_sign_positive());
        assert!(v.is_lossless());
        for text in ["-1e-400", "-0", "-0.0", "-0e5", "-0E-0"] {
            let v = parse(text).unwrap();
            let n = v.as_f64().unwrap();
            assert!(n == 0.0 && n.is_sign_negative(), "{text}");
            assert!(!v.is_lossless(), "{text}");
            assert_eq!(v.to_json(), "0");
        }
        assert!(parse("0").unwrap().is_lossless());
        assert!(parse("[0.0, 1e308, -1]").unwrap().is_lossless());
    }

    #[test]
    fn strings_and_escapes() {
        let v = parse(r#""\u0000\u001f\b\f\n\r\t\"\\\/""#).unwrap();
        assert_eq!(v.as_str(), Some("\u{0}\u{1f}\u{8}\u{c}\n\r\t\"\\/"));
        assert_eq!(v.to_json(), r#""\u0000\u001f\b\f\n\r\t\"\\/""#);
        assert_eq!(
            parse(r#""\u00E9\u00e9\u4E2D""#).unwrap().as_str(),
            Some("\u{e9}\u{e9}\u{4e2d}")
        );
        assert_eq!(parse("\"ünï😀\"").unwrap().as_str(), Some("ünï😀"));
        assert_eq!(rt("\"\u{2028}\u{2029}\""), "\"\u{2028}\u{2029}\"");
        assert_eq!(rt(r#""\u2028""#), "\"\u{2028}\"");
        assert_eq!(rt(r#""a\u0041\"b""#), r#""aA\"b""#);
        assert_eq!(rt(r#""\u007f""#), "\"\u{7f}\"");
        assert_eq!(parse("\"\"").unwrap().as_js_str().unwrap().len_wtf8(), 0);
        // Long strings exercise the word-at-a-time scanner on both paths.
        let long = "abcdefgh".repeat(20);
        assert_eq!(rt(&format!("\"{long}\"")), format!("\"{long}\""));
        assert_eq!(
            rt(&format!("\"{long}\\n{long}\"")),
            format!("\"{long}\\n{long}\"")
        );
    }

    #[test]
    fn surrogates() {
        let pair = parse(r#""\ud83d\ude00""#).unwrap();
        assert_eq!(pair.as_str(), Some("😀"));
        assert_eq!(pair.as_js_str().unwrap().as_wtf8(), "😀".as_bytes());
        assert_eq!(pair.to_json(), "\"😀\"");
        assert_eq!(parse(r#""\uD83D\uDE00""#).unwrap(), pair);
        for text in [
            r#""\ud800""#,
            r#""\udc00\ud800""#,
            r#""\udbff""#,
            r#""\udfff""#,
            r#""a\ud800b""#,
            r#""\ud800\ud800""#,
            r#""\ud800\u0041""#,
            r#""\ud800\n""#,
        ] {
            let v = parse(text).unwrap();
            assert_eq!(v.as_str(), None, "{text}");
            assert!(v.as_js_str().is_some());
            assert_eq!(v.to_json(), text.replace("\\u0041", "A"));
        }
        let v = parse(r#""\ud800\ud83d\ude00\udc00""#).unwrap();
        assert_eq!(v.to_json(), "\"\\ud800😀\\udc00\"");
        let s = v.as_js_str().unwrap();
        assert_eq!(s.as_wtf8(), b"\xed\xa0\x80\xf0\x9f\x98\x80\xed\xb0\x80");
        assert_eq!(s.to_string_lossy(), "\u{fffd}😀\u{fffd}");
        assert!(parse(r#""\ud800\u12""#).is_err());
    }

    #[test]
    fn object_order_and_duplicates() {
        let v = parse(r#"{"b":1,"10":2,"a":3,"2":4}"#).unwrap();
        let keys: Vec<String> = v
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(keys, ["2", "10", "b", "a"]);
        assert_eq!(v.to_json(), r#"{"2":4,"10":2,"b":1,"a":3}"#);
        assert_eq!(rt(r#"{"a":1,"b":2,"a":3}"#), r#"{"a":3,"b":2}"#);
        assert_eq!(rt(r#"{"1":1,"0":2,"1":3}"#), r#"{"0":2,"1":3}"#);
        assert_eq!(
            rt(r#"{"4294967295":1,"4294967294":2,"01":3,"-1":4,"1.0":5,"0":6}"#),
            r#"{"0":6,"4294967294":2,"4294967295":1,"01":3,"-1":4,"1.0":5}"#
        );
        assert_eq!(
            rt(r#"{"__proto__":{"x":1},"a":2}"#),
            r#"{"__proto__":{"x":1},"a":2}"#
        );
        assert!(parse(r#"{"a":-0,"a":1}"#).unwrap().is_lossless());
        assert!(!parse(r#"{"a":1,"a":-0}"#).unwrap().is_lossless());
        assert_eq!(rt(r#"{"\ud800":1,"\ud800":2}"#), r#"{"\ud800":2}"#);
        assert_eq!(rt(r#"{"":1,"a":{"":2}}"#), r#"{"":1,"a":{"":2}}"#);
    }

    #[test]
    fn large_objects() {
        // 100 000 distinct named keys, then duplicates of all of them.
        let mut text = String::from("{");
        for i in 0..100_000 {
            text.push_str(&format!("\"k{i}\":{i},"));
        }
        for i in 0..100_000 {
            text.push_str(&format!("\"k{i}\":{},", i + 1));
        }
        text.push_str("\"z\":0}");
        let v = parse(&text).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 100_001);
        assert_eq!(o.get("k99999").and_then(Value::as_f64), Some(100_000.0));
        assert_eq!(o.keys().next().unwrap(), "k0");
        // 100 000 index keys in descending order.
        let mut text = String::from("{");
        for i in (0..100_000).rev() {
            text.push_str(&format!("\"{i}\":{i},"));
        }
        text.push_str("\"x\":1}");
        let v = parse(&text).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 100_001);
        assert!(o
            .keys()
            .take(100_000)
            .enumerate()
            .all(|(i, k)| *k == i.to_string()));
        assert_eq!(o.get("77").and_then(Value::as_f64), Some(77.0));
    }
}
