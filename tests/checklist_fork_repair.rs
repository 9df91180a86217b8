//! Forks and crash repair (docs/lifecycle.md §5, §6; docs/errors.md §3.4,
//! §4.8).

mod checklist_support;

use checklist_support::*;

// ------------------------------------------------------------------- fork

#[test]
fn fork_of_an_empty_session_inherits_nothing_but_records_lineage() {
    let store = Store::open();
    let src = ok(store.create_json(&json!({"id": "src", "cwd": "/work/project"})));
    let child = ok(src.fork(-1, Some(&json!({"id": "child"}))));
    assert_eq!(
        strip_time(&child.events()),
        json!([{"type": "session/end-seed", "seq": 0, "data": {}}])
    );
    let h = &child.header;
    assert_eq!(
        (&h["cwd"], &h["parentSession"], &h["seedLength"]),
        (&json!("/work/project"), &json!("src"), &json!(0))
    );
    assert_eq!(child.info()["firstLiveSeq"], json!(0));
    assert_eq!(src.len(), 0, "source untouched");
}

#[test]
fn default_boundary_is_the_last_event_and_the_child_is_independent() {
    let store = Store::open();
    let src = ok(store.create_json(&json!({"id": "src", "cwd": "/w", "origin": "subagent", "delegationDepth": 2, "agentPreset": "coder"})));
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    ok(src.batch(&J::Array(log.events.iter().map(|e| {
        let mut item = json!({"type": e["type"], "data": e["data"]});
        if let Some(op) = e.get("surfaceOp") {
            item["intent"] = json!({"surfaceOp": op, "sourceEventSeqs": e.get("sourceEventSeqs").cloned().unwrap_or(json!([]))});
            if e.get("sourceEventSeqs").is_none() {
                item["intent"].as_object_mut().unwrap().remove("sourceEventSeqs");
            }
        }
        item
    }).collect())));
    let source_log = src.events();
    let n = source_log.as_array().unwrap().len();
    let child = ok(src.fork(-1, Some(&json!({"id": "kid"}))));
    let kid = child.events();
    assert_eq!(
        kid.as_array().unwrap()[..n],
        source_log.as_array().unwrap()[..],
        "deep copies of every event"
    );
    assert_eq!(
        strip_time(&kid[n]),
        json!({"type": "session/end-seed", "seq": n, "data": {}})
    );
    assert_eq!(kid.as_array().unwrap().len(), n + 1);
    let h = child.header.as_object().unwrap();
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        [
            "version",
            "id",
            "createdAt",
            "cwd",
            "parentSession",
            "seedLength"
        ]
    );
    assert_eq!(
        (
            &h["version"],
            &h["id"],
            &h["cwd"],
            &h["parentSession"],
            &h["seedLength"]
        ),
        (
            &json!(0),
            &json!("kid"),
            &json!("/w"),
            &json!("src"),
            &json!(n)
        )
    );
    assert_eq!(child.info()["firstLiveSeq"], json!(n));
    assert_eq!(child.derive(), src.derive());
    // Independence in both directions.
    child.log("plugin/child", json!(1));
    src.log("plugin/parent", json!(2));
    assert_eq!(src.events()[n]["type"], "plugin/parent");
    assert_eq!(child.events()[n + 1]["type"], "plugin/child");
    assert_eq!(src.len(), n + 1);
    assert_eq!(child.len(), n + 2);
}

#[test]
fn log_only_events_after_a_closed_turn_are_included_in_a_default_fork() {
    let store = Store::open();
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    let src = store.seeded("src", &log.json());
    let t = src.log("session/title", json!({"title": "x"}));
    let p = src.log("plugin/note", json!(null));
    let child = ok(src.fork(-1, Some(&json!({"id": "c"}))));
    let events = child.events();
    assert_eq!(events[t as usize]["type"], "session/title");
    assert_eq!(events[p as usize]["type"], "plugin/note");
    assert_eq!(events[p as usize + 1]["type"], "session/end-seed");
    assert_eq!(events.as_array().unwrap().len(), src.len() + 1);
    assert_eq!(child.header["seedLength"], json!(src.len()));
}

