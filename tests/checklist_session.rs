//! Sessions: derivation from the log, turn-end round trips, seeds
//! (envelope, contiguity, message shape, request headers), end-seed
//! (docs/lifecycle.md §3–§4, docs/events.md §3, §5, docs/errors.md §3.2,
//! §4.2–§4.4).

mod checklist_support;

use checklist_support::*;

/// Create a session seeded with `seed` and expect `rule` at seed `index`;
/// the id must stay free.
#[track_caller]
fn seed_rejects(seed: J, status: dsh_status, rule: &str, index: u64) -> Fail {
    seed_rejects_text(&seed.to_string(), status, rule, index)
}

/// As `seed_rejects`, with the seed as raw JSON text.
#[track_caller]
fn seed_rejects_text(seed: &str, status: dsh_status, rule: &str, index: u64) -> Fail {
    let store = Store::open();
    let f = expect_err(
        store.create(&format!(r#"{{"id":"s","seed":{seed}}}"#)),
        status,
        rule,
    );
    assert_eq!(f.index, Some(index), "seed index: {}", f.text);
    assert!(store.ids().is_empty(), "nothing registered");
    ok(store.create_json(&json!({"id": "s"})));
    f
}

fn header_event(config: J) -> J {
    json!({"header": {"config": config}, "reason": "initial"})
}

#[test]
fn message_history_is_derived_from_the_log_in_order() {
    let store = Store::open();
    let mut log = Log::new();
    let (u, a, r) = closed_turn(&mut log, 1);
    let s = store.seeded("s", &log.json());
    let events = s.events();
    assert_eq!(
        s.derive(),
        json!([
            events[u as usize]["data"],
            events[a as usize]["data"]["message"],
            events[r as usize]["data"]["message"]
        ])
    );
    // Chunks, boundaries and tool/call never project.
    s.log(
        "assistant/chunk",
        json!({"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}),
    );
    s.log("turn/start", json!({"turn": 2}));
    assert_eq!(s.derive().as_array().unwrap().len(), 3);
}

#[test]
fn turn_end_reasons_round_trip_through_append_and_seed() {
    let store = Store::open();
    let s = store.session("s");
    let reasons = [
        json!({"kind": "max-tokens"}),
        json!({"kind": "aborted", "reason": {"kind": "user"}}),
        json!({"kind": "aborted", "reason": {"kind": "hook", "reason": "policy"}}),
        json!({"kind": "aborted", "reason": {"kind": "parent"}}),
        json!({"kind": "plugin-defined", "detail": [1, 2]}),
    ];
    for (i, reason) in reasons.iter().enumerate() {
        let turn = i as u64 + 1;
        s.log("turn/start", json!({"turn": turn}));
        assert_eq!(s.info()["openTurn"], json!(turn));
        let e = ok(s.append("turn/end", &json!({"turn": turn, "reason": reason}), None));
        assert_eq!(e["data"]["reason"], *reason);
        assert_eq!(s.info()["openTurn"], J::Null);
    }
    let replay = store.seeded("replay", &s.events());
    assert_eq!(
        replay.events().as_array().unwrap()[..10],
        s.events().as_array().unwrap()[..]
    );
}

#[test]
fn injected_context_is_kept_exactly_and_projects_as_user_content() {
    let store = Store::open();
    let s = store.session("s");
    // An unusual but identified context message, with keys in a custom order.
    let text = r#"{"source":{"kind":"plugin","plugin":"memory","form":"snapshot","sections":[{"name":"a","text":"b"}]},"content":[{"type":"text","text":"ctx"}],"role":"user","id":"ctx-1","extra":{"z":1,"a":2}}"#;
    let e = ok(s.append_raw("user/message", text, Some(r#"{"surfaceOp":"append"}"#)));
    s.surf("user/message", user("u", "hi"), op_append());
    let log = s.events_text();
    assert!(
        log.contains(&format!("\"data\":{text}")),
        "stored byte-identically: {log}"
    );
    let derived = s.derive_text();
    assert_eq!(derived, format!("[{text},{}]", user("u", "hi")));
    assert_eq!(e["data"]["role"], "user");
    assert!(s
        .derive()
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["role"] == "user"));
}

#[test]
fn replaying_a_seeded_log_reproduces_derivation_and_first_live_seq() {
    let store = Store::open();
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    closed_turn(&mut log, 2);
    let expected = ok(derive_messages(&log.json()));
    let s = store.seeded("s", &log.json());
    assert_eq!(s.derive(), expected);
    let n = log.events.len();
    assert_eq!(s.info()["firstLiveSeq"], json!(n));
    assert_eq!(
        strip_time(&s.events()[n]),
        json!({"type": "session/end-seed", "seq": n, "data": {}})
    );
    assert_eq!(s.len(), n + 1);
}

#[test]
fn explicit_empty_seed_writes_end_seed_at_zero_and_reopening_adds_nothing() {
    let store = Store::open();
    let fresh = store.session("fresh");
    assert_eq!(fresh.len(), 0, "a fresh session has no events");
    assert_eq!(fresh.info()["firstLiveSeq"], json!(0));
    let s = store.seeded("empty", &json!([]));
    assert_eq!(
        strip_time(&s.events()),
        json!([{"type": "session/end-seed", "seq": 0, "data": {}}])
    );
    assert_eq!(s.info()["firstLiveSeq"], json!(0));
    let log = s.events();
    // Re-seeding with that log adds no second marker.
    let again = store.seeded("again", &log);
    assert_eq!(again.events(), log);
    assert_eq!(again.info()["firstLiveSeq"], json!(1));
    // Reopening the stored log adds nothing either.
    assert_eq!(s.close(), DSH_OK);
    let (reopened, out) = ok(store.open_session("empty"));
    assert_eq!(out["repaired"], json!([]));
    assert_eq!(reopened.events(), log);
    assert_eq!(reopened.info()["firstLiveSeq"], json!(1));
}

#[test]
fn seed_refuses_bad_request_headers_and_unwrapped_assistant_messages() {
    let mut log = Log::new();
    log.push("plugin/anything", J::Null);
    log.push("turn/start", J::Null);
    let store = Store::open();
    ok(store.create_json(&json!({"id": "null-data", "seed": log.json()})));
    for config in [
        json!({"provider": "p"}),
        json!({"model": "m"}),
        json!({"provider": "", "model": "m"}),
        json!({"provider": 1, "model": "m"}),
    ] {
        let mut l = log.clone();
        l.push("request/header", header_event(config));
        seed_rejects(l.json(), DSH_E_REJECTED, "seed.header-provider-model", 2);
    }
    let mut l = log.clone();
    l.push(
        "request/header",
        json!({"header": null, "reason": "initial"}),
    );
    seed_rejects(l.json(), DSH_E_REJECTED, "seed.header-provider-model", 2);
    let mut l = log.clone();
    let bare = asst(1, 1, "a", "x")["message"].clone();
    l.surf("assistant/message", bare, op_append());
    seed_rejects(l.json(), DSH_E_REJECTED, "msg.unidentified", 2);
}

#[test]
fn each_malformed_message_shape_is_refused_with_its_rule_at_seed_only() {
    let mut cases: Vec<(&str, J, &str)> = Vec::new();
    cases.push(("user/message", J::Null, "msg.unidentified"));
    let mut m = user("u", "x");
    m["id"] = json!("");
    cases.push(("user/message", m, "msg.unidentified"));
    let mut m = user("u", "x");
    m["role"] = json!("assistant");
    cases.push(("user/message", m, "msg.role"));
    let mut m = user("u", "x");
    m["source"] = J::Null;
    cases.push(("user/message", m, "msg.source"));
    let mut m = user("u", "x");
    m["source"] = json!({"kind": ""});
    cases.push(("user/message", m, "msg.source"));
    let mut m = user("u", "x");
    m["content"] = json!("x");
    cases.push(("user/message", m, "msg.content"));
    let mut d = asst(1, 1, "a", "x");
    d["message"] = J::Null;
    cases.push(("assistant/message", d, "msg.unidentified"));
    let mut d = asst(1, 1, "a", "x");
    d["message"]["source"] = json!({"kind": "user"});
    cases.push(("assistant/message", d, "msg.model-source"));
    let mut d = asst(1, 1, "a", "x");
    d["message"]["source"]["model"] = json!("");
    cases.push(("assistant/message", d, "msg.model-source"));
    let mut d = tool_result(1, 1, "c", "x");
    d["message"]["source"] = json!({"kind": "user"});
    cases.push(("tool/result", d, "msg.tool-source"));
    let mut d = tool_result(1, 1, "c", "x");
    d["message"]["content"] = json!([{"type": "text", "text": "x"}]);
    cases.push(("tool/result", d, "msg.tool-result-block"));
    let mut d = tool_result(1, 1, "c", "x");
    let block = d["message"]["content"][0].clone();
    d["message"]["content"] = json!([block.clone(), block]);
    cases.push(("tool/result", d, "msg.tool-result-block"));
    let mut d = tool_result(1, 1, "c", "x");
    d["message"]["content"][0]["content"] = json!("x");
    cases.push(("tool/result", d, "msg.tool-result-block"));
    let mut d = tool_result(1, 1, "c", "x");
    d["message"]["content"][0]["toolCallId"] = json!("other");
    cases.push(("tool/result", d, "msg.tool-call-id-mismatch"));
    let mut d = tool_result(1, 1, "c", "x");
    d["message"]["role"] = json!("assistant");
    cases.push(("tool/result", d, "msg.role"));
    let store = Store::open();
    let live = store.session("live");
    for (ty, data, rule) in cases {
        let mut log = Log::new();
        log.push("turn/start", json!({"turn": 1}));
        log.surf(ty, data.clone(), op_append());
        seed_rejects(log.json(), DSH_E_REJECTED, rule, 1);
        // The live append does not check message shapes (docs/errors.md §3.1).
        ok(live.append(ty, &data, Some(&op_append())));
    }
}

#[test]
fn plugin_owned_block_details_are_not_validated() {
    let store = Store::open();
    let mut log = Log::new();
    let mut u = user("u", "x");
    u["content"] = json!([{"type": "hologram", "payload": {"any": [1]}}, 7]);
    log.surf("user/message", u, op_append());
    let mut a = asst_blocks(
        1,
        1,
        "a",
        json!([{"type": "mystery"}, {"type": "tool-call"}]),
    );
    a["message"]["source"]["replayState"] = json!({"opaque": true});
    log.surf("assistant/message", a, op_append_from(&[]));
    let mut r = tool_result(1, 1, "c", "x");
    r["message"]["content"][0]["content"] = json!([{"type": "widget"}]);
    log.surf("tool/result", r, op_append());
    let s = store.seeded("s", &log.json());
    assert_eq!(s.derive().as_array().unwrap().len(), 3);
}

#[test]
fn reasoning_effort_round_trips_and_invalid_values_are_refused_on_seed() {
    let store = Store::open();
    let mut log = Log::new();
    log.push(
        "request/header",
        header_event(json!({"provider": "p", "model": "m", "reasoningEffort": "high"})),
    );
    let s = store.seeded("s", &log.json());
    assert_eq!(
        s.events()[0]["data"]["header"]["config"]["reasoningEffort"],
        "high"
    );
    assert_eq!(s.request_header()["config"]["reasoningEffort"], "high");
    for bad in [json!(""), json!(1), json!(null), json!(true)] {
        let mut l = Log::new();
        l.push(
            "request/header",
            header_event(json!({"provider": "p", "model": "m", "reasoningEffort": bad})),
        );
        seed_rejects(l.json(), DSH_E_REJECTED, "seed.header-reasoning-effort", 0);
    }
}

#[test]
fn adapter_default_markers_round_trip_and_invalid_markers_are_refused_on_seed() {
    let store = Store::open();
    let config = json!({"provider": "p", "model": "m", "reasoningEffort": "low", "maxTokens": 100});
    let good = json!({"header": {"config": config, "adapterDefaults": {"reasoningEffort": true, "maxTokens": true}}, "reason": "resume"});
    let mut log = Log::new();
    log.push("request/header", good.clone());
    let s = store.seeded("s", &log.json());
    assert_eq!(s.events()[0]["data"], good);
    assert_eq!(
        s.request_header()["adapterDefaults"],
        json!({"reasoningEffort": true, "maxTokens": true})
    );
    let bad = [
        (config.clone(), json!({"temperature": true})),
        (config.clone(), json!({"reasoningEffort": false})),
        (config.clone(), json!({"maxTokens": 1})),
        (config.clone(), json!([true])),
        (config.clone(), json!(true)),
        (
            json!({"provider": "p", "model": "m", "maxTokens": 1}),
            json!({"reasoningEffort": true}),
        ),
        (
            json!({"provider": "p", "model": "m", "reasoningEffort": "x"}),
            json!({"maxTokens": true}),
        ),
    ];
    for (config, ad) in bad {
        let mut l = Log::new();
        l.push(
            "request/header",
            json!({"header": {"config": config, "adapterDefaults": ad}, "reason": "change"}),
        );
        seed_rejects(l.json(), DSH_E_REJECTED, "seed.header-adapter-defaults", 0);
    }
}

#[test]
fn seed_refuses_non_lossless_events_and_surface_metadata() {
    let texts = [
        r#"[{"type":"plugin/x","seq":0,"time":1,"data":{"a":[-0]}}]"#,
        r#"[{"type":"plugin/x","seq":0,"time":1,"data":1e400}]"#,
        r#"[{"type":"plugin/x","seq":0,"time":1,"data":null},{"type":"user/message","seq":1,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append","sourceEventSeqs":[-0]}]"#,
        r#"[{"type":"plugin/x","seq":0,"time":1,"data":null},{"type":"user/message","seq":1,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":0,"end":-1e999}}]"#,
        r#"[{"type":"plugin/x","seq":0,"time":-0,"data":null}]"#,
    ];
    for (i, text) in texts.iter().enumerate() {
        let index = if i == 2 || i == 3 { 1 } else { 0 };
        let f = seed_rejects_text(text, DSH_E_INVALID_JSON, "json.not-lossless", index);
        assert!(
            f.message.contains(&format!("index {index}")),
            "{}",
            f.message
        );
    }
}

#[test]
fn seed_refuses_non_contiguous_seqs() {
    let mut log = Log::new();
    log.push("a/b", J::Null);
    log.push("a/b", J::Null);
    let mut gap = log.clone();
    gap.events[1]["seq"] = json!(2);
    seed_rejects(gap.json(), DSH_E_REJECTED, "seq.seed-not-contiguous", 1);
    let mut start = log.clone();
    start.events.remove(0);
    seed_rejects(start.json(), DSH_E_REJECTED, "seq.seed-not-contiguous", 0);
    let mut dup = log;
    dup.events[1]["seq"] = json!(0);
    seed_rejects(dup.json(), DSH_E_REJECTED, "seq.seed-not-contiguous", 1);
}

#[test]
fn seed_surface_failures_carry_the_seed_index_prefix() {
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 1}));
    log.surf("user/message", user("u", "x"), op_append());
    let mut missing = log.clone();
    missing.push("assistant/message", asst(1, 1, "a", "y"));
    let f = seed_rejects(missing.json(), DSH_E_REJECTED, "surface.op-missing", 2);
    assert!(
        f.message.starts_with("invalid seed event at index 2: "),
        "{}",
        f.message
    );
    let mut on_log_only = log.clone();
    on_log_only.surf(
        "turn/end",
        json!({"turn": 1}),
        json!({"sourceEventSeqs": [1]}),
    );
    let mut uncovered = log;
    uncovered.surf("user/message", user("s", "x"), op_replace(1, 1, &[0]));
    for (seed, rule) in [
        (on_log_only, "surface.sources-on-non-surface"),
        (uncovered, "surface.replace-uncovered"),
    ] {
        let f = seed_rejects(seed.json(), DSH_E_REJECTED, rule, 2);
        assert!(
            f.message.starts_with("invalid seed event at index 2: "),
            "{rule}: {}",
            f.message
        );
    }
}

#[test]
fn well_formed_contiguous_seed_is_accepted() {
    let store = Store::open();
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    let r = log.events.len() as u64 - 3;
    log.surf(
        "tool/result",
        tool_result(1, 1, "c1", "trim"),
        op_replace(r, r, &[r]),
    );
    log.push("todo/write", json!({"todos": []}));
    let s = store.seeded("s", &log.json());
    assert_eq!(
        s.events().as_array().unwrap()[..log.events.len()],
        log.events[..]
    );
    assert_eq!(s.surface()["replaceGeneration"], json!(1));
}

#[test]
fn invalid_seed_envelopes_are_refused_and_ignorable_true_is_kept() {
    let base = || ev(0, "plugin/x", json!({"k": 1}), None);
    let mut cases: Vec<(J, &str)> = Vec::new();
    let mut e = base();
    e["extra"] = json!(1);
    cases.push((e, "seed.envelope-key"));
    let mut e = base();
    e["type"] = json!(5);
    cases.push((e, "seed.envelope-invalid"));
    for seq in [json!(0.5), json!(-1), json!("0"), json!(null)] {
        let mut e = base();
        e["seq"] = seq;
        cases.push((e, "seed.envelope-invalid"));
    }
    for time in [json!(0.5), json!("1"), json!(9007199254740992u64)] {
        let mut e = base();
        e["time"] = time;
        cases.push((e, "seed.envelope-invalid"));
    }
    let mut e = base();
    e.as_object_mut().unwrap().remove("data");
    cases.push((e, "seed.envelope-invalid"));
    for ign in [json!(false), json!("yes"), json!(1), json!(null)] {
        let mut e = base();
        e["ignorable"] = ign;
        cases.push((e, "seed.envelope-invalid"));
    }
    cases.push((json!([1]), "seed.envelope-invalid"));
    cases.push((json!("event"), "seed.envelope-invalid"));
    for (e, rule) in cases {
        seed_rejects(json!([e]), DSH_E_REJECTED, rule, 0);
    }
    // Negative time is legal; ignorable:true is accepted and kept verbatim.
    let store = Store::open();
    let mut e = base();
    e["time"] = json!(-5);
    e["ignorable"] = json!(true);
    let s = store.seeded("s", &json!([e]));
    assert_eq!(s.events()[0], e);
    assert!(s
        .events_text()
        .starts_with(r#"[{"type":"plugin/x","seq":0,"time":-5,"data":{"k":1},"ignorable":true}"#));
}

#[test]
fn retired_header_vocabulary_is_refused_in_seeds_and_appends() {
    let config = json!({"provider": "p", "model": "m"});
    let mut delta = Log::new();
    delta.push("request/header-delta", json!({}));
    seed_rejects(delta.json(), DSH_E_REJECTED, "header.legacy", 0);
    // The retired type is refused before the envelope keys are looked at.
    delta.events[0]["bogus"] = json!(1);
    seed_rejects(delta.json(), DSH_E_REJECTED, "header.legacy", 0);
    let mut fallback = Log::new();
    fallback.push(
        "request/header",
        json!({"header": {"config": config}, "reason": "fallback"}),
    );
    seed_rejects(fallback.json(), DSH_E_REJECTED, "header.legacy-fallback", 0);
    let store = Store::open();
    let s = store.session("s");
    expect_err(
        s.append("request/header-delta", &json!({}), None),
        DSH_E_REJECTED,
        "header.legacy",
    );
    expect_err(
        s.append(
            "request/header",
            &json!({"header": {"config": config}, "reason": "fallback"}),
            None,
        ),
        DSH_E_REJECTED,
        "header.legacy-fallback",
    );
    assert_eq!(s.len(), 0);
    assert_eq!(s.request_header(), J::Null);
}
