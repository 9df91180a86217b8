//! What append accepts, open accepts: every append sequence replayed in
//! the default (strict) admission on JSONL (zstd and raw) and SQLite, then
//! flushed, closed and reopened, reopens with exactly the log it had before
//! close (repair may only add closers and the end-seed marker after it);
//! so do a windowed open and a fork at the end. The sequences are the
//! append steps of every session vector and long generated agent sessions
//! (the benchmark's generator) with malformed and host events mixed in.

mod support;

use std::ffi::CString;

use ::dsh_session::json::Value;
use ::dsh_session_ffi::*;
use serde_json::Value as J;
use support::*;

/// What the benchmark's generator needs from its crate.
mod abi {
    use std::ffi::CString;

    pub fn cstr(s: &str) -> CString {
        CString::new(s).expect("no NUL in generated text")
    }
}

#[allow(dead_code)]
#[path = "../../bench/benches/session/mix.rs"]
mod mix;

/// One append: type, data and intent as JSON text.
#[derive(Clone, Debug)]
struct Op {
    ty: String,
    data: String,
    intent: Option<String>,
}

impl Op {
    fn new(ty: &str, data: &str, intent: Option<&str>) -> Op {
        Op {
            ty: ty.to_string(),
            data: data.to_string(),
            intent: intent.map(str::to_string),
        }
    }
}

/// The host type every store of this file declares.
const DECLARED: &str = "myapp/note";

