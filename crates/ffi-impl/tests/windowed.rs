//! `dsh_session_open_windowed`: a session opened with only a tail window
//! resident answers every call exactly like a fully resident twin, also
//! when a call reaches into evicted events (reads, derives after a
//! compaction, old tool-result rewrites, forks) and after the window moved
//! over events appended since the open.

mod support;

use std::ptr;

use ::dsh_session::json::Value;
use ::dsh_session_ffi::*;
use support::{c, call, parse, postgres_config, rule, strip_time, temp_dir, Session, Store};

/// Appends the same generated events to every session it is given.
struct Gen {
    turn: u64,
    seq: u64,
    /// The live surface as (seq, turn); turn 0 marks compaction summaries.
    surface: Vec<(u64, u64)>,
    /// Every tool result: (seq, turn).
    results: Vec<(u64, u64)>,
    /// The seq of every `turn/end`.
    turn_ends: Vec<u64>,
    /// Text added to every tool result (to make a session long in bytes).
    pad: String,
}

fn result_data(turn: u64, text: &str) -> String {
    format!(
        r#"{{"turn":{turn},"step":1,"message":{{"source":{{"kind":"tool","callId":"call-{turn}"}},"content":[{{"type":"tool-result","toolCallId":"call-{turn}","content":[{{"type":"text","text":"{text}"}}]}}],"role":"user","id":"r-{turn}"}},"meta":{{"bytes":{}}}}}"#,
        text.len()
    )
}

impl Gen {
    fn new() -> Gen {
        Gen {
            turn: 0,
            seq: 0,
            surface: Vec::new(),
            results: Vec::new(),
            turn_ends: Vec::new(),
            pad: String::new(),
        }
    }

    /// Append one event to every session; all must agree.
    fn push(&mut self, to: &[&Session], ty: &str, data: &str, intent: Option<&str>) -> u64 {
        let mut first: Option<Value> = None;
        for s in to {
            let v = strip_time(s.append_ok(ty, data, intent));
            match &first {
                None => first = Some(v),
                Some(f) => assert_eq!(&v, f, "{ty} at seq {}", self.seq),
            }
        }
        self.seq += 1;
        self.seq - 1
    }

