//! Sessions: lossless data and metadata, copies and immutability of
//! everything handed in or out, deep nesting, and the session header rules
//! (docs/events.md §2, §3.2, §13; docs/errors.md §3.1, §4.1, §4.5).

mod checklist_support;

use ::dsh_session::engine::seed::SeedMode;
use ::dsh_session::engine::{Markers, Policy, Seed, Session};
use ::dsh_session::json::{self, Value};
use ::dsh_session::Status;
use checklist_support::*;

/// Overwrite every byte of a text the library has already read.
fn overwrite(text: String) {
    let mut bytes = text.into_bytes();
    bytes.fill(b' ');
    std::hint::black_box(&bytes);
}

fn sample_session(store: &Store) -> Sess {
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    log.push(
        "request/context",
        json!({"provider": "p", "model": "m", "contextWindow": 64000}),
    );
    store.seeded("s", &log.json())
}

#[test]
fn returned_views_are_snapshots_the_caller_cannot_alter() {
    let store = Store::open();
    let s = sample_session(&store);
    let before = (
        s.surface(),
        s.events_text(),
        s.derive_text(),
        s.request_context(),
        s.info(),
    );
    // Each call hands out the caller's own copy: change every one of them.
    let live = &s.live;
    let (mut nodes, _) = live.surface().unwrap();
    nodes.iter_mut().for_each(|n| *n += 1);
    nodes.push(99);
    let mut events = live.events(0, u64::MAX).unwrap();
    events.reverse();
    events.pop();
    let mut derived = live.derive().unwrap();
    for m in &mut derived {
        m.as_object_mut()
            .unwrap()
            .insert_str("role", Value::str("system"));
    }
    let mut text = live.derive_json().unwrap();
    text.replace_range(..1, "#");
    let mut context = live.request_context().unwrap().expect("a context");
    context
        .as_object_mut()
        .unwrap()
        .insert_str("model", Value::str("changed"));
    let mut info = live.info().unwrap();
    info.header
        .as_object_mut()
        .unwrap()
        .insert_str("id", Value::str("changed"));
    info.length += 1;
    std::hint::black_box((&nodes, &events, &derived, &text, &context, &info));
    assert_eq!(
        (
            s.surface(),
            s.events_text(),
            s.derive_text(),
            s.request_context(),
            s.info()
        ),
        before
    );
}

#[test]
fn events_snapshot_never_grows_after_later_appends() {
    let store = Store::open();
    let s = store.session("s");
    s.log("turn/start", json!({"turn": 1}));
    let snap = s.events_text();
    let derived = s.derive_text();
    s.surf("user/message", user("u", "x"), op_append());
    assert_eq!(parse(&snap).as_array().unwrap().len(), 1);
    assert_eq!(parse(&derived), json!([]));
    assert_eq!(s.len(), 2);
    assert_eq!(s.derive().as_array().unwrap().len(), 1);
}

