//! The store's connection goes through a [`Proxy`] that misbehaves: a
//! COMMIT whose reply is lost, a network that black-holes every packet.
//! Whatever happened, every acknowledged event is stored exactly once and
//! the writer goes on.

use std::sync::Arc;

use super::proxy::Proxy;
use super::{texts, turn, Fixture};
use crate::rule::Rule;
use crate::store::{ForkOptions, LiveSession, Store};

/// The events of `s` as this store holds them.
fn live_texts(s: &Arc<LiveSession>) -> Vec<String> {
    s.with(|x| Ok(x.events().iter().map(|e| e.to_json()).collect()))
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
