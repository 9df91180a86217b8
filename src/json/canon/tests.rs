//! Tests of the canonical-JSON check and navigation.
use super::tests_nav::check_navigation;
use super::*;
use crate::json::{parse_checked, JsString, Object, Value};
use crate::test_rng::Rng;

// ---- oracle -----------------------------------------------------------

/// The slow, always-correct definition.
fn oracle(t: &str) -> bool {
    match parse_checked(t) {
        Ok((v, lossless)) => lossless && v.is_lossless() && v.to_json() == t,
        Err(_) => false,
    }
}

pub(super) fn short(t: &str) -> String {
    let mut cut = t.len().min(300);
    while !t.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{:?} ({} bytes)", &t[..cut], t.len())
}

/// `is_canonical(t)`, asserting that `true` is backed by the oracle.
fn check(t: &str) -> bool {
    let fast = is_canonical(t);
    if fast {
        assert!(oracle(t), "accepted non-canonical text {}", short(t));
    }
    // The byte path (UTF-8 checked on the way) decides alike.
    assert_eq!(canonical_str(t.as_bytes()).is_some(), fast, "{}", short(t));
    fast
}

// ---- deterministic generator -------------------------------------------

fn gen_string(r: &mut Rng) -> JsString {
    let len = match r.below(10) {
        0 => 0,
        1..=6 => r.below(12),
        7 | 8 => r.below(100),
        _ => r.below(3000),
    };
    let mut units: Vec<u16> = Vec::with_capacity(len);
    for _ in 0..len {
        match r.below(24) {
            0 => units.push(r.below(0x20) as u16),
            1 => units.push(u16::from(*r.pick(b"\"\\/\x7f"))),
            2 | 3 => {
                let c = *r.pick(&[
                    'é', '中', '\u{2028}', '\u{2029}', '😀', '\u{ffff}', '\u{80}',
                ]);
                units.extend(c.encode_utf16(&mut [0; 2]).iter());
            }
            4 if r.below(10) == 0 => units.push(0xD800 + r.below(0x800) as u16),
            _ => units.push(0x20 + r.below(0x5F) as u16),
        }
    }
    JsString::from_utf16(&units)
}

fn gen_number(r: &mut Rng) -> f64 {
    let sign = if r.below(4) == 0 { -1.0 } else { 1.0 };
    sign * match r.below(9) {
        0 => r.below(1000) as f64,
        1 => (r.next() % (1 << 53)) as f64,
        2 => (r.next() >> r.below(64)) as f64 * 1000.0,
        3 => {
            let f = f64::from_bits(r.next());
            if f.is_finite() {
                f
            } else {
                1.5
            }
        }
        4 => r.below(100_000) as f64 / 100.0,
        5 => *r.pick(&[
            0.1,
            0.3,
            0.1 + 0.2,
            1e21,
            1e20,
            1e-7,
            1.5e-7,
            0.000001,
            5e-324,
            f64::MAX,
            123_456_789_012_345_680_000.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
        ]),
        6 => *r.pick(&[
            999_999_999_999_999.0,
            1_000_000_000_000_000.0,
            9_007_199_254_740_991.0,
            9_007_199_254_740_993.0,
            1_755_650_000_000.0,
        ]),
        7 => (r.next() % 10u64.pow(r.below(18) as u32 + 1)) as f64,
        _ => r.below(10) as f64,
    }
}

fn gen_key(r: &mut Rng) -> JsString {
    match r.below(10) {
        0..=5 => JsString::from(*r.pick(&[
            "a",
            "role",
            "content",
            "type",
            "id",
            "",
            "tool_call",
            "x\ny",
            "\"q\"",
            "é",
            "\u{2028}",
            "\\",
            "_1",
        ])),
        6 => JsString::from(*r.pick(&["0", "1", "42", "4294967295", "4294967294", "1a", "01"])),
        _ => gen_string(r),
    }
}

fn gen_value(r: &mut Rng, depth: usize) -> Value {
    let kind = if depth == 0 { r.below(5) } else { r.below(8) };
    match kind {
        0 => Value::Null,
        1 => Value::Bool(r.below(2) == 0),
        2 => Value::Number(gen_number(r)),
        3 | 4 => Value::String(gen_string(r)),
        5 => Value::Array((0..r.below(6)).map(|_| gen_value(r, depth - 1)).collect()),
        _ => {
            let n = match r.below(8) {
                0 => 17 + r.below(60),
                _ => r.below(6),
            };
            let entries = (0..n)
                .map(|_| (gen_key(r), gen_value(r, depth - 1)))
                .collect();
            Value::Object(Object::from_entries(entries))
        }
    }
}

