//! Tests of `log`.
use super::*;
use crate::engine::event::APPEND_ORDER;
use crate::json::Value;

const SIZES: [usize; 6] = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7];

fn event(seq: u64) -> Arc<Event> {
    let ty = if seq % 5 == 0 {
        "turn/start"
    } else {
        "plugin/x"
    };
    Arc::new(Event::new(
        JsString::from(ty),
        seq,
        seq as i64,
        Value::str(&"x".repeat(seq as usize % 7)),
        None,
        None,
        APPEND_ORDER,
    ))
}

fn model(n: usize) -> Vec<Arc<Event>> {
    (0..n as u64).map(event).collect()
}

/// Checks every read path of `log` against `model`.
fn check(log: &Log, model: &[Arc<Event>]) {
    let texts = |it: &mut dyn Iterator<Item = Arc<Event>>| -> Vec<String> {
        it.map(|e| e.text().to_string()).collect()
    };
    let want: Vec<String> = model.iter().map(|e| e.text().to_string()).collect();
    assert_eq!(log.len(), model.len());
    assert_eq!(log.is_empty(), model.is_empty());
    assert_eq!(texts(&mut log.iter()), want);
    let mut back = texts(&mut log.iter().rev());
    back.reverse();
    assert_eq!(back, want);
    assert_eq!(log.iter().len(), model.len());
    assert_eq!(texts(&mut log.to_vec().into_iter()), want);
    assert!(log.get(model.len()).is_none() && log.text(model.len()).is_none());
    assert_eq!(log.first().map(|e| e.seq), model.first().map(|e| e.seq));
    assert_eq!(log.last().map(|e| e.seq), model.last().map(|e| e.seq));
    for (i, e) in model.iter().enumerate() {
        let got = log.get(i).unwrap();
        assert_eq!(*got, **e);
        assert_eq!(log.text(i), Some(e.text()));
        assert_eq!(log.ty(i), Some(&e.ty));
        // The tail is always held as events; sealed chunks of small
        // events are packed.
        match log.resident(i) {
            Some(r) => assert_eq!(**r, **e),
            None => assert!(i < log.full_chunks() * CHUNK),
        }
    }
    for k in 0..log.full_chunks() {
        let chunk = log.chunk(k).unwrap();
        assert_eq!(chunk.len(), CHUNK);
        assert_eq!(*chunk[7], *model[k * CHUNK + 7]);
    }
    if model.len() > 3 {
        let mid = model.len() / 2;
        assert_eq!(
            texts(&mut log.range(1..mid)),
            want[1..mid].to_vec(),
            "a range"
        );
        assert_eq!(log.range(..mid).nth(mid - 1).unwrap().seq, mid as u64 - 1);
    }
}

#[test]
fn push_and_read_across_chunk_boundaries() {
    for n in SIZES {
        let m = model(n);
        let log: Log = m.iter().cloned().collect();
        check(&log, &m);
        // The tail hands out the events themselves; sealed chunks are
        // packed, their events made again.
        let sealed = log.full_chunks() * CHUNK;
        for (i, e) in m.iter().enumerate().skip(sealed) {
            assert!(Arc::ptr_eq(log.resident(i).unwrap(), e));
        }
        if n > CHUNK {
            assert!(log.resident(0).is_none());
            assert!(!Arc::ptr_eq(&log.get(0).unwrap(), &m[0]));
        }
    }
}

#[test]
fn prefixes_and_truncations_at_every_kind_of_boundary() {
    let m = model(3 * CHUNK + 7);
    let log: Log = m.iter().cloned().collect();
    for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 5, m.len()] {
        let p = log.prefix(len);
        check(&p, &m[..len]);
        for k in 0..len / CHUNK {
            assert!(p.shares_chunk(k, &log), "chunk {k} of a prefix is shared");
        }
        let mut t = log.clone();
        t.truncate(len);
        check(&t, &m[..len]);
        // The log itself is untouched, and grows on independently.
        t.push(event(len as u64));
        check(&log, &m);
    }
}

