//! The engine side: a windowed session reads storage only when a call
//! reaches before its window, a chunk at a time, and never on the
//! per-step path.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ::dsh_session::engine::chunked::CHUNK;
use ::dsh_session::engine::window::EventSource;
use ::dsh_session::engine::{Event, Markers, Policy, Session};
use ::dsh_session::json;

/// A copy of the stored log that counts the chunk reads.
#[derive(Debug)]
struct Counted {
    events: Mutex<Vec<Arc<Event>>>,
    reads: AtomicUsize,
}

impl EventSource for Counted {
    fn load(&self, from: u64, to: u64) -> ::dsh_session::Result<Vec<Arc<Event>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Ok(self.events.lock().unwrap()[from as usize..to as usize].to_vec())
    }
}

fn user(s: &mut Session, i: usize, intent: &str) -> Arc<Event> {
    let data = format!(
        r#"{{"id":"u{i}","role":"user","content":[{{"type":"text","text":"m{i}"}}],"source":{{"kind":"user"}}}}"#
    );
    s.append_text("user/message", &data, Some(intent), 1)
        .unwrap()
}

fn session(n: usize) -> Session {
    let header = json::parse(r#"{"version":0,"id":"e","createdAt":1}"#).unwrap();
    let mut s = Session::new("e", header, Markers::Required, Policy::reference()).unwrap();
    for i in 0..n {
        if i % 3 == 0 {
            user(&mut s, i, r#"{"surfaceOp":"append"}"#);
        } else {
            s.append_text("plugin/x", &format!(r#"{{"i":{i}}}"#), None, 1)
                .unwrap();
        }
    }
    s
}

#[test]
fn reads_reach_storage_only_before_the_window() {
    let n = 5 * CHUNK + 10;
    let mut twin = session(n);
    let mut s = session(n);
    let source = Arc::new(Counted {
        events: Mutex::new(s.events().iter().collect()),
        reads: AtomicUsize::new(0),
    });
    s.set_window(source.clone(), 100);
    assert!(s.is_windowed());
    assert_eq!(s.resident_events(), n - 4 * CHUNK, "four chunks evicted");
    let reads = || source.reads.load(Ordering::Relaxed);

    // The per-step path: appends and derive_since at the tail.
    let first = s.derive_since(0, 0).unwrap();
    assert_eq!(first, twin.derive_since(0, 0).unwrap());
    let mut cursor = (first.generation, first.count);
    let before = reads();
    for i in n..n + 3 * CHUNK {
        let e = user(&mut s, i, r#"{"surfaceOp":"append"}"#);
        source.events.lock().unwrap().push(e);
        user(&mut twin, i, r#"{"surfaceOp":"append"}"#);
        s.evict_old();
        let d = s.derive_since(cursor.0, cursor.1).unwrap();
        assert_eq!(d, twin.derive_since(cursor.0, cursor.1).unwrap());
        assert!(!d.reset);
        cursor = (d.generation, d.count);
    }
    assert_eq!(reads(), before, "no storage read on the per-step path");
    assert!(s.resident_events() < 100 + CHUNK);

    // A read of old events: one chunk read per chunk touched.
    let before = reads();
    assert_eq!(
        s.events_in(10, 20).unwrap(),
        twin.events_in(10, 20).unwrap()
    );
    assert_eq!(reads(), before + 1);
    // A full derive reads each evicted chunk holding a message once.
    let before = reads();
    assert_eq!(s.derive().unwrap(), twin.derive().unwrap());
    assert_eq!(
        reads(),
        before + s.events().full_chunks() - s.resident_events() / CHUNK
    );
    // A replace over old nodes, then the derive that resets.
    let cited: Vec<String> = (0..=3000)
        .step_by(3)
        .map(|q: usize| q.to_string())
        .collect();
    let intent = format!(
        r#"{{"surfaceOp":{{"op":"replace","start":0,"end":3000}},"sourceEventSeqs":[{}]}}"#,
        cited.join(",")
    );
    let e = user(&mut s, 0, &intent);
    source.events.lock().unwrap().push(e);
    user(&mut twin, 0, &intent);
    s.evict_old();
    let (d, t) = (
        s.derive_since(cursor.0, cursor.1).unwrap(),
        twin.derive_since(cursor.0, cursor.1).unwrap(),
    );
    assert!(d.reset);
    assert_eq!(d, t);
    assert_eq!(s.open_turn().unwrap(), twin.open_turn().unwrap());
}

/// `visit_derived` hands over the messages of `derive_json`, in its order,
/// one page at a time, windowed or not, after a replace too; it stops when
/// asked.
#[test]
fn derived_messages_are_visited_in_list_order_without_the_list() {
    let n = 3 * CHUNK + 10;
    let joined = |s: &mut Session| {
        let mut parts = Vec::new();
        s.visit_derived(|_, text| {
            parts.push(text.to_string());
            true
        })
        .unwrap();
        format!("[{}]", parts.join(","))
    };
    let mut twin = session(n);
    let mut s = session(n);
    let source = Arc::new(Counted {
        events: Mutex::new(s.events().iter().collect()),
        reads: AtomicUsize::new(0),
    });
    s.set_window(source.clone(), 100);
    assert_eq!(joined(&mut s), twin.derive_json().unwrap());
    assert_eq!(joined(&mut twin), twin.derive_json().unwrap());
    // A replace puts a late event first: list order is not seq order.
    let intent = r#"{"surfaceOp":{"op":"replace","start":0,"end":0},"sourceEventSeqs":[0]}"#;
    let e = user(&mut s, 0, intent);
    source.events.lock().unwrap().push(e);
    user(&mut twin, 0, intent);
    s.evict_old();
    let want = twin.derive_json().unwrap();
    assert_eq!(joined(&mut s), want);
    let mut seqs = Vec::new();
    s.visit_derived(|seq, _| {
        seqs.push(seq);
        true
    })
    .unwrap();
    assert_eq!(seqs[0], n as u64, "the replacement comes first");
    assert!(seqs[1..].windows(2).all(|w| w[0] < w[1]));
    // Stopping after three messages.
    let mut count = 0;
    s.visit_derived(|_, _| {
        count += 1;
        count < 3
    })
    .unwrap();
    assert_eq!(count, 3);
}