/// True when the canonical text has a key starting with an ASCII digit.
fn has_digit_key(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.iter().any(has_digit_key),
        Value::Object(o) => o
            .iter()
            .any(|(k, v)| k.as_wtf8().first().is_some_and(u8::is_ascii_digit) || has_digit_key(v)),
        _ => false,
    }
}

/// For each byte: inside a string literal (quotes included)?
fn in_string(t: &str) -> Vec<bool> {
    let b = t.as_bytes();
    let mut mask = vec![false; b.len()];
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            let end = (i + 1).min(b.len());
            mask[start..end].iter_mut().for_each(|m| *m = true);
            i = end;
        } else {
            i += 1;
        }
    }
    mask
}

fn random_boundary(r: &mut Rng, t: &str) -> usize {
    let mut i = r.below(t.len() + 1);
    while !t.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Replaces one random occurrence of `from` by `to`.
fn replace_one(r: &mut Rng, t: &str, from: &str, to: &str) -> Option<String> {
    let hits: Vec<usize> = t.match_indices(from).map(|(i, _)| i).collect();
    let &at = r.pick(hits.as_slice().get(..).filter(|h| !h.is_empty())?);
    Some(format!("{}{}{}", &t[..at], to, &t[at + from.len()..]))
}

/// Non-canonical respellings of the number token `tok`.
fn respell(tok: &str) -> Vec<String> {
    let mut out = vec![
        format!("{tok}.0"),
        format!("{tok}e0"),
        format!("{tok}E+0"),
        format!("0{tok}"),
        format!("{tok} "),
        "1e400".to_string(),
        "-1e400".to_string(),
        "-0".to_string(),
        "-0.0".to_string(),
        "0.0".to_string(),
        "0e5".to_string(),
        "1e-400".to_string(),
    ];
    if tok.contains('e') {
        out.push(tok.replace('e', "E"));
    }
    if tok.contains("e+") {
        out.push(tok.replace("e+", "e"));
    }
    if let Some(stem) = tok.strip_suffix("00") {
        out.push(format!("{stem}e2"));
    }
    if tok.contains('.') && !tok.contains('e') {
        out.push(format!("{tok}0"));
    }
    out
}

/// Mutates canonical text `t` in several ways, checking every result.
fn mutate_and_check(r: &mut Rng, t: &str) {
    let outside: Vec<usize> = {
        let mask = in_string(t);
        (0..t.len()).filter(|&i| !mask[i]).collect()
    };
    // Whitespace anywhere (inside strings it may stay canonical).
    for _ in 0..2 {
        let at = random_boundary(r, t);
        let ws = *r.pick(&[" ", "\n", "\t", "\r"]);
        check(&format!("{}{}{}", &t[..at], ws, &t[at..]));
    }
    // Whitespace outside strings is never canonical.
    if let Some(&at) = outside.get(r.below(outside.len() + 1)) {
        let m = format!("{} {}", &t[..at], &t[at..]);
        assert!(!check(&m), "{}", short(&m));
    }
    // Escape respellings.
    for (from, to) in [
        ("\\n", "\\u000a"),
        ("\\\"", "\\u0022"),
        ("\\\\", "\\u005c"),
        ("\\t", "\\u0009"),
        ("\\b", "\\u0008"),
        ("\\f", "\\u000c"),
        ("\\r", "\\u000d"),
        ("\\u001f", "\\u001F"),
        ("\\u001b", "\\u001B"),
        ("\\u0000", "\\u0000\\/"),
        ("/", "\\/"),
        ("a", "\\u0061"),
        ("é", "\\u00e9"),
        ("😀", "\\ud83d\\ude00"),
        ("\u{2028}", "\\u2028"),
    ] {
        if let Some(m) = replace_one(r, t, from, to) {
            check(&m);
        }
    }
    // Uppercase hex digits in a \u00XX escape.
    if let Some(at) = t.find("\\u001") {
        let mut m = t.to_string();
        m.replace_range(at + 5..at + 6, &t[at + 5..at + 6].to_ascii_uppercase());
        let fast = check(&m);
        assert_eq!(fast, m == t && fast, "{}", short(&m));
    }
    // Duplicate the first member of an object.
    let objs: Vec<usize> = outside
        .iter()
        .copied()
        .filter(|&i| t.as_bytes()[i] == b'{')
        .collect();
    if !objs.is_empty() {
        let at = *r.pick(&objs);
        if let Some((k, v)) = members(&t[at..]).and_then(|mut m| m.next()) {
            let m = format!("{}\"{k}\":{v},{}", &t[..at + 1], &t[at + 1..]);
            assert!(!check(&m) && !oracle(&m), "{}", short(&m));
        }
    }
    // Respell a number.
    let b = t.as_bytes();
    let starts: Vec<usize> = outside
        .iter()
        .copied()
        .filter(|&i| {
            matches!(b[i], b'-' | b'0'..=b'9') && (i == 0 || matches!(b[i - 1], b'[' | b',' | b':'))
        })
        .collect();
    if !starts.is_empty() {
        let at = *r.pick(&starts);
        let end = skip_value(t, at).unwrap();
        for sp in respell(&t[at..end]) {
            let m = format!("{}{}{}", &t[..at], sp, &t[end..]);
            assert!(!check(&m), "{}", short(&m));
        }
    }
    // Random byte edits: only the implication is checked, plus the
    // navigation functions must not panic.
    for _ in 0..4 {
        let at = random_boundary(r, t);
        let c = char::from(*r.pick(b"{}[]\",:0123456789-+.eE \\/ntfrulx"));
        let m = match r.below(3) {
            0 => format!("{}{}{}", &t[..at], c, &t[at..]),
            1 if at < t.len() => {
                let next = t[at..].chars().next().unwrap().len_utf8();
                format!("{}{}", &t[..at], &t[at + next..])
            }
            _ if at < t.len() => {
                let next = t[at..].chars().next().unwrap().len_utf8();
                format!("{}{}{}", &t[..at], c, &t[at + next..])
            }
            _ => format!("{t}{c}"),
        };
        check(&m);
        if m.len() < 2000 {
            navigate_garbage(&m);
        }
    }
}

/// Exercises every navigation function on arbitrary text: no panics.
pub(super) fn navigate_garbage(t: &str) {
    for i in 0..=t.len() + 1 {
        if let Some(end) = skip_value(t, i) {
            assert!(end <= t.len());
        }
    }
    if let Some(m) = members(t) {
        m.for_each(|(k, v)| assert!(k.len() + v.len() <= t.len()));
    }
    if let Some(e) = elements(t) {
        e.for_each(|v| assert!(v.len() <= t.len()));
    }
    let _ = member(t, "a");
    let _ = member(t, "x\ny");
    let _ = is_nonempty_string(t);
    for i in 0..=t.len() + 1 {
        let _ = walk(t, i);
    }
}

/// A recursive one-pass walk of the value at `start` with [`walk_members`]
/// and [`walk_elements`]: its end and the number of values it visited.
pub(super) fn walk(t: &str, start: usize) -> Option<(usize, usize)> {
    let mut n = 1;
    let end = match t.as_bytes().get(start)? {
        b'{' => walk_members(t, start, |_, v| {
            let (end, k) = walk(t, v)?;
            n += k;
            Some(end)
        }),
        b'[' => walk_elements(t, start, |v| {
            let (end, k) = walk(t, v)?;
            n += k;
            Some(end)
        }),
        _ => skip_value(t, start),
    }?;
    assert!(end > start && end <= t.len());
    Some((end, n))
}

// ---- is_canonical -------------------------------------------------------

#[test]
fn hand_written_cases() {
    let long_int = "1".repeat(400);
    let cases: &[(&str, bool)] = &[
        ("null", true),
        ("true", true),
        ("false", true),
        ("0", true),
        ("-5", true),
        ("100", true),
        ("0.1", true),
        ("1.5", true),
        ("-1.5", true),
        ("1e+21", true),
        ("1e-7", true),
        ("5e-324", true),
        ("1.7976931348623157e+308", true),
        ("999999999999999", true),
        ("1000000000000000", true),
        ("9007199254740992", true),
        ("123456789012345680000", true),
        ("0.30000000000000004", true),
        ("\"\"", true),
        ("\"abc\"", true),
        ("\"é中😀\u{2028}\u{2029}\u{7f}/\"", true),
        (r#""\"\\\b\f\n\r\t""#, true),
        (r#""\u0000\u0001\u0007\u000b\u000e\u001f""#, true),
        ("{}", true),
        ("[]", true),
        (r#"{"a":1,"b":[true,false,null],"c":{"d":"e"},"":{}}"#, true),
        (r#"[[],{},[{}],{"a":[]}]"#, true),
        (r#"{"__proto__":1}"#, true),
        (r#"{"a":{"a":1},"b":{"a":2}}"#, true),
        (r#"{"_0":1,"a0":2}"#, true),
        // Not canonical (or not lossless) at all.
        ("", false),
        (" ", false),
        (" 1", false),
        ("1 ", false),
        ("[1, 2]", false),
        ("{\"a\": 1}", false),
        ("{ }", false),
        ("[ ]", false),
        ("\n{}", false),
        ("1x", false),
        ("{}{}", false),
        ("[1]]", false),
        ("[1,]", false),
        ("[,1]", false),
        ("{\"a\"}", false),
        ("{\"a\":}", false),
        ("{\"a\":1,}", false),
        ("{a:1}", false),
        ("[1", false),
        ("{\"a\":1", false),
        ("\"abc", false),
        ("\"\\", false),
        ("tru", false),
        ("nul", false),
        ("truex", false),
        ("True", false),
        ("-0", false),
        ("-0.0", false),
        ("0.0", false),
        ("1.0", false),
        ("1.", false),
        (".5", false),
        ("+1", false),
        ("01", false),
        ("-01", false),
        ("00", false),
        ("1e21", false),
        ("1E5", false),
        ("1e5", false),
        ("1e400", false),
        ("-1e400", false),
        ("1e-400", false),
        ("100e0", false),
        ("1e2", false),
        ("0.10", false),
        ("9007199254740993", false),
        ("18446744073709551616", false),
        (&long_int, false),
        ("-", false),
        ("--1", false),
        ("1-2", false),
        ("NaN", false),
        ("Infinity", false),
        ("\"\\/\"", false),
        ("\"\\u0041\"", false),
        ("\"\\u00e9\"", false),
        ("\"\\u001F\"", false),
        ("\"\\u001A\"", false),
        ("\"\\u0008\"", false),
        ("\"\\u0009\"", false),
        ("\"\\u000a\"", false),
        ("\"\\u000c\"", false),
        ("\"\\u000d\"", false),
        ("\"\\u0022\"", false),
        ("\"\\u005c\"", false),
        ("\"\\u2028\"", false),
        ("\"\\u00\"", false),
        ("\"\\u00", false),
        ("\"\\x\"", false),
        ("\"\\ud83d\\ude00\"", false),
        ("\"\\uD83D\\uDE00\"", false),
        ("\"\\ud800\"", false), // canonical, but refused (fallback)
        ("\"a\u{1}b\"", false),
        ("\"\n\"", false),
        ("\"\t\"", false),
        ("\"\u{1f}\"", false),
        ("{\"a\":1,\"a\":1}", false),
        ("{\"a\":1,\"b\":2,\"a\":3}", false),
        ("{\"0\":1}", false),  // canonical, but refused (fallback)
        ("{\"1a\":1}", false), // canonical, but refused (fallback)
        ("{\"1\":1,\"0\":2}", false),
        ("{\"a\":-0}", false),
        ("[1e400]", false),
        ("{\"a\":[1,{\"b\":-0}]}", false),
        ("{\"a\":1]", false),
        ("[1}", false),
        ("\u{feff}1", false),
        ("// c\n1", false),
    ];
    for &(text, expect) in cases {
        assert_eq!(check(text), expect, "{}", short(text));
    }
    // Every control character: exactly the writer's escape is accepted.
    for c in 0u8..0x20 {
        let canonical = Value::str(&char::from(c).to_string()).to_json();
        assert!(check(&canonical), "{canonical:?}");
        let u_lower = format!("\"\\u{:04x}\"", c);
        let u_upper = format!("\"\\u{:04X}\"", c);
        assert_eq!(check(&u_lower), u_lower == canonical, "{u_lower}");
        assert_eq!(check(&u_upper), u_upper == canonical, "{u_upper}");
        assert!(!check(&format!("\"{}\"", char::from(c))));
    }
    // Every escape letter.
    for c in 0u8..0x80 {
        let t = format!("\"\\{}\"", char::from(c));
        assert_eq!(check(&t), b"\"\\bfnrt".contains(&c), "{t}");
    }
}

#[test]
fn numbers_agree_with_the_writer() {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..20_000 {
        let n = gen_number(&mut r);
        let t = Value::Number(n).to_json();
        let expect = n.is_finite() || t == "null";
        assert_eq!(check(&t), expect, "{t}");
        for sp in respell(&t) {
            assert!(!check(&sp), "{sp}");
        }
    }
    // Integer spellings around the fast-path limit.
    for digits in 1..=25 {
        let t = format!("{}7", "9".repeat(digits - 1));
        check(&t);
        check(&format!("-{t}"));
    }
}

/// For numbers the check is exact, not just conservative.
#[test]
fn number_tokens_are_decided_exactly() {
    let mut r = Rng(0xDEAD_BEEF_1234_5678);
    let digits = |r: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| {
                if r.below(3) == 0 {
                    '0'
                } else {
                    char::from(b'0' + r.below(10) as u8)
                }
            })
            .collect()
    };
    // Accepted tokens: [integers, decimals, exponents, both].
    let mut accepted = [0usize; 4];
    for _ in 0..200_000 {
        let mut t = String::new();
        if r.below(3) == 0 {
            t.push('-');
        }
        let n = match r.below(4) {
            0 => 1,
            1 => r.below(4),
            _ => r.below(22),
        };
        t.push_str(&digits(&mut r, n));
        if r.below(2) == 0 {
            t.push('.');
            let n = r.below(20);
            t.push_str(&digits(&mut r, n));
        }
        if r.below(4) == 0 {
            t.push(*r.pick(&['e', 'E']));
            if let Some(&s) = [None, Some('+'), Some('-')][r.below(3)].as_ref() {
                t.push(s);
            }
            let n = r.below(4);
            t.push_str(&digits(&mut r, n));
        }
        let fast = is_canonical(&t);
        assert_eq!(fast, oracle(&t), "{t}");
        accepted[usize::from(t.contains('.')) + 2 * usize::from(t.contains('e'))] +=
            usize::from(fast);
        let arr = format!("[{t},{t}]");
        assert_eq!(is_canonical(&arr), oracle(&arr), "{arr}");
    }
    assert!(accepted.iter().all(|&n| n > 100), "{accepted:?}");
    // Decimals around the fast path's limits.
    for t in [
        "0.000001",
        "0.0000001",
        "0.0000015",
        "0.00000105",
        "0.123456789012345",
        "0.1234567890123456",
        "0.00000123456789012345",
        "12345678901234.5",
        "123456789012345.6",
        "1234567890.12345",
        "-0.5",
        "-0.05",
        "-10.25",
        "0.5",
        "0.50",
        "00.5",
        "01.5",
        "1.05",
        "1.0",
        "0.0",
        "-0.0",
        "1.5.5",
        "1.5e3",
        "1.",
        "0.3",
        "0.30000000000000004",
    ] {
        assert_eq!(is_canonical(t), oracle(t), "{t}");
        let neg = format!("-{t}");
        assert_eq!(is_canonical(&neg), oracle(&neg), "{neg}");
    }
}

#[test]
fn deep_nesting() {
    let n = 100_000;
    let arr = format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(check(&arr));
    assert_eq!(skip_value(&arr, 0), Some(arr.len()));
    assert_eq!(elements(&arr).unwrap().count(), 1);
    let obj = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
    assert!(check(&obj));
    assert_eq!(skip_value(&obj, 0), Some(obj.len()));
    assert_eq!(member(&obj, "a").map(str::len), Some(obj.len() - 6));
    let mixed = format!("{}0{}", "[{\"k\":\"v\",\"x\":".repeat(n), "}]".repeat(n));
    assert!(check(&mixed));
    assert!(!check(&arr[1..]));
    assert!(!check(&arr[..arr.len() - 1]));
    assert!(!check(&obj[..obj.len() - 1]));
    let dup = format!("{}1,\"a\":2}}{}", "{\"a\":".repeat(n), "}".repeat(n - 1));
    assert!(!check(&dup));
}

#[test]
fn duplicate_keys_in_large_objects() {
    for n in [1, 2, 15, 16, 17, 63, 64, 65, 100, 1000] {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        let body = |keys: &[String]| {
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("\"{k}\":{{\"z\":1}}"))
                .collect();
            format!("{{{}}}", parts.join(","))
        };
        assert!(check(&body(&keys)), "{n}");
        for (a, b) in [(0, n - 1), (n / 2, n - 1), (0, 1 % n)] {
            if a != b {
                let mut dup = keys.clone();
                dup[b] = dup[a].clone();
                assert!(!check(&body(&dup)), "{n} {a} {b}");
            }
        }
        // Keys of nested objects do not clash with the outer ones.
        let nested = format!("{{\"k0\":{},\"k1\":{}}}", body(&keys), body(&keys));
        assert!(check(&nested));
        // Under 100 levels of other objects (frame and key stacks spill).
        let deep = format!(
            "{}{}{}",
            "{\"k0\":1,\"w\":".repeat(100),
            body(&keys),
            "}".repeat(100)
        );
        assert!(check(&deep));
    }
}

#[test]
fn generated_values() {
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    let (mut accepted, mut total) = (0, 0);
    for _ in 0..4000 {
        let v = gen_value(&mut r, 4);
        let t = v.to_json();
        let expect = !t.contains("\\ud") && !has_digit_key(&v);
        let fast = check(&t);
        assert!(oracle(&t), "{}", short(&t));
        if expect {
            assert!(fast, "rejected canonical text {}", short(&t));
        }
        accepted += usize::from(fast);
        total += 1;
        mutate_and_check(&mut r, &t);
        check_navigation(&t);
    }
    // The generator mostly produces accepted texts.
    assert!(accepted * 2 > total, "{accepted}/{total}");
}

#[test]
fn scanner_agrees_with_bytewise_scan() {
    let bytes: Vec<u8> = (0u8..=255).chain(0u8..=255).rev().collect();
    for len in [0, 1, 7, 8, 9, 15, 16, 17, 31, 33, bytes.len()] {
        let b = &bytes[..len];
        for from in 0..=len + 2 {
            let slow = (from..len)
                .find(|&i| matches!(b[i], b'"' | b'\\' | 0..=0x1f))
                .unwrap_or(len);
            assert_eq!(find_special(b, from), slow, "{len} {from}");
            let slow = (from..len)
                .find(|&i| matches!(b[i], b'"' | b'\\' | 0..=0x1f | 0x80..))
                .unwrap_or(len);
            assert_eq!(find_special_or_non_ascii(b, from), slow, "{len} {from}");
        }
    }
    // Every position of a stop byte in a long run, both scanners.
    for len in [31, 32, 33, 64, 65, 100] {
        for at in 0..len {
            for stop in [b'"', b'\\', 0x00, 0x1f, 0x80, 0xff] {
                let mut b = vec![b'a'; len];
                b[at] = stop;
                let plain = if stop >= 0x80 { len } else { at };
                assert_eq!(find_special(&b, 0), plain);
                assert_eq!(find_special_or_non_ascii(&b, 0), at);
            }
        }
    }
    // Stops, read 64 bytes at a time, give every stop byte in order, from
    // any start, whatever the caller skips between two calls.
    let mut r = crate::test_rng::Rng(0x5851_F42D_4C95_7F2D);
    for _ in 0..2000 {
        let len = r.below(300);
        let b: Vec<u8> = (0..len)
            .map(|_| *r.pick(&[b'a', b'"', b'\\', 0x05, 0x80, 0xC3, b'z'][..]))
            .collect();
        let (mut plain, mut non_ascii) = (Stops::<false>::default(), Stops::<true>::default());
        let mut j = r.below(len + 2);
        loop {
            let (p, n) = (plain.next(&b, j), non_ascii.next(&b, j));
            assert_eq!(p, find_special(&b, j), "{b:?} {j}");
            assert_eq!(n, find_special_or_non_ascii(&b, j), "{b:?} {j}");
            if n >= len {
                break;
            }
            j = n + 1 + r.below(8);
        }
    }
    for k in 0..40 {
        let t = format!("\"{}\\n{}\"", "é".repeat(k), "x".repeat(k));
        assert!(check(&t));
        assert_eq!(skip_value(&t, 0), Some(t.len()));
    }
}
