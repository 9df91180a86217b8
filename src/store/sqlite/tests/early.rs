//! Frames compressed early by the flushing threads (`early.rs`): a round
//! takes a frame only for the very event it was made from, once, the same
//! frame the round would have made; a flush with no large value or with
//! more than a step's makes none; frames no round takes are dropped.

use super::*;
use crate::json;

/// A `tool/result` whose data text is about `len` bytes of prose.
fn large(seq: u64, len: usize) -> Arc<Event> {
    let words = "the flushing thread compresses its own step ";
    let text = words.repeat(len / words.len() + 1);
    let envelope = format!(
        r#"{{"type":"tool/result","seq":{seq},"time":1,"data":{{"seq":{seq},"text":"{text}"}}}}"#
    );
    Arc::new(Event::from_envelope(json::parse(&envelope).unwrap(), "test").unwrap())
}

fn small(seq: u64) -> Arc<Event> {
    let envelope = format!(r#"{{"type":"x/y","seq":{seq},"time":1,"data":{{"n":{seq}}}}}"#);
    Arc::new(Event::from_envelope(json::parse(&envelope).unwrap(), "test").unwrap())
}

fn inflate(frame: &[u8]) -> Vec<u8> {
    zstd::bulk::decompress(frame, 1 << 20).unwrap()
}

#[test]
fn a_round_takes_each_frame_once_and_only_for_its_own_event() {
    let early = Early::default();
    let (a, b) = (large(0, 6000), large(2, 9000));
    let twin = large(0, 6000); // the same text, another event
    assert!(early.wants(a.text().len()) && !early.wants(small(1).text().len()));
    early.run(&[a.clone(), small(1), b.clone()]);
    let got = early.take(&[&twin, &b, &a]);
    assert_eq!(got[0], None, "a frame is found by its event, not its text");
    let mut zstd = rows::compressor().unwrap();
    for (e, frame) in [(&b, &got[1]), (&a, &got[2])] {
        let frame = frame
            .as_ref()
            .expect("made early")
            .as_ref()
            .expect("smaller");
        assert_eq!(inflate(frame), e.data_text().as_bytes());
        let own = rows::compress_smaller(e.data_text(), &mut zstd).unwrap();
        assert_eq!(Some(frame), own.as_ref(), "the round's own frame");
    }
    assert_eq!(early.take(&[&a, &b]), vec![None, None], "taken once");
}

#[test]
fn a_flush_with_no_large_value_or_more_than_a_steps_makes_none() {
    let early = Early::default();
    early.run(&[small(0), small(1)]);
    let many: Vec<Arc<Event>> = (0..MAX_VALUES as u64 + 1).map(|s| large(s, 5000)).collect();
    early.run(&many);
    let refs: Vec<&Arc<Event>> = many.iter().collect();
    assert!(early.take(&refs).iter().all(Option::is_none));
    assert!(early.frames().map.is_empty());
}

#[test]
fn frames_no_round_takes_are_dropped() {
    let early = Early::default();
    let (a, b) = (large(0, 5000), large(1, 5000));
    early.run(std::slice::from_ref(&a));
    early.next_round();
    assert!(
        early.take(&[&a])[0].is_some(),
        "kept while its round may come"
    );
    early.run(std::slice::from_ref(&b));
    for _ in 0..=KEEP_ROUNDS {
        early.next_round();
    }
    assert_eq!(early.take(&[&b]), vec![None]);
    assert!(early.frames().map.is_empty());
}

#[test]
fn the_frames_kept_are_bounded() {
    let early = Early::default();
    let events: Vec<Arc<Event>> = (0..MAX_FRAMES as u64 + 2).map(|s| large(s, 4200)).collect();
    for e in &events {
        early.run(std::slice::from_ref(e));
    }
    assert_eq!(early.frames().map.len(), MAX_FRAMES);
}
