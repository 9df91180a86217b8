//! The storage contract (docs/formats.md §1), run against the core `Store`
//! API (through tests/store_support, which takes the C ABI's JSON texts) on
//! every backend: memory, JSONL (zstd and raw lines), SQLite and
//! PostgreSQL (each test in a fresh schema of the server that
//! `DSH_TEST_POSTGRES_URL` names; skipped, saying so, without one).

mod store_support;

use ::dsh_session::json::Value;
use store_support::*;

/// One backend under test.
struct Fixture {
    config: String,
    durable: bool,
    _dir: Option<store_support::TempDir>,
}

impl Fixture {
    fn new(kind: &str) -> Fixture {
        let (config, durable, dir) = match kind {
            "memory" => ("{\"backend\":\"memory\"}".to_string(), false, None),
            "jsonl-zstd" | "jsonl-raw" => {
                let dir = temp_dir(kind);
                let compression = if kind == "jsonl-zstd" { "zstd" } else { "none" };
                let config = format!(
                    "{{\"backend\":\"jsonl\",\"path\":{},\"compression\":\"{compression}\"}}",
                    Value::str(dir.join("root").to_str().unwrap()).to_json()
                );
                (config, true, Some(dir))
            }
            "sqlite" => {
                let dir = temp_dir(kind);
                let config = format!(
                    "{{\"backend\":\"sqlite\",\"path\":{}}}",
                    Value::str(dir.join("sessions.db").to_str().unwrap()).to_json()
                );
                (config, true, Some(dir))
            }
            "postgres" => (
                postgres_config("").expect("checked by available()"),
                true,
                None,
            ),
            other => panic!("unknown backend {other}"),
        };
        Fixture {
            config: declaring(&config),
            durable,
            _dir: dir,
        }
    }

    fn store(&self) -> Store {
        Store::open(&self.config).unwrap_or_else(|e| panic!("store open {}: {e:?}", self.config))
    }

    /// The store to read back from: the same memory store, or a new process
    /// view of the durable one.
    fn reopen(&self, s: Store) -> Store {
        if !self.durable {
            return s;
        }
        let (st, text) = s.close();
        assert_eq!(st, DSH_OK, "store close: {text}");
        self.store()
    }
}

const USER: &str = r#"{"id":"u1","role":"user","content":[{"type":"text","text":"hi \ud800 there"}],"source":{"kind":"user"}}"#;
const APPEND: &str = r#"{"surfaceOp":"append"}"#;

fn chunk(i: usize) -> String {
    format!(r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"part {i}"}}}}"#)
}

