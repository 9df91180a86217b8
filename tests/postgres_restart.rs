//! The PostgreSQL server stopped while a writer writes, then started again:
//! no acknowledged event is lost, none is stored twice, and the writer goes
//! on from what the database holds. Its own test binary, because it stops
//! the server every other PostgreSQL test uses (cargo runs test binaries
//! one after another).
//!
//! Needs `DSH_TEST_POSTGRES_URL` and the commands `DSH_TEST_POSTGRES_STOP`
//! and `DSH_TEST_POSTGRES_START` (`scripts/pg-cluster.sh` writes all three);
//! without them it says it was skipped.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_session::store::{BackendConfig, CreateOptions, Store, StoreConfig};
use dsh_session::Rule;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn sh(command: &str) {
    let status = Command::new("sh")
        .args(["-c", command])
        .status()
        .expect("run the server command");
    assert!(status.success(), "{command}: {status}");
}

#[test]
fn a_server_restart_mid_batch_loses_no_acknowledged_event_and_duplicates_none() {
    let (Some(url), Some(stop), Some(start)) = (
        env("DSH_TEST_POSTGRES_URL"),
        env("DSH_TEST_POSTGRES_STOP"),
        env("DSH_TEST_POSTGRES_START"),
    ) else {
        eprintln!(
            "skipped: no PostgreSQL server to restart (DSH_TEST_POSTGRES_URL, _STOP and _START; scripts/test.sh sets them)"
        );
        return;
    };
    let schema = format!("restart_{}", std::process::id());
    let mut config = StoreConfig::postgres(&url);
    config.backend = BackendConfig::postgres(&url, &schema);
    config.batch_window_ms = 2;
    let store = Store::open(config.clone()).expect("open");
    let s = store.create(CreateOptions::with_id("r")).unwrap();
    let stop_writing = Arc::new(AtomicBool::new(false));
    let writer = {
        let s = s.clone();
        let stop_writing = stop_writing.clone();
        std::thread::spawn(move || {
            let (mut appended, mut acked, mut failed) = (0u64, 0u64, 0u64);
            let mut turn = 1;
            while !stop_writing.load(Ordering::SeqCst) {
                s.append_text("turn/start", &format!(r#"{{"turn":{turn}}}"#), None)
                    .unwrap();
                for i in 0..40 {
                    let data = format!(
                        r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"w{i} {}"}}}}"#,
                        "x".repeat(300)
                    );
                    s.append_text("assistant/chunk", &data, None).unwrap();
                }
                s.append_text(
                    "turn/end",
                    &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
                    None,
                )
                .unwrap();
                appended += 42;
                turn += 1;
                match s.flush() {
                    Ok(()) => acked = appended,
                    Err(e) => {
                        assert!(
                            matches!(e.rule, Rule::PostgresConnect | Rule::PostgresQuery),
                            "{e:?}"
                        );
                        failed += 1;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
            // The server is back: everything appended is written.
            let deadline = Instant::now() + Duration::from_secs(30);
            while let Err(e) = s.flush() {
                assert!(Instant::now() < deadline, "never flushed again: {e:?}");
                std::thread::sleep(Duration::from_millis(50));
            }
            (appended, acked, failed)
        })
    };
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        sh(&stop);
        std::thread::sleep(Duration::from_millis(300));
        sh(&start);
    }
    std::thread::sleep(Duration::from_millis(300));
    stop_writing.store(true, Ordering::SeqCst);
    let (appended, acked, failed) = writer.join().unwrap();
    s.close().unwrap();
    drop(s);
    drop(store);

    let reader = Store::open(config.read_only()).expect("reader");
    let r = reader.open_session("r").unwrap().session;
    let seqs: Vec<u64> = r
        .with(|x| Ok(x.events().iter().map(|e| e.seq).collect()))
        .unwrap();
    // The stored log is contiguous (no gap, no duplicate) and holds every
    // event appended: those acknowledged before a stop and those written
    // after the restart.
    assert!(seqs.iter().enumerate().all(|(i, &q)| i as u64 == q));
    assert_eq!(seqs.len() as u64, appended, "stored vs appended");
    assert!(
        acked > 0 && failed > 0,
        "the restarts met the writer ({acked} acked, {failed} failed flushes)"
    );
    println!(
        "3 server restarts mid-write: {appended} events appended, {acked} acknowledged before the last stop or later, {failed} flushes failed while the server was down, {} stored",
        seqs.len()
    );
}
