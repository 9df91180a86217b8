//! The store's connection goes through a [`Proxy`] that misbehaves: a
//! COMMIT whose reply is lost, a network that black-holes every packet.
//! Whatever happened, every acknowledged event is stored exactly once and
//! the writer goes on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::proxy::Proxy;
use super::{texts, turn, Fixture};
use crate::error::Status;
use crate::rule::Rule;
use crate::store::{BackendConfig, CreateOptions, ForkOptions, LiveSession, Store};

/// The events of `s` as this store holds them.
fn live_texts(s: &Arc<LiveSession>) -> Vec<String> {
    s.with(|x| Ok(x.events().iter().map(|e| e.text().to_string()).collect()))
        .unwrap()
}

#[test]
fn a_fork_whose_commit_reply_was_lost_writes_on() {
    let Some(mut f) = Fixture::new() else { return };
    let proxy = Proxy::start(&f.url);
    let mut config = f.config_at(&proxy.url(&f.url));
    // Nothing is written before a flush asks for it.
    config.batch_window_ms = 60_000;
    let store = Store::open(config).unwrap();
    let p = store
        .create(crate::store::CreateOptions::with_id("p"))
        .unwrap();
    for n in 1..=4 {
        turn(&p, n);
    }
    p.flush().unwrap();
    // The child's first batch creates its row and copies the parent's
    // prefix inside the database, in one transaction: the server commits
    // it, the store never hears so.
    let child = p.fork(ForkOptions::at(8).with_id("c")).unwrap();
    proxy.lose_next_commit_reply();
    let e = child.flush().unwrap_err();
    assert_eq!(e.rule, Rule::PostgresConnect, "{e:?}");
    assert_eq!(proxy.commits_lost(), 1);
    let forked = live_texts(&child).len() as i64;
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE session_id = 'c'"),
        forked,
        "the database holds the child's batch"
    );
    // The next flush finds exactly its own batch stored, and goes on.
    turn(&child, 5);
    child.flush().unwrap();
    turn(&child, 6);
    let expected = live_texts(&child);
    child.close().unwrap();
    p.close().unwrap();
    drop(store);

    assert_eq!(texts(&f.reader(), "c"), expected);
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE session_id = 'c'"),
        expected.len() as i64
    );
    assert_eq!(
        f.count("SELECT next_seq FROM $S.sessions WHERE id = 'c'"),
        expected.len() as i64
    );
}

#[test]
fn a_black_holed_connection_fails_a_flush_within_the_timeout() {
    let Some(mut f) = Fixture::new() else { return };
    let proxy = Arc::new(Proxy::start(&f.url));
    let limit = Duration::from_millis(1500);
    let mut config = f.config_at(&proxy.url(&f.url));
    if let BackendConfig::Postgres {
        statement_timeout_ms,
        ..
    } = &mut config.backend
    {
        *statement_timeout_ms = limit.as_millis() as u64;
    }
    config.batch_window_ms = 60_000;
    let store = Store::open(config).unwrap();
    let s = store.create(CreateOptions::with_id("s")).unwrap();
    turn(&s, 1);
    s.flush().unwrap();

    // Nothing passes either way; every socket stays open. (Healed anyway
    // after a while, so that a flush that waits for it fails the test
    // instead of hanging it.)
    proxy.hole(true);
    let (healed, heal) = std::sync::mpsc::channel::<()>();
    let healer = {
        let proxy = proxy.clone();
        std::thread::spawn(move || {
            let _ = heal.recv_timeout(limit * 4);
            proxy.hole(false);
        })
    };
    turn(&s, 2);
    let start = Instant::now();
    let e = s.flush().unwrap_err();
    let took = start.elapsed();
    assert_eq!(
        (e.status, e.rule),
        (Status::Io, Rule::PostgresTimeout),
        "{e:?}"
    );
    assert!(
        took >= limit.mul_f32(0.9) && took < limit * 2,
        "the flush failed after {took:?}, its statements wait {limit:?}"
    );

    // The network heals: the batch that waited in it reaches the server
    // on the abandoned connection and commits there. The next flush
    // connects again, finds exactly its own batch stored, and goes on.
    let accepted = proxy.accepted();
    proxy.hole(false);
    drop(healed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.count("SELECT count(*) FROM $S.events WHERE session_id = 's'") < 6 {
        assert!(
            Instant::now() < deadline,
            "the abandoned batch never landed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    turn(&s, 3);
    s.flush().unwrap();
    assert!(proxy.accepted() > accepted, "the flush connected again");
    turn(&s, 4);
    let expected = live_texts(&s);
    s.close().unwrap();
    drop(store);
    healer.join().unwrap();

    assert_eq!(texts(&f.reader(), "s"), expected);
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE session_id = 's'"),
        expected.len() as i64
    );
    assert_eq!(
        f.count("SELECT next_seq FROM $S.sessions WHERE id = 's'"),
        expected.len() as i64
    );
}

#[test]
fn the_statement_timeout_bounds_unacknowledged_data_too() {
    let Some(f) = Fixture::new() else { return };
    let limit = Duration::from_millis(1234);
    let b = super::super::PostgresBackend::open_with(&f.url, &f.schema, false, limit).unwrap();
    assert_eq!(b.config.get_tcp_user_timeout(), Some(&limit));
    assert_eq!(b.client.as_ref().map(|c| c.limit()), Some(limit));
}
