//! The derive cache and the request header and context folds
//! (docs/events.md §9, §10).

mod checklist_support;

use ::dsh_session::engine::request::{canonical_header, RequestFolds};
use ::dsh_session::engine::Event;
use ::dsh_session::json::{self, Value};
use checklist_support::*;

/// Append one random valid event (messages of every kind, chunks, boundaries,
/// replaces, tool-result rewrites).
fn random_append(s: &Sess, rng: &mut Lcg, n: usize) {
    let nodes = s.nodes();
    let events = s.events();
    let results: Vec<u64> = nodes
        .iter()
        .copied()
        .filter(|&q| events[q as usize]["type"] == "tool/result")
        .collect();
    match rng.below(9) {
        0 => {
            s.log("assistant/chunk", json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "t"}}));
        }
        1 => {
            s.log("step/start", json!({"turn": 1, "step": n}));
        }
        2 => {
            s.surf("user/message", user(&format!("u{n}"), "q"), op_append());
        }
        3 => {
            s.surf(
                "user/message",
                context(&format!("c{n}"), "ctx"),
                op_append(),
            );
        }
        4 => {
            let content = if rng.chance(30) {
                json!([])
            } else {
                json!([{"type": "text", "text": format!("a{n}")}])
            };
            s.surf(
                "assistant/message",
                asst_blocks(1, 1, &format!("a{n}"), content),
                op_append_from(&[]),
            );
        }
        5 => {
            let c = s.log("tool/call", tool_call(1, 1, &format!("k{n}")));
            s.surf(
                "tool/result",
                tool_result(1, 1, &format!("k{n}"), "out"),
                op_append_from(&[c]),
            );
        }
        6 if !results.is_empty() => {
            let r = results[rng.below(results.len() as u64) as usize];
            let mut data = events[r as usize]["data"].clone();
            data["message"]["content"][0]["content"] =
                json!([{"type": "text", "text": format!("trim{n}")}]);
            s.surf("tool/result", data, op_replace(r, r, &[r]));
        }
        7 if !nodes.is_empty() => {
            let i = rng.below(nodes.len() as u64) as usize;
            let j = i + rng.below((nodes.len() - i) as u64) as usize;
            s.surf(
                "user/message",
                user(&format!("s{n}"), "summary"),
                op_replace(nodes[i], nodes[j], &nodes[i..=j]),
            );
        }
        _ => {
            s.log("plugin/x", json!(n));
        }
    }
}

#[test]
fn cached_derivation_always_equals_a_from_scratch_derivation() {
    let store = Store::open();
    let mut replaces = 0;
    for seed in 0..6u64 {
        let s = store.session(&format!("s{seed}"));
        let mut rng = Lcg::new(seed);
        for n in 0..60 {
            let generation = s.surface()["replaceGeneration"].clone();
            random_append(&s, &mut rng, n);
            if s.surface()["replaceGeneration"] != generation {
                replaces += 1;
            }
            assert_eq!(
                s.derive(),
                ok(derive_messages(&s.events())),
                "seed {seed} step {n}"
            );
        }
    }
    assert!(replaces > 10, "replaces exercised: {replaces}");
}