#[test]
fn explicit_earlier_boundary_works_while_the_source_turn_is_open() {
    let store = Store::open();
    let mut log = Log::new();
    let (u, a, r) = closed_turn(&mut log, 1);
    let end = log.events.len() as u64 - 1;
    log.push("turn/start", json!({"turn": 2}));
    log.surf("user/message", user("u2", "more"), op_append());
    let src = store.seeded("src", &log.json());
    let child = ok(src.fork_at("c", json!(end)));
    assert_eq!(child.len() as u64, end + 2);
    assert_eq!(child.header["seedLength"], json!(end + 1));
    let keys: Vec<&String> = child.header.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["version", "id", "createdAt", "parentSession", "seedLength"],
        "no cwd when the source has none"
    );
    let ev = src.events();
    let expect: Vec<J> = [u, a, r]
        .iter()
        .map(|&s| {
            let d = &ev[s as usize]["data"];
            if s == u {
                d.clone()
            } else {
                d["message"].clone()
            }
        })
        .collect();
    assert_eq!(child.derive(), J::Array(expect));
}

#[test]
fn every_turn_end_reason_is_a_valid_explicit_boundary() {
    let store = Store::open();
    let reasons = [
        json!({"kind": "completed"}),
        json!({"kind": "aborted", "reason": {"kind": "user"}}),
        json!({"kind": "aborted", "reason": {"kind": "disposed"}}),
        json!({"kind": "error", "error": {"message": "boom", "code": "E"}}),
        json!({"kind": "max-tokens"}),
        json!({"kind": "interrupted"}),
        json!({"kind": "blocked"}),
    ];
    for (i, reason) in reasons.iter().enumerate() {
        let src = store.session(&format!("s{i}"));
        src.log("turn/start", json!({"turn": 1}));
        src.surf("user/message", user("u", "x"), op_append());
        let b = src.log("turn/end", json!({"turn": 1, "reason": reason}));
        src.log("turn/start", json!({"turn": 2}));
        let child = ok(src.fork_at(&format!("c{i}"), json!(b)));
        assert_eq!(child.events()[b as usize]["data"]["reason"], *reason);
    }
}

#[test]
fn bracket_opened_in_the_parent_ends_up_before_the_child_end_seed() {
    let store = Store::open();
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    let src = store.seeded("src", &log.json());
    let bracket = src.log("compaction/start", json!({"turn": null}));
    let parent_before = src.events_text();
    let child = ok(src.fork(-1, Some(&json!({"id": "c"}))));
    let events = child.events();
    assert_eq!(events[bracket as usize]["type"], "compaction/start");
    assert_eq!(events[bracket as usize + 1]["type"], "session/end-seed");
    assert_eq!(child.info()["firstLiveSeq"], json!(bracket + 1));
    assert_eq!(src.events_text(), parent_before, "parent log unchanged");
}

#[test]
fn invalid_boundaries_are_refused_before_any_child_is_created() {
    let store = Store::open();
    let empty = store.session("empty");
    let f = expect_err(
        empty.fork_at("x", json!(0)),
        DSH_E_INVALID_ARGUMENT,
        "fork.out-of-range",
    );
    assert!(f.message.contains("none"), "{}", f.message);
    assert_eq!(f.reference_code.as_deref(), Some("INVALID_BOUNDARY"));
    let src = store.session("src");
    for i in 0..3 {
        src.log("plugin/x", json!(i));
    }
    let cases = [
        (json!(-1), "fork.boundary-invalid"),
        (json!(0.5), "fork.boundary-invalid"),
        (json!(9007199254740992u64), "fork.boundary-invalid"),
        (json!("1"), "fork.boundary-invalid"),
        (json!(null), "fork.boundary-invalid"),
        (json!(3), "fork.out-of-range"),
        (json!(4), "fork.out-of-range"),
    ];
    for (b, rule) in cases {
        let f = expect_err(src.fork_at("x", b), DSH_E_INVALID_ARGUMENT, rule);
        assert_eq!(
            f.reference_code.as_deref(),
            Some("INVALID_BOUNDARY"),
            "{}",
            f.text
        );
    }
    expect_err(
        src.fork(-2, Some(&json!({"id": "x"}))),
        DSH_E_INVALID_ARGUMENT,
        "fork.boundary-invalid",
    );
    expect_err(
        src.fork(3, Some(&json!({"id": "x"}))),
        DSH_E_INVALID_ARGUMENT,
        "fork.out-of-range",
    );
    assert!(
        !store.ids().contains(&"x".to_string()),
        "no child was stored"
    );
    assert_eq!(src.len(), 3);
    ok(store.create_json(&json!({"id": "x"})));
}

