//! Stores and `todo/write`: registration, notices, header meta, re-entrant
//! appends, the todo snapshot (docs/lifecycle.md §9, docs/events.md §13,
//! §10.3, docs/errors.md §3.1, §4.5, §4.7).

mod checklist_support;

use std::sync::{Arc, Mutex, Weak};

use ::dsh_session::store::{CreateOptions, LiveSession, Notice};

use checklist_support::*;

#[test]
fn create_registers_the_session_and_emits_created_and_event_notices() {
    let rec = Recorder::default();
    let store = Store::open();
    observe(&store, &rec);
    let s = store.session("s");
    assert_eq!(
        rec.take(),
        vec![(
            "s".to_string(),
            "created".to_string(),
            serde_json::to_string(&s.header).unwrap()
        )]
    );
    let e = ok(s.append("turn/start", &json!({"turn": 1}), None));
    assert!(
        store.ids().contains(&"s".to_string()),
        "stored once it has events"
    );
    let notices = rec.take();
    assert_eq!(notices.len(), 1);
    assert_eq!(
        (notices[0].0.as_str(), notices[0].1.as_str()),
        ("s", "event")
    );
    assert_eq!(
        parse(&notices[0].2),
        e,
        "the notice carries the stored event"
    );
}

#[test]
fn duplicate_ids_are_refused_and_seeding_works_through_the_store() {
    let store = Store::open();
    let a = store.session("a");
    expect_err(
        store.create_json(&json!({"id": "a"})),
        DSH_E_CONFLICT,
        "store.duplicate-id",
    );
    expect_err(
        store.create_json(&json!({"id": "a", "seed": []})),
        DSH_E_CONFLICT,
        "store.duplicate-id",
    );
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    let b = store.seeded("b", &log.json());
    assert_eq!(b.len(), log.events.len() + 1);
    assert_eq!(a.len(), 0);
}

#[test]
fn creating_an_id_that_already_has_a_stored_log_is_refused() {
    // Creating an id already stored is refused
    // (`persist.exists-stored`, DSH_E_CONFLICT); it must be opened instead.
    let store = Store::open();
    let a = store.session("a");
    a.log("turn/start", json!({"turn": 1}));
    assert_eq!(a.close(), DSH_OK);
    expect_err(
        store.create_json(&json!({"id": "a"})),
        DSH_E_CONFLICT,
        "persist.exists-stored",
    );
    let (reopened, _) = ok(store.open_session("a"));
    assert_eq!(reopened.events()[0]["type"], "turn/start");
}

#[test]
fn opening_an_id_that_is_already_live_is_refused() {
    let store = Store::open();
    let _a = store.session("a");
    let f = store.open_session("a").map(|_| ()).expect_err("live id");
    assert_eq!(f.status, DSH_E_CONFLICT, "{}", f.text);
    assert!(
        ["store.duplicate-id", "load.live-prepare"].contains(&f.rule.as_str()),
        "{}",
        f.text
    );
}

#[test]
fn opening_a_stored_session_registers_and_announces_it_once() {
    let rec = Recorder::default();
    let store = Store::open();
    observe(&store, &rec);
    // Known types only: a load refuses unknown non-ignorable ones (docs/events.md §11.3).
    let a = store.seeded(
        "a",
        &json!([ev(0, "session/title", json!({"title": "t"}), None)]),
    );
    a.log("goal/change", json!({"goal": "g"}));
    assert_eq!(a.close(), DSH_OK);
    rec.take();
    let (b, out) = ok(store.open_session("a"));
    let notices = rec.take();
    assert_eq!(
        notices.iter().filter(|n| n.1 == "created").count(),
        1,
        "{notices:?}"
    );
    assert_eq!(parse(&notices[0].2), out["header"]);
    // Live now: neither create nor open may take the id.
    assert_eq!(
        expect_err(
            store.create_json(&json!({"id": "a"})),
            DSH_E_CONFLICT,
            "store.duplicate-id"
        )
        .status,
        DSH_E_CONFLICT
    );
    assert!(store.open_session("a").is_err());
    // stored log + the end-seed of the new lifecycle (docs/lifecycle.md §4).
    assert_eq!(b.len(), 4);
    assert_eq!(b.events()[3]["type"], "session/end-seed");
    assert_eq!(b.info()["firstLiveSeq"], json!(3));
}

#[test]
fn created_is_announced_once_and_seed_events_are_not_published() {
    let rec = Recorder::default();
    let store = Store::open();
    observe(&store, &rec);
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    let s = store.seeded("s", &log.json());
    let child = ok(s.fork(-1, Some(&json!({"id": "c"}))));
    let kinds = rec.kinds();
    assert_eq!(
        kinds,
        ["created", "created"],
        "no event notices for seeds or end-seed markers"
    );
    drop(child);
    drop(s);
    let notices = rec.take();
    assert_eq!(notices.iter().filter(|n| n.1 == "disposed").count(), 2);
}

