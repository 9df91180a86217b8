//! The incremental surface (windows, incremental vs full fold, splicing),
//! derived messages over the surface and the surface options of an append
//! (docs/events.md §6, §9).

mod checklist_support;

use ::dsh_session::engine::surface::{candidate_of, CandidateData, EventLookup, Markers, Surface};
use ::dsh_session::json::{self, JsString, Value};
use checklist_support::*;

/// A loaded window of a longer log whose first element has seq `base`.
struct Window<'a> {
    base: u64,
    events: &'a [Value],
}

impl EventLookup for Window<'_> {
    fn type_and_data(&self, seq: u64) -> Option<(&JsString, CandidateData<'_>)> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        let o = self.events.get(i)?.as_object()?;
        Some((
            o.get("type")?.as_js_str()?,
            CandidateData::Value(o.get("data")?),
        ))
    }
}

/// Fold a window with the manager's steps (plan, then apply).
fn fold_window(base: u64, events: &J) -> Result<Surface, ::dsh_session::Error> {
    let events = json::parse(&events.to_string())
        .unwrap()
        .into_array()
        .unwrap();
    let mut s = Surface::new();
    for (i, v) in events.iter().enumerate() {
        let seq = base + i as u64;
        let lookup = Window {
            base,
            events: &events[..i],
        };
        let plan = s.plan(&candidate_of(v), seq, Markers::Required, &lookup)?;
        s.apply(seq, &plan);
    }
    Ok(s)
}

fn wev(seq: u64, ty: &str, data: J, intent: J) -> J {
    ev(seq, ty, data, Some(intent))
}

#[test]
fn window_with_a_nonzero_base_folds_without_earlier_events() {
    let events = json!([
        wev(100, "user/message", user("u", "x"), op_append_from(&[3])),
        ev(101, "assistant/chunk", json!({}), None),
        wev(
            102,
            "assistant/message",
            asst(9, 1, "a", "y"),
            op_append_from(&[101, 40])
        ),
    ]);
    let s = fold_window(100, &events).expect("window folds");
    assert_eq!(s.nodes(), &[100, 102]);
    // The same events at base 0 are a seq gap.
    assert_eq!(fold_window(0, &events).unwrap_err().rule, "seq.gap");
}

#[test]
fn window_tool_result_rewrites_are_validated_against_the_offset() {
    let base = 500;
    let good = json!([
        wev(
            base,
            "tool/result",
            tool_result(3, 2, "c7", "big"),
            op_append_from(&[base - 1])
        ),
        wev(
            base + 1,
            "tool/result",
            tool_result(3, 2, "c7", "small"),
            op_replace(base, base, &[base])
        ),
    ]);
    let s = fold_window(base, &good).expect("rewrite in window");
    assert_eq!((s.nodes().to_vec(), s.generation()), (vec![base + 1], 1));
    let mut bad = good.clone();
    bad[1]["data"]["turn"] = json!(4);
    assert_eq!(
        fold_window(base, &bad).unwrap_err().rule,
        "surface.tool-result-rewrite"
    );
}

#[test]
fn window_replacement_crossing_the_head_is_refused() {
    let events = json!([
        wev(50, "user/message", user("u", "x"), op_append()),
        wev(
            51,
            "user/message",
            user("s", "sum"),
            op_replace(10, 50, &[10, 50])
        ),
    ]);
    let e = fold_window(50, &events).unwrap_err();
    assert_eq!(e.rule, "surface.replace-endpoint-missing");
    assert!(e.message.contains("start"), "{}", e.message);
}

/// Append a random valid surface step to `s`; returns nothing (state lives in `s`).
fn random_step(s: &Sess, rng: &mut Lcg, n: usize) {
    let nodes = s.nodes();
    let len = s.len() as u64;
    match rng.below(6) {
        0 => {
            s.log(
                "assistant/chunk",
                json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"t"}}),
            );
        }
        1 | 2 => {
            s.surf("user/message", user(&format!("u{n}"), "x"), op_append());
        }
        3 => {
            let src: Vec<u64> = if len > 0 {
                vec![rng.below(len)]
            } else {
                vec![]
            };
            s.surf(
                "assistant/message",
                asst(1, 1, &format!("a{n}"), "y"),
                op_append_from(&src),
            );
        }
        _ if nodes.is_empty() => {
            s.log("plugin/x", json!(n));
        }
        _ => {
            let i = rng.below(nodes.len() as u64) as usize;
            let j = i + rng.below((nodes.len() - i) as u64) as usize;
            let shadowed = &nodes[i..=j];
            s.surf(
                "user/message",
                user(&format!("r{n}"), "sum"),
                op_replace(nodes[i], nodes[j], shadowed),
            );
        }
    }
}