#[test]
fn fork_from_a_closed_handle_is_refused() {
    // A closed live session refuses a fork as every other call
    // (docs/c-api.md, DSH_E_CLOSED).
    let store = Store::open();
    let src = store.session("gone");
    let live = src.live.clone();
    assert_eq!(src.close(), DSH_OK);
    let f = Fail::from(live.fork(Default::default()).expect_err("closed"));
    assert_eq!(f.status, DSH_E_CLOSED, "{}", f.text);
    assert_eq!(f.rule, "handle.closed");
    assert!(store.ids().is_empty(), "no child was stored");
}

#[test]
fn boundaries_inside_an_open_turn_are_refused() {
    let store = Store::open();
    let src = store.session("src");
    src.log("plugin/before", json!(null));
    let mut inside = vec![src.log("turn/start", json!({"turn": 1}))];
    inside.push(src.surf("user/message", user("u", "x"), op_append()));
    inside.push(src.log("step/start", json!({"turn": 1, "step": 1})));
    inside.push(src.log(
        "request/header",
        json!({"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}),
    ));
    let ch = src.log(
        "assistant/chunk",
        json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "t"}}),
    );
    inside.push(ch);
    inside.push(src.surf(
        "assistant/message",
        asst_blocks(1, 1, "a", json!([call_block("c1")])),
        op_append_from(&[ch]),
    ));
    let c = src.log("tool/call", tool_call(1, 1, "c1"));
    inside.push(c);
    inside.push(src.surf(
        "tool/result",
        tool_result(1, 1, "c1", "ok"),
        op_append_from(&[c]),
    ));
    inside.push(src.log("step/end", json!({"turn": 1, "step": 1})));
    // The default boundary at an open tail is refused too.
    let f = expect_err(
        src.fork(-1, Some(&json!({"id": "d"}))),
        DSH_E_REJECTED,
        "fork.open-turn",
    );
    assert_eq!(f.reference_code.as_deref(), Some("OPEN_TURN"));
    let end = src.log(
        "turn/end",
        json!({"turn": 1, "reason": {"kind": "completed"}}),
    );
    for b in inside {
        let f = expect_err(src.fork_at("x", json!(b)), DSH_E_REJECTED, "fork.open-turn");
        assert_eq!(f.reference_code.as_deref(), Some("OPEN_TURN"));
    }
    assert!(!store.ids().contains(&"x".to_string()));
    ok(src.fork_at("before", json!(0)));
    ok(src.fork_at("after", json!(end)));
}

#[test]
fn child_id_that_is_already_live_is_refused() {
    let store = Store::open();
    let src = store.session("src");
    let _other = store.session("other");
    for id in ["src", "other"] {
        let f = expect_err(
            src.fork(-1, Some(&json!({"id": id}))),
            DSH_E_CONFLICT,
            "fork.child-exists",
        );
        assert_eq!(f.reference_code.as_deref(), Some("SESSION_ALREADY_EXISTS"));
    }
}

#[test]
fn duplicate_child_id_is_checked_before_the_boundary() {
    let store = Store::open();
    let src = store.session("src");
    src.log("turn/start", json!({"turn": 1}));
    for b in [json!(0.5), json!(99), json!(0)] {
        expect_err(src.fork_at("src", b), DSH_E_CONFLICT, "fork.child-exists");
    }
}

