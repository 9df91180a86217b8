//! The typed session API (`LiveSession::append` with `Intent`,
//! `append_batch` with `NewEvent`, `validate`, the reads) against the
//! JSON-text doors the C ABI uses: the same events, the same refusals, and
//! nothing committed by a refusal or a validation.

use dsh_session::engine::{Intent, NewEvent, SurfaceOp};
use dsh_session::json::{parse, Value};
use dsh_session::store::{CreateOptions, LiveSession, Store, StoreConfig};
use dsh_session::{Rule, Status};

use std::sync::Arc;

fn v(text: &str) -> Value {
    parse(text).unwrap()
}

fn user(id: &str) -> Value {
    v(&format!(
        r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"q {id}"}}],"source":{{"kind":"user"}}}}"#
    ))
}

fn fresh(store: &Arc<Store>, id: &str) -> Arc<LiveSession> {
    store.create(CreateOptions::with_id(id)).unwrap()
}

/// The intent's JSON text, as a host writes it for the text door.
fn intent_text(i: &Intent) -> Option<String> {
    i.to_value().map(|v| v.to_json())
}

/// An event without its `time` (two appends a moment apart differ there).
fn timeless(
    e: &dsh_session::engine::Event,
) -> (String, u64, String, Option<String>, Option<String>) {
    (
        e.ty.to_string_lossy(),
        e.seq,
        e.data_text().to_string(),
        e.op_text().map(str::to_string),
        e.sources_text().map(str::to_string),
    )
}

