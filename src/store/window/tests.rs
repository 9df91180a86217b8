//! Tests of the store side of windowed sessions: which opens stream (on
//! the disk backends, each test where its backend is built).

use std::path::PathBuf;
use std::sync::Arc;

use super::super::{BackendConfig, CreateOptions, LiveSession, Store, StoreConfig};
use crate::engine::chunked::CHUNK;
use crate::rule::Rule;

/// A store of `backend` under a fresh temp dir (`zstd`: a JSONL store's
/// compression).
fn store(tag: &str, backend: &str, zstd: bool) -> (PathBuf, Arc<Store>) {
    let dir = std::env::temp_dir().join(format!("dsh-window-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = match backend {
        "sqlite" => StoreConfig::sqlite(dir.join("s.db")),
        _ => StoreConfig::new(BackendConfig::Jsonl {
            path: dir.clone(),
            zstd,
        }),
    };
    let store = Store::open(config).unwrap();
    (dir, store)
}

/// 200 closed turns of 52 events each under id `w`.
fn fill(store: &Arc<Store>) {
    let s = store.create(CreateOptions::with_id("w")).unwrap();
    for t in 1..=200 {
        s.append_text("turn/start", &format!(r#"{{"turn":{t}}}"#), None)
            .unwrap();
        for i in 0..50 {
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
    s.close().unwrap();
}

/// Open `w` by streaming with a window of 100 events: every event is
/// there (plus the end-seed marker) and only the tail is resident.
fn streamed(store: &Arc<Store>) -> Arc<LiveSession> {
    let crate::store::Opened {
        session: live,
        repaired: closers,
        ..
    } = store
        .open_streaming(
            store.reserve("w", Rule::LoadLivePrepare, "open").unwrap(),
            100,
        )
        .unwrap()
        .ok()
        .expect("streamed");
    assert!(closers.is_empty());
    let (len, resident) = live
        .with(|s| Ok((s.events().len(), s.resident_events())))
        .unwrap();
    assert_eq!(len, 200 * 52 + 1);
    assert!(resident < 100 + CHUNK, "{resident}");
    live
}

#[cfg(feature = "jsonl")]
#[test]
fn a_clean_jsonl_log_streams_and_a_torn_one_does_not() {
    for compression in ["zstd", "none"] {
        let (dir, store) = store(compression, "jsonl", compression == "zstd");
        fill(&store);
        streamed(&store).close().unwrap();
        // A torn tail: the streaming read declines, the whole-log open
        // repairs it.
        // The log itself, not a merge's temporary file beside it.
        let log = walk(&dir)
            .into_iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n == "session.jsonl" || n == "session.jsonl.zstd")
            })
            .unwrap();
        let bytes = std::fs::read(&log).unwrap();
        std::fs::write(&log, &bytes[..bytes.len() - 5]).unwrap();
        let reserved = store.reserve("w", Rule::LoadLivePrepare, "open").unwrap();
        assert!(store.open_streaming(reserved, 100).unwrap().is_err());
        // (the cut hit the end-seed marker of the first open, which the
        // second open writes anew)
        let live = store.open_session_windowed("w", 100).unwrap().session;
        let (len, windowed) = live
            .with(|s| Ok((s.events().len(), s.is_windowed())))
            .unwrap();
        assert_eq!(len, 200 * 52 + 1);
        assert!(windowed);
        live.close().unwrap();
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn a_clean_sqlite_log_streams() {
    let (dir, store) = store("sqlite", "sqlite", false);
    fill(&store);
    streamed(&store).close().unwrap();
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "jsonl")]
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
