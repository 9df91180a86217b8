//! A JSONL store written the way agents write (a flush after every step):
//! the writer merges the log's small zstd frames while it is idle and at
//! the session's close, a reader beside it always reads a prefix of what
//! was acknowledged, and a reopen reads back exactly what was written.
#![cfg(feature = "jsonl")]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dsh_session::store::{CreateOptions, Store, StoreConfig};

/// A temp directory removed on drop.
struct Temp(PathBuf);

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The number of frames of the zstd log at `path` (0 when unreadable
/// mid-replace).
fn frames(path: &Path) -> usize {
    let Ok(bytes) = std::fs::read(path) else {
        return 0;
    };
    let mut rest = &bytes[..];
    let mut n = 0;
    while !rest.is_empty() {
        match zstd::zstd_safe::find_frame_compressed_size(rest) {
            Ok(len) if len <= rest.len() => rest = &rest[len..],
            _ => break,
        }
        n += 1;
    }
    n
}

/// Pseudo-random words: text that compresses as prose does, not better.
fn words(seed: &mut u64, n: usize) -> String {
    const WORDS: [&str; 16] = [
        "file", "read", "the", "function", "returns", "error", "value", "path", "test", "build",
        "step", "model", "tool", "result", "line", "change",
    ];
    let mut out = String::new();
    for _ in 0..n {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.push_str(WORDS[(*seed >> 33) as usize % WORDS.len()]);
        out.push_str(if (*seed >> 40) % 7 == 0 { ". " } else { " " });
        out.push_str(&((*seed >> 45) % 1000).to_string());
        out.push(' ');
    }
    out
}

/// `a` and `b` are the same text (reported by where they part, not whole).
fn same(a: &str, b: &str, what: &str) {
    if a != b {
        let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        let near = |s: &str| {
            s.get(at.saturating_sub(80)..(at + 80).min(s.len()))
                .unwrap_or("")
                .to_string()
        };
        panic!(
            "{what}: {} vs {} bytes, parting at {at}: {:?} vs {:?}",
            a.len(),
            b.len(),
            near(a),
            near(b)
        );
    }
}

/// Events as one JSON array of their texts.
fn events_text(events: &[std::sync::Arc<dsh_session::engine::Event>]) -> String {
    let texts: Vec<&str> = events.iter().map(|e| e.text()).collect();
    format!("[{}]", texts.join(","))
}

#[test]
fn per_step_flushes_are_merged_while_idle_and_read_back_exactly() {
    let dir = Temp(std::env::temp_dir().join(format!("dsh-merge-{}", std::process::id())));
    let config = StoreConfig::jsonl(&dir.0);
    let store = Store::open(config.clone()).unwrap();
    let s = store.create(CreateOptions::with_id("m")).unwrap();
    let log = dir.0.join("_no-cwd/m/session.jsonl.zstd");
    // A reader beside the writer opens the session again and again.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, config) = (stop.clone(), config.clone().read_only());
        std::thread::spawn(move || {
            let mut reads = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let r = Store::open(config.clone()).unwrap();
                if let Ok(dsh_session::store::Opened {
                    session: rs,
                    repaired: closers,
                    ..
                }) = r.open_session("m")
                {
                    // Its repair closes the open turn in memory: the
                    // stored events come first.
                    let json = rs
                        .with(|x| {
                            x.events_in(0, x.events().len() - closers.len())
                                .map(|e| events_text(&e))
                        })
                        .unwrap();
                    reads.push(json);
                    rs.close().unwrap();
                }
                drop(r);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            reads
        })
    };
    let mut seed = 3;
    let (mut most, mut merged_while_open) = (0, false);
    for turn in 1..=120 {
        s.append_text("turn/start", &format!(r#"{{"turn":{turn}}}"#), None)
            .unwrap();
        for step in 1..=3 {
            for i in 0..8 {
                let data = format!(
                    r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":{i},"text":"{}"}}}}"#,
                    words(&mut seed, 30)
                );
                s.append_text("assistant/chunk", &data, None).unwrap();
            }
            s.append_text(
                "step/end",
                &format!(r#"{{"turn":{turn},"step":{step}}}"#),
                None,
            )
            .unwrap();
            s.flush().unwrap();
            let now = frames(&log);
            merged_while_open |= now > 0 && now < most;
            most = most.max(now);
        }
        s.append_text(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            None,
        )
        .unwrap();
        s.flush().unwrap();
    }
    let (written, count) = s
        .with(|x| {
            Ok((
                x.events_in(0, usize::MAX).map(|e| events_text(&e))?,
                x.events().len(),
            ))
        })
        .unwrap();
    // Give the writer its idle moment, as the model call after a flush does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !merged_while_open && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        merged_while_open = frames(&log) < most;
    }
    assert!(
        merged_while_open,
        "the writer merged frames while idle ({most} at most)"
    );
    let before_close = frames(&log);
    s.close().unwrap();
    assert!(
        frames(&log) < before_close || before_close <= 3,
        "the close merged the tail: {before_close} -> {}",
        frames(&log)
    );
    stop.store(true, Ordering::SeqCst);
    let reads = reader.join().unwrap();
    drop(s);
    drop(store);
    assert!(!reads.is_empty());
    let prefix = written.trim_end_matches(']');
    for r in &reads {
        let body = r.trim_end_matches(']');
        same(
            &prefix[..body.len().min(prefix.len())],
            body,
            "a reader's read",
        );
    }
    let store = Store::open(config).unwrap();
    let dsh_session::store::Opened {
        session: s,
        repaired: closers,
        ..
    } = store.open_session("m").unwrap();
    assert!(closers.is_empty());
    // The open marks the resume with a session/end-seed after them.
    let reopened = s
        .with(|x| x.events_in(0, count).map(|e| events_text(&e)))
        .unwrap();
    same(&reopened, &written, "the reopened session");
    s.close().unwrap();
    drop(store);
}
