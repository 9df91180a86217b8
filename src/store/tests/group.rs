//! Group commits: one backend write carries the batches of several
//! sessions, and each batch stands or fails on its own; concurrent flushes
//! of different sessions share that write, and a failure fails exactly the
//! flushes whose events it held.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::backend::{Batch, Events};
use super::memory::MemoryBackend;
use super::{hurry::Hurry, Backend, CreateOptions, Store, StoreConfig};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::{self, Value};
use crate::rule::Rule;

fn header(id: &str) -> Value {
    Value::obj([
        ("version", Value::Number(0.0)),
        ("id", Value::str(id)),
        ("createdAt", Value::Number(1_700_000_000_000.0)),
    ])
}

fn ev(seq: u64) -> Arc<Event> {
    let text =
        format!(r#"{{"type":"x/y","seq":{seq},"time":1,"data":{{"n":{seq}}},"ignorable":true}}"#);
    Arc::new(Event::from_envelope(json::parse(&text).unwrap(), "test event").unwrap())
}

#[cfg(any(feature = "sqlite", feature = "jsonl"))]
fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dsh-group-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    d
}

/// The backends a group write is checked on (PostgreSQL with
/// `DSH_TEST_POSTGRES_URL`).
// A memory-only build checks the memory backend alone.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "jsonl", feature = "postgres")),
    allow(unused_mut, unused_variables)
)]
fn backends(name: &str) -> Vec<(String, Box<dyn Backend>)> {
    let mut out: Vec<(String, Box<dyn Backend>)> =
        vec![("memory".into(), Box::new(MemoryBackend::new()))];
    #[cfg(feature = "sqlite")]
    {
        let db = temp(&format!("{name}-sqlite")).join("g.db");
        let b = crate::store::sqlite::SqliteBackend::open(&db, 1000).unwrap();
        out.push(("sqlite".into(), Box::new(b)));
    }
    #[cfg(feature = "jsonl")]
    for (tag, c) in [
        ("jsonl", crate::store::jsonl::Compression::Zstd),
        ("jsonl-raw", crate::store::jsonl::Compression::None),
    ] {
        let root = temp(&format!("{name}-{tag}"));
        out.push((
            tag.into(),
            Box::new(crate::store::jsonl::JsonlBackend::open(&root, c).unwrap()),
        ));
    }
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("DSH_TEST_POSTGRES_URL") {
        let schema = format!("group_{name}_{}", std::process::id());
        let b = crate::store::postgres::PostgresBackend::open(&url, &schema).unwrap();
        out.push(("postgres".into(), Box::new(b)));
    }
    out
}

/// A batch that does not continue its log fails alone: the batches
/// written with it are stored, it is not.
#[test]
fn a_failing_batch_in_a_group_fails_alone() {
    for (name, mut b) in backends("alone") {
        let ids = ["a", "b", "c"];
        let headers: Vec<Value> = ids.iter().map(|id| header(id)).collect();
        let first = [ev(0)];
        let batches: Vec<Batch<'_>> = headers
            .iter()
            .map(|h| Batch {
                header: h,
                events: Events::Slice(&first),
                materialize: true,
                fork: None,
            })
            .collect();
        assert!(b.write(&batches).iter().all(Result::is_ok), "{name}");
        let next = [ev(1), ev(2)];
        let gap = [ev(5)];
        let batches: Vec<Batch<'_>> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| Batch {
                header: h,
                events: Events::Slice(if i == 1 { &gap } else { &next }),
                materialize: false,
                fork: None,
            })
            .collect();
        let results = b.write(&batches);
        assert!(
            results[0].is_ok() && results[2].is_ok(),
            "{name}: {results:?}"
        );
        assert_eq!(
            results[1].as_ref().unwrap_err().status,
            Status::Conflict,
            "{name}"
        );
        for (id, want) in [("a", 3), ("b", 1), ("c", 3)] {
            let got = b.load(id).unwrap().unwrap().events.len();
            assert_eq!(got, want, "{name}: session {id}");
        }
        // The failed session goes on from what is stored.
        let again = [ev(1)];
        let batch = Batch {
            header: &headers[1],
            events: Events::Slice(&again),
            materialize: false,
            fork: None,
        };
        assert!(b.write(&[batch]).pop().unwrap().is_ok(), "{name}");
    }
}