#[test]
fn sessions_belong_to_exactly_one_store() {
    let (one, two) = (Store::open(), Store::open());
    let a = one.session("a");
    a.log("plugin/x", json!(1));
    expect_err(
        two.open_session("a").map(|_| ()),
        DSH_E_NOT_FOUND,
        "load.not-found",
    );
    let other = two.session("a");
    other.log("plugin/y", json!(2));
    assert_eq!(a.events()[0]["type"], "plugin/x");
    assert_eq!(a.len(), 1);
    assert_eq!(other.len(), 1);
}

#[test]
fn bare_store_created_session_gets_a_current_version_header() {
    let store = Store::open();
    // No options at all: the defaults.
    let bare = ok(store.create_with(CreateOptions::default()));
    let h = parse(&bare.live.header().unwrap().to_json());
    let keys: Vec<&String> = h.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["version", "id", "createdAt"]);
    assert_eq!(h["version"], json!(0));
    assert!(h["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(h["createdAt"]
        .as_u64()
        .is_some_and(|t| t > 1_600_000_000_000));
    assert_eq!(bare.close(), DSH_OK);
    let s = store.session("named");
    assert_eq!(s.header["version"], json!(0));
    assert_eq!(s.header["id"], "named");
    assert_eq!(s.info()["header"], s.header);
}

#[test]
fn meta_fields_reach_the_header_in_order() {
    let store = Store::open();
    let s = ok(store.create_json(&json!({"agentPreset": "coder", "delegationDepth": 2, "origin": "subagent", "parentSession": "p", "cwd": "/home/u", "id": "s"})));
    let h = s.header.as_object().unwrap();
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        [
            "version",
            "id",
            "createdAt",
            "cwd",
            "parentSession",
            "origin",
            "delegationDepth",
            "agentPreset"
        ]
    );
    assert_eq!(
        (&h["cwd"], &h["parentSession"]),
        (&json!("/home/u"), &json!("p"))
    );
    assert_eq!(
        (&h["origin"], &h["delegationDepth"], &h["agentPreset"]),
        (&json!("subagent"), &json!(2), &json!("coder"))
    );
    s.log("turn/start", json!({"turn": 1}));
    assert_eq!(store.list()[0]["cwd"], "/home/u");
}

#[test]
fn non_lossless_invalid_or_relative_meta_is_refused() {
    let store = Store::open();
    let cases = [
        (
            r#"{"id":"s","origin":"main"}"#,
            DSH_E_REJECTED,
            "header.origin",
        ),
        (
            r#"{"id":"s","origin":null}"#,
            DSH_E_REJECTED,
            "header.origin",
        ),
        (
            r#"{"id":"s","delegationDepth":1.5}"#,
            DSH_E_REJECTED,
            "header.delegation-depth",
        ),
        (
            r#"{"id":"s","delegationDepth":-1}"#,
            DSH_E_REJECTED,
            "header.delegation-depth",
        ),
        (
            r#"{"id":"s","delegationDepth":"1"}"#,
            DSH_E_REJECTED,
            "header.delegation-depth",
        ),
        (
            r#"{"id":"s","parentSession":5}"#,
            DSH_E_REJECTED,
            "header.parent-session",
        ),
        (
            r#"{"id":"s","agentPreset":[]}"#,
            DSH_E_REJECTED,
            "header.agent-preset",
        ),
        (r#"{"id":"s","cwd":5}"#, DSH_E_REJECTED, "header.cwd-type"),
        (
            r#"{"id":"s","cwd":"relative/path"}"#,
            DSH_E_REJECTED,
            "header.cwd-not-absolute",
        ),
        (
            r#"{"id":"s","cwd":"./here"}"#,
            DSH_E_REJECTED,
            "header.cwd-not-absolute",
        ),
        (
            r#"{"id":"s","cwd":""}"#,
            DSH_E_REJECTED,
            "header.cwd-not-absolute",
        ),
        (
            r#"{"id":"s","delegationDepth":-0}"#,
            DSH_E_INVALID_JSON,
            "header.not-lossless",
        ),
        (
            r#"{"id":"s","parentSession":"p","delegationDepth":1e400}"#,
            DSH_E_INVALID_JSON,
            "header.not-lossless",
        ),
    ];
    for (options, status, rule) in cases {
        expect_err(store.create(options), status, rule);
    }
    assert!(store.ids().is_empty());
}

#[test]
fn rejected_surface_transition_is_not_applied_or_published() {
    let rec = Recorder::default();
    let store = Store::open();
    observe(&store, &rec);
    let s = store.session("s");
    let a = s.surf("user/message", user("a", "x"), op_append());
    rec.take();
    let before = (s.surface(), s.events_text());
    let uncovered = json!({"surfaceOp": {"op": "replace", "start": a, "end": a}});
    expect_err(
        s.append("user/message", &user("b", "y"), Some(&uncovered)),
        DSH_E_REJECTED,
        "surface.replace-uncovered",
    );
    expect_err(s.batch(&json!([{"type": "plugin/ok", "data": 1}, {"type": "user/message", "data": user("b", "y")}])), DSH_E_REJECTED, "surface.op-missing");
    assert_eq!((s.surface(), s.events_text()), before);
    assert!(rec.take().is_empty(), "nothing was published");
}

/// An observer that appends to the session it is told about.
struct Reenter {
    session: Mutex<Weak<LiveSession>>,
    data: &'static str,
    notices: Mutex<Vec<(String, u64)>>,
    inner: Mutex<Vec<(dsh_status, String, usize)>>,
}

fn reenter(r: &Reenter, notice: Notice<'_>) {
    let (kind, payload) = notice_text(notice);
    if kind != "event" {
        return;
    }
    let seq = parse(&payload)["seq"].as_u64().unwrap();
    r.notices.lock().unwrap().push(("event".into(), seq));
    let s = r.session.lock().unwrap().upgrade().expect("live session");
    let (st, rule) = match s.append_text("plugin/reentrant", r.data, None) {
        Ok(_) => (DSH_OK, String::new()),
        Err(e) => (e.status.code(), e.rule.as_str().to_string()),
    };
    // The committed event is readable from the observer.
    let log = s.events(0, u64::MAX).unwrap();
    r.inner.lock().unwrap().push((st, rule, log.len()));
}

fn reentrant_store(data: &'static str) -> (Arc<Reenter>, Store) {
    let r = Arc::new(Reenter {
        session: Mutex::new(Weak::new()),
        data,
        notices: Mutex::default(),
        inner: Mutex::default(),
    });
    let store = Store::open();
    let seen = r.clone();
    store.set_observer(Some(Arc::new(move |_: &str, notice: Notice<'_>| {
        reenter(&seen, notice)
    })));
    (r, store)
}

