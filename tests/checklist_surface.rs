//! The surface fold's provenance, tool-result rewrites and the type guards /
//! generation (docs/events.md §6, §7; docs/errors.md §4.6).

mod checklist_support;

use checklist_support::*;

/// Fold `log` + one candidate and expect the candidate to fail with `rule`.
#[track_caller]
fn fold_rejects(events: &J, rule: &str) -> Fail {
    let f = expect_err(fold(events), DSH_E_REJECTED, rule);
    let last = events.as_array().unwrap().len() as u64 - 1;
    assert_eq!(
        f.index,
        Some(last),
        "index of the failing event: {}",
        f.text
    );
    f
}

// ------------------------------------------------------------ provenance

#[test]
fn fold_accepts_absent_or_valid_sources_and_complete_replace_coverage() {
    let mut log = Log::new();
    let u = log.surf("user/message", user("u", "hi"), op_append());
    let ch = log.push(
        "assistant/chunk",
        json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}),
    );
    let a = log.surf(
        "assistant/message",
        asst(1, 1, "a", "x"),
        op_append_from(&[ch]),
    );
    // Extra sources beyond the shadowed nodes are allowed.
    let r = log.surf(
        "user/message",
        user("s", "summary"),
        op_replace(u, a, &[u, ch, a]),
    );
    let f = ok(fold(&log.json()));
    assert_eq!(
        f,
        json!({"nodes":[r],"replacements":[{"seq":r,"start":u,"end":a,"shadowedSeqs":[u,a]}]})
    );
}

#[test]
fn fold_refuses_surface_fields_on_non_surface_events() {
    let log = Log::new();
    fold_rejects(
        &log.with(
            "turn/start",
            json!({"turn":1}),
            Some(json!({"sourceEventSeqs":[]})),
        ),
        "surface.sources-on-non-surface",
    );
    fold_rejects(
        &log.with("tool/call", json!({}), Some(json!({"surfaceOp":"append"}))),
        "surface.op-on-non-surface",
    );
    // The op check runs before the sources check.
    fold_rejects(
        &log.with(
            "x/y",
            json!(null),
            Some(json!({"surfaceOp":null,"sourceEventSeqs":[0]})),
        ),
        "surface.op-on-non-surface",
    );
}

#[test]
fn fold_accepts_explicit_empty_sources_on_assistant_message() {
    let mut log = Log::new();
    log.surf("user/message", user("u", "hi"), op_append());
    let a = log.surf(
        "assistant/message",
        asst(1, 1, "a", "x"),
        op_append_from(&[]),
    );
    assert_eq!(ok(fold(&log.json()))["nodes"], json!([0, a]));
}

#[test]
fn fold_refuses_each_malformed_source_list() {
    let mut log = Log::new();
    log.surf("user/message", user("u0", "a"), op_append());
    log.surf("user/message", user("u1", "b"), op_append());
    let next = 2u64;
    let msg = user("u2", "c");
    let cases: Vec<(J, &str, &str)> = vec![
        (json!(1), "user/message", "surface.sources-not-array"),
        (json!({"0": 0}), "user/message", "surface.sources-not-array"),
        (json!([]), "user/message", "surface.sources-empty"),
        (json!([]), "tool/result", "surface.sources-empty"),
        (json!([0, 0]), "user/message", "surface.source-duplicate"),
        (json!(["0"]), "user/message", "surface.source-not-seq"),
        (json!([null]), "user/message", "surface.source-not-seq"),
        (json!([0.5]), "user/message", "surface.source-not-seq"),
        (json!([-1]), "user/message", "surface.source-not-seq"),
        (
            json!([9007199254740992u64]),
            "user/message",
            "surface.source-not-seq",
        ),
        (json!([next]), "user/message", "surface.source-not-earlier"),
        (
            json!([0, next + 4]),
            "user/message",
            "surface.source-not-earlier",
        ),
        // The element walk stops at the first non-seq, before the duplicate check.
        (json!([0, 0, "x"]), "user/message", "surface.source-not-seq"),
        // Duplicates are reported before earliness.
        (json!([7, 7]), "user/message", "surface.source-duplicate"),
    ];
    for (sources, ty, rule) in cases {
        let data = if ty == "tool/result" {
            tool_result(1, 1, "c", "r")
        } else {
            msg.clone()
        };
        let events = log.with(
            ty,
            data,
            Some(json!({"surfaceOp":"append","sourceEventSeqs":sources})),
        );
        fold_rejects(&events, rule);
    }
    // The earliness message names the first offending value and the seq.
    let f = fold_rejects(
        &log.with(
            "user/message",
            msg.clone(),
            Some(op_append_from(&[0, 5, 3])),
        ),
        "surface.source-not-earlier",
    );
    assert!(
        f.message.contains('5') && f.message.contains('2'),
        "{}",
        f.message
    );
}

