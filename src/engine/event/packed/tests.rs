use super::*;
use crate::engine::event::APPEND_ORDER;
use crate::json::Value;

/// Event `seq` of an odd mix: three types, a replace, an ignorable one,
/// texts of different lengths (some not ASCII).
fn event(seq: u64) -> Arc<Event> {
    let text = match seq % 3 {
        0 => format!(
            r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"message":{{"role":"user","content":"é{seq}"}}}}}}"#
        ),
        1 => {
            format!(r#"{{"type":"plugin/x","seq":{seq},"time":7,"data":[{seq}],"ignorable":true}}"#)
        }
        _ => format!(
            r#"{{"type":"assistant/message","seq":{seq},"time":1,"data":{{}},"sourceEventSeqs":[0],"surfaceOp":{{"kind":"replace","start":0,"end":0}}}}"#
        ),
    };
    Arc::new(Event::from_canonical_text(text.into()).expect("canonical"))
}

fn same(a: &Event, b: &Event) {
    assert_eq!(a.text(), b.text());
    assert_eq!((a.seq, a.time, a.ignorable), (b.seq, b.time, b.ignorable));
    assert_eq!(a.ty, b.ty);
    assert_eq!(a.data_text(), b.data_text());
    assert_eq!(a.sources_text(), b.sources_text());
    assert_eq!(a.op_text(), b.op_text());
    assert_eq!(a, b);
}

#[test]
fn events_made_again_from_a_packed_chunk_are_the_events_packed() {
    let events: Vec<_> = (100..400).map(event).collect();
    let p = Packed::seal(&events).unwrap();
    assert_eq!(p.len(), events.len());
    assert_eq!(p.types.len(), 3, "a type is kept once");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(p.text(i), e.text());
        assert_eq!(p.ty(i), &e.ty);
        same(&p.event(i), e);
    }
    assert_eq!(p.events().len(), events.len());
}

#[test]
fn logs_sealing_the_same_events_share_one_packed_chunk() {
    let events: Vec<_> = (0..50).map(event).collect();
    let a = Packed::seal(&events).unwrap();
    let b = Packed::seal(&events.clone()).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // Other events ending in the same last event are packed anew.
    let mut other = events.clone();
    other[0] = Arc::new(
        Event::from_canonical_text(r#"{"type":"plugin/y","seq":0,"time":0,"data":null}"#.into())
            .unwrap(),
    );
    let c = Packed::seal(&other).unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    assert_eq!(c.text(0), other[0].text());
}

#[test]
fn events_that_are_not_contiguous_or_large_are_not_packed() {
    let events = vec![event(1), event(3)];
    assert!(Packed::seal(&events).is_none());
    assert!(Packed::seal(&[]).is_none());
    let big = |seq: u64, n: usize| {
        let text = format!(
            r#"{{"type":"plugin/x","seq":{seq},"time":0,"data":"{}"}}"#,
            "x".repeat(n)
        );
        Arc::new(Event::from_canonical_text(text.into()).unwrap())
    };
    let n = PACK_AVERAGE_MAX;
    assert!(Packed::seal(&[big(0, n - 100), big(1, n - 100)]).is_some());
    assert!(Packed::seal(&[big(0, n), big(1, n)]).is_none());
}

#[test]
fn check_bits_known_at_packing_are_kept() {
    let e = Arc::new(Event::new(
        JsString::from("plugin/x"),
        0,
        0,
        Value::Number(1.0),
        None,
        None,
        APPEND_ORDER,
    ));
    e.mark_checked(super::super::Checked::SHAPE);
    let p = Packed::seal(&[e]).unwrap();
    assert!(p.event(0).is_checked(super::super::Checked::SHAPE));
}
