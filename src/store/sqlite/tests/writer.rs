//! Write-behind batching (docs/formats.md §2) over the SQLite backend,
//! through the writer's public API: a wrapper backend records every batch
//! written (when, which seqs), can hold a write open, and can fail one.

use crate::rule::Rule;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::tests::{header, plain, TempDir};
use super::*;
use crate::store::writer::{SharedBackend, Writer};

/// What the test sees of the backend's writes.
#[derive(Default)]
struct Probe {
    /// `(start, end, seqs)` of every successful append.
    writes: Mutex<Vec<(Instant, Instant, Vec<u64>)>>,
    /// `(hold, held)`: hold the next appends open until released; an
    /// append is being held.
    gate: Mutex<(bool, bool)>,
    changed: Condvar,
    fail_next: AtomicBool,
}

impl Probe {
    fn set_hold(&self, on: bool) {
        self.gate.lock().unwrap().0 = on;
        self.changed.notify_all();
    }

    /// Wait until an append is being held open.
    fn wait_held(&self) {
        let started = Instant::now();
        let mut gate = self.gate.lock().unwrap();
        while !gate.1 {
            assert!(started.elapsed() < Duration::from_secs(10), "no write came");
            gate = self
                .changed
                .wait_timeout(gate, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }

    fn batches(&self) -> Vec<Vec<u64>> {
        let w = self.writes.lock().unwrap();
        w.iter().map(|(_, _, s)| s.clone()).collect()
    }

    fn times(&self) -> Vec<(Instant, Instant)> {
        let w = self.writes.lock().unwrap();
        w.iter().map(|(a, b, _)| (*a, *b)).collect()
    }
}

struct Gated {
    inner: SqliteBackend,
    probe: Arc<Probe>,
}

impl Backend for Gated {
    crate::store::backend::wrapped_backend!(inner);
    fn write(&mut self, batches: &[crate::store::Batch<'_>]) -> Vec<Result<()>> {
        batches
            .iter()
            .map(|b| self.write_one(b.header, &b.events.to_slice(), b.materialize))
            .collect()
    }
}

impl Gated {
    fn write_one(
        &mut self,
        header: &Value,
        events: &[Arc<Event>],
        materialize: bool,
    ) -> Result<()> {
        let start = Instant::now();
        {
            let mut gate = self.probe.gate.lock().unwrap();
            if gate.0 {
                gate.1 = true;
                self.probe.changed.notify_all();
                while gate.0 {
                    gate = self.probe.changed.wait(gate).unwrap();
                }
                gate.1 = false;
            }
        }
        if self.probe.fail_next.swap(false, Ordering::SeqCst) {
            return Err(Error::new(Status::Io, Rule::IoWrite, "injected failure"));
        }
        self.inner.append(header, events, materialize)?;
        let seqs = events.iter().map(|e| e.seq).collect();
        let end = Instant::now();
        self.probe.writes.lock().unwrap().push((start, end, seqs));
        Ok(())
    }
}

/// A writer with window `window_ms` over a fresh database, tracking `s`.
fn setup(tag: &str, window_ms: u64) -> (TempDir, Writer, SharedBackend, Arc<Probe>) {
    let dir = TempDir::new(tag);
    let probe = Arc::new(Probe::default());
    let backend: SharedBackend = Arc::new(std::sync::Mutex::new(Box::new(Gated {
        inner: SqliteBackend::open(&dir.db(), 5000).unwrap(),
        probe: probe.clone(),
    })));
    let w = Writer::new(backend.clone(), window_ms);
    w.track("s", &header("s"), None, false);
    (dir, w, backend, probe)
}

fn ev(seq: u64) -> Arc<Event> {
    plain(seq, "x/e", &format!(r#"{{"n":{seq}}}"#), "")
}

fn stored_seqs(backend: &SharedBackend) -> Vec<u64> {
    let loaded = crate::store::writer::lock_backend(backend)
        .load("s")
        .unwrap()
        .unwrap();
    loaded
        .values()
        .iter()
        .map(|v| v.as_object().unwrap().get("seq").unwrap().as_f64().unwrap() as u64)
        .collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How long a test waits for a background write to show up: a bound for a
/// disk that a whole test suite loads with fsyncs, not a figure (each
/// test's own assertions say when the write may start at the earliest).
const WRITTEN_WITHIN: Duration = Duration::from_secs(30);

/// write-behind #1 and #2: the window is fixed from the first queued event
/// (not pushed back by later ones): twenty events 10 ms apart inside one
/// window are written as one batch at about first + window.
#[test]
fn events_inside_one_window_are_one_batch_at_its_end() {
    let (_dir, w, backend, probe) = setup("window", 600);
    let first = Instant::now();
    let mut last = first;
    for seq in 0..20 {
        last = Instant::now();
        w.enqueue("s", &[ev(seq)]).unwrap();
        std::thread::sleep(ms(10));
    }
    let deadline = Instant::now() + WRITTEN_WITHIN;
    while probe.batches().is_empty() && Instant::now() < deadline {
        std::thread::sleep(ms(5));
    }
    assert_eq!(probe.batches(), [(0..20).collect::<Vec<_>>()]);
    let start = probe.times()[0].0;
    assert!(
        start - first >= ms(590),
        "written {:?} after the first event",
        start - first
    );
    // Debounced, it would start a window after the last event.
    assert!(
        start < last + ms(600),
        "written {:?} after the last event",
        start - last
    );
    w.flush("s").unwrap();
    assert_eq!(probe.batches().len(), 1, "nothing left for the flush");
    assert_eq!(stored_seqs(&backend), (0..20).collect::<Vec<_>>());
}

/// write-behind #4: work admitted after a finished flush barrier gets a new
/// window of its own and is written when it closes, without a flush.
#[test]
fn work_after_a_finished_barrier_gets_a_new_window() {
    let (_dir, w, backend, probe) = setup("new-window", 300);
    w.enqueue("s", &[ev(0), ev(1)]).unwrap();
    w.flush("s").unwrap();
    assert_eq!(probe.batches(), [vec![0, 1]]);
    let queued = Instant::now();
    w.enqueue("s", &[ev(2)]).unwrap();
    let deadline = Instant::now() + WRITTEN_WITHIN;
    while probe.batches().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(ms(5));
    }
    assert_eq!(probe.batches(), [vec![0, 1], vec![2]]);
    let at = probe.times()[1].0 - queued;
    assert!(
        at >= ms(290),
        "written after {at:?}: before its window closed"
    );
    assert_eq!(stored_seqs(&backend), [0, 1, 2]);
}

/// persistence.spec #4: events admitted while a write is in flight form a
/// follow-up batch, written after it, in order.
#[test]
fn events_admitted_during_a_write_form_a_follow_up_batch() {
    let (_dir, w, backend, probe) = setup("follow-up", 50);
    probe.set_hold(true);
    w.enqueue("s", &[ev(0), ev(1)]).unwrap();
    probe.wait_held();
    w.enqueue("s", &[ev(2)]).unwrap();
    w.enqueue("s", &[ev(3), ev(4)]).unwrap();
    probe.set_hold(false);
    w.flush("s").unwrap();
    assert_eq!(probe.batches(), [vec![0, 1], vec![2, 3, 4]]);
    assert_eq!(stored_seqs(&backend), [0, 1, 2, 3, 4]);
}

/// persistence.spec #5, write-behind #8: a background write that fails is
/// kept (with what arrived meanwhile) and retried by the next flush
/// barrier, which returns once it is durable.
#[test]
fn a_failed_background_write_is_retried_at_the_flush() {
    let (_dir, w, backend, probe) = setup("retry", 50);
    probe.fail_next.store(true, Ordering::SeqCst);
    probe.set_hold(true);
    w.enqueue("s", &[ev(0), ev(1)]).unwrap();
    probe.wait_held();
    // Admitted while the failing write is in flight.
    w.enqueue("s", &[ev(2)]).unwrap();
    probe.set_hold(false);
    // The failure pauses automatic writing: nothing is written meanwhile.
    std::thread::sleep(ms(300));
    assert!(probe.batches().is_empty());
    w.flush("s").unwrap();
    assert_eq!(probe.batches(), [vec![0, 1, 2]]);
    assert_eq!(stored_seqs(&backend), [0, 1, 2]);
    // A failure met by the flush itself is reported by it, and the next
    // flush retries again.
    probe.fail_next.store(true, Ordering::SeqCst);
    w.enqueue("s", &[ev(3)]).unwrap();
    let err = w.flush("s").unwrap_err();
    assert_eq!((err.status, err.rule), (Status::Io, Rule::IoWrite));
    w.flush("s").unwrap();
    assert_eq!(stored_seqs(&backend), [0, 1, 2, 3]);
}

/// write-behind #5: a tail admitted during a long write whose window has
/// closed by the time that write ends starts right after it.
#[test]
fn an_overdue_tail_starts_right_after_the_active_write() {
    let (_dir, w, _backend, probe) = setup("overdue", 100);
    probe.set_hold(true);
    w.enqueue("s", &[ev(0)]).unwrap();
    probe.wait_held();
    w.enqueue("s", &[ev(1)]).unwrap();
    // Hold the first write well past the tail's window.
    std::thread::sleep(ms(400));
    probe.set_hold(false);
    let deadline = Instant::now() + WRITTEN_WITHIN;
    while probe.batches().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(ms(2));
    }
    assert_eq!(probe.batches(), [vec![0], vec![1]]);
    let times = probe.times();
    let gap = times[1].0 - times[0].1;
    assert!(gap < ms(90), "the tail waited {gap:?} after the write");
}

/// write-behind #6: a tail admitted during a short write keeps its own
/// deadline (admission + window) rather than starting right after it.
#[test]
fn a_tail_whose_window_is_open_keeps_its_timer() {
    let (_dir, w, _backend, probe) = setup("timer", 500);
    probe.set_hold(true);
    w.enqueue("s", &[ev(0)]).unwrap();
    probe.wait_held();
    let admitted = Instant::now();
    w.enqueue("s", &[ev(1)]).unwrap();
    probe.set_hold(false);
    let deadline = Instant::now() + WRITTEN_WITHIN;
    while probe.batches().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(ms(2));
    }
    assert_eq!(probe.batches(), [vec![0], vec![1]]);
    let at = probe.times()[1].0 - admitted;
    assert!(at >= ms(490), "the tail was written {at:?} after admission");
}

/// write-behind #3: flushes waiting at the same time (one from before an
/// append, one from after it) all return once the writes they wait for
/// are durable; the events admitted meanwhile are drained as one
/// follow-up batch, not one write per flush.
#[test]
fn concurrent_flushes_drain_what_was_admitted_meanwhile() {
    let (_dir, w, backend, probe) = setup("flushes", 50);
    let w = Arc::new(w);
    probe.set_hold(true);
    w.enqueue("s", &[ev(0)]).unwrap();
    probe.wait_held();
    let flush = |w: &Arc<Writer>| {
        let w = w.clone();
        std::thread::spawn(move || w.flush("s"))
    };
    let a = flush(&w);
    w.enqueue("s", &[ev(1), ev(2)]).unwrap();
    let b = flush(&w);
    let c = flush(&w);
    std::thread::sleep(ms(100));
    assert!(!a.is_finished() && !b.is_finished() && !c.is_finished());
    probe.set_hold(false);
    for t in [a, b, c] {
        t.join().unwrap().unwrap();
    }
    assert_eq!(stored_seqs(&backend), [0, 1, 2]);
    assert_eq!(probe.batches(), [vec![0], vec![1, 2]]);
}
