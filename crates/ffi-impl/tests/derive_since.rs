//! `dsh_session_derive_since`: the incremental derive across the ABI.

mod support;

use ::dsh_session::json::Value;
use ::dsh_session_ffi::*;
use support::*;

fn since(s: &Session, generation: u64, count: u64) -> (u64, u64, bool, Vec<Value>) {
    // SAFETY: live handle.
    let (st, text) = call(|out| unsafe { dsh_session_derive_since(s.0, generation, count, out) });
    assert_eq!(st, DSH_OK, "{text}");
    let v = parse(&text);
    let o = v.as_object().unwrap();
    (
        o.get("generation").unwrap().as_safe_u64().unwrap(),
        o.get("count").unwrap().as_safe_u64().unwrap(),
        o.get("reset").unwrap().as_bool().unwrap(),
        o.get("messages").unwrap().as_array().unwrap().clone(),
    )
}

fn user(s: &Session, n: u64) {
    s.append_ok(
        "user/message",
        &format!(r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"m{n}"}}],"source":{{"kind":"user"}}}}"#),
        Some(r#"{"surfaceOp":"append"}"#),
    );
}

#[test]
fn deltas_add_up_to_the_full_derive_and_a_replace_resets_the_cursor() {
    let store = Store::open(&declaring("null")).unwrap();
    let s = store.create(r#"{"id":"d"}"#).unwrap();
    let (mut g, mut n) = (0, 0);
    let mut held: Vec<Value> = Vec::new();
    for i in 0..30u64 {
        user(&s, i);
        if i % 3 == 0 {
            s.append_ok("plugin/noise", "{}", None);
        }
        if i % 4 == 0 {
            let (g2, n2, reset, messages) = since(&s, g, n);
            assert!(!reset, "no replace yet");
            held.extend(messages);
            (g, n) = (g2, n2);
            assert_eq!(Value::Array(held.clone()), s.derive());
        }
    }
    let (g2, n2, reset, messages) = since(&s, g, n);
    assert!(!reset);
    held.extend(messages);
    assert_eq!(Value::Array(held.clone()), s.derive());
    assert_eq!(n2, 30);
    // Nothing new: an empty delta.
    let (_, _, reset, messages) = since(&s, g2, n2);
    assert!(!reset && messages.is_empty());
    // A compaction replace invalidates the cursor: the whole list comes back.
    s.append_ok(
        "user/message",
        r#"{"id":"sum","role":"user","content":[],"source":{"kind":"compaction"}}"#,
        Some(r#"{"surfaceOp":{"op":"replace","start":0,"end":2},"sourceEventSeqs":[0,2]}"#),
    );
    let (g3, n3, reset, messages) = since(&s, g2, n2);
    assert!(reset);
    assert_eq!(g3, g2 + 1);
    assert_eq!(n3, 29);
    assert_eq!(Value::Array(messages), s.derive());
    // A cursor this session never gave out also resets.
    let (_, _, reset, messages) = since(&s, g3, 1000);
    assert!(reset);
    assert_eq!(Value::Array(messages), s.derive());
}
