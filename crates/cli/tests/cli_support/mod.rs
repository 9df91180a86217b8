//! Stores for the `dsh-session` CLI tests, made through the library's
//! public API (`dsh_session::store::Store` for realistic sessions, the
//! `Backend` trait for a large log), and helpers to run the binary.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use assert_cmd::Command;
use dsh_session::engine::event::APPEND_ORDER;
use dsh_session::engine::Event;
use dsh_session::json::{JsString, Object, Value};
use dsh_session::store::{Backend, BackendConfig, CreateOptions, LiveSession, Store, StoreConfig};

/// A fresh directory for one test (mode 0755 under the system temp dir).
pub fn temp_dir(name: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("dsh-cli-{name}-"))
        .tempdir()
        .expect("temp dir");
    TempDir(dir)
}

/// A test's directory, removed with everything in it when dropped (declare
/// it before the stores that use it, so they close first).
pub struct TempDir(tempfile::TempDir);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// `dsh-session ARGS…`.
pub fn cli(args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("dsh-session").expect("binary built");
    cmd.args(args);
    cmd
}

/// Run `dsh-session ARGS…`: (exit status, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = cli(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

/// Parse the JSON the binary printed.
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A path as `&str`.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The configuration of a `backend` store at `path` that writes inside
/// appends (`compression`: a JSONL store's, zstd when `None`).
pub fn config(backend: &str, path: &Path, compression: Option<&str>) -> StoreConfig {
    let backend = match backend {
        "sqlite" => BackendConfig::Sqlite {
            path: path.to_path_buf(),
        },
        "jsonl" => BackendConfig::Jsonl {
            path: path.to_path_buf(),
            zstd: compression != Some("none"),
        },
        other => panic!("no backend {other}"),
    };
    let mut config = StoreConfig::new(backend);
    config.batch_window_ms = 0;
    config
}

fn append(s: &LiveSession, ty: &str, data: &str, intent: Option<&str>) {
    s.append_text(ty, data, intent)
        .unwrap_or_else(|e| panic!("append {ty}: {e}"));
}

