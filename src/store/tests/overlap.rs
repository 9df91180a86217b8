//! Overlapping rounds: on a backend that detaches its writes (a log file
//! per session), the writes of several rounds run at once, each session
//! in one round at a time, and every flushed event is stored at its seq;
//! a backend that gives no result for a batch fails that flush.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::backend::{Batch, Detached};
use super::{hurry::Hurry, Backend, CreateOptions, Store, StoreConfig};
use crate::error::Result;
use crate::rule::Rule;

/// Counts the detached writes running at once (the most seen), each held
/// open a little so that rounds which can overlap do.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    most: AtomicUsize,
}

/// A detached write of the wrapped backend, counted by a [`Gauge`].
struct Counted {
    inner: Box<dyn Detached>,
    gauge: Arc<Gauge>,
}

impl Detached for Counted {
    fn run(&mut self) {
        let now = self.gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.gauge.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(5));
        self.inner.run();
        self.gauge.now.fetch_sub(1, Ordering::SeqCst);
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// A backend passing everything to the one it wraps, counting its
/// detached writes; with `lose`, its detached writes give no results.
struct Gauged {
    inner: Box<dyn Backend>,
    gauge: Arc<Gauge>,
    lose: Arc<std::sync::atomic::AtomicBool>,
}

impl Backend for Gauged {
    crate::store::backend::wrapped_backend!(inner);
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        self.inner.write(batches)
    }
    fn detaches_writes(&self) -> bool {
        self.inner.detaches_writes()
    }
    fn prepare_write(&mut self, batches: &[Batch<'_>]) -> Option<Box<dyn Detached>> {
        let inner = self.inner.prepare_write(batches)?;
        Some(Box::new(Counted {
            inner,
            gauge: self.gauge.clone(),
        }))
    }
    fn finish_write(&mut self, detached: Box<dyn Detached>) -> Vec<Result<()>> {
        let counted = detached
            .into_any()
            .downcast::<Counted>()
            .unwrap_or_else(|_| panic!("a detached write of another backend"));
        let results = self.inner.finish_write(counted.inner);
        match self.lose.load(Ordering::SeqCst) {
            true => Vec::new(),
            false => results,
        }
    }
}

fn reopen_config(dir: &std::path::Path, c: super::jsonl::Compression) -> StoreConfig {
    StoreConfig::new(super::BackendConfig::Jsonl {
        path: dir.to_path_buf(),
        zstd: c == super::jsonl::Compression::Zstd,
    })
}

fn jsonl(name: &str, c: super::jsonl::Compression) -> (std::path::PathBuf, Box<dyn Backend>) {
    let d = std::env::temp_dir().join(format!("dsh-overlap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let b = super::jsonl::JsonlBackend::open(&d, c).unwrap();
    (d, Box::new(b))
}

fn gauged(inner: Box<dyn Backend>) -> (Gauged, Arc<Gauge>, Arc<std::sync::atomic::AtomicBool>) {
    let gauge = Arc::new(Gauge::default());
    let lose = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let b = Gauged {
        inner,
        gauge: gauge.clone(),
        lose: lose.clone(),
    };
    (b, gauge, lose)
}

/// Eight threads append and flush their own sessions at once: the
/// detached writes of their rounds overlap, and after a reopen every
/// session holds every event, in order.
#[test]
fn rounds_of_different_sessions_overlap_and_every_event_lands() {
    use super::jsonl::Compression;
    for (tag, c) in [("zstd", Compression::Zstd), ("raw", Compression::None)] {
        let (dir, inner) = jsonl(tag, c);
        let (backend, gauge, _) = gauged(inner);
        let mut config = StoreConfig::memory();
        config.batch_window_ms = 1000;
        let store = Store::over(Box::new(backend), &config, Arc::new(Hurry::default()));
        std::thread::scope(|scope| {
            for t in 0..8 {
                let store = store.clone();
                scope.spawn(move || {
                    let s = store
                        .create(CreateOptions::with_id(format!("s{t}")))
                        .unwrap();
                    for step in 0..30 {
                        let data = format!(r#"{{"step":{step}}}"#);
                        s.append_text("x/y", &data, Some(r#"{"ignorable":true}"#))
                            .unwrap();
                        s.flush().unwrap();
                    }
                    s.close().unwrap();
                });
            }
        });
        assert!(
            gauge.most.load(Ordering::SeqCst) >= 2,
            "{tag}: no two rounds ran at once"
        );
        drop(store);
        let store = Store::open(reopen_config(&dir, c)).unwrap();
        for t in 0..8 {
            let events = store.inspect(&format!("s{t}")).unwrap().events;
            assert_eq!(events.len(), 30, "{tag}: s{t}");
            for (i, e) in events.iter().enumerate() {
                assert_eq!(e.seq, i as u64, "{tag}: s{t}");
                assert!(e.text().contains(&format!(r#""step":{i}"#)), "{tag}");
            }
        }
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A write whose backend gives no result is not acknowledged: the flush
/// fails with `internal.no-result`.
#[test]
fn a_batch_without_a_result_is_not_acknowledged() {
    let (dir, inner) = jsonl("no-result", super::jsonl::Compression::None);
    let (backend, _, lose) = gauged(inner);
    let mut config = StoreConfig::memory();
    config.batch_window_ms = 1000;
    let store = Store::over(Box::new(backend), &config, Arc::new(Hurry::default()));
    let s = store.create(CreateOptions::with_id("n")).unwrap();
    s.flush().unwrap();
    s.append_text("x/y", r#"{"a":1}"#, Some(r#"{"ignorable":true}"#))
        .unwrap();
    lose.store(true, Ordering::SeqCst);
    let err = s.flush().unwrap_err();
    assert_eq!(err.rule, Rule::InternalNoResult, "{err:?}");
    lose.store(false, Ordering::SeqCst);
    // (This backend did write the batch it kept quiet about: whatever the
    // retries do, the log stays contiguous.)
    let retried = s.flush();
    drop(s);
    drop(store);
    let store = Store::open(reopen_config(&dir, super::jsonl::Compression::None)).unwrap();
    let events = store.inspect("n").unwrap().events;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "{retried:?}"
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
