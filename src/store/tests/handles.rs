//! Tests of what a live handle's flush and close acknowledge when they
//! race each other and other opens of the same id.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::backend::Batch;
use super::memory::MemoryBackend;
use super::{hurry::Hurry, Backend, CreateOptions, Store, StoreConfig};
use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// A memory backend whose appends are refused as another writer's
/// (`DSH_E_CONFLICT`) while `conflict` is set.
struct Contested {
    inner: MemoryBackend,
    conflict: Arc<AtomicBool>,
}

impl Backend for Contested {
    crate::store::backend::wrapped_backend!(inner);
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        if self.conflict.load(Ordering::SeqCst) {
            std::thread::yield_now();
            let e = Error::new(
                Status::Conflict,
                Rule::PersistAppendSeqMismatch,
                "another writer wrote this session",
            );
            return batches.iter().map(|_| Err(e.clone())).collect();
        }
        self.inner.write(batches)
    }
}

fn contested() -> (Arc<Store>, Arc<AtomicBool>) {
    let conflict = Arc::new(AtomicBool::new(false));
    let backend = Contested {
        inner: MemoryBackend::new(),
        conflict: conflict.clone(),
    };
    let mut config = StoreConfig::memory();
    config.batch_window_ms = 1;
    let store = Store::over(Box::new(backend), &config, Arc::new(Hurry::default()));
    (store, conflict)
}

/// A close whose drain meets another writer drops the handle's events: a
/// flush racing that close must never report them durable, also when the
/// close runs entirely between the flush's check that the handle is open
/// and its wait for the writer.
#[test]
fn a_flush_racing_a_close_that_drops_the_events_is_not_acknowledged() {
    let (store, conflict) = contested();
    conflict.store(true, Ordering::SeqCst);
    let s = store.create(CreateOptions::with_id("c")).unwrap();
    s.append_text("race/x", "{}", Some(r#"{"ignorable":true}"#))
        .unwrap();
    let (close_now, closed) = (
        Arc::new(std::sync::Barrier::new(2)),
        Arc::new(AtomicBool::new(false)),
    );
    std::thread::scope(|scope| {
        let closer = scope.spawn(|| {
            close_now.wait();
            let r = s.close();
            closed.store(true, Ordering::SeqCst);
            r
        });
        let (go, done) = (close_now.clone(), closed.clone());
        let _hook = crate::store::faults::install(&super::session::FLUSH_CHECKED, move |()| {
            go.wait();
            // Give the close every chance to run to its end first.
            let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
            while !done.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(())
        });
        let flushed = s.flush();
        assert!(
            flushed.is_err(),
            "a flush acknowledged events its close dropped"
        );
        assert_eq!(closer.join().unwrap().unwrap_err().status, Status::Conflict);
    });
}

/// Two opens of one stored id racing each other: exactly one gets the
/// handle, the other a conflict, and the log is repaired once.
#[test]
fn racing_opens_of_one_id_hand_out_one_handle() {
    let (store, _) = contested();
    let s = store.create(CreateOptions::with_id("r")).unwrap();
    s.append_text("turn/start", r#"{"turn":1}"#, None).unwrap();
    s.close().unwrap();
    for _ in 0..200 {
        let opened: Vec<_> = std::thread::scope(|scope| {
            let a = scope.spawn(|| store.open_session("r"));
            let b = scope.spawn(|| store.open_session("r"));
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let handles: Vec<_> = opened.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(handles.len(), 1, "{opened:?}");
        let refused = opened.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert_eq!(
            (refused.status, refused.rule),
            (Status::Conflict, Rule::LoadLivePrepare)
        );
        handles[0].session.close().unwrap();
    }
    // One repair (turn/end + end-seed), then one end-seed per reopen at most.
    let log = store.inspect("r").unwrap().events;
    let ends = log.iter().filter(|e| e.ty == "turn/end").count();
    assert_eq!(ends, 1, "the interrupted turn was closed more than once");
}