fn configs(dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let path = |name: &str| Value::str(dir.join(name).to_str().unwrap()).to_json();
    let types = format!(r#""eventTypes":["{DECLARED}"]"#);
    vec![
        (
            "jsonl-zstd",
            format!(r#"{{"backend":"jsonl","path":{},{types}}}"#, path("zstd")),
        ),
        (
            "jsonl-raw",
            format!(
                r#"{{"backend":"jsonl","path":{},"compression":"none",{types}}}"#,
                path("raw")
            ),
        ),
        (
            "sqlite",
            format!(r#"{{"backend":"sqlite","path":{},{types}}}"#, path("s.db")),
        ),
    ]
}

/// A session to write: its create options and its appends.
struct Script {
    id: String,
    seed: Option<String>,
    ops: Vec<Op>,
}

/// Counts of what a run did, so a test can tell it exercised both sides.
#[derive(Default, Debug)]
struct Tally {
    accepted: usize,
    refused: usize,
}

/// Statuses a refused append may give: never internal, never I/O.
fn is_refusal(st: dsh_status) -> bool {
    [
        DSH_E_REJECTED,
        DSH_E_INVALID_ARGUMENT,
        DSH_E_INVALID_JSON,
        DSH_E_CONFLICT,
    ]
    .contains(&st)
}

/// `events` up to (not including) the first event at or after `len`.
fn prefix(events: &Value, len: usize) -> Vec<Value> {
    events.as_array().unwrap()[..len].to_vec()
}

/// Write every script to a store of `config`, then reopen each session
/// (full, windowed, and a fork at its end) and check the logs.
fn check_scripts(kind: &str, config: &str, scripts: &[Script]) -> Tally {
    let mut tally = Tally::default();
    let mut before: Vec<Value> = Vec::new();
    {
        let store = Store::open(config).unwrap();
        for sc in scripts {
            let options = match &sc.seed {
                Some(seed) => format!(r#"{{"id":"{}","seed":{seed}}}"#, sc.id),
                None => format!(r#"{{"id":"{}"}}"#, sc.id),
            };
            let s = match store.create(&options) {
                Ok(s) => s,
                Err((st, text)) => {
                    assert!(is_refusal(st), "{kind} {}: create: {text}", sc.id);
                    tally.refused += 1;
                    store.create(&format!(r#"{{"id":"{}"}}"#, sc.id)).unwrap()
                }
            };
            for op in &sc.ops {
                let (st, text) = s.append(&op.ty, &op.data, op.intent.as_deref());
                if st == DSH_OK {
                    tally.accepted += 1;
                } else {
                    assert!(is_refusal(st), "{kind} {}: append {op:?}: {text}", sc.id);
                    tally.refused += 1;
                }
            }
            assert_eq!(s.flush().0, DSH_OK, "{kind} {}", sc.id);
            before.push(s.events());
            assert_eq!(s.close().0, DSH_OK);
        }
        assert_eq!(store.close().0, DSH_OK);
    }
    let mut reopened: Vec<Value> = Vec::new();
    {
        let store = Store::open(config).unwrap();
        for (sc, was) in scripts.iter().zip(&before) {
            if was.as_array().unwrap().is_empty() {
                // Nothing was written: a JSONL session is made on its first event.
                reopened.push(Value::Null);
                continue;
            }
            let (s, _) = store
                .open_session(&sc.id)
                .unwrap_or_else(|e| panic!("{kind} {}: reopen refused: {e:?}", sc.id));
            let now = s.events();
            let n = was.as_array().unwrap().len();
            assert_eq!(
                prefix(&now, n),
                prefix(was, n),
                "{kind} {}: the reopened log differs",
                sc.id
            );
            let child = s
                .fork(-1, &format!(r#"{{"id":"{}~fork"}}"#, sc.id))
                .unwrap_or_else(|e| panic!("{kind} {}: fork at the end refused: {e:?}", sc.id));
            assert_eq!(child.flush().0, DSH_OK);
            drop(child);
            reopened.push(now);
        }
        assert_eq!(store.close().0, DSH_OK);
    }
    let store = Store::open(config).unwrap();
    for (sc, now) in scripts.iter().zip(&reopened) {
        if now.is_null() {
            continue;
        }
        let (w, _) = store
            .open_windowed(&sc.id, Some(r#"{"window":16}"#))
            .unwrap_or_else(|e| panic!("{kind} {}: windowed reopen refused: {e:?}", sc.id));
        assert_eq!(&w.events(), now, "{kind} {}: windowed open differs", sc.id);
        drop(w);
        let (child, _) = store
            .open_session(&format!("{}~fork", sc.id))
            .unwrap_or_else(|e| panic!("{kind} {}: the fork does not reopen: {e:?}", sc.id));
        let n = now.as_array().unwrap().len();
        assert_eq!(
            strip_time(Value::Array(prefix(&child.events(), n))),
            strip_time(now.clone()),
            "{kind} {}: the fork's inherited prefix differs",
            sc.id
        );
    }
    tally
}

fn text_of(step: &J, key: &str) -> Option<String> {
    if let Some(t) = step.get(format!("{key}Text")) {
        return Some(t.as_str().unwrap().to_string());
    }
    step.get(key).map(J::to_string)
}

/// The create seed and append steps of every session vector.
fn vector_scripts() -> Vec<Script> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let v: J = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let Some(steps) = v.get("steps").and_then(J::as_array) else {
            continue;
        };
        let ops = steps
            .iter()
            .filter(|s| s["op"] == "append")
            .map(|s| Op {
                ty: s["type"].as_str().unwrap().to_string(),
                data: text_of(s, "data").unwrap_or_else(|| "null".into()),
                intent: text_of(s, "intent"),
            })
            .collect();
        out.push(Script {
            id: format!("v{i}"),
            seed: text_of(&v, "seed"),
            ops,
        });
    }
    out
}

#[test]
fn every_vector_append_sequence_reopens_identically_in_strict_admission() {
    let scripts = vector_scripts();
    assert!(scripts.len() > 300, "vectors found: {}", scripts.len());
    let dir = temp_dir("admission-vectors");
    for (kind, config) in configs(&dir) {
        let t = check_scripts(kind, &config, &scripts);
        // Both sides are exercised: strict admission refuses a good part
        // of what the vectors append, and accepts most of it.
        assert!(t.accepted > 2000 && t.refused > 200, "{kind}: {t:?}");
    }
}

/// Events strict admission must refuse, whatever the log holds.
fn refused_ops(n: usize) -> Vec<Op> {
    let user = r#"{"surfaceOp":"append"}"#;
    vec![
        Op::new("zz/undeclared", r#"{"x":1}"#, None),
        Op::new("mode/set", r#"{"mode":"plan"}"#, None),
        Op::new(
            "steering/message",
            r#"{"turn":1,"content":[],"source":{"kind":"user"}}"#,
            Some(r#"{"ignorable":true}"#),
        ),
        Op::new(
            "user/message",
            r#"{"id":"m","role":"user","content":"hi","source":{"kind":"user"}}"#,
            Some(user),
        ),
        Op::new(
            "user/message",
            r#"{"role":"user","content":[],"source":{"kind":"user"}}"#,
            Some(user),
        ),
        Op::new(
            "request/header",
            r#"{"header":{"config":{"provider":"p"}},"reason":"change"}"#,
            None,
        ),
        Op::new(
            "turn/end",
            &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}},"extra":true}}"#),
            None,
        ),
        Op::new(
            "turn/start",
            r#"{"turn":1,"trigger":{"kind":"user"}}"#,
            None,
        ),
        Op::new("tool/call", "{}", Some(r#"{"ignorable":true}"#)),
    ]
}

/// Log-only events strict admission accepts.
fn accepted_ops(n: usize) -> Vec<Op> {
    vec![
        Op::new(DECLARED, &format!(r#"{{"n":{n}}}"#), None),
        Op::new(
            "other/host-type",
            r#"{"opaque":[1,"two"]}"#,
            Some(r#"{"ignorable":true}"#),
        ),
    ]
}

/// Tiny splitmix, for where the mutations go.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// A generated agent session of `n` events with, before some of its events,
/// an event strict admission refuses, and in place of some of its chunks
/// (log-only, so no later seq moves) a host event it accepts.
fn generated_script(id: &str, n: usize, seed: u64) -> (Script, usize) {
    let stream = mix::generate(n);
    let mut dice = Dice(seed);
    let mut ops = Vec::new();
    let mut planted = 0;
    for (i, ev) in stream.events.iter().enumerate() {
        let text = |c: &CString| c.to_str().unwrap().to_string();
        let op = Op {
            ty: ev.ty.to_str().unwrap().to_string(),
            data: text(&ev.data),
            intent: ev.intent.as_ref().map(text),
        };
        if dice.below(25) == 0 {
            let refused = refused_ops(i);
            ops.push(refused[dice.below(refused.len() as u64) as usize].clone());
            planted += 1;
        }
        if op.ty == "assistant/chunk" && dice.below(15) == 0 {
            let accepted = accepted_ops(i);
            ops.push(accepted[dice.below(accepted.len() as u64) as usize].clone());
        } else {
            ops.push(op);
        }
    }
    let script = Script {
        id: id.to_string(),
        seed: None,
        ops,
    };
    (script, planted)
}

#[test]
fn generated_sessions_with_malformed_and_host_events_reopen_identically() {
    let dir = temp_dir("admission-generated");
    let scripts: Vec<(Script, usize)> = (0..3)
        .map(|k| generated_script(&format!("g{k}"), 1500 + 700 * k, 0xadd1 + k as u64))
        .collect();
    let planted: usize = scripts.iter().map(|s| s.1).sum();
    let scripts: Vec<Script> = scripts.into_iter().map(|s| s.0).collect();
    for (kind, config) in configs(&dir) {
        let t = check_scripts(kind, &config, &scripts);
        // Every planted event is refused, and nothing else is.
        assert_eq!(t.refused, planted, "{kind}: {t:?}");
    }
}