#[test]
fn non_lossless_append_data_is_refused_and_the_log_is_unchanged() {
    let store = Store::open();
    let s = store.session("s");
    s.log("turn/start", json!({"turn": 1}));
    let before = s.events_text();
    for data in [
        "-0",
        "-0.0",
        "-0e3",
        "1e400",
        "-1e309",
        "[1,{\"a\":[-0]}]",
        "{\"x\":-1e-400}",
        "{\"deep\":{\"er\":[[1e999]]}}",
    ] {
        expect_err(
            s.append_raw("plugin/x", data, None),
            DSH_E_INVALID_JSON,
            "json.not-lossless",
        );
        expect_err(
            s.append_raw("user/message", data, Some(r#"{"surfaceOp":"append"}"#)),
            DSH_E_INVALID_JSON,
            "json.not-lossless",
        );
    }
    // JavaScript-only values cannot be written as JSON text at all.
    for data in [
        "NaN",
        "Infinity",
        "undefined",
        "[1,,2]",
        "1n",
        "{a:1}",
        "function(){}",
    ] {
        expect_err(
            s.append_raw("plugin/x", data, None),
            DSH_E_INVALID_JSON,
            "json.parse",
        );
    }
    assert_eq!(s.events_text(), before);
}

#[test]
fn dense_arrays_and_nested_objects_with_extra_keys_are_accepted_as_data() {
    let store = Store::open();
    let s = store.session("s");
    let cases = [
        (
            "turn/start",
            r#"{"turn":1,"extra":{"nested":[1,[2,[3]],{"k":null}]}}"#,
            None,
        ),
        (
            "user/message",
            r#"{"id":"u","role":"user","content":[],"source":{"kind":"user"},"tags":["a","b"]}"#,
            Some(r#"{"surfaceOp":"append"}"#),
        ),
        (
            "todo/write",
            r#"{"todos":[{"content":"x","status":"pending","priority":3}],"by":"me"}"#,
            None,
        ),
        (
            "plugin/x",
            r#"[0,1.5,-2,1e21,"s",true,false,null,[],{}]"#,
            None,
        ),
    ];
    for (ty, data, intent) in cases {
        let e = ok(s.append_raw(ty, data, intent));
        assert_eq!(e["data"], parse(data));
    }
    let text = s.events_text();
    assert!(
        text.contains(r#""data":[0,1.5,-2,1e+21,"s",true,false,null,[],{}]"#),
        "{text}"
    );
}

#[test]
fn append_data_and_seeds_are_copied_from_caller_memory() {
    let store = Store::open();
    let seed = Log {
        events: vec![ev(0, "plugin/seeded", json!({"v": "original"}), None)],
    };
    let options = json!({"id": "s", "seed": seed.json(), "cwd": "/orig"}).to_string();
    let s = ok(store.create(&options));
    overwrite(options);
    let (t, d) = ("plugin/live".to_string(), r#"{"v":"original"}"#.to_string());
    let e = s.live.append_text(&t, d.as_str(), None);
    assert!(e.is_ok(), "{e:?}");
    overwrite(d);
    overwrite(t);
    let events = s.events();
    let info = s.info();
    assert_eq!(events[0]["data"], json!({"v": "original"}));
    assert_eq!(events[2]["type"], "plugin/live");
    assert_eq!(events[2]["data"], json!({"v": "original"}));
    assert_eq!(info["header"]["cwd"], "/orig");
    assert_eq!(s.close(), DSH_OK);
}

#[test]
fn non_lossless_surface_metadata_on_append_is_refused() {
    let store = Store::open();
    let s = store.session("s");
    s.surf("user/message", user("u", "x"), op_append());
    let msg = user("v", "y").to_string();
    for intent in [
        r#"{"surfaceOp":"append","sourceEventSeqs":[-0]}"#,
        r#"{"surfaceOp":"append","sourceEventSeqs":[0,1e400]}"#,
        r#"{"surfaceOp":{"op":"replace","start":-0,"end":0},"sourceEventSeqs":[0]}"#,
        r#"{"surfaceOp":{"op":"replace","start":0,"end":0,"x":-1e999},"sourceEventSeqs":[0]}"#,
    ] {
        expect_err(
            s.append_raw("user/message", &msg, Some(intent)),
            DSH_E_INVALID_JSON,
            "json.surface-metadata-not-lossless",
        );
    }
    // Evaluation order: data first, then retired vocabulary, then metadata.
    let bad = r#"{"surfaceOp":"append","sourceEventSeqs":[-0]}"#;
    expect_err(
        s.append_raw("user/message", "[-0]", Some(bad)),
        DSH_E_INVALID_JSON,
        "json.not-lossless",
    );
    expect_err(
        s.append_raw("request/header-delta", "{}", Some(bad)),
        DSH_E_REJECTED,
        "header.legacy",
    );
    assert_eq!(s.len(), 1);
}

#[test]
fn invalid_surface_metadata_shapes_on_append_are_refused() {
    let store = Store::open();
    let s = store.session("s");
    s.surf("user/message", user("u", "x"), op_append());
    let cases = [
        (json!({"surfaceOp": 7}), "surface.op-invalid"),
        (json!({"surfaceOp": "replace"}), "surface.op-invalid"),
        (json!({"surfaceOp": "Append"}), "surface.op-invalid"),
        (json!({"surfaceOp": null}), "surface.op-invalid"),
        (json!({"surfaceOp": [0, 0]}), "surface.op-invalid"),
        (json!({"surfaceOp": true}), "surface.op-invalid"),
        (json!({"surfaceOp": {}}), "surface.replace-shape"),
        (
            json!({"surfaceOp": {"op": "replace", "start": 0}, "sourceEventSeqs": [0]}),
            "surface.replace-shape",
        ),
        (
            json!({"surfaceOp": {"op": "replace", "start": 0, "end": 0, "why": "x"}, "sourceEventSeqs": [0]}),
            "surface.replace-shape",
        ),
        (
            json!({"surfaceOp": {"op": "swap", "start": 0, "end": 0}, "sourceEventSeqs": [0]}),
            "surface.replace-shape",
        ),
        (
            json!({"surfaceOp": {"op": "replace", "start": -1, "end": 0}, "sourceEventSeqs": [0]}),
            "surface.replace-shape",
        ),
        (
            json!({"surfaceOp": {"op": "replace", "start": 0.5, "end": 0}, "sourceEventSeqs": [0]}),
            "surface.replace-shape",
        ),
        (
            json!({"surfaceOp": {"op": "replace", "start": "0", "end": 0}, "sourceEventSeqs": [0]}),
            "surface.replace-shape",
        ),
        (
            json!({"surfaceOp": "append", "sourceEventSeqs": "0"}),
            "surface.sources-not-array",
        ),
        (
            json!({"surfaceOp": "append", "sourceEventSeqs": [0.5]}),
            "surface.source-not-seq",
        ),
        (
            json!({"surfaceOp": "append", "sourceEventSeqs": [-1]}),
            "surface.source-not-seq",
        ),
        (
            json!({"surfaceOp": "append", "sourceEventSeqs": [true]}),
            "surface.source-not-seq",
        ),
    ];
    for (intent, rule) in cases {
        expect_err(
            s.append("user/message", &user("v", "y"), Some(&intent)),
            DSH_E_REJECTED,
            rule,
        );
    }
    assert_eq!(s.nodes(), vec![0]);
    assert_eq!(s.len(), 1);
}

#[test]
fn surface_metadata_on_non_surface_events_is_refused_at_append_and_seed() {
    let store = Store::open();
    let s = store.session("s");
    s.surf("user/message", user("u", "x"), op_append());
    for (intent, rule) in [
        (json!({"surfaceOp": "append"}), "surface.op-on-non-surface"),
        (json!({"surfaceOp": null}), "surface.op-on-non-surface"),
        (
            json!({"sourceEventSeqs": [0]}),
            "surface.sources-on-non-surface",
        ),
        (
            json!({"sourceEventSeqs": []}),
            "surface.sources-on-non-surface",
        ),
    ] {
        expect_err(
            s.append("todo/write", &json!({"todos": []}), Some(&intent)),
            DSH_E_REJECTED,
            rule,
        );
        let mut log = Log::new();
        log.surf("todo/write", json!({"todos": []}), intent);
        let f = expect_err(
            store.create_json(&json!({"id": "seeded", "seed": log.json()})),
            DSH_E_REJECTED,
            rule,
        );
        assert_eq!(f.index, Some(0));
    }
    assert_eq!(s.len(), 1);
}

fn deep(depth: usize) -> String {
    let mut s = "[".repeat(depth);
    s.push_str("{\"leaf\":1}");
    s.push_str(&"]".repeat(depth));
    s
}

#[test]
fn deeply_nested_data_survives_append_seed_and_restore() {
    let depth = 100_000;
    let data = deep(depth);
    let store = Store::open();
    let s = store.session("s");
    let e = s.live.append_text("plugin/deep", data.as_str(), None);
    let text = e.expect("deep data is appended").text().to_string();
    assert!(text.contains(&data));
    // A known type: a load refuses unknown non-ignorable ones (docs/events.md §11.3).
    let seed = format!(
        r#"{{"id":"seeded","seed":[{{"type":"compaction/summary","seq":0,"time":1,"data":{data}}}]}}"#
    );
    let seeded = ok(store.create(&seed));
    assert!(seeded.events_text().contains(&data));
    assert_eq!(seeded.close(), DSH_OK);
    let (restored, _) = ok(store.open_session("seeded"));
    let log = restored.events_text();
    assert!(log.contains(&data));
    // The lossless parser reads it back without exhausting the stack.
    let v = json::parse(&log).expect("deep output parses");
    assert_eq!(v.as_array().map(Vec::len), Some(2));
}

// ------------------------------------------------------------------ header

fn header(extra: J) -> Value {
    let mut h = json!({"version": 0, "id": "s", "createdAt": 1_700_000_000_000u64});
    for (k, v) in extra.as_object().unwrap() {
        h[k] = v.clone();
    }
    json::parse(&h.to_string()).unwrap()
}

#[track_caller]
fn header_rejects(h: Value, status: Status, rule: &str) {
    let e = Session::new("s", h.clone(), Markers::Required, Policy::reference()).expect_err(rule);
    assert_eq!((e.status, e.rule.as_str()), (status, rule), "{}", e.message);
    // Snapshot mode validates the header after the seed.
    let e = Session::from_seed(
        "s",
        h,
        Seed::Values(vec![]),
        SeedMode::Snapshot,
        (Markers::Required, Policy::reference()),
        1,
    )
    .expect_err(rule);
    assert_eq!(e.rule, rule);
}

#[test]
fn supplied_header_is_validated_and_kept() {
    let h = header(
        json!({"cwd": "/a", "parentSession": "p", "seedLength": 3, "origin": "subagent", "delegationDepth": 1, "agentPreset": "x", "custom": {"k": 1}}),
    );
    let s =
        Session::new("s", h.clone(), Markers::Required, Policy::reference()).expect("valid header");
    assert_eq!(s.header(), &h);
    assert_eq!(s.header().to_json(), h.to_json(), "key order kept");
}

#[test]
fn header_that_is_non_lossless_or_has_a_mismatched_id_is_refused() {
    header_rejects(
        header(json!({"id": "other"})),
        Status::Rejected,
        "header.id-mismatch",
    );
    header_rejects(
        header(json!({"id": 5})),
        Status::Rejected,
        "header.id-mismatch",
    );
    let h = json::parse(r#"{"version":0,"id":"s","createdAt":1,"extra":[-0]}"#).unwrap();
    header_rejects(h, Status::InvalidJson, "header.not-lossless");
    let store = Store::open();
    expect_err(
        store.create(r#"{"id":"s","delegationDepth":-0}"#),
        DSH_E_INVALID_JSON,
        "header.not-lossless",
    );
    expect_err(
        store.create(r#"{"id":"s","agentPreset":{"x":1e400}}"#),
        DSH_E_INVALID_JSON,
        "header.not-lossless",
    );
    assert!(store.ids().is_empty());
}

#[test]
fn invalid_header_scalars_are_refused() {
    for h in ["[]", "null", "\"h\"", "3"] {
        header_rejects(
            json::parse(h).unwrap(),
            Status::Rejected,
            "header.not-record",
        );
    }
    let cases = [
        (json!({"version": 1}), "header.version"),
        (json!({"version": "0"}), "header.version"),
        (json!({"createdAt": 1.5}), "header.created-at"),
        (json!({"createdAt": -1}), "header.created-at"),
        (json!({"createdAt": "1"}), "header.created-at"),
        (json!({"cwd": 5}), "header.cwd-type"),
        (json!({"cwd": "relative/dir"}), "header.cwd-not-absolute"),
        (json!({"parentSession": 5}), "header.parent-session"),
        (json!({"seedLength": "1"}), "header.seed-length"),
        (json!({"seedLength": 0.5}), "header.seed-length"),
        (json!({"seedLength": -1}), "header.seed-length"),
        (json!({"origin": "top"}), "header.origin"),
        (json!({"delegationDepth": 1.5}), "header.delegation-depth"),
        (json!({"agentPreset": 1}), "header.agent-preset"),
    ];
    for (extra, rule) in cases {
        header_rejects(header(extra), Status::Rejected, rule);
    }
    let mut missing = header(json!({}));
    missing.as_object_mut().unwrap().remove("createdAt");
    header_rejects(missing, Status::Rejected, "header.created-at");
}
