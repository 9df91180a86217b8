//! A fork re-admits its inherited prefix as a snapshot seed: what the
//! source was allowed to hold (a stored -0, a live message without id) is
//! refused in the child, every time — remembered checks never hide that.

mod store_support;

use store_support::*;

#[test]
fn a_live_message_without_id_refuses_every_fork_and_a_clean_prefix_forks() {
    // Only the reference's admission lets a message without id in.
    let store = Store::open(&declaring(r#"{"admission":"reference"}"#)).unwrap();
    let s = store.create(r#"{"id":"src"}"#).unwrap();
    s.append_ok("plugin/a", "{}", None);
    for round in 0..2 {
        let child = s
            .fork(-1, &format!(r#"{{"id":"ok{round}"}}"#))
            .expect("clean prefix forks");
        assert_eq!(child.events().as_array().unwrap().len(), 2);
    }
    s.append_ok(
        "user/message",
        r#"{"role":"user","content":[],"source":{"kind":"user"}}"#,
        Some(r#"{"surfaceOp":"append"}"#),
    );
    for round in 0..2 {
        let err = s
            .fork(-1, &format!(r#"{{"id":"bad{round}"}}"#))
            .err()
            .expect("refused");
        assert_eq!(
            (err.0, rule(&err.1).as_str()),
            (DSH_E_REJECTED, "msg.unidentified"),
            "round {round}"
        );
    }
    // An earlier boundary that leaves the message out still forks.
    assert!(s.fork(0, r#"{"id":"early"}"#).is_ok());
}

#[test]
fn a_stored_negative_zero_opens_but_refuses_every_fork() {
    let (_dir, config) = raw_jsonl_store(
        "fork-neg-zero",
        "z",
        &[r#"{"type":"plugin/x","seq":0,"time":1,"data":{"v":-0},"ignorable":true}"#],
    );
    let store = Store::open(&config).unwrap();
    let (s, _) = store
        .open_session("z")
        .expect("restore mode does not walk for -0");
    for round in 0..2 {
        let err = s
            .fork(-1, &format!(r#"{{"id":"c{round}"}}"#))
            .err()
            .expect("refused");
        assert_eq!(
            (err.0, rule(&err.1).as_str()),
            (DSH_E_INVALID_JSON, "json.not-lossless"),
            "round {round}"
        );
    }
}