#[test]
fn the_typed_append_commits_what_the_text_append_commits_and_refuses_alike() {
    let store = Store::open(StoreConfig::memory()).unwrap();
    let (typed, text) = (fresh(&store, "typed"), fresh(&store, "text"));
    let cases: Vec<(&str, Value, Intent)> = vec![
        ("turn/start", v(r#"{"turn":1}"#), Intent::none()),
        ("user/message", user("u1"), Intent::append()),
        // Refused: a message event needs a surface op.
        ("user/message", user("u2"), Intent::none()),
        // Refused: a log-only event may not carry one.
        ("step/start", v(r#"{"turn":1,"step":1}"#), Intent::append()),
        ("step/start", v(r#"{"turn":1,"step":1}"#), Intent::none()),
        (
            "user/message",
            user("u3"),
            Intent::append().with_sources([1]),
        ),
        // A replace of the two user messages, citing them.
        (
            "user/message",
            user("summary"),
            Intent::replace(1, 3).with_sources([1, 3]),
        ),
        // Refused: a replace whose range is not on the surface.
        ("user/message", user("u4"), Intent::replace(40, 41)),
        // Refused: an unknown type under strict admission.
        ("plugin/unknown", v("{}"), Intent::none()),
        // Refused: `ignorable` on a core type.
        (
            "step/end",
            v(r#"{"turn":1,"step":1}"#),
            Intent::none().ignorable(),
        ),
        ("step/end", v(r#"{"turn":1,"step":1}"#), Intent::none()),
    ];
    let mut refused = 0;
    for (ty, data, intent) in cases {
        let by_text =
            text.append_text(ty, data.to_json().as_str(), intent_text(&intent).as_deref());
        let by_type = typed.append(ty, data, intent.clone());
        match (by_type, by_text) {
            (Ok(a), Ok(b)) => assert_eq!(timeless(&a), timeless(&b), "{ty} {intent:?}"),
            (Err(a), Err(b)) => {
                refused += 1;
                assert_eq!((a.status, a.rule), (b.status, b.rule), "{ty} {intent:?}");
                assert_eq!(a.message, b.message);
            }
            (a, b) => panic!("{ty} {intent:?}: typed {a:?}, text {b:?}"),
        }
    }
    assert_eq!(refused, 5);
    assert_eq!(typed.next_seq().unwrap(), text.next_seq().unwrap());
    assert_eq!(typed.derive().unwrap(), text.derive().unwrap());
    assert_eq!(
        typed.derive().unwrap().len(),
        1,
        "the replace left one message"
    );
}

#[test]
fn a_typed_batch_is_all_or_nothing_and_names_the_refused_item() {
    let store = Store::open(StoreConfig::memory()).unwrap();
    let s = fresh(&store, "batch");
    let good = vec![
        NewEvent::new("turn/start", v(r#"{"turn":1}"#), Intent::none()),
        NewEvent::new("user/message", user("u1"), Intent::append()),
    ];
    let mut bad = good.clone();
    bad.push(NewEvent::new("user/message", user("u2"), Intent::none()));
    let e = s.append_batch(bad).unwrap_err();
    assert_eq!((e.status, e.index), (Status::Rejected, Some(2)));
    assert_eq!(s.next_seq().unwrap(), 0, "nothing of a refused batch stays");
    let events = s.append_batch(good).unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [0, 1]);
    // The same batch as text commits the same events on a twin.
    let twin = fresh(&store, "twin");
    let text = r#"[{"type":"turn/start","data":{"turn":1}},{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"q u1"}],"source":{"kind":"user"}},"intent":{"surfaceOp":"append"}}]"#;
    let by_text = twin.append_batch_text(text).unwrap();
    assert_eq!(
        events.iter().map(|e| timeless(e)).collect::<Vec<_>>(),
        by_text.iter().map(|e| timeless(e)).collect::<Vec<_>>()
    );
}

#[test]
fn validate_answers_without_committing() {
    let store = Store::open(StoreConfig::memory()).unwrap();
    let s = fresh(&store, "v");
    let e = s
        .validate("turn/start", v(r#"{"turn":1}"#), Intent::none())
        .unwrap();
    assert_eq!((e.seq, e.data_text()), (0, r#"{"turn":1}"#));
    let refused = s
        .validate("user/message", user("u1"), Intent::none())
        .unwrap_err();
    assert_eq!(refused.rule, Rule::SurfaceOpMissing);
    assert_eq!(s.next_seq().unwrap(), 0);
}

#[test]
fn the_reads_tell_what_the_session_holds() {
    let store = Store::open(StoreConfig::memory()).unwrap();
    let s = fresh(&store, "reads");
    s.append("turn/start", v(r#"{"turn":1}"#), Intent::none())
        .unwrap();
    s.append("user/message", user("u1"), Intent::append())
        .unwrap();
    let info = s.info().unwrap();
    assert_eq!(
        (info.id.as_str(), info.length, info.replace_generation),
        ("reads", 2, 0)
    );
    assert_eq!(info.open_turn, Some(v("1")));
    assert_eq!(s.header().unwrap(), info.header);
    assert_eq!(s.open_turn().unwrap(), Some(v("1")));
    // A range past the end stops at the end; one starting past it is empty.
    assert_eq!(s.events(1, u64::MAX).unwrap().len(), 1);
    assert!(s.events(5, 9).unwrap().is_empty());
    assert_eq!(s.surface().unwrap(), (vec![1], 0));
    // derive_since: the typed messages are the text door's, parsed.
    let d = s.derive_since(0, 0).unwrap();
    let t = s.derive_since_json(0, 0).unwrap();
    assert_eq!(
        (d.generation, d.count, d.reset),
        (t.generation, t.count, t.reset)
    );
    assert_eq!(Value::Array(d.messages.clone()), v(&t.messages));
    assert_eq!(d.messages, s.derive().unwrap());
    assert_eq!(v(&s.derive_json().unwrap()), Value::Array(d.messages));
    // The next call from the cursor has nothing new.
    let next = s.derive_since(d.generation, d.count).unwrap();
    assert!(!next.reset && next.messages.is_empty());
}

#[test]
fn an_intent_is_the_object_the_text_form_writes() {
    let i = Intent::replace(2, 5).with_sources([2, 3, 5]).ignorable();
    assert_eq!(
        i.to_value().unwrap().to_json(),
        r#"{"surfaceOp":{"op":"replace","start":2,"end":5},"sourceEventSeqs":[2,3,5],"ignorable":true}"#
    );
    assert_eq!(Intent::none().to_value(), None);
    assert_eq!(Intent::append().surface_op, Some(SurfaceOp::Append));
}

#[test]
fn an_observer_appending_on_its_session_meets_the_input_checks_first() {
    use dsh_session::store::Notice;
    use std::sync::Mutex;
    let store = Store::open(StoreConfig::memory()).unwrap();
    let slot: Arc<Mutex<Option<Arc<LiveSession>>>> = Arc::default();
    let rules: Arc<Mutex<Vec<Rule>>> = Arc::default();
    let (in_slot, seen) = (slot.clone(), rules.clone());
    store.set_observer(Some(Arc::new(move |_, notice| {
        let Notice::Event(e) = notice else { return };
        if e.seq != 0 {
            return;
        }
        let s = in_slot.lock().unwrap().clone().unwrap();
        let lossy = Value::obj([("turn", Value::Number(-0.0))]);
        let attempts = [
            s.append("turn/start", lossy, Intent::none()),
            s.append("request/header-delta", v("{}"), Intent::none()),
            s.append("turn/start", v(r#"{"turn":2}"#), Intent::none()),
        ];
        let mut seen = seen.lock().unwrap();
        seen.extend(attempts.into_iter().map(|r| r.unwrap_err().rule));
    })));
    let s = fresh(&store, "observed");
    *slot.lock().unwrap() = Some(s.clone());
    s.append("turn/start", v(r#"{"turn":1}"#), Intent::none())
        .unwrap();
    assert_eq!(
        *rules.lock().unwrap(),
        [
            Rule::JsonNotLossless,
            Rule::HeaderLegacy,
            Rule::AppendReentrant
        ],
        "docs/errors.md §3.1: the input checks come before the re-entrancy check"
    );
    assert_eq!(s.next_seq().unwrap(), 1);
    *slot.lock().unwrap() = None;
}

#[test]
fn a_dropped_session_is_disposed_once_as_a_closed_one_is() {
    use dsh_session::store::Notice;
    use std::sync::Mutex;
    let store = Store::open(StoreConfig::memory()).unwrap();
    let disposed: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = disposed.clone();
    store.set_observer(Some(Arc::new(move |id, notice| {
        if matches!(notice, Notice::Disposed) {
            seen.lock().unwrap().push(id.to_string());
        }
    })));
    drop(fresh(&store, "dropped"));
    let closed = fresh(&store, "closed");
    closed.close().unwrap();
    drop(closed);
    assert_eq!(*disposed.lock().unwrap(), ["dropped", "closed"]);
}
