//! Tests of `writer`.
use super::pending::Taken;
use super::*;
use crate::engine::chunked::CHUNK;
use crate::engine::event::APPEND_ORDER;
use crate::json::JsString;
use crate::rule::Rule;
use crate::store::backend::{header_id, Batch, Events};
use crate::store::memory::MemoryBackend;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// First chunks of the logs a backend was handed whole.
type Chunks = Arc<Mutex<Vec<Log>>>;

/// A memory backend whose writes can be made to fail.
struct Flaky {
    inner: MemoryBackend,
    fail: Arc<AtomicBool>,
    writes: Arc<AtomicUsize>,
    /// The first chunk of every log handed over whole (a seed), to see
    /// whether it arrived shared.
    seeds: Chunks,
}

thread_local! {
    /// Batches a `Flaky` backend wrote on this thread.
    static WRITES_HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The text bytes of each batch a `Flaky` backend wrote on this thread.
    static BATCH_BYTES_HERE: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Backend for Flaky {
    crate::store::backend::wrapped_backend!(inner);
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        batches
            .iter()
            .map(|b| {
                if let Events::Log(log) = b.events {
                    self.seeds.lock().unwrap().push(log.clone());
                }
                if self.fail.load(Ordering::SeqCst) {
                    return Err(Error::new(crate::Status::Io, Rule::IoWrite, "disk on fire"));
                }
                self.writes.fetch_add(1, Ordering::SeqCst);
                WRITES_HERE.with(|w| w.set(w.get() + 1));
                let events = b.events.to_slice();
                let bytes = events.iter().map(|e| e.text().len()).sum();
                BATCH_BYTES_HERE.with(|c| c.borrow_mut().push(bytes));
                self.inner.append(b.header, &events, b.materialize)
            })
            .collect()
    }
}

fn event(seq: u64) -> Arc<Event> {
    Arc::new(Event::new(
        JsString::from("plugin/x"),
        seq,
        0,
        Value::Number(seq as f64),
        None,
        None,
        APPEND_ORDER,
    ))
}

fn setup(
    window_ms: u64,
) -> (
    Writer,
    SharedBackend,
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    Value,
) {
    let fail = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    let backend: SharedBackend = Arc::new(Mutex::new(Box::new(Flaky {
        inner: MemoryBackend::new(),
        fail: fail.clone(),
        writes: writes.clone(),
        seeds: Chunks::default(),
    })));
    let header = Value::obj([("version", Value::Number(0.0)), ("id", Value::str("s"))]);
    let w = Writer::new(backend.clone(), window_ms);
    w.track(header_id(&header), &header, None, false);
    (w, backend, fail, writes, header)
}

fn stored_len(b: &SharedBackend) -> usize {
    lock_backend(b)
        .load("s")
        .unwrap()
        .map_or(0, |l| l.events.len())
}

#[test]
fn appends_are_batched_within_the_window_and_flush_is_the_barrier() {
    let (w, backend, _, writes, _) = setup(10_000);
    for seq in 0..50 {
        w.enqueue("s", &[event(seq)]).unwrap();
    }
    assert_eq!(
        stored_len(&backend),
        0,
        "nothing written before the window or a flush"
    );
    w.flush("s").unwrap();
    assert_eq!(stored_len(&backend), 50);
    assert_eq!(writes.load(Ordering::SeqCst), 1, "one batch");
}