#[test]
fn incremental_and_full_folds_agree_on_nodes_and_nested_replacements() {
    let store = Store::open();
    for seed in 0..10u64 {
        let s = store.session(&format!("p{seed}"));
        let mut rng = Lcg::new(seed);
        for n in 0..40 {
            random_step(&s, &mut rng, n);
            let f = ok(fold(&s.events()));
            let surface = s.surface();
            assert_eq!(surface["nodes"], f["nodes"], "seed {seed} step {n}");
            assert_eq!(
                surface["replaceGeneration"],
                json!(f["replacements"].as_array().unwrap().len())
            );
        }
    }
    // A replacement nested inside an earlier one reports the earlier
    // replacing node among its shadowed seqs.
    let s = store.session("nested");
    let a = s.surf("user/message", user("a", "1"), op_append());
    let b = s.surf("user/message", user("b", "2"), op_append());
    let c = s.surf("user/message", user("c", "3"), op_append());
    let r1 = s.surf("user/message", user("r1", "s"), op_replace(a, b, &[a, b]));
    let r2 = s.surf("user/message", user("r2", "s"), op_replace(r1, c, &[r1, c]));
    let f = ok(fold(&s.events()));
    assert_eq!(
        f["replacements"],
        json!([
            {"seq": r1, "start": a, "end": b, "shadowedSeqs": [a, b]},
            {"seq": r2, "start": r1, "end": c, "shadowedSeqs": [r1, c]},
        ])
    );
    assert_eq!(s.nodes(), vec![r2]);
}

#[test]
fn incremental_state_keeps_no_replacement_history() {
    let store = Store::open();
    let s = store.session("h");
    let a = s.surf("user/message", user("a", "1"), op_append());
    s.surf("user/message", user("r", "s"), op_replace(a, a, &[a]));
    let surface = s.surface();
    let keys: Vec<&String> = surface.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["nodes", "replaceGeneration"]);
    assert_eq!(surface, json!({"nodes": [1], "replaceGeneration": 1}));
}

/// Candidates that are invalid against the state after one closed turn.
fn invalid_candidates(u: u64, a: u64, r: u64) -> Vec<(&'static str, J, J, &'static str)> {
    vec![
        (
            "user/message",
            user("x", "1"),
            op_replace(99, a, &[a]),
            "surface.replace-endpoint-missing",
        ),
        (
            "user/message",
            user("x", "1"),
            op_replace(u, 2, &[u]),
            "surface.replace-endpoint-missing",
        ),
        (
            "user/message",
            user("x", "1"),
            op_replace(r, u, &[u, a, r]),
            "surface.replace-inverted",
        ),
        (
            "user/message",
            user("x", "1"),
            op_replace(u, r, &[u, r]),
            "surface.replace-uncovered",
        ),
        (
            "tool/result",
            tool_result(1, 1, "c1", "x"),
            op_replace(a, r, &[a, r]),
            "surface.tool-result-rewrite-arity",
        ),
        (
            "tool/result",
            tool_result(1, 1, "c1", "x"),
            op_replace(a, a, &[a]),
            "surface.tool-result-rewrite-target",
        ),
        (
            "tool/result",
            tool_result(2, 1, "c1", "x"),
            op_replace(r, r, &[r]),
            "surface.tool-result-rewrite",
        ),
        (
            "user/message",
            user("x", "1"),
            json!({"surfaceOp": {"op": "replace", "start": u}}),
            "surface.replace-shape",
        ),
        (
            "user/message",
            user("x", "1"),
            json!({"surfaceOp": "replace"}),
            "surface.op-invalid",
        ),
        (
            "user/message",
            user("x", "1"),
            json!({"surfaceOp": null}),
            "surface.op-invalid",
        ),
        (
            "user/message",
            user("x", "1"),
            json!({"surfaceOp": []}),
            "surface.op-invalid",
        ),
        (
            "user/message",
            user("x", "1"),
            json!({"sourceEventSeqs": [u]}),
            "surface.op-missing",
        ),
    ]
}

