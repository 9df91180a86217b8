//! Append sequences decoded from bytes: types, data shapes and intents
//! drawn from the vocabulary a host uses (good and bad alike), on a strict
//! store. Whatever strict admission accepts must reopen with the same log
//! (what append accepts, open accepts), and every read must answer.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use std::ptr;

use ::dsh_session_ffi::*;
use common::*;
use libfuzzer_sys::fuzz_target;

const TYPES: [&str; 12] = [
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "request/header",
    "myapp/note",
    "zz/unknown",
];

fn data(ty: &str, b: u8, n: u64) -> String {
    let user = format!(
        r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"t{n}"}}],"source":{{"kind":"user"}}}}"#
    );
    match (ty, b % 4) {
        (_, 3) => ["null", "{}", "[1]", r#""x""#][(n % 4) as usize].to_string(),
        ("turn/start", _) => format!(r#"{{"turn":{}}}"#, n % 5),
        ("turn/end", _) => format!(r#"{{"turn":{},"reason":{{"kind":"completed"}}}}"#, n % 5),
        ("step/start" | "step/end", _) => format!(r#"{{"turn":1,"step":{}}}"#, n % 3),
        ("user/message", _) => user,
        ("assistant/message", _) => format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"a{n}","role":"assistant","content":[{{"type":"tool-call","id":"c{n}","name":"ls","arguments":"{{}}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#
        ),
        ("tool/call", _) => {
            format!(r#"{{"turn":1,"step":1,"callId":"c{n}","name":"ls","arguments":"{{}}"}}"#)
        }
        ("tool/result", _) => format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"r{n}","role":"user","content":[{{"type":"tool-result","toolCallId":"c{n}","content":[]}}],"source":{{"kind":"tool","callId":"c{n}"}}}}}}"#
        ),
        ("request/header", _) => {
            r#"{"header":{"config":{"provider":"p","model":"m"},"system":"s"},"reason":"initial"}"#
                .to_string()
        }
        _ => format!(r#"{{"n":{n}}}"#),
    }
}

fn intent(ty: &str, b: u8, len: u64) -> Option<String> {
    let surface = matches!(ty, "user/message" | "assistant/message" | "tool/result");
    let seq = |k: u8| u64::from(k) % len.max(1);
    match b % 6 {
        0 if surface => Some(r#"{"surfaceOp":"append"}"#.to_string()),
        1 if surface => Some(format!(
            r#"{{"surfaceOp":"append","sourceEventSeqs":[{}]}}"#,
            seq(b)
        )),
        2 if surface => Some(format!(
            r#"{{"surfaceOp":{{"op":"replace","start":{},"end":{}}},"sourceEventSeqs":[{},{}]}}"#,
            seq(b / 6),
            seq(b / 3),
            seq(b / 6),
            seq(b / 3)
        )),
        3 => Some(r#"{"ignorable":true}"#.to_string()),
        _ => None,
    }
}

fuzz_target!(|input: &[u8]| {
    let store = open_store(r#"{"eventTypes":["myapp/note"]}"#).expect("memory store");
    let s = create(store, "f");
    let mut len = 0u64;
    for (n, pair) in input.chunks(2).take(400).enumerate() {
        let (a, b) = (pair[0], *pair.get(1).unwrap_or(&0));
        let ty = TYPES[usize::from(a) % TYPES.len()];
        let (cty, cdata) = (c(ty), c(&data(ty, a / 16, n as u64)));
        let cintent = intent(ty, b, len).map(|i| c(&i));
        let ip = cintent.as_ref().map_or(ptr::null(), |i| i.as_ptr());
        // SAFETY: live handle, NUL-terminated strings (or NULL intent).
        let (st, _) =
            call(|out| unsafe { dsh_session_append(s, cty.as_ptr(), cdata.as_ptr(), ip, out) });
        if st == DSH_OK {
            len += 1;
        }
    }
    read_all(s);
    // SAFETY: live handle.
    let (_, before) = call(|out| unsafe { dsh_session_events(s, 0, u64::MAX, out) });
    // SAFETY: live handle, closed once.
    unsafe { call(|out| dsh_session_close(s, out)) };
    if len == 0 {
        // Nothing was stored: a session is made on its first event.
        close(ptr::null_mut(), store);
        return;
    }
    // What strict admission accepted opens again, with the same events first.
    let again = open_session(store, "f").unwrap_or_else(|e| panic!("reopen refused: {e:?}"));
    // SAFETY: live handle.
    let (_, after) = call(|out| unsafe { dsh_session_events(again, 0, u64::MAX, out) });
    let (before, after) = (
        ::dsh_session::json::parse(&before).unwrap(),
        ::dsh_session::json::parse(&after).unwrap(),
    );
    let (b, a) = (before.as_array().unwrap(), after.as_array().unwrap());
    assert_eq!(&a[..b.len()], &b[..], "the reopened log differs");
    read_all(again);
    close(again, store);
});