#[test]
fn the_window_writes_without_a_flush() {
    let (w, backend, _, _, _) = setup(5);
    w.enqueue("s", &[event(0), event(1)]).unwrap();
    let start = Instant::now();
    while stored_len(&backend) < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "background write never happened"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_failed_write_keeps_its_events_in_order_and_the_next_flush_retries() {
    let (w, backend, fail, _, _) = setup(10_000);
    w.enqueue("s", &[event(0), event(1)]).unwrap();
    fail.store(true, Ordering::SeqCst);
    let err = w.flush("s").unwrap_err();
    assert_eq!(err.rule, Rule::IoWrite);
    w.enqueue("s", &[event(2)]).unwrap();
    assert_eq!(w.flush("s").unwrap_err().rule, Rule::IoWrite);
    fail.store(false, Ordering::SeqCst);
    w.flush("s").unwrap();
    let loaded = lock_backend(&backend).load("s").unwrap().unwrap();
    let seqs: Vec<f64> = loaded
        .values()
        .iter()
        .map(|e| e.as_object().unwrap().get("seq").unwrap().as_f64().unwrap())
        .collect();
    assert_eq!(seqs, [0.0, 1.0, 2.0]);
}

#[test]
fn a_zero_window_writes_inside_the_append_and_reports_failure() {
    let (w, backend, fail, _, _) = setup(0);
    w.enqueue("s", &[event(0)]).unwrap();
    assert_eq!(stored_len(&backend), 1);
    fail.store(true, Ordering::SeqCst);
    assert!(w.enqueue("s", &[event(1)]).is_err());
    fail.store(false, Ordering::SeqCst);
    // The failed batch is not kept: the session undoes that append.
    w.flush("s").unwrap();
    assert_eq!(stored_len(&backend), 1);
}

#[test]
fn a_batch_that_does_not_continue_the_stored_log_is_refused_and_nothing_is_written() {
    let (w, backend, _, _, _) = setup(0);
    w.enqueue("s", &[event(0), event(1)]).unwrap();
    for bad in [vec![event(3)], vec![event(1)], vec![event(2), event(4)]] {
        let err = w.enqueue("s", &bad).unwrap_err();
        assert_eq!(err.rule, Rule::PersistAppendSeqMismatch);
        assert_eq!(err.status, crate::Status::Conflict);
    }
    assert_eq!(stored_len(&backend), 2);
    w.enqueue("s", &[event(2)]).unwrap();
    assert_eq!(stored_len(&backend), 3);
}

/// A writer over a failing-on-demand backend with small high-water marks.
/// A writer with high-water marks `events` / `bytes` (of a windowed
/// session `s` when `windowed`) and a 60 s window.
fn limited(
    events: usize,
    bytes: usize,
    windowed: bool,
) -> (Writer, SharedBackend, Arc<AtomicBool>) {
    let (_, backend, fail, _, header) = setup(60_000);
    let w = Writer::with_limits(
        backend.clone(),
        60_000,
        Limits { events, bytes },
        Arc::new(Hurry::default()),
    );
    w.track(header_id(&header), &header, None, windowed);
    (w, backend, fail)
}

/// A backlog of 1000 events (about 30 KB of text).
fn backlog() -> Vec<Arc<Event>> {
    (0..1000).map(event).collect()
}

#[test]
fn a_healthy_backlog_is_never_waited_for() {
    let (w, backend, _) = limited(100, usize::MAX, false);
    w.enqueue("s", &backlog()).unwrap();
    w.reserve().unwrap();
    assert_eq!(
        stored_len(&backend),
        0,
        "above the event mark, nothing failed: no wait"
    );
}

#[test]
fn a_backlog_on_a_failing_disk_is_drained_or_refused() {
    let (w, backend, fail) = limited(100, usize::MAX, false);
    w.enqueue("s", &backlog()).unwrap();
    fail.store(true, Ordering::SeqCst);
    assert!(w.flush_all().is_err(), "the disk fails");
    assert!(
        w.reserve().is_err(),
        "above the mark with a failing disk: refuse"
    );
    fail.store(false, Ordering::SeqCst);
    w.reserve().unwrap();
    assert_eq!(stored_len(&backend), 1000, "reserve drained the backlog");
    // Written: the disk is healthy again and the backlog empty.
    w.enqueue("s", &[event(1000)]).unwrap();
    w.reserve().unwrap();
    assert_eq!(stored_len(&backend), 1000);
}

#[test]
fn memory_is_bounded_by_the_byte_mark() {
    let (w, backend, fail) = limited(usize::MAX, 10_000, false);
    let batch = backlog();
    let bytes: usize = batch.iter().map(|e| e.text().len()).sum();
    assert!(bytes > 10_000);
    w.enqueue("s", &batch).unwrap();
    fail.store(true, Ordering::SeqCst);
    assert!(w.flush_all().is_err(), "the disk fails");
    assert!(
        w.reserve().is_err(),
        "above the byte mark with a failing disk: drain, which fails"
    );
    fail.store(false, Ordering::SeqCst);
    w.reserve().unwrap();
    assert_eq!(stored_len(&backend), 1000, "reserve drained the backlog");
}

#[test]
fn above_the_byte_mark_a_working_disk_is_waited_for_one_round_by_a_windowed_session() {
    let (w, backend, _) = limited(usize::MAX, 10_000, true);
    w.enqueue("s", &backlog()).unwrap();
    w.reserve().unwrap();
    assert_eq!(
        stored_len(&backend),
        1000,
        "the writer's round took the backlog"
    );
    w.enqueue("s", &(1000..2000).map(event).collect::<Vec<_>>())
        .unwrap();
    w.reserve().unwrap();
    assert_eq!(
        stored_len(&backend),
        2000,
        "the mark counts again after a round"
    );
}

#[test]
fn a_resident_sessions_backlog_above_the_byte_mark_is_not_waited_for() {
    let (w, backend, _) = limited(usize::MAX, 10_000, false);
    w.enqueue("s", &backlog()).unwrap();
    w.reserve().unwrap();
    assert_eq!(
        stored_len(&backend),
        0,
        "its events are the session's own: no wait on a working disk"
    );
    w.flush("s").unwrap();
    assert_eq!(stored_len(&backend), 1000);
}

#[test]
fn a_bounded_take_keeps_order_and_takes_at_least_one_event() {
    let mut p = Pending::default();
    for e in (0..10).map(event) {
        let len = e.text().len();
        p.push(e, len);
    }
    let one = event(0).text().len();
    assert_eq!(p.queued_bytes(), 10 * one);
    let first = p.take(0);
    assert_eq!(first.bytes, one);
    assert_eq!(first.into_batch().len(), 1, "at least one event");
    let next = p.take(3 * one);
    assert_eq!(next.bytes, 3 * one);
    let seqs = |t: Taken| t.into_batch().iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(next), [1, 2, 3]);
    assert_eq!(p.queued_bytes(), 6 * one);
    let rest = p.take(usize::MAX);
    assert_eq!(rest.bytes, 6 * one);
    assert_eq!(seqs(rest), [4, 5, 6, 7, 8, 9]);
    assert!(p.is_empty());
    assert_eq!(p.queued_bytes(), 0);
}