#[test]
fn fold_refuses_a_non_contiguous_event_seq() {
    let mut events = vec![ev(0, "turn/start", json!({"turn":1}), None)];
    events.push(ev(2, "turn/end", json!({"turn":1}), None));
    let f = expect_err(fold(&J::Array(events)), DSH_E_REJECTED, "seq.gap");
    assert_eq!(f.index, Some(1));
    let first = ev(1, "turn/start", json!({"turn":1}), None);
    assert_eq!(
        expect_err(fold(&json!([first])), DSH_E_REJECTED, "seq.gap").index,
        Some(0)
    );
}

#[test]
fn fold_refuses_incomplete_replace_coverage_naming_the_missing_seq() {
    let mut log = Log::new();
    let (u, a, r) = closed_turn(&mut log, 1);
    let f = fold_rejects(
        &log.with(
            "user/message",
            user("s", "sum"),
            Some(op_replace(u, r, &[u, r])),
        ),
        "surface.replace-uncovered",
    );
    assert!(
        f.message.contains(&a.to_string()),
        "names {a}: {}",
        f.message
    );
    // Absent sources count as empty.
    let f = fold_rejects(
        &log.with(
            "user/message",
            user("s", "sum"),
            Some(json!({"surfaceOp":{"op":"replace","start":u,"end":u}})),
        ),
        "surface.replace-uncovered",
    );
    assert!(f.message.contains(&u.to_string()), "{}", f.message);
}

// ------------------------------------------------------ tool-result rewrites

/// A closed turn plus the seq of its tool result; `R` = 5.
fn rewrite_base() -> (Log, u64) {
    let mut log = Log::new();
    let (_, _, r) = closed_turn(&mut log, 1);
    (log, r)
}

fn rewrite(log: &Log, data: J, start: u64, end: u64, sources: &[u64]) -> J {
    log.with("tool/result", data, Some(op_replace(start, end, sources)))
}

#[test]
fn tool_result_rewrite_of_only_the_inner_content_is_accepted() {
    let (log, r) = rewrite_base();
    let events = rewrite(&log, tool_result(1, 1, "c1", "[trimmed]"), r, r, &[r]);
    let f = ok(fold(&events));
    let seq = log.events.len() as u64;
    assert_eq!(
        f["replacements"],
        json!([{"seq":seq,"start":r,"end":r,"shadowedSeqs":[r]}])
    );
    assert_eq!(f["nodes"], json!([1, 3, seq]));
    // A chain of rewrites is fine: rewrite the rewrite.
    let mut chain = Log {
        events: events.as_array().unwrap().clone(),
    };
    chain.surf(
        "tool/result",
        tool_result(1, 1, "c1", ""),
        op_replace(seq, seq, &[seq]),
    );
    assert_eq!(ok(fold(&chain.json()))["nodes"], json!([1, 3, seq + 1]));
}

#[test]
fn tool_result_rewrite_spanning_several_nodes_is_refused() {
    let (log, r) = rewrite_base();
    fold_rejects(
        &rewrite(&log, tool_result(1, 1, "c1", "x"), 3, r, &[3, r]),
        "surface.tool-result-rewrite-arity",
    );
}