/// A backend that refuses every batch of one session and passes the
/// others, as a group, to the backend it wraps; it counts the writes
/// that carried more than one batch.
struct FailOne {
    inner: Box<dyn Backend>,
    id: String,
    groups: Arc<AtomicU64>,
}

impl Backend for FailOne {
    crate::store::backend::wrapped_backend!(inner);
    fn precompute(&self) -> Option<Arc<dyn super::backend::Precompute>> {
        self.inner.precompute()
    }
    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        // As long as a sync: flushes that arrive meanwhile find the write
        // in progress even when a busy machine runs the threads one by one.
        std::thread::sleep(std::time::Duration::from_micros(500));
        if batches.len() > 1 {
            self.groups.fetch_add(1, Ordering::SeqCst);
        }
        let doomed = |b: &Batch<'_>| super::backend::header_id(b.header) == self.id;
        let passed: Vec<Batch<'_>> = batches.iter().filter(|b| !doomed(b)).copied().collect();
        let mut written = self.inner.write(&passed).into_iter();
        batches
            .iter()
            .map(|b| match doomed(b) {
                true => Err(Error::new(Status::Io, Rule::IoWrite, "injected failure")),
                false => written.next().unwrap_or(Ok(())),
            })
            .collect()
    }
}

/// Eight threads flush their own sessions at once, again and again: the
/// flushes share group commits, the flushes of the session whose writes
/// fail fail (its events stay queued), and every other flushed event is
/// stored as it was appended. Every third step carries a value large
/// enough to be compressed (on SQLite, by the flushing thread before its
/// round).
#[test]
fn concurrent_flushes_share_writes_and_a_failure_fails_only_its_own() {
    for (name, inner) in backends("flushes") {
        let groups = Arc::new(AtomicU64::new(0));
        let backend = FailOne {
            inner,
            id: "s3".into(),
            groups: groups.clone(),
        };
        let mut config = StoreConfig::memory();
        config.batch_window_ms = 1000;
        let store = Store::over(Box::new(backend), &config, Arc::new(Hurry::default()));
        let flushed: Vec<(String, Vec<Value>, bool)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|t| {
                    let store = store.clone();
                    scope.spawn(move || {
                        let id = format!("s{t}");
                        let s = store.create(CreateOptions::with_id(&id)).unwrap();
                        let (mut appended, mut failed) = (Vec::new(), false);
                        for step in 0..40 {
                            let data = match step % 3 {
                                0 => format!(
                                    r#"{{"step":{step},"text":"{}"}}"#,
                                    format!("{id} at step {step} ").repeat(400)
                                ),
                                _ => format!(r#"{{"step":{step}}}"#),
                            };
                            s.append_text("x/y", &data, Some(r#"{"ignorable":true}"#))
                                .unwrap();
                            appended.push(json::parse(&data).unwrap());
                            failed |= s.flush().is_err();
                        }
                        (id, appended, failed)
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for (id, appended, failed) in &flushed {
            assert_eq!(*failed, id == "s3", "{name}: {id}");
            let stored = store.inspect(id).map(|i| {
                let data = i.events.iter().map(|e| json::parse(e.data_text()).unwrap());
                data.collect::<Vec<Value>>()
            });
            match id.as_str() {
                "s3" => assert!(
                    stored.as_ref().is_err() || stored.as_ref().is_ok_and(Vec::is_empty),
                    "{name}: s3 stored something"
                ),
                _ => assert!(stored.unwrap() == *appended, "{name}: {id}"),
            }
        }
        assert!(
            groups.load(Ordering::SeqCst) > 0,
            "{name}: no write carried two sessions"
        );
    }
}