// ----------------------------------------------------------------- repair

const NOT_STARTED: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";
const UNKNOWN: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// The exact synthetic tool result of docs/lifecycle.md §6.2 (key order included).
fn synthetic(seq: u64, time: i64, turn: u64, step: u64, call: &str, call_seq: Option<u64>) -> J {
    let (text, name, code) = match call_seq {
        Some(_) => (UNKNOWN, "ToolOutcomeUnknownError", "TOOL_OUTCOME_UNKNOWN"),
        None => (NOT_STARTED, "ToolNotStartedError", "TOOL_NOT_STARTED"),
    };
    let mut e = json!({"type": "tool/result", "seq": seq, "time": time,
        "data": {"turn": turn, "step": step,
            "message": {"id": format!("interrupted-tool-result-{call}-{seq}"), "role": "user",
                "source": {"kind": "tool", "callId": call},
                "content": [{"type": "tool-result", "toolCallId": call, "isError": true, "content": [{"type": "text", "text": text}]}]},
            "error": {"name": name, "code": code}},
        "surfaceOp": "append"});
    if let Some(c) = call_seq {
        e["sourceEventSeqs"] = json!([c]);
    }
    e
}

fn step_end(seq: u64, time: i64, turn: u64, step: u64) -> J {
    json!({"type": "step/end", "seq": seq, "time": time, "data": {"turn": turn, "step": step}})
}

fn turn_end(seq: u64, time: i64, turn: u64) -> J {
    json!({"type": "turn/end", "seq": seq, "time": time, "data": {"turn": turn, "reason": {"kind": "interrupted"}}})
}

/// Repair `log`, compare the closers byte for byte, and check that
/// log + closers is a valid, balanced seed.
#[track_caller]
fn assert_closers(log: &Log, expected: J) {
    let got = ok(repair(&log.json()));
    assert_eq!(got.to_string(), expected.to_string());
    let mut full = log.events.clone();
    full.extend(got.as_array().unwrap().iter().cloned());
    ok(fold(&J::Array(full.clone())));
    assert_eq!(
        ok(repair(&J::Array(full.clone()))),
        json!([]),
        "balanced after repair"
    );
    let store = Store::open();
    ok(store.create_json(&json!({"id": "check", "seed": full})));
}

#[test]
fn balanced_and_empty_logs_need_no_closers() {
    let mut log = Log::new();
    assert_eq!(ok(repair(&log.json())), json!([]));
    closed_turn(&mut log, 1);
    assert_eq!(ok(repair(&log.json())), json!([]));
    log.push("plugin/after", json!(1));
    assert_eq!(ok(repair(&log.json())), json!([]));
}

#[test]
fn open_turn_without_a_step_gets_only_an_interrupted_turn_end() {
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 4}));
    let u = log.surf("user/message", user("u", "x"), op_append());
    assert_closers(&log, json!([turn_end(u + 1, T0 + u as i64, 4)]));
}

#[test]
fn open_step_is_closed_before_the_turn() {
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 2}));
    log.push("step/start", json!({"turn": 2, "step": 3}));
    let last = log.push(
        "assistant/chunk",
        json!({"turn": 2, "step": 3, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}),
    );
    let t = T0 + last as i64;
    assert_closers(
        &log,
        json!([step_end(last + 1, t, 2, 3), turn_end(last + 2, t, 2)]),
    );
}

#[test]
fn unstarted_tool_call_gets_a_not_started_result_then_step_and_turn_end() {
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 1}));
    log.push("step/start", json!({"turn": 1, "step": 1}));
    let a = log.surf(
        "assistant/message",
        asst_blocks(
            1,
            1,
            "a",
            json!([{"type": "text", "text": "t"}, call_block("c1")]),
        ),
        op_append_from(&[]),
    );
    let t = T0 + a as i64;
    assert_closers(
        &log,
        json!([
            synthetic(a + 1, t, 1, 1, "c1", None),
            step_end(a + 2, t, 1, 1),
            turn_end(a + 3, t, 1)
        ]),
    );
}

