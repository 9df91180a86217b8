//! Tests of the streaming read outside a store: the same session as the
//! whole-log restore, a bounded resident window, progress, and the logs
//! left to the whole-log read.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{read_progress, read_streaming};
use crate::engine::chunked::CHUNK;
use crate::engine::Policy;
use crate::store::writer::SharedBackend;
use crate::store::{restore, BackendConfig, CreateOptions, ProgressUnit, Store, StoreConfig};

fn config(tag: &str, backend: &str) -> (PathBuf, BackendConfig) {
    let dir = std::env::temp_dir().join(format!("dsh-stream-read-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = match backend {
        "sqlite" => BackendConfig::Sqlite {
            path: dir.join("s.db"),
        },
        _ => BackendConfig::Jsonl {
            path: dir.clone(),
            zstd: backend == "zstd",
        },
    };
    (dir, config)
}

/// `long`: 200 closed turns of 52 events, then a compaction replacing the
/// first user message; `open`: a turn left open after a tool call.
fn fill(config: &BackendConfig) {
    let store = Store::open(StoreConfig::new(config.clone())).unwrap();
    let s = store.create(CreateOptions::with_id("long")).unwrap();
    let append = Some(r#"{"surfaceOp":"append"}"#);
    for t in 1..=200 {
        s.append_text("turn/start", &format!(r#"{{"turn":{t}}}"#), None)
            .unwrap();
        let user = format!(
            r#"{{"id":"u{t}","role":"user","content":[{{"type":"text","text":"q{t}"}}],"source":{{"kind":"user"}}}}"#
        );
        s.append_text("user/message", &user, append).unwrap();
        for i in 0..49 {
            let chunk = format!(
                r#"{{"turn":{t},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"x{i}"}}}}"#
            );
            s.append_text("assistant/chunk", &chunk, None).unwrap();
        }
        s.append_text(
            "turn/end",
            &format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
            None,
        )
        .unwrap();
    }
    let summary = r#"{"id":"sum","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"compaction"}}"#;
    s.append_text("compaction/start", r#"{"turn":null}"#, None)
        .unwrap();
    s.append_text(
        "user/message",
        summary,
        Some(r#"{"surfaceOp":{"op":"replace","start":1,"end":1},"sourceEventSeqs":[1]}"#),
    )
    .unwrap();
    s.append_text("compaction/end", r#"{"turn":null}"#, None)
        .unwrap();
    s.close().unwrap();
    let o = store.create(CreateOptions::with_id("open")).unwrap();
    o.append_text("turn/start", r#"{"turn":1}"#, None).unwrap();
    o.append_text(
        "assistant/message",
        r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c9","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[]}"#),
    )
    .unwrap();
    o.close().unwrap();
    store.flush().unwrap();
}

fn reader(config: &BackendConfig) -> SharedBackend {
    let access = crate::store::Access {
        read_only: true,
        ..Default::default()
    };
    Arc::new(Mutex::new(config.open_with(access, None).unwrap()))
}

#[test]
fn a_streamed_read_is_the_whole_restore_with_a_window_resident() {
    for backend in ["sqlite", "zstd", "jsonl"] {
        let (dir, config) = config(&format!("same-{backend}"), backend);
        fill(&config);
        let shared = reader(&config);
        let policy = Policy::reference();
        for id in ["long", "open"] {
            let progress = read_progress(&shared, id).expect("progress");
            let mut seen = Vec::new();
            let mut read = read_streaming(&shared, id, &policy, 100, &mut |batch| {
                seen.extend(batch.iter().map(|e| e.seq));
            })
            .unwrap()
            .expect("streams");
            let loaded = shared.lock().unwrap().load(id).unwrap().unwrap();
            let mut whole = restore(id, &loaded, &policy).unwrap();
            assert_eq!(read.stored, loaded.events.len(), "{backend} {id}");
            assert_eq!(seen, (0..read.stored as u64).collect::<Vec<_>>());
            assert_eq!(read.header, loaded.header);
            assert_eq!(read.revision, loaded.revision);
            let texts = |c: &[Arc<crate::engine::Event>]| {
                c.iter().map(|e| e.ty.to_string_lossy()).collect::<Vec<_>>()
            };
            assert_eq!(texts(&read.closers), texts(&whole.closers));
            assert_eq!(
                read.session.derive_json().unwrap(),
                whole.session.derive_json().unwrap(),
                "{backend} {id}"
            );
            assert_eq!(read.session.events().len(), whole.session.events().len());
            match progress.unit {
                ProgressUnit::Events => assert_eq!(progress.total, read.stored as u64),
                ProgressUnit::Bytes => assert_eq!(
                    progress.total,
                    std::fs::metadata(crate::store::jsonl::log_paths(&dir, id)[0].clone())
                        .unwrap()
                        .len()
                ),
            }
            assert_eq!(progress.done(), progress.total, "{backend} {id}");
            if id == "long" {
                assert!(read.session.is_windowed());
                assert!(
                    read.session.resident_events() < 100 + CHUNK,
                    "{backend}: {}",
                    read.session.resident_events()
                );
            } else {
                assert_eq!(texts(&read.closers), ["tool/result", "turn/end"]);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn an_unusual_log_is_left_to_the_whole_read() {
    let (dir, config) = config("unusual", "jsonl");
    fill(&config);
    let policy = Policy::reference();
    // Absent.
    let shared = reader(&config);
    let none = read_streaming(&shared, "nope", &policy, 100, &mut |_| {}).unwrap();
    assert!(none.is_none());
    // A torn tail.
    let log = crate::store::jsonl::log_paths(&dir, "long")[0].clone();
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, br#"{"type":"turn/st"#).unwrap();
    drop(f);
    let shared = reader(&config);
    let torn = read_streaming(&shared, "long", &policy, 100, &mut |_| {}).unwrap();
    assert!(torn.is_none());
    // A type outside the vocabulary.
    let log = crate::store::jsonl::log_paths(&dir, "open")[0].clone();
    let text = std::fs::read_to_string(&log).unwrap().replacen(
        r#""type":"turn/start""#,
        r#""type":"future/thing""#,
        1,
    );
    std::fs::write(&log, text).unwrap();
    let shared = reader(&config);
    let unknown = read_streaming(&shared, "open", &policy, 100, &mut |_| {}).unwrap();
    assert!(unknown.is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
