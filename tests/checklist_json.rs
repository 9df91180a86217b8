//! The lossless JSON value model of appended data (docs/events.md §2,
//! docs/errors.md §4.1).

mod checklist_support;

use ::dsh_session::json;
use checklist_support::*;

/// Append `data` as raw text to a log-only event; return (status, rule or
/// the stored `data` text).
fn append_text(s: &Sess, data: &str) -> (dsh_status, String) {
    let text = match s.live.append_text("plugin/value", data, None) {
        Ok(e) => e.text().to_string(),
        Err(e) => return (e.status.code(), e.rule.as_str().to_string()),
    };
    let start = text.find(",\"data\":").expect("data key") + 8;
    (DSH_OK, text[start..text.len() - 1].to_string())
}

/// Scalars as JSON text and the canonical text they are stored as.
const ACCEPTED: [(&str, &str); 16] = [
    ("0", "0"),
    ("0.0", "0"),
    ("1", "1"),
    ("-1", "-1"),
    ("1.50", "1.5"),
    ("1e21", "1e+21"),
    ("1e20", "100000000000000000000"),
    ("0.000001", "0.000001"),
    ("1e-7", "1e-7"),
    ("9007199254740993", "9007199254740992"),
    ("true", "true"),
    ("false", "false"),
    ("null", "null"),
    ("\"\"", "\"\""),
    (
        "\"\\ud800x\\u0001\\u2028/\"",
        "\"\\ud800x\\u0001\u{2028}/\"",
    ),
    ("-1e-300", "-1e-300"),
];

const REFUSED: [&str; 7] = [
    "-0", "-0.0", "-0e3", "-1e-400", "1e400", "-1e309", "1e999999",
];

#[test]
fn json_scalars_are_accepted_and_copied_but_negative_zero_and_infinities_are_refused() {
    let store = Store::open();
    let s = store.session("s");
    for (input, stored) in ACCEPTED {
        assert_eq!(
            append_text(&s, input),
            (DSH_OK, stored.to_string()),
            "{input}"
        );
    }
    for input in REFUSED {
        assert_eq!(
            append_text(&s, input),
            (DSH_E_INVALID_JSON, "json.not-lossless".to_string()),
            "{input}"
        );
    }
    assert_eq!(s.info()["length"], json!(ACCEPTED.len()));
}

#[test]
fn lossless_check_agrees_with_the_append_verdict_on_every_scalar() {
    let store = Store::open();
    let s = store.session("s");
    let all = ACCEPTED.iter().map(|(t, _)| *t).chain(REFUSED);
    for input in all {
        let verdict = json::parse(input).unwrap().is_lossless();
        let (st, _) = append_text(&s, input);
        assert_eq!(verdict, st == DSH_OK, "{input}");
        let wrapped = format!("[{{\"k\":[{input}]}}]");
        assert_eq!(
            json::parse(&wrapped).unwrap().is_lossless(),
            verdict,
            "nested {input}"
        );
        assert_eq!(
            append_text(&s, &wrapped).0 == DSH_OK,
            verdict,
            "nested {input}"
        );
    }
}

#[test]
fn dense_arrays_and_plain_objects_are_deep_copied_in_javascript_order() {
    let store = Store::open();
    let s = store.session("s");
    let cases = [
        (
            r#"[[1,[2,[3,{"a":[]}]]],{}]"#,
            r#"[[1,[2,[3,{"a":[]}]]],{}]"#,
        ),
        (
            r#"{"b":1,"10":2,"a":3,"2":4}"#,
            r#"{"2":4,"10":2,"b":1,"a":3}"#,
        ),
        (r#"{"a":1,"b":2,"a":3}"#, r#"{"a":3,"b":2}"#),
        (
            r#"{"4294967295":1,"4294967294":2,"01":3,"-1":4}"#,
            r#"{"4294967294":2,"4294967295":1,"01":3,"-1":4}"#,
        ),
        ("{ \"x\" : [ 1 , 2 ] }", r#"{"x":[1,2]}"#),
    ];
    for (input, stored) in cases {
        assert_eq!(
            append_text(&s, input),
            (DSH_OK, stored.to_string()),
            "{input}"
        );
    }
    assert!(json::parse(cases[0].0).unwrap().is_lossless());
    assert!(json::parse(r#"{"a":{"b":[1,2,{"c":null}]}}"#)
        .unwrap()
        .is_lossless());
    assert!(!json::parse(r#"{"a":{"b":[1,2,{"c":-0}]}}"#)
        .unwrap()
        .is_lossless());
}

#[test]
fn very_deep_nesting_is_accepted_without_stack_exhaustion() {
    let depth = 300_000;
    let mut text = "{\"a\":".repeat(depth);
    text.push_str("[-0]");
    text.push_str(&"}".repeat(depth));
    let v = json::parse(&text).expect("deep parse");
    assert!(!v.is_lossless(), "the walk reaches the bottom");
    drop(v);
    let good = text.replace("[-0]", "[0]");
    let store = Store::open();
    let s = store.session("s");
    assert_eq!(
        append_text(&s, &text),
        (DSH_E_INVALID_JSON, "json.not-lossless".to_string())
    );
    assert_eq!(append_text(&s, &good), (DSH_OK, good.clone()));
    let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let events = format!(
        r#"[{{"type":"user/message","seq":0,"time":0,"data":{{"id":"u","role":"user","content":{arrays},"source":{{"kind":"user"}}}},"surfaceOp":"append"}}]"#
    );
    let derived = ok(derive_messages_text(&events));
    assert!(derived.contains(&arrays));
}

#[test]
fn literal_proto_key_is_an_ordinary_key() {
    let store = Store::open();
    let s = store.session("s");
    let input = r#"{"__proto__":{"polluted":true},"a":1,"__proto__":{"x":[1]}}"#;
    assert_eq!(
        append_text(&s, input),
        (DSH_OK, r#"{"__proto__":{"x":[1]},"a":1}"#.to_string())
    );
    let msg = r#"{"id":"u","role":"user","content":[],"source":{"kind":"user"},"__proto__":{"role":"assistant"}}"#;
    let e = ok(s.append_raw("user/message", msg, Some(r#"{"surfaceOp":"append"}"#)));
    assert_eq!(e["data"]["__proto__"], json!({"role": "assistant"}));
    assert_eq!(e["data"]["role"], "user");
    assert_eq!(s.derive_text(), format!("[{msg}]"));
}
