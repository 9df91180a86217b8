//! The whole-log read of a long session, which decodes on two threads:
//! it returns what was appended, in order, and damage far into the log is
//! judged as in a short one (torn tail or committed corruption).

use crate::rule::Rule;
use std::sync::Arc;

use super::tests::{delta, header, open, plain, raw, values, TempDir};
use super::*;

/// Turns of `turn/start`, `user/message` (every 7th with data large enough
/// to be compressed), `turn/end`; every 10th turn also holds a run of
/// deltas (one packed row). `turns` turns, then `open_tail` events of an
/// unfinished turn. Well past the rows where the second thread starts.
fn long_log(turns: u64, open_tail: u64) -> Vec<Arc<Event>> {
    let mut out: Vec<Arc<Event>> = Vec::new();
    let big = "x".repeat(6000);
    let next = |out: &Vec<Arc<Event>>| out.len() as u64;
    for t in 0..turns {
        let turn = format!(r#"{{"turn":{t}}}"#);
        out.push(plain(next(&out), "turn/start", &turn, ""));
        let text = if t % 7 == 0 { big.as_str() } else { "hi" };
        let data = format!(r#"{{"m":{t},"text":"{text}"}}"#);
        out.push(plain(next(&out), "user/message", &data, ""));
        if t % 10 == 0 {
            for _ in 0..5 {
                let s = next(&out);
                out.push(delta(s, 50 + s as i64, "text", "d"));
            }
        }
        out.push(plain(next(&out), "turn/end", &turn, ""));
    }
    for i in 0..open_tail {
        let data = format!(r#"{{"tail":{i}}}"#);
        out.push(plain(next(&out), "user/message", &data, ""));
    }
    out
}

fn stored(tag: &str, events: &[Arc<Event>]) -> TempDir {
    let dir = TempDir::new(tag);
    open(&dir.db()).append(&header("s"), events, true).unwrap();
    dir
}

#[test]
fn a_long_log_reads_back_whole_and_in_order() {
    let events = long_log(10_000, 0);
    let dir = stored("long", &events);
    let loaded = open(&dir.db()).load("s").unwrap().unwrap();
    assert!(loaded.torn.is_none());
    assert_eq!(loaded.events, values(&events));
}

#[test]
fn damage_deep_before_the_last_turn_end_is_committed_corruption() {
    let events = long_log(10_000, 0);
    let dir = stored("long-committed", &events);
    raw(&dir.db())
        .execute_batch("UPDATE events SET source_event_seqs = X'80' WHERE seq = 25001")
        .unwrap();
    let err = open(&dir.db()).load("s").unwrap_err();
    assert_eq!(
        (err.status, err.rule, err.cause),
        (
            Status::Corrupt,
            Rule::LoadCorruptCommittedRow,
            Some(Rule::CodecTruncated)
        )
    );
    assert!(err.message.contains("at seq 25001"), "{}", err.message);
}

#[test]
fn a_gap_deep_before_the_last_turn_end_is_committed_corruption() {
    let events = long_log(10_000, 0);
    let dir = stored("long-gap", &events);
    raw(&dir.db())
        .execute_batch("DELETE FROM events WHERE seq = 20000")
        .unwrap();
    let err = open(&dir.db()).load("s").unwrap_err();
    assert_eq!(err.rule, Rule::LoadCorruptCommittedRow);
    assert!(
        err.message.contains("at seq 20001 (expected seq 20000)"),
        "{}",
        err.message
    );
}

#[test]
fn damage_in_a_long_open_turn_is_a_torn_tail() {
    let events = long_log(5_000, 12_000);
    let n = events.len() as u64;
    let torn_at = n - 3_000;
    let dir = stored("long-torn", &events);
    raw(&dir.db())
        .execute_batch(&format!(
            "UPDATE events SET data = '{{' WHERE seq = {torn_at}"
        ))
        .unwrap();
    let loaded = open(&dir.db()).load("s").unwrap().unwrap();
    assert_eq!(loaded.events.len() as u64, torn_at);
    assert_eq!(loaded.events, values(&events[..torn_at as usize]));
    let torn = loaded.torn.unwrap();
    assert_eq!(
        (torn.at.value(), torn.recovered, torn.why),
        (torn_at, 0, TornKind::UndecodableRows)
    );
}

/// A range read (windowed sessions) is the slice of a whole read, also
/// when it starts inside a packed row or right after single rows it skips
/// without decoding.
#[test]
fn a_range_read_is_the_slice_of_a_whole_read() {
    use super::tests::{delta, header, open, plain, TempDir};
    let dir = TempDir::new("range");
    let mut b = open(&dir.db());
    // Runs of text deltas (packed rows) between single events.
    let events: Vec<_> = (0..3000u64)
        .map(|i| {
            if i % 300 < 200 {
                delta(i, 5, "text", &format!("t{i}"))
            } else {
                plain(i, "plugin/x", &format!(r#"{{"i":{i}}}"#), "")
            }
        })
        .collect();
    for (k, batch) in events.chunks(700).enumerate() {
        b.append(&header("r"), batch, k == 0).unwrap();
    }
    let all = b.load("r").unwrap().unwrap().events;
    assert_eq!(all.len(), 3000);
    for (from, to) in [
        (0, 10),
        (150, 160),
        (199, 260),
        (250, 1300),
        (2999, 3000),
        (2990, 3100),
        (3000, 3010),
    ] {
        let got = b.load_range("r", from, to).unwrap();
        let want = &all[(from as usize).min(3000)..(to as usize).min(3000)];
        assert_eq!(got, want, "{from}..{to}");
    }
}

/// A streaming read (windowed open): every event of the whole read, in
/// order, in batches; a gap or a row that does not decode, far into the
/// log, and an absent session answer `None` (the whole read decides).
#[test]
fn a_streaming_read_is_the_whole_read_or_declines() {
    let events = long_log(3_000, 5);
    let dir = stored("long-stream", &events);
    // `slow`: the sink takes its time, so the reading thread gets ahead
    // and decodes the pages it cannot hand on yet.
    let stream = |b: &mut SqliteBackend, id: &str, slow: bool| {
        let mut got = Vec::new();
        let mut batches = 0;
        let end = b
            .load_streaming(id, &mut |_, batch| {
                if slow {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                batches += 1;
                got.extend(batch);
                Ok(())
            })
            .unwrap();
        end.map(|_| (got, batches))
    };
    for slow in [false, true] {
        let mut b = open(&dir.db());
        let ahead = super::stream::decoded_ahead();
        let (got, batches) = stream(&mut b, "s", slow).expect("a clean log streams");
        assert_eq!(got, values(&events));
        assert!(batches > 2, "{batches} batches");
        if slow {
            assert!(
                super::stream::decoded_ahead() > ahead,
                "no page decoded ahead"
            );
        }
        assert!(stream(&mut b, "absent", slow).is_none());
    }
    raw(&dir.db())
        .execute_batch("UPDATE events SET source_event_seqs = X'80' WHERE seq = 6001")
        .unwrap();
    for slow in [false, true] {
        assert!(stream(&mut open(&dir.db()), "s", slow).is_none());
    }
    raw(&dir.db())
        .execute_batch("DELETE FROM events WHERE seq = 6001")
        .unwrap();
    for slow in [false, true] {
        assert!(stream(&mut open(&dir.db()), "s", slow).is_none());
    }
}
