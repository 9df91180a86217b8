//! A flush hands a step's worth of its session's queued events to the
//! backend's [`Precompute`] before it waits for the round that writes
//! them; a backlog is left to the round.

use std::sync::{Arc, Mutex};

use super::backend::{Batch, Precompute};
use super::memory::MemoryBackend;
use super::{hurry::Hurry, Backend, CreateOptions, Store, StoreConfig};
use crate::engine::Event;
use crate::error::Result;

/// Seqs the backend has written.
type Written = Arc<Mutex<Vec<u64>>>;

/// Records what it is handed: each event's seq and whether the backend
/// had written it already.
struct Recorder {
    written: Written,
    seen: Mutex<Vec<(u64, bool)>>,
}

impl Precompute for Recorder {
    fn wants(&self, text_len: usize) -> bool {
        text_len >= 300
    }

    fn run(&self, events: &[Arc<Event>]) {
        let written = self.written.lock().unwrap();
        let mut seen = self.seen.lock().unwrap();
        seen.extend(events.iter().map(|e| (e.seq, written.contains(&e.seq))));
    }
}

struct Watched {
    inner: MemoryBackend,
    written: Written,
    pre: Arc<Recorder>,
}

impl Backend for Watched {
    crate::store::backend::wrapped_backend!(inner);
    fn precompute(&self) -> Option<Arc<dyn Precompute>> {
        Some(self.pre.clone())
    }
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        let mut w = self.written.lock().unwrap();
        w.extend(batches.iter().flat_map(|b| {
            b.events
                .to_slice()
                .iter()
                .map(|e| e.seq)
                .collect::<Vec<_>>()
        }));
        drop(w);
        self.inner.write(batches)
    }
}

#[test]
fn a_flush_hands_its_large_queued_events_over_before_its_round() {
    let written = Written::default();
    let pre = Arc::new(Recorder {
        written: written.clone(),
        seen: Mutex::default(),
    });
    let backend = Watched {
        inner: MemoryBackend::new(),
        written: written.clone(),
        pre: pre.clone(),
    };
    let mut config = StoreConfig::memory();
    config.batch_window_ms = 10_000;
    let store = Store::over(Box::new(backend), &config, Arc::new(Hurry::default()));
    let s = store.create(CreateOptions::with_id("s")).unwrap();
    let large = format!(r#"{{"text":"{}"}}"#, "x".repeat(400));
    let ignorable = Some(r#"{"ignorable":true}"#);
    let mut expected = Vec::new();
    for step in 0..5u64 {
        s.append_text("x/y", r#"{"small":true}"#, ignorable)
            .unwrap();
        s.append_text("x/y", &large, ignorable).unwrap();
        expected.push((2 * step + 1, false));
        s.flush().unwrap();
    }
    assert_eq!(*pre.seen.lock().unwrap(), expected);
    // A backlog (more than a step's worth) is the round's alone.
    for _ in 0..100 {
        s.append_text("x/y", &large, ignorable).unwrap();
    }
    s.flush().unwrap();
    assert_eq!(*pre.seen.lock().unwrap(), expected);
    assert_eq!(written.lock().unwrap().len(), 110);
}