#[test]
fn tool_result_rewrite_targeting_a_non_result_node_is_refused() {
    let (log, _) = rewrite_base();
    fold_rejects(
        &rewrite(&log, tool_result(1, 1, "c1", "x"), 3, 3, &[3]),
        "surface.tool-result-rewrite-target",
    );
    fold_rejects(
        &rewrite(&log, tool_result(1, 1, "c1", "x"), 1, 1, &[1]),
        "surface.tool-result-rewrite-target",
    );
}

#[test]
fn tool_result_rewrite_changing_anything_outside_the_content_is_refused() {
    let (log, r) = rewrite_base();
    let base = tool_result(1, 1, "c1", "[trimmed]");
    let mut edits: Vec<J> = Vec::new();
    let mut d = base.clone();
    d["message"]["id"] = json!("other-id");
    edits.push(d);
    let mut d = base.clone();
    d["message"]["source"]["callId"] = json!("c9");
    edits.push(d);
    let mut d = base.clone();
    d["message"]["source"]["callId"] = json!("c9");
    d["message"]["content"][0]["toolCallId"] = json!("c9");
    edits.push(d);
    let mut d = base.clone();
    d["turn"] = json!(2);
    edits.push(d);
    let mut d = base.clone();
    d["error"] = json!({"name":"E","code":"X"});
    edits.push(d);
    let mut d = base.clone();
    d["message"]["role"] = json!("assistant");
    edits.push(d);
    let mut d = base.clone();
    d["message"]["content"] = json!([]);
    edits.push(d);
    let mut d = base.clone();
    d.as_object_mut().unwrap().remove("message");
    edits.push(d);
    for data in edits {
        fold_rejects(
            &rewrite(&log, data, r, r, &[r]),
            "surface.tool-result-rewrite",
        );
    }
}

#[test]
fn tool_result_rewrite_changing_tool_call_id_or_is_error_is_refused() {
    let (log, r) = rewrite_base();
    let base = tool_result(1, 1, "c1", "[trimmed]");
    for (key, value) in [
        ("toolCallId", json!("c2")),
        ("isError", json!(false)),
        ("isError", json!(true)),
    ] {
        let mut d = base.clone();
        d["message"]["content"][0][key] = value;
        fold_rejects(&rewrite(&log, d, r, r, &[r]), "surface.tool-result-rewrite");
    }
}

#[test]
fn tool_result_rewrite_compares_rest_fields_structurally() {
    let mut log = Log::new();
    let mut original = tool_result(1, 1, "c1", "big");
    original["meta"] = json!({"lines": [1, {"k": "v", "n": 2}], "path": "/a"});
    let r = log.surf("tool/result", original.clone(), op_append());
    let with_meta = |meta: J| {
        let mut d = tool_result(1, 1, "c1", "small");
        d["meta"] = meta;
        rewrite(&log, d, r, r, &[r])
    };
    // Equal meta (key order inside objects is irrelevant) passes.
    ok(fold(&with_meta(
        json!({"path": "/a", "lines": [1, {"n": 2, "k": "v"}]}),
    )));
    for meta in [
        json!({"lines": [1, {"k": "v", "n": 3}], "path": "/a"}),
        json!({"lines": [1, {"k": "v", "n": 2}, 3], "path": "/a"}),
        json!({"lines": 1, "path": "/a"}),
        json!({"rows": [1, {"k": "v", "n": 2}], "path": "/a"}),
        json!({"lines": [1, {"k": "v", "n": 2}], "path": "/a", "extra": true}),
        json!({"lines": [1, {"k": "v", "n": 2}]}),
    ] {
        fold_rejects(&with_meta(meta), "surface.tool-result-rewrite");
    }
    // Dropping meta entirely is also a difference.
    fold_rejects(
        &rewrite(&log, tool_result(1, 1, "c1", "small"), r, r, &[r]),
        "surface.tool-result-rewrite",
    );
}