#[test]
fn logs_fed_the_same_events_share_their_packed_chunks() {
    // The memory store keeps its own log of a session's events.
    let m = model(2 * CHUNK + 1);
    let (mut a, mut b) = (Log::new(), Log::new());
    for e in &m {
        a.push(e.clone());
        b.push(e.clone());
    }
    assert!(a.shares_chunk(0, &b) && a.shares_chunk(1, &b));
    assert!(!a.shares_chunk(2, &b), "not a full chunk");
    check(&b, &m);
}

#[test]
fn events_that_do_not_pack_are_kept_as_they_are() {
    // Seqs that are not contiguous (not a session's log) still read back.
    let m: Vec<_> = (0..CHUNK as u64 + 3).map(|i| event(i * 2)).collect();
    let log: Log = m.iter().cloned().collect();
    assert!(Arc::ptr_eq(log.resident(5).unwrap(), &m[5]));
    assert_eq!(log.get(CHUNK + 1).unwrap().seq, m[CHUNK + 1].seq);
    assert_eq!(log.text(9), Some(m[9].text()));
}

#[test]
fn evicted_chunks_answer_none_until_restored() {
    let m = model(2 * CHUNK + 3);
    let mut log: Log = m.iter().cloned().collect();
    log.evict_chunk(0);
    assert!(log.is_evicted(0) && !log.is_evicted(1));
    assert_eq!(log.len(), m.len());
    assert!(log.get(3).is_none() && log.text(3).is_none() && log.ty(3).is_none());
    assert!(log.chunk(0).is_none());
    assert_eq!(log.get(CHUNK).unwrap().seq, CHUNK as u64);
    assert_eq!(log.last().unwrap().seq, m.len() as u64 - 1);
    log.restore_chunk(0, &m[..CHUNK]);
    check(&log, &m);
}

#[test]
#[should_panic(expected = "evicted")]
fn iterating_over_an_evicted_chunk_panics() {
    let mut log: Log = model(CHUNK + 1).into_iter().collect();
    log.evict_chunk(0);
    log.iter().for_each(drop);
}

/// An event of `seq` whose text is `len`-ish bytes (large ones keep their
/// chunk from being packed).
fn sized(seq: u64, len: usize) -> Arc<Event> {
    Arc::new(Event::new(
        JsString::from("plugin/x"),
        seq,
        0,
        Value::str(&"y".repeat(len)),
        None,
        None,
        APPEND_ORDER,
    ))
}

#[test]
fn random_pushes_truncations_prefixes_and_evictions_match_a_vector() {
    use crate::engine::event::PACK_AVERAGE_MAX;
    use crate::test_rng::Rng;
    let mut rng = Rng(0x5eed_1095);
    let mut log = Log::new();
    let mut model: Vec<Arc<Event>> = Vec::new();
    let mut forks: Vec<(Log, Vec<Arc<Event>>)> = Vec::new();
    for step in 0..150 {
        match rng.below(10) {
            // Runs of pushes, small or large events (packed or kept), up
            // to five chunks.
            0..=5 if model.len() < 5 * CHUNK => {
                let len = *rng.pick(&[3, 40, 2 * PACK_AVERAGE_MAX]);
                for _ in 0..rng.below(3 * CHUNK / 2) {
                    let e = sized(model.len() as u64, len);
                    log.push(e.clone());
                    model.push(e);
                }
            }
            0..=6 => {
                let len = rng.below(model.len() + 1);
                log.truncate(len);
                model.truncate(len);
            }
            7 => {
                let len = rng.below(model.len() + 1);
                forks.push((log.prefix(len), model[..len].to_vec()));
            }
            8 if log.full_chunks() > 0 => {
                // Evict a chunk and put it back, as a windowed read does.
                let k = rng.below(log.full_chunks());
                log.evict_chunk(k);
                assert!(log.get(k * CHUNK).is_none());
                log.restore_chunk(k, &model[k * CHUNK..(k + 1) * CHUNK]);
            }
            _ => forks.push((log.clone(), model.clone())),
        }
        if step % 30 == 0 {
            check(&log, &model);
        }
    }
    check(&log, &model);
    for (fork, model) in forks.iter().rev().take(6) {
        check(fork, model);
    }
}