    fn turn(&mut self, to: &[&Session]) {
        self.turn += 1;
        let t = self.turn;
        self.push(to, "turn/start", &format!(r#"{{"turn":{t}}}"#), None);
        if t % 40 == 1 {
            let header = format!(
                r#"{{"header":{{"config":{{"provider":"p","model":"m{t}"}},"system":"be brief","tools":[]}},"reason":"{}"}}"#,
                if t == 1 { "initial" } else { "resume" }
            );
            self.push(to, "request/header", &header, None);
        }
        let append = Some(r#"{"surfaceOp":"append"}"#);
        let user = format!(
            r#"{{"id":"u-{t}","role":"user","content":[{{"type":"text","text":"question {t}"}}],"source":{{"kind":"user"}}}}"#
        );
        let seq = self.push(to, "user/message", &user, append);
        self.surface.push((seq, t));
        self.push(
            to,
            "step/start",
            &format!(r#"{{"turn":{t},"step":1}}"#),
            None,
        );
        let message = format!(
            r#"{{"turn":{t},"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"answer {t}"}},{{"type":"tool-call","id":"call-{t}","name":"grep","arguments":"{{}}"}}],"source":{{"kind":"model","provider":"p","model":"m"}},"id":"a-{t}"}}}}"#
        );
        let seq = self.push(to, "assistant/message", &message, append);
        self.surface.push((seq, t));
        let call_seq = self.push(
            to,
            "tool/call",
            &format!(
                r#"{{"turn":{t},"step":1,"callId":"call-{t}","name":"grep","arguments":"{{}}"}}"#
            ),
            None,
        );
        let intent = format!(r#"{{"surfaceOp":"append","sourceEventSeqs":[{call_seq}]}}"#);
        let seq = self.push(
            to,
            "tool/result",
            &result_data(t, &format!("output {t}{}", self.pad)),
            Some(&intent),
        );
        self.surface.push((seq, t));
        self.results.push((seq, t));
        self.push(to, "step/end", &format!(r#"{{"turn":{t},"step":1}}"#), None);
        let end = self.push(
            to,
            "turn/end",
            &format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
            None,
        );
        self.turn_ends.push(end);
        if t % 100 == 0 {
            self.compact(to, t - 99, t - 50);
        }
    }

    /// Replace the surface nodes of turns `from..=to` by one summary.
    fn compact(&mut self, to_sessions: &[&Session], from: u64, to: u64) {
        let a = self
            .surface
            .iter()
            .position(|&(_, t)| t >= from && t <= to)
            .expect("nodes of those turns");
        let b = self
            .surface
            .iter()
            .rposition(|&(_, t)| t >= from && t <= to)
            .unwrap();
        let shadowed: Vec<String> = self.surface[a..=b]
            .iter()
            .map(|n| n.0.to_string())
            .collect();
        self.push(to_sessions, "compaction/start", r#"{"turn":null}"#, None);
        let intent = format!(
            r#"{{"surfaceOp":{{"op":"replace","start":{},"end":{}}},"sourceEventSeqs":[{}]}}"#,
            self.surface[a].0,
            self.surface[b].0,
            shadowed.join(",")
        );
        let summary = format!(
            r#"{{"id":"c-{}","role":"user","content":[{{"type":"text","text":"summary of turns {from}-{to}"}}],"source":{{"kind":"compaction"}}}}"#,
            self.seq
        );
        let seq = self.push(to_sessions, "user/message", &summary, Some(&intent));
        self.surface.splice(a..=b, [(seq, 0)]);
        self.push(to_sessions, "compaction/end", r#"{"turn":null}"#, None);
    }
}

fn events_range(s: &Session, from: u64, to: u64) -> Value {
    // SAFETY: live handle.
    let (st, text) = call(|out| unsafe { dsh_session_events(s.0, from, to, out) });
    assert_eq!(st, DSH_OK, "{text}");
    strip_time(parse(&text))
}

fn text_of(
    s: &Session,
    f: unsafe extern "C" fn(*mut dsh_session, *mut dsh_buf) -> dsh_status,
) -> String {
    // SAFETY: live handle; `f` is one of the session read calls.
    let (st, text) = call(|out| unsafe { f(s.0, out) });
    assert_eq!(st, DSH_OK, "{text}");
    text
}

fn derive_since(s: &Session, generation: u64, count: u64) -> Value {
    // SAFETY: live handle.
    let (st, text) = call(|out| unsafe { dsh_session_derive_since(s.0, generation, count, out) });
    assert_eq!(st, DSH_OK, "{text}");
    parse(&text)
}

fn cursor(d: &Value) -> (u64, u64) {
    let o = d.as_object().unwrap();
    (
        o.get("generation").unwrap().as_safe_u64().unwrap(),
        o.get("count").unwrap().as_safe_u64().unwrap(),
    )
}

/// `info` without the header (whose `createdAt` differs between stores).
fn info(s: &Session) -> Value {
    let mut v = s.info();
    if let Value::Object(o) = &mut v {
        o.remove("header");
    }
    v
}

/// Every read call answers the same on both sessions.
fn same_reads(w: &Session, twin: &Session, what: &str) {
    let len = info(twin)
        .as_object()
        .and_then(|o| o.get("length"))
        .and_then(Value::as_safe_u64)
        .unwrap();
    assert_eq!(info(w), info(twin), "{what}: info");
    assert_eq!(
        strip_time(w.events()),
        strip_time(twin.events()),
        "{what}: events"
    );
    for (a, b) in [
        (0, 10),
        (4090, 4100),
        (len / 2, len / 2 + 3),
        (len - 5, len),
    ] {
        assert_eq!(
            events_range(w, a, b),
            events_range(twin, a, b),
            "{what}: events {a}..{b}"
        );
    }
    for f in [
        dsh_session_derive,
        dsh_session_surface,
        dsh_session_request_header,
        dsh_session_request_context,
    ] {
        assert_eq!(text_of(w, f), text_of(twin, f), "{what}");
    }
    assert_eq!(
        derive_since(w, 0, 0),
        derive_since(twin, 0, 0),
        "{what}: derive_since"
    );
}

fn windowed_matches_a_full_twin(config: &str, tag: &str) {
    let dir = temp_dir(tag);
    let config = config.replace("DIR", &dir.display().to_string());
    let store = Store::open(&config).unwrap();
    let mem = Store::open(r#"{"backend":"memory"}"#).unwrap();
    let twin = mem.create(r#"{"id":"w"}"#).unwrap();
    let mut gen = Gen::new();
    {
        let w = store.create(r#"{"id":"w"}"#).unwrap();
        while gen.seq < 3 * 4096 + 1500 {
            gen.turn(&[&w, &twin]);
        }
        let (st, text) = w.close();
        assert_eq!(st, DSH_OK, "{text}");
    }
    // The stored session opened with a small window.
    let (w, opened) = store.open_windowed("w", Some(r#"{"window":100}"#)).unwrap();
    assert_eq!(
        opened.as_object().unwrap().get("repaired").unwrap(),
        &Value::Array(Vec::new())
    );
    // The memory twin went through no open: give it the end-seed marker
    // the open appended, by opening it too.
    let (st, text) = twin.close();
    assert_eq!(st, DSH_OK, "{text}");
    let (twin, _) = mem.open_session("w").unwrap();
    gen.seq += 1;
    same_reads(&w, &twin, "after open");

    // A rewrite of an evicted tool result: accepted alike...
    let live: Vec<(u64, u64)> = gen
        .results
        .iter()
        .copied()
        .filter(|(r, _)| gen.surface.iter().any(|n| n.0 == *r))
        .collect();
    assert!(live[5].0 < 4096, "the rewritten results are evicted");
    let (old, t) = live[0];
    let intent = format!(
        r#"{{"surfaceOp":{{"op":"replace","start":{old},"end":{old}}},"sourceEventSeqs":[{old}]}}"#
    );
    gen.push(
        &[&w, &twin],
        "tool/result",
        &result_data(t, "rewritten"),
        Some(&intent),
    );
    // ...and a rewrite that changes the call id is refused alike.
    let (old, t) = live[5];
    let bad = result_data(t, "x").replace(
        &format!("\"toolCallId\":\"call-{t}\""),
        "\"toolCallId\":\"other\"",
    );
    let intent = format!(
        r#"{{"surfaceOp":{{"op":"replace","start":{old},"end":{old}}},"sourceEventSeqs":[{old}]}}"#
    );
    let (st_w, text_w) = w.append("tool/result", &bad, Some(&intent));
    let (st_t, text_t) = twin.append("tool/result", &bad, Some(&intent));
    assert_eq!((st_w, rule(&text_w)), (st_t, rule(&text_t)));
    assert_eq!(st_w, DSH_E_REJECTED, "{text_w}");
    same_reads(&w, &twin, "after the rewrites");

    // A compaction of old turns resets a held cursor the same way.
    let held = derive_since(&w, 0, 0);
    let (g, n) = cursor(&held);
    gen.compact(&[&w, &twin], 150, 160);
    let (dw, dt) = (derive_since(&w, g, n), derive_since(&twin, g, n));
    assert_eq!(dw, dt);
    assert_eq!(
        dw.as_object().unwrap().get("reset"),
        Some(&Value::Bool(true))
    );

    // The window moves over events appended since the open (some still
    // queued in the writer when they are evicted).
    let before = gen.seq;
    while gen.seq < before + 2 * 4096 {
        gen.turn(&[&w, &twin]);
    }
    same_reads(&w, &twin, "after the window moved");
    assert_eq!(
        events_range(&w, before, before + 50),
        events_range(&twin, before, before + 50)
    );

    // A fork inside the evicted part: the same child on both sides.
    let boundary = gen.turn_ends[19] as i64;
    let (st_w, text_w) = w.fork(boundary - 1, "{}").err().unwrap();
    let (st_t, text_t) = twin.fork(boundary - 1, "{}").err().unwrap();
    assert_eq!((st_w, text_w), (st_t, text_t), "a boundary inside a turn");
    let cw = w.fork(boundary, r#"{"id":"cw"}"#).unwrap();
    let ct = twin.fork(boundary, r#"{"id":"ct"}"#).unwrap();
    assert_eq!(strip_time(cw.events()), strip_time(ct.events()));
    assert_eq!(cw.derive(), ct.derive());

    // Closed and opened fully, the windowed session's log is the twin's.
    let (st, text) = w.close();
    assert_eq!(st, DSH_OK, "{text}");
    let (full, _) = store.open_session("w").unwrap();
    let (st, text) = twin.close();
    assert_eq!(st, DSH_OK, "{text}");
    let (twin, _) = mem.open_session("w").unwrap();
    assert_eq!(strip_time(full.events()), strip_time(twin.events()));
    assert_eq!(full.derive(), twin.derive());
    drop((full, cw, ct, twin));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_windowed_jsonl_session_matches_a_full_twin() {
    windowed_matches_a_full_twin(r#"{"backend":"jsonl","path":"DIR"}"#, "win-jsonl");
}

#[test]
fn a_windowed_raw_jsonl_session_matches_a_full_twin() {
    windowed_matches_a_full_twin(
        r#"{"backend":"jsonl","path":"DIR","compression":"none"}"#,
        "win-jsonl-raw",
    );
}

#[test]
fn a_windowed_sqlite_session_matches_a_full_twin() {
    windowed_matches_a_full_twin(r#"{"backend":"sqlite","path":"DIR/s.db"}"#, "win-sqlite");
}

#[test]
fn a_windowed_postgres_session_matches_a_full_twin() {
    let Some(config) = postgres_config("") else {
        return;
    };
    windowed_matches_a_full_twin(&config, "win-postgres");
}

#[test]
fn window_options_are_checked() {
    let dir = temp_dir("win-options");
    let store = Store::open(&format!(
        r#"{{"backend":"jsonl","path":"{}"}}"#,
        dir.display()
    ))
    .unwrap();
    let s = store.create(r#"{"id":"o"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    s.close();
    for (options, status, want) in [
        (r#"{"window":-1}"#, DSH_E_INVALID_ARGUMENT, "arg.window"),
        (r#"{"window":1.5}"#, DSH_E_INVALID_ARGUMENT, "arg.window"),
        (
            r#"{"size":10}"#,
            DSH_E_INVALID_ARGUMENT,
            "arg.option-unknown",
        ),
        (r#"[1]"#, DSH_E_INVALID_ARGUMENT, ""),
        (r#"{"window":"#, DSH_E_INVALID_JSON, ""),
    ] {
        let Err((st, text)) = store.open_windowed("o", Some(options)) else {
            panic!("{options} was accepted")
        };
        assert_eq!(st, status, "{options}: {text}");
        if !want.is_empty() {
            assert_eq!(rule(&text), want, "{options}");
        }
    }
    // NULL options and a missing session.
    let (w, _) = store.open_windowed("o", None).unwrap();
    assert_eq!(
        w.info().as_object().unwrap().get("openTurn"),
        Some(&Value::Null)
    );
    let Err((st, _)) = store.open_windowed("missing", None) else {
        panic!("a missing session opened")
    };
    assert_eq!(st, DSH_E_NOT_FOUND);
    let mut out_session = ptr::null_mut();
    let id = c("o");
    // SAFETY: a NULL store is checked.
    let (st, _) = call(|out| unsafe {
        dsh_session_open_windowed(
            ptr::null_mut(),
            id.as_ptr(),
            ptr::null(),
            &mut out_session,
            out,
        )
    });
    assert_eq!(st, DSH_E_INVALID_ARGUMENT);
    assert!(out_session.is_null());
    drop(w);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_memory_store_session_opens_windowed_fully_resident() {
    let store = Store::open(r#"{"backend":"memory"}"#).unwrap();
    let s = store.create(r#"{"id":"m"}"#).unwrap();
    let mut gen = Gen::new();
    while gen.seq < 4096 + 100 {
        gen.turn(&[&s]);
    }
    let before = strip_time(s.events());
    s.close();
    let (w, _) = store.open_windowed("m", Some(r#"{"window":0}"#)).unwrap();
    let after = strip_time(w.events());
    // The same events plus the end-seed marker of the open.
    let (Value::Array(b), Value::Array(a)) = (&before, &after) else {
        panic!("arrays")
    };
    assert_eq!(&a[..b.len()], &b[..]);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// A log that ends inside a long turn (its `turn/start` far before the
/// window): the windowed open appends the same closers as a full open.
#[test]
fn a_windowed_open_repairs_like_a_full_open() {
    for compression in ["zstd", "none"] {
        let dir = temp_dir(&format!("win-repair-{compression}"));
        let copy = temp_dir(&format!("win-repair-copy-{compression}"));
        let config = |d: &std::path::Path| {
            format!(
                r#"{{"backend":"jsonl","path":"{}","compression":"{compression}"}}"#,
                d.display()
            )
        };
        {
            let store = Store::open(&config(&dir)).unwrap();
            let s = store.create(r#"{"id":"r"}"#).unwrap();
            let append = Some(r#"{"surfaceOp":"append"}"#);
            s.append_ok("turn/start", r#"{"turn":1}"#, None);
            s.append_ok(
                "user/message",
                r#"{"id":"u","role":"user","content":[{"type":"text","text":"go"}],"source":{"kind":"user"}}"#,
                append,
            );
            s.append_ok("step/start", r#"{"turn":1,"step":1}"#, None);
            for i in 0..9000 {
                s.append_ok(
                    "assistant/chunk",
                    &format!(r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"c{i}"}}}}"#),
                    None,
                );
            }
            s.append_ok(
                "assistant/message",
                r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"k","name":"grep","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a"}}"#,
                append,
            );
            s.append_ok(
                "tool/call",
                r#"{"turn":1,"step":1,"callId":"k","name":"grep","arguments":"{}"}"#,
                None,
            );
            s.close();
        }
        copy_dir(&dir, &copy);
        let (a, b) = (
            Store::open(&config(&dir)).unwrap(),
            Store::open(&config(&copy)).unwrap(),
        );
        let (w, opened_w) = a.open_windowed("r", Some(r#"{"window":100}"#)).unwrap();
        let (f, opened_f) = b.open_session("r").unwrap();
        let repaired =
            |v: &Value| strip_time(v.as_object().unwrap().get("repaired").unwrap().clone());
        assert_eq!(repaired(&opened_w), repaired(&opened_f), "{compression}");
        assert!(repaired(&opened_w).as_array().is_some_and(|a| a.len() >= 3));
        assert_eq!(strip_time(w.events()), strip_time(f.events()));
        assert_eq!(w.derive(), f.derive());
        assert_eq!(info(&w), info(&f));
        drop((w, f, a, b));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&copy);
    }
}

/// A fork of a session holding far more text than one write takes (16 MiB)
/// is queued whole and written in pieces, the first one creating the log:
/// opened again, fully and windowed, the child is the one the fork made.
#[test]
fn a_fork_of_a_long_session_is_written_in_pieces_and_reads_back() {
    let postgres = postgres_config("");
    let mut configs = vec![
        (r#"{"backend":"jsonl","path":"DIR"}"#, "fork-long-jsonl"),
        (
            r#"{"backend":"jsonl","path":"DIR","compression":"none"}"#,
            "fork-long-raw",
        ),
        (
            r#"{"backend":"sqlite","path":"DIR/s.db"}"#,
            "fork-long-sqlite",
        ),
    ];
    if let Some(c) = &postgres {
        configs.push((c.as_str(), "fork-long-postgres"));
    }
    for (config, tag) in configs {
        let dir = temp_dir(tag);
        let config = config.replace("DIR", &dir.display().to_string());
        let store = Store::open(&config).unwrap();
        let s = store.create(r#"{"id":"long"}"#).unwrap();
        let mut gen = Gen::new();
        gen.pad = "x".repeat(40_000);
        while gen.turn < 1100 {
            gen.turn(&[&s]);
        }
        let boundary = *gen.turn_ends.last().unwrap() as i64;
        let child = s.fork(boundary, r#"{"id":"child"}"#).unwrap();
        let want = (strip_time(child.events()), child.derive());
        for session in [child, s] {
            let (st, text) = session.close();
            assert_eq!(st, DSH_OK, "{tag}: {text}");
        }
        let (st, text) = store.close();
        assert_eq!(st, DSH_OK, "{tag}: {text}");
        if tag == "fork-long-jsonl" {
            // The header frame and at least three pieces of the seed (the
            // magic number may also occur inside compressed data, which
            // only adds to the count).
            let log = std::fs::read(dir.join("_no-cwd/child/session.jsonl.zstd")).unwrap();
            let frames = log
                .windows(4)
                .filter(|w| w == &[0x28, 0xb5, 0x2f, 0xfd])
                .count();
            assert!(frames >= 4, "{frames} frames");
        }
        let store = Store::open(&config).unwrap();
        let (full, _) = store.open_session("child").unwrap();
        assert_eq!((strip_time(full.events()), full.derive()), want, "{tag}");
        let (st, text) = full.close();
        assert_eq!(st, DSH_OK, "{tag}: {text}");
        let (w, _) = store
            .open_windowed("child", Some(r#"{"window":100}"#))
            .unwrap();
        assert_eq!((strip_time(w.events()), w.derive()), want, "{tag} windowed");
        drop(w);
        let (st, text) = store.close();
        assert_eq!(st, DSH_OK, "{tag}: {text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