#[test]
fn full_and_incremental_folds_report_the_same_failures() {
    let store = Store::open();
    let mut log = Log::new();
    let (u, a, r) = closed_turn(&mut log, 1);
    let s = store.seeded("same", &log.json());
    let base = Log {
        events: s.events().as_array().unwrap().clone(),
    };
    for (ty, data, intent, rule) in invalid_candidates(u, a, r) {
        let live = expect_err(s.append(ty, &data, Some(&intent)), DSH_E_REJECTED, rule);
        let dry = expect_err(
            s.validate_raw(ty, &data.to_string(), Some(&intent.to_string())),
            DSH_E_REJECTED,
            rule,
        );
        let full = expect_err(
            fold(&base.with(ty, data, Some(intent))),
            DSH_E_REJECTED,
            rule,
        );
        assert_eq!(full.index, Some(base.events.len() as u64));
        assert_eq!(live.rule, full.rule);
        assert_eq!(dry.rule, full.rule);
    }
}

#[test]
fn failed_candidate_leaves_incremental_state_unchanged() {
    let store = Store::open();
    let mut log = Log::new();
    let (u, a, r) = closed_turn(&mut log, 1);
    let s = store.seeded("keep", &log.json());
    let before = (s.events_text(), s.surface(), s.derive_text(), s.info());
    for (ty, data, intent, _) in invalid_candidates(u, a, r) {
        assert!(s.append(ty, &data, Some(&intent)).is_err());
        assert_eq!(
            (s.events_text(), s.surface(), s.derive_text(), s.info()),
            before
        );
    }
    // No stale pending plan: the next valid event gets the next seq and applies.
    let len = s.len() as u64;
    let e = ok(s.append(
        "user/message",
        &user("ok", "1"),
        Some(&op_replace(u, a, &[u, a])),
    ));
    assert_eq!(e["seq"], json!(len));
    assert_eq!(s.nodes(), vec![len, r]);
}

#[test]
fn full_fold_refuses_markerless_surface_event_and_marker_on_log_only_event() {
    let mut log = Log::new();
    log.surf("user/message", user("u", "1"), op_append());
    let f = expect_err(
        fold(&log.with("tool/result", tool_result(1, 1, "c", "r"), None)),
        DSH_E_REJECTED,
        "surface.op-missing",
    );
    assert_eq!(f.index, Some(1));
    let f = expect_err(
        fold(&log.with(
            "step/end",
            json!({"turn":1,"step":1}),
            Some(json!({"surfaceOp": {"op":"replace","start":0,"end":0}})),
        )),
        DSH_E_REJECTED,
        "surface.op-on-non-surface",
    );
    assert_eq!(f.index, Some(1));
}

#[test]
fn append_markers_build_the_ordered_node_list_incrementally() {
    let store = Store::open();
    let s = store.session("order");
    assert_eq!(
        s.surface(),
        json!({"nodes": [], "replaceGeneration": 0}),
        "empty log, empty surface"
    );
    assert_eq!(
        ok(fold(&json!([]))),
        json!({"nodes": [], "replacements": []})
    );
    let mut expected = Vec::new();
    for i in 0..6u64 {
        if i % 2 == 0 {
            s.log(
                "assistant/chunk",
                json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"t"}}),
            );
        }
        expected.push(s.surf("user/message", user(&format!("u{i}"), "x"), op_append()));
        assert_eq!(s.nodes(), expected, "picked up after append {i}");
    }
}

#[test]
fn seeded_log_with_markers_replays_identically() {
    let store = Store::open();
    let live = store.session("live");
    let mut rng = Lcg::new(77);
    for n in 0..60 {
        random_step(&live, &mut rng, n);
    }
    let replay = store.seeded("replay", &live.events());
    let (a, b) = (live.surface(), replay.surface());
    assert_eq!(a, b);
    assert_eq!(live.derive(), replay.derive());
}

