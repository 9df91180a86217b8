//! Tests of the navigation over canonical JSON text (members, elements,
//! skipping and walking values), against the parsed tree.
use super::tests::{navigate_garbage, short, walk};
use super::*;
use crate::json::{parse, Value};

/// Compares every navigation function with the parsed tree, recursively.
pub(super) fn check_navigation(t: &str) {
    let v = parse(t).unwrap();
    assert_eq!(skip_value(t, 0), Some(t.len()), "{}", short(t));
    assert_eq!(
        is_nonempty_string(t),
        v.as_js_str().is_some_and(|s| !s.is_empty())
    );
    match &v {
        Value::Object(o) => {
            assert!(elements(t).is_none());
            let got: Vec<(&str, &str)> = members(t).unwrap().collect();
            assert_eq!(got.len(), o.len());
            for (&(k, vt), (ek, ev)) in got.iter().zip(o.iter()) {
                assert_eq!(format!("\"{k}\""), ek.to_json());
                assert_eq!(&parse(vt).unwrap(), ev);
                if let Some(plain) = ek.as_str() {
                    let found = member(t, plain).map(|m| parse(m).unwrap());
                    assert_eq!(found.as_ref(), o.get(plain), "{plain:?}");
                }
                check_navigation(vt);
            }
            assert_eq!(member(t, "no such key\u{0}"), None);
            let mut walked = Vec::new();
            let end = walk_members(t, 0, |k, v| {
                let end = skip_value(t, v)?;
                walked.push((k, &t[v..end]));
                Some(end)
            });
            assert_eq!((end, walked), (Some(t.len()), got));
            assert_eq!(walk(t, 0).map(|(end, _)| end), Some(t.len()));
        }
        Value::Array(a) => {
            assert!(members(t).is_none() && member(t, "a").is_none());
            let got: Vec<&str> = elements(t).unwrap().collect();
            assert_eq!(got.len(), a.len());
            let mut walked = Vec::new();
            let end = walk_elements(t, 0, |v| {
                let end = skip_value(t, v)?;
                walked.push(&t[v..end]);
                Some(end)
            });
            assert_eq!((end, &walked), (Some(t.len()), &got));
            for (et, ev) in got.iter().zip(a) {
                assert_eq!(&parse(et).unwrap(), ev);
                check_navigation(et);
            }
        }
        _ => assert!(members(t).is_none() && elements(t).is_none()),
    }
}

#[test]
fn navigation_examples() {
    let t = r#"{"a":1,"b":[true,{"c":"x\"}"},[]],"":"","x\ny":null,"q\"":{},"0":-1.5e-7}"#;
    assert_eq!(member(t, "a"), Some("1"));
    assert_eq!(member(t, "b"), Some(r#"[true,{"c":"x\"}"},[]]"#));
    assert_eq!(member(t, ""), Some("\"\""));
    assert_eq!(member(t, "x\ny"), Some("null"));
    assert_eq!(member(t, "q\""), Some("{}"));
    assert_eq!(member(t, "0"), Some("-1.5e-7"));
    assert_eq!(member(t, "c"), None);
    let keys: Vec<&str> = members(t).unwrap().map(|(k, _)| k).collect();
    assert_eq!(keys, ["a", "b", "", "x\\ny", "q\\\"", "0"]);
    let b = member(t, "b").unwrap();
    let items: Vec<&str> = elements(b).unwrap().collect();
    assert_eq!(items, ["true", r#"{"c":"x\"}"}"#, "[]"]);
    assert_eq!(member(items[1], "c"), Some(r#""x\"}""#));
    assert!(is_nonempty_string(member(items[1], "c").unwrap()));
    assert!(!is_nonempty_string("\"\""));
    assert!(!is_nonempty_string("1") && !is_nonempty_string("\""));
    assert_eq!(members("{}").unwrap().count(), 0);
    assert_eq!(elements("[]").unwrap().count(), 0);
    assert!(members("[]").is_none() && elements("{}").is_none());
    assert!(members("").is_none() && elements("").is_none());
    assert_eq!(skip_value(t, 5), Some(6));
    assert_eq!(skip_value("[1,\"]\",[2]]", 3), Some(6));
    assert_eq!(skip_value("[1,\"]\",[2]]", 7), Some(10));
    assert_eq!(skip_value("true,", 0), Some(4));
    assert_eq!(skip_value("[1", 0), None);
    assert_eq!(skip_value("\"ab", 0), None);
    assert_eq!(skip_value("x", 0), None);
    assert_eq!(skip_value("1", 5), None);
    // Keys are matched on raw text; escapes in `key` are handled.
    let v = Value::obj([("tab\there", 1.0.into()), ("ctl\u{1}", 2.0.into())]);
    let t = v.to_json();
    assert_eq!(member(&t, "tab\there"), Some("1"));
    assert_eq!(member(&t, "ctl\u{1}"), Some("2"));
    for g in [
        "{",
        "{\"",
        "{\"a\"",
        "{\"a\":",
        "{\"a\":1,",
        "[",
        "[1,",
        "{\"a\\",
        "\"\\",
    ] {
        navigate_garbage(g);
    }
}

#[test]
fn canonical_members_agree_with_members_and_is_canonical() {
    let cases = [
        r#"{"a":1,"b":[1,{"c":2}],"d":{"e":"x\"y"},"f":null}"#,
        r#"{"type":"t","seq":0,"time":1,"data":{}}"#,
        r#"{}"#,
        r#"{"a":{}}"#,
        r#"{"a":[]}"#,
        r#"{"a":1,"a":2}"#,
        r#"{"a": 1}"#,
        r#"[{"a":1}]"#,
        r#""s""#,
    ];
    for t in cases {
        let got = canonical_members(t);
        if !is_canonical(t) || !t.starts_with('{') {
            assert!(got.is_none(), "{t}");
            continue;
        }
        let want: Vec<(&str, &str)> = members(t).unwrap().collect();
        assert_eq!(got.unwrap(), want, "{t}");
    }
}

#[test]
fn skipping_strings_counts_the_backslashes_before_each_quote() {
    // Runs of backslashes of every parity right before quotes, escaped
    // newlines, non-ASCII text: the string ends at its closing quote only.
    let pieces: [&str; 9] = ["\\", "\"", "a", "\n", "é", "\\\"", "\\\\", "\"\"", "\u{1}"];
    let mut r = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let n = r.below(24);
        let s: String = (0..n)
            .map(|_| *r.pick(&pieces[..]))
            .collect::<Vec<&str>>()
            .concat();
        let lit = Value::from(s.as_str()).to_json();
        assert_eq!(skip_value(&lit, 0), Some(lit.len()), "{lit}");
        for t in [
            format!("[{lit},\"x\\\\\"]"),
            format!("{{\"k\\\"\":{lit},\"z\":[{lit}]}}"),
        ] {
            check_navigation(&t);
        }
        // Cut anywhere inside, the string has no end.
        let mut cut = 1 + r.below(lit.len() - 1);
        while !lit.is_char_boundary(cut) {
            cut += 1;
        }
        assert_eq!(skip_value(&lit[..cut], 0), None, "{}", &lit[..cut]);
    }
}