#[test]
fn reentrant_append_from_an_observer_is_refused_and_order_is_kept() {
    let (r, store) = reentrant_store("{}");
    let s = store.session("s");
    *r.session.lock().unwrap() = Arc::downgrade(&s.live);
    s.log("plugin/first", json!(1));
    s.log("plugin/second", json!(2));
    assert_eq!(
        *r.inner.lock().unwrap(),
        vec![
            (DSH_E_CONFLICT, "append.reentrant".to_string(), 1),
            (DSH_E_CONFLICT, "append.reentrant".to_string(), 2)
        ]
    );
    assert_eq!(
        *r.notices.lock().unwrap(),
        vec![("event".to_string(), 0), ("event".to_string(), 1)]
    );
    assert_eq!(
        s.len(),
        2,
        "the outer appends stay committed, the inner ones are refused"
    );
}

#[test]
fn reentrant_append_checks_its_data_before_reentrancy() {
    // docs/errors.md §3.1: json.not-lossless (1) precedes append.reentrant (4).
    let (r, store) = reentrant_store("[-0]");
    let s = store.session("s");
    *r.session.lock().unwrap() = Arc::downgrade(&s.live);
    s.log("plugin/first", json!(1));
    assert_eq!(
        *r.inner.lock().unwrap(),
        vec![(DSH_E_INVALID_JSON, "json.not-lossless".to_string(), 1)]
    );
}

// ------------------------------------------------------------- todo/write

/// The todo fold of docs/events.md §10.3 over a log (the library exposes the log).
fn current_todos(events: &J) -> J {
    events
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["type"] == "todo/write")
        .map_or(json!([]), |e| e["data"]["todos"].clone())
}

#[test]
fn todo_write_stores_the_whole_list_as_a_snapshot() {
    let store = Store::open();
    let s = store.session("s");
    let list = json!({"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "in_progress"}]});
    let d = list.to_string();
    let e = s.live.append_text("todo/write", d.as_str(), None);
    assert!(e.is_ok(), "{e:?}");
    let mut bytes = d.into_bytes();
    bytes.fill(b'x');
    std::hint::black_box(&bytes);
    assert_eq!(s.events()[0]["data"], list);
    let second = json!({"todos": [{"content": "b", "status": "completed"}]});
    s.log("todo/write", second.clone());
    s.log("plugin/other", json!({"todos": ["not a todo write"]}));
    assert_eq!(current_todos(&s.events()), second["todos"]);
    assert_eq!(
        s.events()[0]["data"],
        list,
        "earlier snapshots are untouched"
    );
}

#[test]
fn todo_write_is_log_only_and_survives_seeded_replay() {
    let store = Store::open();
    let s = store.session("s");
    s.surf("user/message", user("u", "x"), op_append());
    let e = ok(s.append(
        "todo/write",
        &json!({"todos": [{"content": "a", "status": "pending"}]}),
        None,
    ));
    assert_eq!(e.as_object().unwrap().len(), 4, "no surface fields");
    assert_eq!(s.nodes(), vec![0]);
    assert_eq!(s.derive(), json!([user("u", "x")]));
    assert_eq!(ok(event_message(&e)), J::Null);
    expect_err(
        s.append("todo/write", &json!({"todos": []}), Some(&op_append())),
        DSH_E_REJECTED,
        "surface.op-on-non-surface",
    );
    let replay = store.seeded("r", &s.events());
    assert_eq!(replay.events()[1], e);
    assert_eq!(
        current_todos(&replay.events()),
        json!([{"content": "a", "status": "pending"}])
    );
    assert_eq!(replay.derive(), s.derive());
}