/// A complete turn with every kind of event, including a chunk run that
/// packs, a tool call, a compaction replace and data over 4 KiB.
fn full_turn(s: &Session) {
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    s.append_ok("user/message", USER, Some(APPEND));
    s.append_ok("step/start", r#"{"turn":1,"step":1}"#, None);
    s.append_ok(
        "request/header",
        r#"{"header":{"config":{"provider":"p","model":"m"},"system":"sys"},"reason":"initial"}"#,
        None,
    );
    for i in 0..5 {
        s.append_ok("assistant/chunk", &chunk(i), None);
    }
    s.append_ok(
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":"{}"}}"#,
        None,
    );
    s.append_ok(
        "assistant/message",
        r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"part 0part 1"},{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},"usage":{"inputTokens":10,"outputTokens":2}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[4,5,6,7,8,9]}"#),
    );
    s.append_ok(
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"}"#,
        None,
    );
    let big = "x".repeat(9000);
    s.append_ok(
        "tool/result",
        &format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"t1","role":"user","content":[{{"type":"tool-result","toolCallId":"c1","content":[{{"type":"text","text":"{big}"}}]}}],"source":{{"kind":"tool","callId":"c1"}}}},"meta":{{"n":-1.5e-7}}}}"#
        ),
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[11]}"#),
    );
    s.append_ok("step/end", r#"{"turn":1,"step":1}"#, None);
    s.append_ok(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        None,
    );
    s.append_ok(
        "user/message",
        r#"{"id":"sum","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"compaction"}}"#,
        Some(r#"{"surfaceOp":{"op":"replace","start":1,"end":12},"sourceEventSeqs":[1,10,12]}"#),
    );
    s.append_ok("todo/write", r#"{"todos":[]}"#, None);
}

fn lossless_round_trip_of_every_event_shape(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store
        .create(r#"{"id":"a","cwd":"/tmp/project","agentPreset":"p"}"#)
        .unwrap();
    full_turn(&s);
    let written = s.events();
    let derived = s.derive();
    assert_eq!(s.close().0, DSH_OK);
    let store = f.reopen(store);
    let (s, opened) = store.open_session("a").unwrap();
    assert_eq!(
        opened.as_object().unwrap().get("repaired"),
        Some(&Value::Array(vec![]))
    );
    let read = s.events();
    let (written, read) = (written.as_array().unwrap(), read.as_array().unwrap());
    // Open appends the end-seed marker (docs/lifecycle.md §3); everything else is
    // the log exactly as appended, chunks included.
    assert_eq!(read.len(), written.len() + 1);
    assert_eq!(&read[..written.len()], &written[..]);
    let marker = read.last().unwrap().as_object().unwrap();
    assert_eq!(
        marker.get("type").and_then(Value::as_str),
        Some("session/end-seed")
    );
    assert_eq!(s.derive(), derived);
}

fn lazy_materialization(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store.create(r#"{"id":"empty"}"#).unwrap();
    assert_eq!(s.flush().0, DSH_OK);
    let ids: Vec<String> = store
        .list()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h.as_object()?.get("id")?.as_str().map(str::to_string))
        .collect();
    assert!(!ids.contains(&"empty".to_string()), "{ids:?}");
    drop(s);
    let store = f.reopen(store);
    let err = store.open_session("empty").err().expect("nothing stored");
    assert_eq!(err.0, DSH_E_NOT_FOUND, "{}", err.1);
    assert_eq!(rule(&err.1), "load.not-found");
}

fn header_is_kept_beside_the_log(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store
        .create(r#"{"id":"h","cwd":"/work/x","origin":"subagent","delegationDepth":2,"agentPreset":"coder"}"#)
        .unwrap();
    s.append_ok("plugin/note", "{}", None);
    drop(s);
    let store = f.reopen(store);
    let list = store.list();
    let h = list
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h.as_object().unwrap().get("id") == Some(&Value::str("h")));
    let h = h.expect("listed").as_object().unwrap();
    assert_eq!(h.get("cwd"), Some(&Value::str("/work/x")));
    assert_eq!(h.get("origin"), Some(&Value::str("subagent")));
    assert_eq!(h.get("delegationDepth"), Some(&Value::Number(2.0)));
    assert_eq!(h.get("agentPreset"), Some(&Value::str("coder")));
    assert!(h.get("revision").and_then(Value::as_str).is_some());
}

fn unknown_required_types_refuse_ignorable_ones_are_kept(kind: &str) {
    let f = Fixture::new(kind);
    // Only the reference's admission writes an undeclared type.
    let config = format!(r#"{{"admission":"reference",{}"#, &f.config[1..]);
    let store = Store::open(&config).unwrap();
    let s = store.create(r#"{"id":"u"}"#).unwrap();
    s.append_ok("plugin/unknown", r#"{"x":1}"#, None);
    drop(s);
    let store = if f.durable {
        drop(store);
        f.store()
    } else {
        store
    };
    let seed = r#"{"id":"i","seed":[{"type":"plugin/other","seq":0,"time":5,"data":{"y":[1,2]},"ignorable":true}]}"#;
    drop(store.create(seed).unwrap());
    let store = f.reopen(store);
    let err = store.open_session("u").err().expect("unknown type refused");
    assert_eq!(err.0, DSH_E_SCHEMA_MISMATCH, "{}", err.1);
    assert_eq!(rule(&err.1), "load.unknown-type");
    let (s, _) = store.open_session("i").unwrap();
    let events = strip_time(s.events());
    let first = &events.as_array().unwrap()[0];
    assert_eq!(
        first.to_json(),
        r#"{"type":"plugin/other","seq":0,"data":{"y":[1,2]},"ignorable":true}"#
    );
}

fn reopening_an_untouched_session_does_not_grow_its_log(kind: &str) {
    let f = Fixture::new(kind);
    let mut store = f.store();
    drop(store.create(r#"{"id":"r","seed":[]}"#).unwrap());
    let mut lengths = Vec::new();
    for _ in 0..3 {
        store = f.reopen(store);
        let (s, _) = store.open_session("r").unwrap();
        lengths.push(s.events().as_array().unwrap().len());
    }
    assert_eq!(lengths, vec![1, 1, 1]);
}

fn open_repairs_an_interrupted_turn_durably(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store.create(r#"{"id":"crash"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":3}"#, None);
    s.append_ok("step/start", r#"{"turn":3,"step":1}"#, None);
    s.append_ok(
        "assistant/message",
        r#"{"turn":3,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"x","arguments":"{}"},{"type":"tool-call","id":"c2","name":"y","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[]}"#),
    );
    s.append_ok(
        "tool/call",
        r#"{"turn":3,"step":1,"callId":"c1","name":"x","arguments":"{}"}"#,
        None,
    );
    drop(s);
    let store = f.reopen(store);
    let (s, opened) = store.open_session("crash").unwrap();
    let repaired = strip_time(opened.as_object().unwrap().get("repaired").unwrap().clone());
    let types = types_of(repaired.as_array().unwrap());
    assert_eq!(
        types,
        ["tool/result", "tool/result", "step/end", "turn/end"]
    );
    let events = s.events();
    let n = events.as_array().unwrap().len();
    assert_eq!(n, 4 + 4 + 1, "closers then the end-seed marker");
    drop(s);
    let store = f.reopen(store);
    let (s, opened) = store.open_session("crash").unwrap();
    assert_eq!(
        opened.as_object().unwrap().get("repaired"),
        Some(&Value::Array(vec![]))
    );
    assert_eq!(
        s.events().as_array().unwrap().len(),
        n,
        "repair was durable, nothing added"
    );
}

fn revision_changes_exactly_when_the_log_changes(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store.create(r#"{"id":"rev"}"#).unwrap();
    s.append_ok("plugin/a", "{}", None);
    assert_eq!(s.flush().0, DSH_OK);
    let revision = |store: &Store| {
        store.list().as_array().unwrap()[0]
            .as_object()
            .unwrap()
            .get("revision")
            .cloned()
            .unwrap()
    };
    let r1 = revision(&store);
    assert_eq!(revision(&store), r1, "reading changes nothing");
    s.append_ok("plugin/b", "{}", None);
    assert_eq!(s.flush().0, DSH_OK);
    let r2 = revision(&store);
    assert_ne!(r1, r2);
    assert_eq!(s.flush().0, DSH_OK);
    assert_eq!(
        revision(&store),
        r2,
        "a flush with nothing pending changes nothing"
    );
}

fn deleted_sessions_are_gone(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store.create(r#"{"id":"d"}"#).unwrap();
    s.append_ok("plugin/a", "{}", None);
    let (st, text) = store.delete("d");
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_CONFLICT, "store.delete-live")
    );
    drop(s);
    assert_eq!(store.delete("d").0, DSH_OK);
    assert_eq!(store.delete("d").0, DSH_E_NOT_FOUND);
    assert_eq!(store.open_session("d").err().unwrap().0, DSH_E_NOT_FOUND);
    assert!(
        store.create(r#"{"id":"d"}"#).is_ok(),
        "the id is free again"
    );
}

fn creating_a_stored_id_conflicts(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store.create(r#"{"id":"dup"}"#).unwrap();
    let live = store.create(r#"{"id":"dup"}"#).err().unwrap();
    assert_eq!(
        (live.0, rule(&live.1).as_str()),
        (DSH_E_CONFLICT, "store.duplicate-id")
    );
    s.append_ok("plugin/a", "{}", None);
    drop(s);
    let store = f.reopen(store);
    let stored = store.create(r#"{"id":"dup"}"#).err().unwrap();
    assert_eq!(
        (stored.0, rule(&stored.1).as_str()),
        (DSH_E_CONFLICT, "persist.exists-stored")
    );
}

fn forks_and_seeds_persist_their_whole_log(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store.create(r#"{"id":"src"}"#).unwrap();
    full_turn(&s);
    let child = s.fork(-1, r#"{"id":"kid"}"#).unwrap();
    let child_log = child.events();
    drop(child);
    drop(s);
    let store = f.reopen(store);
    let (child, _) = store.open_session("kid").unwrap();
    assert_eq!(
        child.events(),
        child_log,
        "seed + end-seed stored; reopening adds nothing"
    );
    let info = child.info();
    let header = info
        .as_object()
        .unwrap()
        .get("header")
        .unwrap()
        .as_object()
        .unwrap();
    assert_eq!(header.get("parentSession"), Some(&Value::str("src")));
}

macro_rules! contract {
    ($backend:ident, $kind:expr) => {
        mod $backend {
            #[test]
            fn lossless_round_trip_of_every_event_shape() {
                if super::available($kind) {
                    super::lossless_round_trip_of_every_event_shape($kind)
                }
            }
            #[test]
            fn lazy_materialization() {
                if super::available($kind) {
                    super::lazy_materialization($kind)
                }
            }
            #[test]
            fn header_is_kept_beside_the_log() {
                if super::available($kind) {
                    super::header_is_kept_beside_the_log($kind)
                }
            }
            #[test]
            fn unknown_required_types_refuse_ignorable_ones_are_kept() {
                if super::available($kind) {
                    super::unknown_required_types_refuse_ignorable_ones_are_kept($kind)
                }
            }
            #[test]
            fn reopening_an_untouched_session_does_not_grow_its_log() {
                if super::available($kind) {
                    super::reopening_an_untouched_session_does_not_grow_its_log($kind)
                }
            }
            #[test]
            fn open_repairs_an_interrupted_turn_durably() {
                if super::available($kind) {
                    super::open_repairs_an_interrupted_turn_durably($kind)
                }
            }
            #[test]
            fn revision_changes_exactly_when_the_log_changes() {
                if super::available($kind) {
                    super::revision_changes_exactly_when_the_log_changes($kind)
                }
            }
            #[test]
            fn deleted_sessions_are_gone() {
                if super::available($kind) {
                    super::deleted_sessions_are_gone($kind)
                }
            }
            #[test]
            fn creating_a_stored_id_conflicts() {
                if super::available($kind) {
                    super::creating_a_stored_id_conflicts($kind)
                }
            }
            #[test]
            fn inspect_reads_without_repairing() {
                if super::available($kind) {
                    super::inspect_reads_without_repairing($kind)
                }
            }
            #[test]
            fn forks_and_seeds_persist_their_whole_log() {
                if super::available($kind) {
                    super::forks_and_seeds_persist_their_whole_log($kind)
                }
            }
        }
    };
}

contract!(memory, "memory");
contract!(sqlite, "sqlite");
contract!(jsonl_zstd, "jsonl-zstd");
contract!(jsonl_raw, "jsonl-raw");
contract!(postgres, "postgres");

/// Whether the backend `kind` can run here: PostgreSQL needs a server
/// (`DSH_TEST_POSTGRES_URL`); without one its tests say they are skipped.
fn available(kind: &str) -> bool {
    kind != "postgres" || postgres_url().is_some()
}

fn inspect_reads_without_repairing(kind: &str) {
    let f = Fixture::new(kind);
    let store = f.store();
    let s = store.create(r#"{"id":"ins"}"#).unwrap();
    s.append_ok("turn/start", r#"{"turn":1}"#, None);
    s.append_ok("step/start", r#"{"turn":1,"step":1}"#, None);
    drop(s);
    let store = f.reopen(store);
    let inspect = || store.inspect("ins");
    let first = inspect();
    let o = first.as_object().unwrap();
    assert_eq!(o.get("torn"), Some(&Value::Bool(false)));
    let events = o.get("events").unwrap().as_array().unwrap();
    assert_eq!(events.len(), 4, "2 stored + step/end + turn/end closers");
    assert_eq!(o.get("repair").unwrap().as_array().unwrap().len(), 2);
    assert_eq!(
        inspect(),
        first,
        "inspect wrote nothing: same revision, same result"
    );
    let (s, opened) = store.open_session("ins").unwrap();
    assert_eq!(
        opened
            .as_object()
            .unwrap()
            .get("repaired")
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(s.events().as_array().unwrap().len(), 5);
}
