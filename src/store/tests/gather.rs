//! Rounds on a backend with one writer gather the sessions of the last
//! round: sessions that flush at every step share one write per step
//! instead of splitting into two cohorts that alternate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::backend::Batch;
use super::memory::MemoryBackend;
use super::{hurry::Hurry, Backend, CreateOptions, Store, StoreConfig};
use crate::error::Result;

/// A memory backend whose writes take as long as a sync, counting writes
/// and the batches they carry.
struct Slow {
    inner: MemoryBackend,
    writes: Arc<AtomicU64>,
    batches: Arc<AtomicU64>,
}

impl Backend for Slow {
    crate::store::backend::wrapped_backend!(inner);
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        std::thread::sleep(Duration::from_millis(2));
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.batches
            .fetch_add(batches.len() as u64, Ordering::SeqCst);
        self.inner.write(batches)
    }
}

/// Four sessions, a thread each, append and flush 100 steps: their
/// flushes' writes carry about all four sessions each (two cohorts of two
/// would make it two). The bound leaves room for a thread that a busy
/// machine does not run in time.
#[test]
fn flushing_sessions_share_each_round() {
    let (writes, batches) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let backend = Slow {
        inner: MemoryBackend::new(),
        writes: writes.clone(),
        batches: batches.clone(),
    };
    let mut config = StoreConfig::memory();
    config.batch_window_ms = 1000;
    let store = Store::over(Box::new(backend), &config, Arc::new(Hurry::default()));
    let sessions: Vec<_> = (0..4)
        .map(|t| {
            store
                .create(CreateOptions::with_id(format!("s{t}")))
                .unwrap()
        })
        .collect();
    for s in &sessions {
        s.flush().unwrap();
    }
    let (w0, b0) = (
        writes.load(Ordering::SeqCst),
        batches.load(Ordering::SeqCst),
    );
    std::thread::scope(|scope| {
        for s in &sessions {
            scope.spawn(move || {
                for step in 0..100 {
                    let data = format!(r#"{{"step":{step}}}"#);
                    s.append_text("x/y", &data, Some(r#"{"ignorable":true}"#))
                        .unwrap();
                    s.flush().unwrap();
                }
            });
        }
    });
    let w = writes.load(Ordering::SeqCst) - w0;
    let b = batches.load(Ordering::SeqCst) - b0;
    assert_eq!(b, 400, "every step was written once");
    let per_write = b as f64 / w as f64;
    assert!(
        per_write >= 3.0,
        "{w} writes carried {b} batches: {per_write:.2} sessions a round"
    );
    for t in 0..4 {
        let stored = store.inspect(&format!("s{t}")).unwrap().events.len();
        assert_eq!(stored, 100, "s{t}");
    }
}