#[test]
fn a_queue_counts_its_bytes_through_seeds_takes_and_put_backs() {
    let len = |e: &Arc<Event>| e.text().len();
    let mut seed = Log::new();
    for e in (0..3).map(event) {
        seed.push(e);
    }
    let seed_bytes: usize = seed.iter().map(|e| len(&e)).sum();
    let mut p = Pending::default();
    let pieces = pending::seed_pieces(&seed, ROUND_BYTES);
    p.push_log(Arc::new(seed), pieces);
    for e in (3..6).map(event) {
        let n = len(&e);
        p.push(e, n);
    }
    let all = seed_bytes + (3..6).map(|s| len(&event(s))).sum::<usize>();
    assert_eq!(p.queued_bytes(), all);
    assert_eq!(p.queued(), 6);

    // The seed (one piece) goes whole, then events up to the budget,
    // which counts the seed too.
    let taken = p.take(seed_bytes + len(&event(3)));
    assert_eq!(taken.bytes, seed_bytes + len(&event(3)));
    let batch = taken.into_batch();
    assert_eq!(
        batch.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(p.queued_bytes(), all - seed_bytes - len(&event(3)));

    // A failed batch goes back in front of what arrived meanwhile.
    let e6 = event(6);
    let n6 = len(&e6);
    p.push(e6, n6);
    p.put_back(batch);
    assert_eq!(p.queued_bytes(), all + n6);
    let rest = p.take(usize::MAX);
    assert_eq!(rest.bytes, all + n6);
    assert_eq!(
        rest.into_batch().iter().map(|e| e.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5, 6]
    );
    assert!(p.is_empty());
}

#[test]
fn a_long_seed_is_taken_in_the_pieces_it_was_cut_into() {
    let len = |e: &Arc<Event>| e.text().len();
    let one = len(&event(0));
    let mut seed = Log::new();
    for e in (0..7).map(event) {
        seed.push(e);
    }
    // Pieces of two events; the last one is short.
    let pieces = pending::seed_pieces(&seed, 2 * one);
    assert_eq!(pieces, [(2, 2 * one), (4, 2 * one), (6, 2 * one), (7, one)]);
    assert_eq!(
        pending::seed_pieces(&seed, 0).len(),
        7,
        "at least one event each"
    );
    let mut p = Pending::default();
    p.push_log(Arc::new(seed.clone()), pieces);
    p.push(event(7), one);
    assert_eq!((p.queued(), p.queued_bytes()), (8, 8 * one));
    let seqs = |t: Taken| t.into_batch().iter().map(|e| e.seq).collect::<Vec<_>>();
    let first = p.take(usize::MAX);
    assert_eq!(first.bytes, 2 * one);
    assert_eq!(seqs(first), [0, 1], "a piece, whatever the budget");
    assert_eq!((p.queued(), p.queued_bytes()), (6, 6 * one));
    assert_eq!(seqs(p.take(0)), [2, 3]);
    // A failed piece goes back in front: the rest of the seed and the
    // queued events follow it as events.
    let failed = p.take(0).into_batch();
    assert_eq!(failed.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
    p.put_back(failed);
    assert_eq!((p.queued(), p.queued_bytes()), (4, 4 * one));
    assert_eq!(seqs(p.take(usize::MAX)), [4, 5, 6, 7]);
    assert!(p.is_empty());
    // The last piece and queued events go in one round, within the
    // budget: the piece always, events only if they fit.
    for (budget, want) in [(8 * one, 8), (7 * one, 7), (one, 7)] {
        let mut p = Pending::default();
        p.push_log(
            Arc::new(seed.clone()),
            pending::seed_pieces(&seed, usize::MAX),
        );
        p.push(event(7), one);
        let taken = p.take(budget);
        assert_eq!(taken.bytes, want * one);
        assert_eq!(seqs(taken), (0..want as u64).collect::<Vec<_>>());
        assert_eq!(p.queued_bytes(), (8 - want) * one);
    }
}

#[test]
fn a_long_queue_is_taken_across_its_blocks_in_order() {
    let mut p = Pending::default();
    let n = 10_000;
    let one = event(0).text().len();
    for seq in 0..n {
        let e = event(seq);
        let len = e.text().len();
        p.push(e, len);
    }
    assert_eq!(p.queued(), n as usize);
    let mut seen = Vec::new();
    // Budgets that end inside blocks, across block ends, and take all.
    for budget in [one * 5000, one * 3, one * 4100, usize::MAX] {
        let taken = p.take(budget);
        let bytes = taken.bytes;
        let batch = taken.into_batch();
        let texts: usize = batch.iter().map(|e| e.text().len()).sum();
        assert_eq!(bytes, texts, "the bytes taken are the batch's");
        assert!(texts <= budget.max(one * 2));
        seen.extend(batch.iter().map(|e| e.seq));
    }
    assert_eq!(
        seen,
        (0..n).collect::<Vec<_>>(),
        "every event once, in order"
    );
    assert!(p.is_empty());
    assert_eq!(p.queued_bytes(), 0);
}

/// Random pushes, bounded and whole takes and put-backs of a failed batch
/// against a plain model queue: same events in the same order, same byte
/// counts, across block boundaries.
#[test]
fn a_queue_matches_a_plain_model_under_random_operations() {
    use crate::test_rng::Rng;
    use std::collections::VecDeque;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Events of a few lengths, so budgets end at varied places.
    let events: Vec<Arc<Event>> = (0..64).map(|s| event(s * 1_000_003)).collect();
    let mut p = Pending::default();
    let mut model: VecDeque<Arc<Event>> = VecDeque::new();
    for step in 0..3000 {
        match rng.below(10) {
            0..=5 => {
                for _ in 0..rng.below(3000) {
                    let e = rng.pick(&events).clone();
                    let len = e.text().len();
                    p.push(e.clone(), len);
                    model.push_back(e);
                }
            }
            6..=8 => {
                let budget = if rng.below(4) > 0 {
                    rng.below(200_000)
                } else {
                    usize::MAX
                };
                let taken = p.take(budget);
                let bytes = taken.bytes;
                let batch = taken.into_batch();
                let mut want = Vec::new();
                let mut sum = 0;
                while let Some(e) = model.front() {
                    let len = e.text().len();
                    let fits = want.is_empty() || sum + len <= budget;
                    if !fits {
                        break;
                    }
                    sum += len;
                    want.push(model.pop_front().expect("front"));
                }
                assert_eq!(bytes, sum, "step {step}: bytes taken");
                assert!(
                    batch.iter().zip(&want).all(|(a, b)| Arc::ptr_eq(a, b))
                        && batch.len() == want.len(),
                    "step {step}: the batch is the model's front"
                );
                if rng.below(3) == 0 {
                    // The write failed: back in front of what came since.
                    for e in (0..rng.below(50)).map(|_| rng.pick(&events).clone()) {
                        let len = e.text().len();
                        p.push(e.clone(), len);
                        model.push_back(e);
                    }
                    for e in want.into_iter().rev() {
                        model.push_front(e);
                    }
                    p.put_back(batch);
                }
            }
            _ => {}
        }
        let model_bytes: usize = model.iter().map(|e| e.text().len()).sum();
        assert_eq!(p.queued(), model.len(), "step {step}: queued events");
        assert_eq!(p.queued_bytes(), model_bytes, "step {step}: queued bytes");
    }
    let rest = p.take(usize::MAX).into_batch();
    assert!(rest.iter().zip(&model).all(|(a, b)| Arc::ptr_eq(a, b)) && rest.len() == model.len());
}

#[test]
fn a_flush_between_rounds_writes_on_the_flushing_thread() {
    let (w, backend, _, writes, _) = setup(60_000);
    let before = WRITES_HERE.with(|c| c.get());
    w.enqueue("s", &[event(0), event(1)]).unwrap();
    w.flush("s").unwrap();
    assert_eq!(stored_len(&backend), 2);
    assert_eq!(writes.load(Ordering::SeqCst), 1, "one batch");
    assert_eq!(
        WRITES_HERE.with(|c| c.get()) - before,
        1,
        "written by the flushing thread, not the writer's"
    );
    // The writer thread still writes what the window makes due.
    let (w, backend, _, _, _) = setup(5);
    w.enqueue("s", &[event(0)]).unwrap();
    let start = Instant::now();
    while stored_len(&backend) < 1 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(stored_len(&backend), 1, "the window's round wrote it");
}

#[test]
fn a_flush_writes_a_long_backlog_in_bounded_rounds() {
    // 40 events of 1 MiB: a flush writes them in rounds of at most
    // ROUND_BYTES (one zstd frame each on JSONL), never as one batch.
    let big = "x".repeat(1 << 20);
    let events: Vec<_> = (0..40)
        .map(|seq| {
            Arc::new(Event::new(
                JsString::from("plugin/x"),
                seq,
                0,
                Value::str(&big),
                None,
                None,
                APPEND_ORDER,
            ))
        })
        .collect();
    let total: usize = events.iter().map(|e| e.text().len()).sum();
    for seeded in [false, true] {
        let (w, backend, _, _, _) = setup(60_000);
        BATCH_BYTES_HERE.with(|b| b.borrow_mut().clear());
        if seeded {
            // A new session's whole log (a fork's seed) goes in pieces too.
            let mut log = Log::new();
            for e in &events {
                log.push(e.clone());
            }
            w.enqueue_log("s", &log).unwrap();
        } else {
            for e in &events {
                w.enqueue("s", std::slice::from_ref(e)).unwrap();
            }
        }
        w.flush("s").unwrap();
        assert_eq!(stored_len(&backend), 40, "the flush wrote everything");
        let sizes = BATCH_BYTES_HERE.with(|b| b.borrow().clone());
        assert_eq!(sizes.iter().sum::<usize>(), total, "{sizes:?}");
        assert!(sizes.len() >= 3, "written in rounds: {sizes:?}");
        assert!(sizes.iter().all(|&n| n <= ROUND_BYTES), "{sizes:?}");
    }
}

#[test]
fn a_fork_seed_written_on_the_callers_thread_is_handed_over_shared() {
    // A memory store writes on the caller's thread: a fork child's seed
    // (the parent's events) must reach its backend as the shared log, not
    // a copy of every event (a fork of a long log stays O(chunks)).
    let seeds = Chunks::default();
    let backend: SharedBackend = Arc::new(Mutex::new(Box::new(Flaky {
        inner: MemoryBackend::new(),
        fail: Arc::default(),
        writes: Arc::default(),
        seeds: seeds.clone(),
    })));
    let w = Writer::new(backend.clone(), 0);
    let log: Log = (0..CHUNK as u64 + 10).map(event).collect();
    for (id, fork) in [("parent", None), ("child", Some("parent"))] {
        let header = Value::obj([("version", Value::Number(0.0)), ("id", Value::str(id))]);
        w.track(id, &header, None, false);
        if let Some(parent) = fork {
            w.track_fork(id, parent, log.len() as u64);
        }
        w.enqueue_log(id, &log).unwrap();
    }
    let got = seeds.lock().unwrap();
    assert_eq!(got.len(), 2, "both seeds arrived as logs");
    assert!(
        got.iter().all(|seed| seed.shares_chunk(0, &log)),
        "shared, not copied"
    );
    let stored = lock_backend(&backend).load("child").unwrap().unwrap();
    assert_eq!(stored.events.len(), log.len());
}