/// A log of several chunks of small events: its sealed chunks are packed,
/// so replaces, tool-result rewrites, the derive, a fork inside a chunk
/// and a reopen read their events from there.
#[test]
fn a_log_of_packed_chunks_derives_like_a_from_scratch_derivation() {
    const CHUNK: usize = 4096;
    let store = Store::open_config(r#"{"admission":"reference","eventTypes":["plugin/x"]}"#);
    let s = store.session("long");
    let mut k = 0;
    while k < 2 * CHUNK + 500 {
        match k % 8 {
            0 => {
                s.surf("user/message", user(&format!("u{k}"), "q"), op_append());
            }
            1 => {
                let c = s.log("tool/call", tool_call(1, 1, &format!("k{k}")));
                s.surf(
                    "tool/result",
                    tool_result(1, 1, &format!("k{k}"), "out"),
                    op_append_from(&[c]),
                );
                k += 1;
            }
            _ => {
                s.log("plugin/x", json!(k));
            }
        }
        k += 1;
    }
    assert_eq!(s.derive(), ok(derive_messages(&s.events())));
    let mut rng = Lcg::new(11);
    for n in 0..25 {
        random_append(&s, &mut rng, n);
        assert_eq!(s.derive(), ok(derive_messages(&s.events())), "step {n}");
    }
    // A fork inside the second chunk, and the log read back.
    let child = ok(s.fork_at("child", json!(CHUNK + 1000)));
    assert_eq!(child.len(), CHUNK + 1002);
    assert_eq!(child.derive(), ok(derive_messages(&child.events())));
    let events = s.events();
    assert_eq!(s.close(), DSH_OK);
    // The open adds the repair's closers and the end-seed marker.
    let (again, _) = ok(store.open_session("long"));
    let reopened = again.events();
    let n = events.as_array().unwrap().len();
    assert!(reopened.as_array().unwrap()[..n] == events.as_array().unwrap()[..]);
    assert!(again.derive() == ok(derive_messages(&reopened)));
}

#[test]
fn each_call_returns_a_fresh_snapshot_that_never_grows() {
    let store = Store::open();
    let s = store.session("s");
    s.surf("user/message", user("u", "x"), op_append());
    let first = s.derive_text();
    assert_eq!(s.derive_text(), first, "repeatable");
    s.surf("assistant/message", asst(1, 1, "a", "y"), op_append());
    assert_eq!(
        parse(&first).as_array().unwrap().len(),
        1,
        "the earlier snapshot did not grow"
    );
    assert_eq!(s.derive().as_array().unwrap().len(), 2);
    s.surf("user/message", user("r", "z"), op_replace(0, 1, &[0, 1]));
    assert_eq!(s.derive(), json!([user("r", "z")]));
    assert_eq!(parse(&first), json!([user("u", "x")]));
}

#[test]
fn projecting_one_event_equals_the_derivation_of_that_node() {
    let store = Store::open();
    let s = store.session("s");
    let mut rng = Lcg::new(5);
    for n in 0..80 {
        random_append(&s, &mut rng, n);
    }
    let events = s.events();
    let projected: Vec<J> = s
        .nodes()
        .iter()
        .map(|&q| ok(event_message(&events[q as usize])))
        .filter(|m| !m.is_null())
        .collect();
    assert_eq!(J::Array(projected), s.derive());
}

#[test]
fn projection_is_the_logged_message_byte_for_byte() {
    let store = Store::open();
    let s = store.session("s");
    let msg = r#"{"source":{"kind":"model","replayState":{"b":1,"a":[2]},"model":"m","provider":"p"},"role":"assistant","id":"a1","content":[{"text":"hi","type":"text"}],"z":null}"#;
    let data = format!(
        r#"{{"turn":1,"step":1,"message":{msg},"usage":{{"inputTokens":1,"outputTokens":2}},"interrupted":true}}"#
    );
    let e = ok(s.append_raw(
        "assistant/message",
        &data,
        Some(r#"{"surfaceOp":"append"}"#),
    ));
    assert_eq!(
        s.derive_text(),
        format!("[{msg}]"),
        "usage/interrupted are not part of the message"
    );
    assert_eq!(
        ok(event_message_text(&e.to_string())),
        json::parse(msg).unwrap().to_json()
    );
    let tr = tool_result(1, 1, "c", "x");
    let mut with_extra = tr.clone();
    with_extra["error"] = json!({"name": "E", "code": "C"});
    with_extra["meta"] = json!({"private": true});
    let e = ok(s.append("tool/result", &with_extra, Some(&op_append())));
    assert_eq!(
        ok(event_message(&e)),
        tr["message"],
        "error/meta are not part of the message"
    );
}

#[test]
fn boundaries_and_empty_assistant_messages_project_to_nothing() {
    for (ty, data) in [
        ("turn/start", json!({"turn": 1})),
        (
            "turn/end",
            json!({"turn": 1, "reason": {"kind": "completed"}}),
        ),
        ("step/start", json!({"turn": 1, "step": 1})),
        ("step/end", json!({"turn": 1, "step": 1})),
        (
            "assistant/chunk",
            json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}),
        ),
        ("tool/call", tool_call(1, 1, "c")),
        ("todo/write", json!({"todos": []})),
        (
            "request/header",
            json!({"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}),
        ),
        ("session/end-seed", json!({})),
        ("plugin/x", json!({"message": user("u", "x")})),
        ("assistant/message", asst_blocks(1, 1, "a", json!([]))),
    ] {
        assert_eq!(ok(event_message(&ev(0, ty, data, None))), J::Null, "{ty}");
    }
    // A user message with empty content is not skipped.
    let mut empty_user = user("u", "x");
    empty_user["content"] = json!([]);
    assert_eq!(
        ok(event_message(&ev(
            0,
            "user/message",
            empty_user.clone(),
            Some(op_append())
        ))),
        empty_user
    );
}

// --------------------------------------------------------- request header

fn val(j: &J) -> Value {
    json::parse(&j.to_string()).unwrap()
}

fn canon(j: J) -> J {
    parse(&canonical_header(&val(&j)).expect("object header").to_json())
}

#[test]
fn canonicalization_drops_empty_fields_and_false_only_defaults() {
    let config = json!({"provider": "p", "model": "m", "stop": []});
    let bare = json!({"config": config});
    assert_eq!(
        canon(
            json!({"tools": [], "system": "", "adapterDefaults": {"reasoningEffort": false, "maxTokens": false}, "config": config})
        ),
        bare
    );
    assert_eq!(
        canon(json!({"config": config, "adapterDefaults": {}})),
        bare
    );
    let tools = json!([{"name": "read", "description": "d", "parameters": {"type": "object"}}]);
    let full = canon(
        json!({"tools": tools, "system": "sys", "adapterDefaults": {"maxTokens": true, "reasoningEffort": false}, "config": config}),
    );
    assert_eq!(
        full.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["config", "adapterDefaults", "system", "tools"]
    );
    assert_eq!(
        full["adapterDefaults"],
        json!({"maxTokens": true, "reasoningEffort": false}),
        "kept as the original object"
    );
    assert_eq!(
        full["config"]["stop"],
        json!([]),
        "config is not normalized"
    );
    // The live fold returns the canonical form.
    let store = Store::open();
    let s = store.session("s");
    s.log(
        "request/header",
        json!({"header": {"config": config, "system": "", "tools": []}, "reason": "initial"}),
    );
    assert_eq!(s.request_header(), bare);
}

#[test]
fn canonical_forms_compare_every_field_including_tool_order() {
    let t1 = json!({"name": "a", "description": "x", "parameters": {}});
    let t2 = json!({"name": "b", "description": "y", "parameters": {}});
    let base = json!({"config": {"provider": "p", "model": "m"}, "system": "s", "tools": [t1, t2]});
    let text = |j: J| canonical_header(&val(&j)).unwrap().to_json();
    assert_eq!(text(base.clone()), text(base.clone()));
    let mut swapped = base.clone();
    swapped["tools"] = json!([t2, t1]);
    assert_ne!(text(swapped), text(base.clone()));
    for (path, value) in [
        ("provider", json!("q")),
        ("model", json!("n")),
        ("temperature", json!(0.5)),
        ("maxTokens", json!(9)),
        ("reasoningEffort", json!("hi")),
        ("stop", json!([])),
    ] {
        let mut changed = base.clone();
        changed["config"][path] = value;
        assert_ne!(text(changed), text(base.clone()), "{path}");
    }
    let mut no_system = base.clone();
    no_system["system"] = json!("other");
    assert_ne!(text(no_system), text(base.clone()));
    // Absent and empty tool lists are the same canonical header.
    let cfg = json!({"config": {"provider": "p", "model": "m"}});
    let mut empty = cfg.clone();
    empty["tools"] = json!([]);
    assert_eq!(text(empty), text(cfg));
}

fn events(j: &J) -> Vec<Event> {
    j.as_array()
        .unwrap()
        .iter()
        .map(|e| Event::from_envelope(val(e), "test event").unwrap())
        .collect()
}

/// Fold the events of `all` that `folds` has not seen yet.
fn catch_up(folds: &mut RequestFolds, all: &[Event]) {
    for e in &all[folds.folded()..] {
        folds.fold(e);
    }
}

#[test]
fn header_fold_keeps_the_baseline_and_takes_the_latest_snapshot() {
    let h1 = json!({"config": {"provider": "p", "model": "m"}, "system": "one"});
    let h2 = json!({"config": {"provider": "p", "model": "m2"}});
    let mut log = Log::new();
    log.push("request/header", json!({"header": h1, "reason": "initial"}));
    let baseline_len = log.events.len();
    log.push("request/context", json!({"provider": "x", "model": "y"}));
    log.push("plugin/x", json!({"header": h2}));
    let all = events(&log.json());
    let mut folds = RequestFolds::default();
    catch_up(&mut folds, &all[..baseline_len]);
    assert_eq!(parse(&folds.header().unwrap().to_json()), h1);
    catch_up(&mut folds, &all);
    assert_eq!(
        parse(&folds.header().unwrap().to_json()),
        h1,
        "baseline kept: no snapshot followed"
    );
    assert_eq!(folds.folded(), all.len());
    log.push("request/header", json!({"header": h2, "reason": "change"}));
    let all = events(&log.json());
    catch_up(&mut folds, &all);
    assert_eq!(
        parse(&folds.header().unwrap().to_json()),
        h2,
        "latest full snapshot, no merging"
    );
    let mut fresh = RequestFolds::default();
    catch_up(&mut fresh, &[]);
    assert!(fresh.header().is_none());
    // The same through a session.
    let store = Store::open();
    let s = store.seeded("s", &log.json());
    assert_eq!(s.request_header(), h2);
    s.log("request/context", json!({"provider": "z", "model": "z"}));
    assert_eq!(s.request_header(), h2);
}

#[test]
fn request_context_fold_is_incremental_and_last_record_wins() {
    let store = Store::open();
    let s = store.session("s");
    assert_eq!(s.request_context(), J::Null, "none before any record");
    assert_eq!(s.request_header(), J::Null);
    s.log("turn/start", json!({"turn": 1}));
    assert_eq!(s.request_context(), J::Null);
    let c1 = json!({"provider": "p", "model": "m", "contextWindow": 128000});
    s.log("request/context", c1.clone());
    assert_eq!(s.request_context(), c1);
    s.log("plugin/x", json!({"provider": "nope"}));
    s.log(
        "request/header",
        json!({"header": {"config": {"provider": "q", "model": "n"}}, "reason": "change"}),
    );
    assert_eq!(s.request_context(), c1, "unrelated events are ignored");
    let c2 = json!({"provider": "p", "model": "m"});
    s.log("request/context", c2.clone());
    assert_eq!(s.request_context(), c2, "no merging: the window is cleared");
}

#[test]
fn seeded_log_is_folded_on_first_read() {
    let store = Store::open();
    let mut log = Log::new();
    log.push("request/context", json!({"provider": "a", "model": "1"}));
    log.push(
        "request/header",
        json!({"header": {"config": {"provider": "a", "model": "1"}}, "reason": "initial"}),
    );
    log.push(
        "request/context",
        json!({"provider": "b", "model": "2", "contextWindow": 8}),
    );
    let s = store.seeded("s", &log.json());
    assert_eq!(
        s.request_context(),
        json!({"provider": "b", "model": "2", "contextWindow": 8})
    );
    assert_eq!(
        s.request_header(),
        json!({"config": {"provider": "a", "model": "1"}})
    );
}

#[test]
fn batch_appended_between_two_reads_is_folded() {
    let store = Store::open();
    let s = store.session("s");
    s.log("request/context", json!({"provider": "a", "model": "1"}));
    assert_eq!(s.request_context()["provider"], "a");
    ok(s.batch(&json!([
        {"type": "request/context", "data": {"provider": "b", "model": "2"}},
        {"type": "request/header", "data": {"header": {"config": {"provider": "b", "model": "2"}, "system": "s"}, "reason": "change"}},
        {"type": "request/context", "data": {"provider": "c", "model": "3", "contextWindow": 1}},
        {"type": "plugin/x", "data": null},
    ])));
    assert_eq!(
        s.request_context(),
        json!({"provider": "c", "model": "3", "contextWindow": 1})
    );
    assert_eq!(
        s.request_header(),
        json!({"config": {"provider": "b", "model": "2"}, "system": "s"})
    );
    // A failed batch folds nothing.
    expect_err(
        s.batch(&json!([
            {"type": "request/context", "data": {"provider": "d", "model": "4"}},
            {"type": "request/header-delta", "data": {}},
        ])),
        DSH_E_REJECTED,
        "header.legacy",
    );
    assert_eq!(s.request_context()["provider"], "c");
}

#[test]
fn exposed_context_record_is_an_immutable_copy() {
    let store = Store::open();
    let s = store.session("s");
    let c = json!({"provider": "p", "model": "m", "contextWindow": 1000});
    s.log("request/context", c.clone());
    // The core hands out its own copy: changing it changes nothing stored.
    let mut mine = ok(s.live.request_context().map_err(Fail::from)).expect("a context");
    mine.as_object_mut()
        .unwrap()
        .insert_str("contextWindow", Value::Number(0.0));
    assert_eq!(
        mine.to_json(),
        r#"{"provider":"p","model":"m","contextWindow":0}"#
    );
    let mut copy = s.request_context();
    copy["contextWindow"] = json!(1);
    assert_eq!(s.request_context(), c);
    assert_eq!(s.events()[0]["data"], c);
}