#[test]
fn replace_splices_out_only_the_shadowed_range() {
    let store = Store::open();
    let s = store.session("splice");
    let n: Vec<u64> = (0..5)
        .map(|i| s.surf("user/message", user(&format!("m{i}"), "x"), op_append()))
        .collect();
    // Between two real nodes: only that range goes; surrounding order kept.
    let r = s.surf(
        "user/message",
        user("r", "s"),
        op_replace(n[1], n[3], &[n[1], n[2], n[3]]),
    );
    assert_eq!(s.nodes(), vec![n[0], r, n[4]]);
    // Single-node replacement (start = end).
    let r2 = s.surf(
        "user/message",
        user("r2", "s"),
        op_replace(n[4], n[4], &[n[4]]),
    );
    assert_eq!(s.nodes(), vec![n[0], r, r2]);
    // Mid-surface start: nodes before and after keep their order.
    let t = s.surf("user/message", user("t", "x"), op_append());
    let r3 = s.surf("user/message", user("r3", "s"), op_replace(r, r2, &[r, r2]));
    assert_eq!(s.nodes(), vec![n[0], r3, t]);
    // The log keeps every event: shadowing never deletes.
    assert_eq!(s.len() as u64, r3 + 1);
}

#[test]
fn unknown_endpoints_and_inverted_ranges_are_refused() {
    let store = Store::open();
    let s = store.session("ends");
    let a = s.surf("user/message", user("a", "1"), op_append());
    let ch = s.log("assistant/chunk", json!({}));
    let b = s.surf("user/message", user("b", "2"), op_append());
    let before = s.surface();
    let f = expect_err(
        s.append(
            "user/message",
            &user("x", "1"),
            Some(&op_replace(ch, b, &[ch, b])),
        ),
        DSH_E_REJECTED,
        "surface.replace-endpoint-missing",
    );
    assert!(f.message.contains("start"), "{}", f.message);
    // Both missing: the start is reported first.
    let f = expect_err(
        s.append(
            "user/message",
            &user("x", "1"),
            Some(&op_replace(40, 41, &[0])),
        ),
        DSH_E_REJECTED,
        "surface.replace-endpoint-missing",
    );
    assert!(
        f.message.contains("start") && f.message.contains("40"),
        "{}",
        f.message
    );
    let f = expect_err(
        s.append(
            "user/message",
            &user("x", "1"),
            Some(&op_replace(a, ch, &[a])),
        ),
        DSH_E_REJECTED,
        "surface.replace-endpoint-missing",
    );
    assert!(f.message.contains("end"), "{}", f.message);
    expect_err(
        s.append(
            "user/message",
            &user("x", "1"),
            Some(&op_replace(b, a, &[a, b])),
        ),
        DSH_E_REJECTED,
        "surface.replace-inverted",
    );
    assert_eq!(s.surface(), before);
}

#[test]
fn positional_range_may_run_from_a_larger_to_a_smaller_seq() {
    let store = Store::open();
    let s = store.session("pos");
    let a = s.surf("user/message", user("a", "1"), op_append());
    let b = s.surf("user/message", user("b", "2"), op_append());
    let r = s.surf("user/message", user("r", "s"), op_replace(a, a, &[a]));
    assert_eq!(s.nodes(), vec![r, b]);
    // start = r (> b numerically) sits before b on the surface.
    let r2 = s.surf("user/message", user("r2", "s"), op_replace(r, b, &[b, r]));
    assert_eq!(s.nodes(), vec![r2]);
    assert_eq!(s.derive(), json!([user("r2", "s")]));
}

#[test]
fn source_seqs_and_replace_object_are_copied_from_caller_memory() {
    let store = Store::open();
    let s = store.session("copy");
    let a = s.surf("user/message", user("a", "1"), op_append());
    let data = user("r", "s").to_string();
    let intent = op_replace(a, a, &[a]).to_string();
    let e = s
        .live
        .append_text("user/message", data.as_str(), Some(intent.as_str()));
    assert!(e.is_ok(), "{e:?}");
    // Overwrite the caller's buffer: the stored event must not change.
    let mut bytes = intent.into_bytes();
    bytes
        .iter_mut()
        .filter(|b| b.is_ascii_digit())
        .for_each(|b| *b = b'7');
    drop(bytes);
    let e = &s.events()[1];
    assert_eq!(e["sourceEventSeqs"], json!([a]));
    assert_eq!(
        e["surfaceOp"],
        json!({"op": "replace", "start": a, "end": a})
    );
}
