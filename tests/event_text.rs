//! Events are kept as canonical JSON text and logs are shared by forks:
//! what a caller sees must be exactly what the value-tree engine gave
//! (`JSON.stringify` of the parsed input), whatever form the input had,
//! and a fork must share, never alias, its parent's events.

mod store_support;
use store_support as support;

use std::sync::Arc;

use ::dsh_session::engine::chunked::CHUNK;
use ::dsh_session::engine::event::Checked;
use ::dsh_session::engine::log::Log;
use ::dsh_session::engine::seed::SeedMode;
use ::dsh_session::engine::{Markers, Policy, Seed, Session};
use ::dsh_session::json::{self, Value};

fn header(id: &str) -> Value {
    json::parse(&format!(r#"{{"version":0,"id":"{id}","createdAt":1}}"#)).unwrap()
}

/// True when logs `a` and `b` share event `i`: the same packed chunk, or
/// the same event object.
fn shared(a: &Log, b: &Log, i: usize) -> bool {
    a.shares_chunk(i / CHUNK, b)
        || matches!((a.resident(i), b.resident(i)), (Some(x), Some(y)) if Arc::ptr_eq(x, y))
}

fn session(id: &str) -> Session {
    Session::new(id, header(id), Markers::Required, Policy::reference()).unwrap()
}

fn user(i: usize) -> String {
    format!(
        r#"{{"id":"u{i}","role":"user","content":[{{"type":"text","text":"hello {i}"}}],"source":{{"kind":"user"}}}}"#
    )
}

const APPEND: Option<&str> = Some(r#"{"surfaceOp":"append"}"#);

#[test]
fn appended_data_is_stored_as_json_stringify_writes_it() {
    let mut s = session("a");
    // (input, what JSON.stringify(JSON.parse(input)) gives)
    let cases = [
        (
            r#"{"a":1,"b":[true,null,"x"]}"#,
            r#"{"a":1,"b":[true,null,"x"]}"#,
        ),
        ("{ \"a\" : 1 ,\n \"b\" : [ ] }", r#"{"a":1,"b":[]}"#),
        (r#"{"a":1,"a":2,"b":3}"#, r#"{"a":2,"b":3}"#),
        (r#"{"b":1,"2":2,"1":3}"#, r#"{"1":3,"2":2,"b":1}"#),
        (
            r#"{"n":1.50,"e":1E3,"big":1e21,"small":0.0000001}"#,
            r#"{"n":1.5,"e":1000,"big":1e+21,"small":1e-7}"#,
        ),
        (
            r#"{"s":"\u0041\/\u00e9\ud83d\ude00"}"#,
            "{\"s\":\"A/\u{e9}\u{1F600}\"}",
        ),
        (r#"{"lone":"\uD800"}"#, r#"{"lone":"\ud800"}"#),
        (r#"{"c":"\u001F\u0008"}"#, r#"{"c":"\u001f\b"}"#),
        (r#""just a string""#, r#""just a string""#),
        ("[1,2,3]", "[1,2,3]"),
    ];
    for (i, (input, want)) in cases.iter().enumerate() {
        let e = s
            .append_text("plugin/x", *input, None, 10 + i as i64)
            .unwrap();
        assert_eq!(e.data_text(), *want, "input {input}");
        // The whole event text is the envelope around exactly that data.
        let text = format!(
            r#"{{"type":"plugin/x","seq":{},"time":{},"data":{want}}}"#,
            e.seq,
            10 + i
        );
        assert_eq!(e.text(), text);
        // A tree built on demand agrees with the text.
        assert_eq!(e.data().to_json(), *want);
    }
}

#[test]
fn data_json_cannot_keep_is_refused_and_changes_nothing() {
    let mut s = session("b");
    for bad in [r#"{"v":-0}"#, r#"{"v":1e400}"#, "[-0.0]"] {
        let err = s.append_text("plugin/x", bad, None, 1).unwrap_err();
        assert_eq!(err.rule, "json.not-lossless", "{bad}");
    }
    let err = s.append_text("plugin/x", "{\"a\":", None, 1).unwrap_err();
    assert_eq!(err.rule, "json.parse");
    assert!(s.events().is_empty());
}

#[test]
fn a_fork_at_the_last_event_shares_events_surface_and_messages() {
    let mut parent = session("p");
    for i in 0..10_000 {
        parent
            .append_text("user/message", &user(i), APPEND, i as i64)
            .unwrap();
        parent
            .append_text("plugin/x", "{}", None, i as i64)
            .unwrap();
    }
    let before = parent.derive_json();
    let len = parent.fork_len(None).unwrap();
    assert_eq!(len, 20_000);
    let mut child = parent.fork(len, "c", 99).unwrap();
    // Inherited events are the parent's own (shared), plus the marker.
    assert_eq!(child.events().len(), len + 1);
    for i in [0, 4095, 4096, 12_345, len - 1] {
        assert!(shared(parent.events(), child.events(), i), "{i}");
    }
    assert!(child.events().get(len).unwrap().is("session/end-seed"));
    assert_eq!(child.surface().nodes(), parent.surface().nodes());
    assert_eq!(child.derive_json(), before);
    // Appends on either side stay on that side.
    child
        .append_text("user/message", &user(1_000_000), APPEND, 1)
        .unwrap();
    parent.append_text("plugin/y", "{}", None, 1).unwrap();
    assert_eq!(parent.events().len(), len + 1);
    assert!(parent.events().get(len).unwrap().is("plugin/y"));
    assert_eq!(child.events().len(), len + 2);
    assert_eq!(parent.derive_json(), before);
    assert_ne!(child.derive_json(), before);
}

#[test]
fn a_fork_at_an_earlier_boundary_shares_the_prefix_and_refolds_its_surface() {
    let mut parent = session("p");
    for i in 0..9_000 {
        parent
            .append_text("user/message", &user(i), APPEND, 1)
            .unwrap();
    }
    let boundary = Value::Number(4_999.0);
    let len = parent.fork_len(Some(&boundary)).unwrap();
    let child = parent.fork(len, "c", 2).unwrap();
    assert_eq!(child.events().len(), 5_001);
    // Whole chunks are shared; the chunk the prefix ends in is copied.
    assert!(shared(parent.events(), child.events(), 4_095));
    assert!(!shared(parent.events(), child.events(), 4_999));
    assert_eq!(
        parent.events().get(4_999).unwrap().text(),
        child.events().get(4_999).unwrap().text()
    );
    let nodes: Vec<u64> = (0..5_000).collect();
    assert_eq!(child.surface().nodes().to_vec(), nodes);
}

#[test]
fn a_fork_checks_each_inherited_event_once() {
    let mut parent = session("p");
    parent
        .append_text("user/message", &user(0), APPEND, 1)
        .unwrap();
    let e = parent.events().get(0).unwrap();
    assert!(!e.is_checked(Checked::SHAPE));
    let len = parent.fork_len(None).unwrap();
    parent.fork(len, "c1", 1).unwrap();
    assert!(e.is_checked(Checked::SHAPE | Checked::LOSSLESS));
}

#[test]
fn a_seed_given_as_values_and_the_same_events_as_text_make_the_same_session() {
    let mut src = session("s");
    for i in 0..50 {
        src.append_text("user/message", &user(i), APPEND, 1)
            .unwrap();
    }
    let values: Vec<Value> = src.events().iter().map(|e| e.to_value()).collect();
    let mut a = Session::from_seed(
        "a",
        header("a"),
        Seed::Values(values),
        SeedMode::Snapshot,
        (Markers::Required, Policy::reference()),
        5,
    )
    .unwrap();
    let mut b = Session::from_seed(
        "a",
        header("a"),
        Seed::Events(src.events().iter().collect()),
        SeedMode::Snapshot,
        (Markers::Required, Policy::reference()),
        5,
    )
    .unwrap();
    let texts = |s: &Session| {
        s.events()
            .iter()
            .map(|e| e.text().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(texts(&a), texts(&b));
    assert_eq!(a.derive_json(), b.derive_json());
}

/// Open a raw JSONL log (no compression) written by hand and return the
/// text of every event the opened session holds.
fn open_texts(name: &str, lines: &[String]) -> Vec<String> {
    use ::dsh_session::store::{BackendConfig, Store, StoreConfig};
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (dir, _) = support::raw_jsonl_store(name, "z", &lines);
    let store = Store::open(StoreConfig::new(BackendConfig::Jsonl {
        path: dir.join("root"),
        zstd: false,
    }))
    .unwrap();
    let s = store.open_session("z").unwrap().session;
    let texts = s
        .with(|s| Ok(s.events().iter().map(|e| e.text().to_string()).collect()))
        .unwrap();
    s.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    texts
}

#[test]
fn open_gives_the_same_events_for_canonical_and_non_canonical_lines() {
    let mut src = session("z");
    for i in 0..20 {
        src.append_text("user/message", &user(i), APPEND, 1)
            .unwrap();
        src.append_text("request/context", r#"{"k":[1,2]}"#, None, 1)
            .unwrap();
    }
    let canonical: Vec<String> = src.events().iter().map(|e| e.text().to_string()).collect();
    // The same log with whitespace, key order and escapes a foreign writer
    // might use: the value path must read it to the same events.
    let foreign: Vec<String> = canonical
        .iter()
        .enumerate()
        .map(|(i, l)| match i % 3 {
            0 => l.replace(",\"", ", \""),
            1 => l.replace("hello", "\\u0068ello"),
            _ => l.clone(),
        })
        .collect();
    let a = open_texts("canonical", &canonical);
    let b = open_texts("foreign", &foreign);
    // Both end with the end-seed marker open appends (its time is now).
    let n = canonical.len();
    assert_eq!((a.len(), b.len()), (n + 1, n + 1));
    assert_eq!(a[..n], b[..n]);
    assert_eq!(a[..n], canonical[..]);
    assert!(a[n].contains("session/end-seed") && b[n].contains("session/end-seed"));
}

/// The same batch as canonical text (read in place) and with whitespace
/// (parsed to values) appends the same events, or fails with the same
/// error at the same index and changes nothing.
#[test]
fn a_batch_appends_the_same_whether_its_text_is_canonical_or_not() {
    let u = user(1);
    let items = [
        // Non-ASCII and escapes in data; intent absent, null, append,
        // replace with sources; an extra item key; a type with an escape.
        r#"{"type":"plugin/é","data":{"t":"a\"b\\c\n","n":[1.5,-2,1e+21]}}"#.to_string(),
        format!(r#"{{"type":"user/message","data":{u},"intent":{{"surfaceOp":"append"}}}}"#),
        r#"{"type":"plugin/x","data":null,"intent":null,"extra":[1]}"#.to_string(),
        format!(
            r#"{{"data":{u},"type":"user/message","intent":{{"surfaceOp":{{"op":"replace","start":2,"end":2}},"sourceEventSeqs":[2]}}}}"#
        ),
        r#"{"type":"plugin/\u0001","data":{}}"#.to_string(),
    ];
    let spaced = |t: &str| t.replace(":", " : ").replace(",\"", " , \"");
    let run = |batch: &str| {
        let mut s = session("batch");
        s.append_text("plugin/first", "{}", None, 1).unwrap();
        let r = s.append_batch_text(batch, 2);
        let texts: Vec<String> = s.events().iter().map(|e| e.text().to_string()).collect();
        (
            r.map(|v| v.len()).map_err(|e| (e.rule, e.message, e.index)),
            texts,
        )
    };
    let all = format!("[{}]", items.join(","));
    assert!(json::canon::is_canonical(&all));
    let (fast, fast_texts) = run(&all);
    let (slow, slow_texts) = run(&spaced(&all));
    assert!(!json::canon::is_canonical(&spaced(&all)));
    assert_eq!(fast, Ok(items.len()));
    assert_eq!((fast, fast_texts), (slow, slow_texts));

    // Failing items: the error, its index and the untouched log agree.
    for bad in [
        "1",
        r#"{"data":{}}"#,
        r#"{"type":7,"data":{}}"#,
        r#"{"type":"plugin/x"}"#,
        r#"{"type":"plugin/x","data":{},"intent":[1]}"#,
        r#"{"type":"user/message","data":{}}"#,
        r#"{"type":"request/header-delta","data":{}}"#,
        r#"{"type":"user/message","data":{},"intent":{"surfaceOp":{"op":"replace","start":9,"end":9}}}"#,
    ] {
        let batch = format!("[{},{bad}]", items[0]);
        assert!(json::canon::is_canonical(&batch), "{batch}");
        let (fast, fast_texts) = run(&batch);
        let (slow, slow_texts) = run(&spaced(&batch));
        let err = fast.clone().unwrap_err();
        assert_eq!(err.2, Some(1), "{bad}: {err:?}");
        assert_eq!(fast_texts.len(), 1, "{bad}: nothing of the batch stays");
        assert_eq!((fast, fast_texts), (slow, slow_texts), "{bad}");
    }
    for not_array in ["{}", "1", "\"[]\""] {
        assert_eq!(run(not_array).0, run(&format!(" {not_array} ")).0);
        assert_eq!(run(not_array).0.unwrap_err().0, "arg.batch");
    }
}
