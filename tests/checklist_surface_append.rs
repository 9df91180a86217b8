//! Derived messages over the surface and the surface options of an append
//! (docs/events.md §6, §9).

mod checklist_support;

use checklist_support::*;

// ------------------------------------------------- deriveMessages with surface

#[test]
fn derivation_walks_the_surface_skipping_chunks_boundaries_and_shadowed_nodes() {
    let store = Store::open();
    let s = store.session("walk");
    s.log("turn/start", json!({"turn": 1}));
    let u = s.surf("user/message", user("u", "q"), op_append());
    let ctx = s.surf("user/message", context("ctx", "remember"), op_append());
    s.log("step/start", json!({"turn": 1, "step": 1}));
    let ch = s.log(
        "assistant/chunk",
        json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}),
    );
    s.surf(
        "assistant/message",
        asst(1, 1, "a", "answer"),
        op_append_from(&[ch]),
    );
    s.log("step/end", json!({"turn": 1, "step": 1}));
    s.log(
        "turn/end",
        json!({"turn": 1, "reason": {"kind": "completed"}}),
    );
    s.log("session/end-seed", json!({}));
    let msgs = s.derive();
    assert_eq!(
        msgs,
        json!([
            user("u", "q"),
            context("ctx", "remember"),
            asst(1, 1, "a", "answer")["message"]
        ])
    );
    // Injected context and human input both project as user-role nodes.
    assert_eq!(s.nodes().len(), 3);
    assert!(msgs
        .as_array()
        .unwrap()
        .iter()
        .take(2)
        .all(|m| m["role"] == "user"));
    // After a replace the shadowed nodes are gone and the replacement sits
    // at the range position.
    let r = s.surf(
        "user/message",
        user("sum", "summary"),
        op_replace(u, ctx, &[u, ctx]),
    );
    assert_eq!(
        s.derive(),
        json!([user("sum", "summary"), asst(1, 1, "a", "answer")["message"]])
    );
    assert_eq!(s.nodes()[0], r);
}

// ------------------------------------------------ Session.append surface opts

#[test]
fn append_records_source_seqs_and_surface_op_on_the_event() {
    let store = Store::open();
    let s = store.session("rec");
    let ch = s.log("assistant/chunk", json!({}));
    let e = ok(s.append(
        "assistant/message",
        &asst(1, 1, "a", "x"),
        Some(&op_append_from(&[ch])),
    ));
    assert_eq!(
        strip_time(&e),
        json!({"type":"assistant/message","seq":1,"data":asst(1, 1, "a", "x"),"sourceEventSeqs":[ch],"surfaceOp":"append"})
    );
    let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "type",
            "seq",
            "time",
            "data",
            "sourceEventSeqs",
            "surfaceOp"
        ]
    );
    // The primitive op is stored as the string itself.
    assert_eq!(s.events()[1]["surfaceOp"], json!("append"));
    assert_eq!(s.events()[1], e);
}

#[test]
fn empty_assistant_surface_node_is_skipped_by_derivation() {
    let store = Store::open();
    let s = store.session("empty");
    let u = s.surf("user/message", user("u", "q"), op_append());
    let a = s.surf(
        "assistant/message",
        asst_blocks(1, 1, "a", json!([])),
        op_append_from(&[]),
    );
    assert_eq!(s.nodes(), vec![u, a], "the empty assistant is a node");
    assert_eq!(
        s.derive(),
        json!([user("u", "q")]),
        "but projects to nothing"
    );
}

#[test]
fn non_surface_events_carry_no_surface_fields() {
    let store = Store::open();
    let s = store.session("plain");
    let e = ok(s.append("tool/call", &tool_call(1, 1, "c"), None));
    assert_eq!(
        e.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["type", "seq", "time", "data"]
    );
    // An intent with neither key is also no surface metadata.
    let e = ok(s.append("plugin/x", &json!(1), Some(&json!({"other": 1}))));
    assert_eq!(e.as_object().unwrap().len(), 4);
    assert!(s.nodes().is_empty());
}

#[test]
fn surface_type_without_marker_is_refused_at_append() {
    let store = Store::open();
    let s = store.session("nomark");
    for (ty, data) in [
        ("user/message", user("u", "1")),
        ("assistant/message", asst(1, 1, "a", "x")),
        ("tool/result", tool_result(1, 1, "c", "x")),
    ] {
        expect_err(
            s.append(ty, &data, None),
            DSH_E_REJECTED,
            "surface.op-missing",
        );
        expect_err(
            s.append(ty, &data, Some(&json!({"sourceEventSeqs": [0]}))),
            DSH_E_REJECTED,
            "surface.op-missing",
        );
    }
    assert_eq!(s.len(), 0);
}