// ---------------------------------------------------- type guards, generation

#[test]
fn surface_eligible_types_are_exactly_the_three_message_types() {
    use ::dsh_session::engine::event::is_surface_type;
    use ::dsh_session::json::JsString;
    for ty in ["user/message", "assistant/message", "tool/result"] {
        assert!(is_surface_type(&JsString::from_str(ty)), "{ty}");
    }
    for ty in [
        "assistant/chunk",
        "tool/call",
        "turn/start",
        "todo/write",
        "request/header",
        "session/end-seed",
        "context/message",
        "User/message",
        "user/message ",
        "",
    ] {
        assert!(!is_surface_type(&JsString::from_str(ty)), "{ty}");
    }
}

#[test]
fn surface_event_needs_an_eligible_type_and_a_marker() {
    let log = Log::new();
    // Eligible with a marker: a surface event.
    assert_eq!(
        ok(fold(&log.with(
            "user/message",
            user("u", "x"),
            Some(op_append())
        )))["nodes"],
        json!([0])
    );
    // Eligible without a marker: refused.
    fold_rejects(
        &log.with("assistant/message", asst(1, 1, "a", "x"), None),
        "surface.op-missing",
    );
    fold_rejects(
        &log.with("tool/result", tool_result(1, 1, "c", "x"), None),
        "surface.op-missing",
    );
    // Not eligible but carrying a marker: refused.
    fold_rejects(
        &log.with("assistant/chunk", json!({}), Some(op_append())),
        "surface.op-on-non-surface",
    );
    // Not eligible, no marker: log-only, never a node.
    assert_eq!(
        ok(fold(&log.with("plugin/x", json!(1), None)))["nodes"],
        json!([])
    );
}

#[test]
fn append_and_replacement_classification_follows_the_marker() {
    let mut log = Log::new();
    let u = log.surf("user/message", user("u", "x"), op_append());
    log.push("compaction/start", json!({"turn": null}));
    let a = log.surf("assistant/message", asst(1, 1, "a", "y"), op_append());
    let s = log.surf("user/message", user("s", "sum"), op_replace(u, a, &[u, a]));
    let t = log.surf("user/message", user("t", "z"), op_append());
    let f = ok(fold(&log.json()));
    // Only the replace-marked event is a replacement; append-origin events
    // are nodes until shadowed; the log-only event is neither.
    let repl: Vec<u64> = f["replacements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(repl, vec![s]);
    assert_eq!(f["nodes"], json!([s, t]));
}

#[test]
fn replace_generation_counts_replaces_and_folds_pending_events() {
    let store = Store::open();
    let s = store.session("gen");
    assert_eq!(s.surface()["replaceGeneration"], json!(0));
    let u = s.surf("user/message", user("u", "x"), op_append());
    let a = s.surf("assistant/message", asst(1, 1, "a", "y"), op_append());
    assert_eq!(
        s.surface()["replaceGeneration"],
        json!(0),
        "appends do not count"
    );
    let r1 = s.surf("user/message", user("s1", "sum"), op_replace(u, a, &[u, a]));
    assert_eq!(s.surface()["replaceGeneration"], json!(1));
    assert_eq!(s.info()["replaceGeneration"], json!(1));
    s.surf(
        "user/message",
        user("s2", "sum2"),
        op_replace(r1, r1, &[r1]),
    );
    // A batch of events committed before the next read is folded on access.
    ok(s.batch(&json!([
        {"type":"user/message","data":user("v","1"),"intent":op_append()},
        {"type":"user/message","data":user("w","2"),"intent":{"surfaceOp":{"op":"replace","start":r1 + 1,"end":r1 + 1},"sourceEventSeqs":[r1 + 1]}}
    ])));
    let surface = s.surface();
    assert_eq!(surface["replaceGeneration"], json!(3));
    let f = ok(fold(&s.events()));
    assert_eq!(f["replacements"].as_array().unwrap().len(), 3);
    assert_eq!(f["nodes"], surface["nodes"]);
}