#[test]
fn answered_calls_and_calls_of_closed_steps_or_turns_are_not_repaired() {
    // A call that already has a result.
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 1}));
    log.push("step/start", json!({"turn": 1, "step": 1}));
    log.surf(
        "assistant/message",
        asst_blocks(1, 1, "a", json!([call_block("c1")])),
        op_append_from(&[]),
    );
    let c = log.push("tool/call", tool_call(1, 1, "c1"));
    let r = log.surf(
        "tool/result",
        tool_result(1, 1, "c1", "ok"),
        op_append_from(&[c]),
    );
    let t = T0 + r as i64;
    assert_closers(
        &log,
        json!([step_end(r + 1, t, 1, 1), turn_end(r + 2, t, 1)]),
    );
    // A call whose step already ended.
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 1}));
    log.push("step/start", json!({"turn": 1, "step": 1}));
    log.surf(
        "assistant/message",
        asst_blocks(1, 1, "a", json!([call_block("c1")])),
        op_append_from(&[]),
    );
    log.push("step/end", json!({"turn": 1, "step": 1}));
    let s = log.push("step/start", json!({"turn": 1, "step": 2}));
    assert_closers(
        &log,
        json!([
            step_end(s + 1, T0 + s as i64, 1, 2),
            turn_end(s + 2, T0 + s as i64, 1)
        ]),
    );
    // A call of an earlier committed turn.
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 1}));
    log.push("step/start", json!({"turn": 1, "step": 1}));
    log.surf(
        "assistant/message",
        asst_blocks(1, 1, "a", json!([call_block("old")])),
        op_append_from(&[]),
    );
    log.push(
        "turn/end",
        json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}),
    );
    let s = log.push("turn/start", json!({"turn": 2}));
    assert_closers(&log, json!([turn_end(s + 1, T0 + s as i64, 2)]));
}

#[test]
fn several_unanswered_calls_each_get_a_result_in_transcript_order() {
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 3}));
    log.push("step/start", json!({"turn": 3, "step": 1}));
    log.surf(
        "assistant/message",
        asst_blocks(3, 1, "a1", json!([call_block("z"), call_block("b")])),
        op_append_from(&[]),
    );
    let a2 = log.surf(
        "assistant/message",
        asst_blocks(3, 1, "a2", json!([call_block("m")])),
        op_append_from(&[]),
    );
    let t = T0 + a2 as i64;
    assert_closers(
        &log,
        json!([
            synthetic(a2 + 1, t, 3, 1, "z", None),
            synthetic(a2 + 2, t, 3, 1, "b", None),
            synthetic(a2 + 3, t, 3, 1, "m", None),
            step_end(a2 + 4, t, 3, 1),
            turn_end(a2 + 5, t, 3),
        ]),
    );
}

#[test]
fn logged_tool_call_gives_an_outcome_unknown_result_citing_it() {
    // docs/lifecycle.md §6 worked example.
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 3}));
    log.push("step/start", json!({"turn": 3, "step": 1}));
    log.surf(
        "assistant/message",
        asst_blocks(3, 1, "a", json!([call_block("c1"), call_block("c2")])),
        op_append_from(&[]),
    );
    let c = log.push("tool/call", tool_call(3, 1, "c1"));
    let t = T0 + c as i64;
    assert_closers(
        &log,
        json!([
            synthetic(4, t, 3, 1, "c1", Some(3)),
            synthetic(5, t, 3, 1, "c2", None),
            step_end(6, t, 3, 1),
            turn_end(7, t, 3),
        ]),
    );
}

#[test]
fn tool_call_without_a_matching_assistant_block_is_ignored() {
    let mut log = Log::new();
    log.push("turn/start", json!({"turn": 1}));
    log.push("step/start", json!({"turn": 1, "step": 1}));
    let c = log.push("tool/call", tool_call(1, 1, "ghost"));
    let t = T0 + c as i64;
    assert_closers(
        &log,
        json!([step_end(c + 1, t, 1, 1), turn_end(c + 2, t, 1)]),
    );
}