const APPEND: Option<&str> = Some(r#"{"surfaceOp":"append"}"#);

/// Session `id`: a closed turn with streamed chunks, a tool call and its
/// result (seqs 0..=13), then a compaction replacing nodes 1..8 (14..=16)
/// and a second closed turn (17..=20).
pub fn demo_session(store: &Arc<Store>, id: &str) -> Arc<LiveSession> {
    let s = store
        .create(CreateOptions {
            header_fields: Object::from_iter([("cwd", Value::str("/home/demo"))]),
            ..CreateOptions::with_id(id)
        })
        .expect("create");
    append(&s, "turn/start", r#"{"turn":1}"#, None);
    append(
        &s,
        "user/message",
        r#"{"id":"u1","role":"user","content":[{"type":"text","text":"What is in README.md?"}],"source":{"kind":"user"}}"#,
        APPEND,
    );
    append(&s, "step/start", r#"{"turn":1,"step":1}"#, None);
    append(
        &s,
        "request/header",
        r#"{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"}},"reason":"initial"}"#,
        None,
    );
    append(
        &s,
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Let me look."}}"#,
        None,
    );
    append(
        &s,
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":"{}"}}"#,
        None,
    );
    append(
        &s,
        "assistant/message",
        r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"a1"},"usage":{"inputTokens":120,"outputTokens":30}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[4,5]}"#),
    );
    append(
        &s,
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"}"#,
        None,
    );
    append(
        &s,
        "tool/result",
        r#"{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a native session engine"}]}],"role":"user","id":"t1"}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[7]}"#),
    );
    append(&s, "step/end", r#"{"turn":1,"step":1}"#, None);
    append(&s, "step/start", r#"{"turn":1,"step":2}"#, None);
    append(
        &s,
        "assistant/message",
        r#"{"turn":1,"step":2,"message":{"role":"assistant","content":[{"type":"text","text":"It describes a session engine."}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"a2"},"usage":{"inputTokens":200,"outputTokens":10,"cacheReadTokens":100}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[]}"#),
    );
    append(&s, "step/end", r#"{"turn":1,"step":2}"#, None);
    append(
        &s,
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        None,
    );
    append(&s, "compaction/start", r#"{"turn":null}"#, None);
    append(
        &s,
        "user/message",
        r#"{"id":"sum1","role":"user","content":[{"type":"text","text":"Summary: README.md was read."}],"source":{"kind":"compaction"}}"#,
        Some(r#"{"surfaceOp":{"op":"replace","start":1,"end":8},"sourceEventSeqs":[1,6,8]}"#),
    );
    append(&s, "compaction/end", r#"{"turn":null}"#, None);
    append(&s, "turn/start", r#"{"turn":2}"#, None);
    append(
        &s,
        "user/message",
        r#"{"id":"u2","role":"user","content":[{"type":"text","text":"Thanks"}],"source":{"kind":"user"}}"#,
        APPEND,
    );
    append(
        &s,
        "assistant/message",
        r#"{"turn":2,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"You are welcome."}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"a3"}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[]}"#),
    );
    append(
        &s,
        "turn/end",
        r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        None,
    );
    s
}

/// Session `id` interrupted inside a turn: a tool call was recorded
/// (`tool/call` at seq 4) but no result (seqs 0..=4).
pub fn interrupted_session(store: &Arc<Store>, id: &str) -> Arc<LiveSession> {
    let s = store.create(CreateOptions::with_id(id)).expect("create");
    append(&s, "turn/start", r#"{"turn":1}"#, None);
    append(
        &s,
        "user/message",
        r#"{"id":"u1","role":"user","content":[{"type":"text","text":"run it"}],"source":{"kind":"user"}}"#,
        APPEND,
    );
    append(&s, "step/start", r#"{"turn":1,"step":1}"#, None);
    append(
        &s,
        "assistant/message",
        r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c9","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[]}"#),
    );
    append(
        &s,
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"c9","name":"bash","arguments":"{}"}"#,
        None,
    );
    s
}

/// A store at `config` holding `demo` (clean) and `open` (interrupted),
/// closed again so the binary can lock it. Returns the derived messages
/// of `demo` as the library computed them.
pub fn make_store(config: StoreConfig) -> String {
    let store = Store::open(config).expect("store");
    let demo = demo_session(&store, "demo");
    let derived = demo.derive_json().expect("derive");
    demo.close().expect("close");
    let open = interrupted_session(&store, "open");
    open.close().expect("close");
    store.flush().expect("flush");
    derived
}

/// One turn of 20 events starting at `seq` (turn `turn`): a run of 12
/// text chunks (packed by both backends), messages, a tool call and result.
fn big_turn(turn: u64, seq: u64, out: &mut Vec<Arc<Event>>) {
    let t = |ms: u64| 1_700_000_000_000 + (seq + ms) as i64 * 7;
    let n = |x: u64| Value::num(x as f64);
    let mut push = |ty: &str, data: Value, sources: Option<Value>, op: Option<&str>| {
        let seq_now = seq + out.len() as u64 % 20;
        let e = Event::new(
            JsString::from_str(ty),
            seq_now,
            t(out.len() as u64 % 20),
            data,
            sources,
            op.map(Value::str),
            APPEND_ORDER,
        );
        out.push(Arc::new(e));
    };
    let text = |x: &str| {
        Value::Array(vec![Value::obj([
            ("type", Value::str("text")),
            ("text", Value::str(x)),
        ])])
    };
    push("turn/start", Value::obj([("turn", n(turn))]), None, None);
    let user = Value::obj([
        ("id", Value::str(&format!("u{turn}"))),
        ("role", Value::str("user")),
        (
            "content",
            text(&format!("question {turn} with a bit of text é\u{1F600}")),
        ),
        ("source", Value::obj([("kind", Value::str("user"))])),
    ]);
    push("user/message", user, None, Some("append"));
    push(
        "step/start",
        Value::obj([("turn", n(turn)), ("step", n(1))]),
        None,
        None,
    );
    for k in 0..12 {
        let chunk = Value::obj([
            ("type", Value::str("text-delta")),
            ("index", n(0)),
            ("text", Value::str(&format!("part {k} of answer {turn}; "))),
        ]);
        push(
            "assistant/chunk",
            Value::obj([("turn", n(turn)), ("step", n(1)), ("chunk", chunk)]),
            None,
            None,
        );
    }
    let call = format!("c{turn}");
    let message = Value::obj([
        ("role", Value::str("assistant")),
        (
            "content",
            Value::Array(vec![Value::obj([
                ("type", Value::str("tool-call")),
                ("id", Value::str(&call)),
                ("name", Value::str("read")),
                ("arguments", Value::str("{\"path\":\"x\"}")),
            ])]),
        ),
        (
            "source",
            Value::obj([
                ("kind", Value::str("model")),
                ("provider", Value::str("p")),
                ("model", Value::str("m")),
            ]),
        ),
        ("id", Value::str(&format!("a{turn}"))),
    ]);
    let usage = Value::obj([("inputTokens", n(100 + turn)), ("outputTokens", n(7))]);
    push(
        "assistant/message",
        Value::obj([
            ("turn", n(turn)),
            ("step", n(1)),
            ("message", message),
            ("usage", usage),
        ]),
        Some(Value::Array(vec![n(seq + 3), n(seq + 14)])),
        Some("append"),
    );
    push(
        "tool/call",
        Value::obj([
            ("turn", n(turn)),
            ("step", n(1)),
            ("callId", Value::str(&call)),
            ("name", Value::str("read")),
        ]),
        None,
        None,
    );
    let result = Value::obj([
        (
            "source",
            Value::obj([("kind", Value::str("tool")), ("callId", Value::str(&call))]),
        ),
        (
            "content",
            Value::Array(vec![Value::obj([
                ("type", Value::str("tool-result")),
                ("toolCallId", Value::str(&call)),
                ("content", text(&"file contents ".repeat(4))),
            ])]),
        ),
        ("role", Value::str("user")),
        ("id", Value::str(&format!("t{turn}"))),
    ]);
    push(
        "tool/result",
        Value::obj([("turn", n(turn)), ("step", n(1)), ("message", result)]),
        Some(Value::Array(vec![n(seq + 16)])),
        Some("append"),
    );
    push(
        "step/end",
        Value::obj([("turn", n(turn)), ("step", n(1))]),
        None,
        None,
    );
    let reason = Value::obj([("kind", Value::str("completed"))]);
    push(
        "turn/end",
        Value::obj([("turn", n(turn)), ("reason", reason)]),
        None,
        None,
    );
}

/// Write session `id` of `turns * 20` events through the Backend trait,
/// in batches of 10 000 events.
pub fn write_big_session(backend: &BackendConfig, id: &str, turns: u64) {
    let mut b: Box<dyn Backend> = backend.open().expect("backend");
    let header = Value::obj([
        ("version", Value::num(0.0)),
        ("id", Value::str(id)),
        ("createdAt", Value::num(1_700_000_000_000.0)),
        ("cwd", Value::str("/work/big")),
    ]);
    let mut batch = Vec::new();
    let mut first = true;
    for turn in 1..=turns {
        let mut events = Vec::new();
        big_turn(turn, (turn - 1) * 20, &mut events);
        batch.extend(events);
        if batch.len() >= 10_000 || turn == turns {
            b.append(&header, &batch, first).expect("append");
            first = false;
            batch.clear();
        }
    }
}

/// Header and events of session `id` as the backend reads them.
pub fn load(backend: &BackendConfig, id: &str) -> (Value, Vec<Value>) {
    let mut b = backend.open().expect("backend");
    let loaded = b.load(id).expect("load").expect("stored");
    assert!(loaded.torn.is_none());
    let events = loaded.values();
    (loaded.header, events)
}
