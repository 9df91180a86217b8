//! Deterministic pseudo-random properties (fixed seeds,
//! ~200 iterations each) over derivation, seqs and re-seeding.

mod checklist_support;

use checklist_support::*;

/// One abstract step of a message history; seqs are resolved at build time.
#[derive(Clone, Debug)]
enum Step {
    User(String),
    Context(String),
    Assistant(String, bool),
    Tool(String),
    Rewrite(usize),
    Replace(usize, usize, String),
}

fn random_steps(rng: &mut Lcg, len: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut nodes = 0usize;
    let mut results: Vec<usize> = Vec::new();
    for n in 0..len {
        let step = match rng.below(7) {
            0 => Step::User(format!("u{n}")),
            1 => Step::Context(format!("c{n}")),
            2 => Step::Assistant(format!("a{n}"), rng.chance(20)),
            3 => Step::Tool(format!("t{n}")),
            4 if !results.is_empty() => {
                Step::Rewrite(results[rng.below(results.len() as u64) as usize])
            }
            5 if nodes > 0 => {
                let i = rng.below(nodes as u64) as usize;
                let j = i + rng.below((nodes - i) as u64) as usize;
                Step::Replace(i, j, format!("r{n}"))
            }
            _ => Step::User(format!("v{n}")),
        };
        match &step {
            Step::Tool(_) => {
                results.push(steps.len());
                nodes += 1;
            }
            Step::Replace(i, j, _) => nodes -= j - i,
            Step::Rewrite(_) => {}
            _ => nodes += 1,
        }
        steps.push(step);
    }
    steps
}

/// Materialize `steps` as a valid log; `noise` inserts log-only events.
fn build(steps: &[Step], mut noise: impl FnMut(&mut Log)) -> Log {
    let mut log = Log::new();
    let mut nodes: Vec<u64> = Vec::new();
    let mut step_seq: Vec<u64> = Vec::new();
    for step in steps {
        noise(&mut log);
        let seq = match step {
            Step::User(id) => log.surf("user/message", user(id, "x"), op_append()),
            Step::Context(id) => log.surf("user/message", context(id, "ctx"), op_append()),
            Step::Assistant(id, empty) => {
                let content = if *empty {
                    json!([])
                } else {
                    json!([{"type": "text", "text": id}])
                };
                log.surf(
                    "assistant/message",
                    asst_blocks(1, 1, id, content),
                    op_append_from(&[]),
                )
            }
            Step::Tool(id) => {
                let c = log.push("tool/call", tool_call(1, 1, id));
                noise(&mut log);
                log.surf(
                    "tool/result",
                    tool_result(1, 1, id, "out"),
                    op_append_from(&[c]),
                )
            }
            Step::Rewrite(k) => {
                // Rewrite whatever currently stands for the k-th step's result.
                let target = *nodes
                    .iter()
                    .find(|&&q| {
                        log.events[q as usize]["data"]["message"]["id"]
                            == log.events[step_seq[*k] as usize]["data"]["message"]["id"]
                            && log.events[q as usize]["type"] == "tool/result"
                    })
                    .unwrap_or(&u64::MAX);
                if target == u64::MAX {
                    log.push("plugin/skip", json!(null))
                } else {
                    let mut data = log.events[target as usize]["data"].clone();
                    data["message"]["content"][0]["content"] = json!([]);
                    log.surf("tool/result", data, op_replace(target, target, &[target]))
                }
            }
            Step::Replace(i, j, id) => {
                let (i, j) = (*i.min(&(nodes.len() - 1)), *j.min(&(nodes.len() - 1)));
                log.surf(
                    "user/message",
                    user(id, "sum"),
                    op_replace(nodes[i], nodes[j], &nodes[i..=j]),
                )
            }
        };
        step_seq.push(seq);
        let f = ok(fold(&log.json()));
        nodes = seqs(&f["nodes"]);
    }
    log
}

fn noise_event(rng: &mut Lcg, log: &mut Log) {
    let n = log.events.len();
    match rng.below(5) {
        0 => log.push(
            "assistant/chunk",
            json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "z"}}),
        ),
        1 => log.push("turn/start", json!({"turn": n})),
        2 => log.push("todo/write", json!({"todos": []})),
        3 => log.push("request/context", json!({"provider": "p", "model": "m"})),
        _ => log.push("plugin/noise", json!({"n": n})),
    };
}

#[test]
fn deriving_the_same_log_twice_gives_identical_results() {
    let store = Store::open();
    for seed in 0..200u64 {
        let mut rng = Lcg::new(seed);
        let log = build(&random_steps(&mut rng, 12), |_| {});
        let a = ok(derive_messages(&log.json()));
        assert_eq!(ok(derive_messages(&log.json())), a);
        if seed % 20 == 0 {
            let s = store.seeded(&format!("s{seed}"), &log.json());
            assert_eq!(s.derive_text(), s.derive_text());
            assert_eq!(s.derive(), a);
        }
    }
}

#[test]
fn seqs_stay_zero_based_and_contiguous_after_any_append_sequence() {
    let store = Store::open();
    for seed in 0..200u64 {
        let mut rng = Lcg::new(seed);
        let s = store.session(&format!("s{seed}"));
        for n in 0..15u64 {
            let len = s.len() as u64;
            let _ = match rng.below(5) {
                0 => s.append("plugin/x", &json!(n), None),
                1 => s.append("user/message", &user("u", "x"), Some(&op_append_from(&[rng.below(len + 3)]))),
                2 => s.append("user/message", &user("u", "x"), Some(&op_replace(rng.below(len + 1), rng.below(len + 1), &[rng.below(len + 1)]))),
                3 => s.batch(&json!([{"type": "plugin/a", "data": 1}, {"type": "user/message", "data": user("b", "y"), "intent": if rng.chance(50) { op_append() } else { json!({}) }}])),
                _ => s.append_raw("plugin/x", if rng.chance(50) { "-0" } else { "{}" }, None),
            };
        }
        let events = s.events();
        for (i, e) in events.as_array().unwrap().iter().enumerate() {
            assert_eq!(e["seq"], json!(i), "seed {seed}");
        }
    }
}

#[test]
fn reseeding_with_its_own_log_reproduces_the_derivation_plus_one_end_seed() {
    let store = Store::open();
    for seed in 0..200u64 {
        let mut rng = Lcg::new(seed + 1000);
        let mut noise = Lcg::new(seed);
        let log = build(&random_steps(&mut rng, 8), |l| {
            if noise.chance(30) {
                noise_event(&mut noise, l);
            }
        });
        let s = store.seeded(&format!("a{seed}"), &log.json());
        let events = s.events();
        let n = log.events.len();
        assert_eq!(events.as_array().unwrap()[..n], log.events[..]);
        assert_eq!(events.as_array().unwrap().len(), n + 1);
        assert_eq!(events[n]["type"], "session/end-seed");
        assert_eq!(s.derive(), ok(derive_messages(&log.json())));
        // Re-seeding a log that already ends in end-seed adds no marker.
        let again = store.seeded(&format!("b{seed}"), &events);
        assert_eq!(again.events(), events);
        assert_eq!(again.info()["firstLiveSeq"], json!(n + 1));
        assert_eq!(again.derive(), s.derive());
    }
}

#[test]
fn inserting_non_message_events_never_changes_the_derived_history() {
    for seed in 0..200u64 {
        let mut rng = Lcg::new(seed + 7);
        let steps = random_steps(&mut rng, 10);
        let clean = build(&steps, |_| {});
        let mut noise = Lcg::new(seed * 31 + 3);
        let noisy = build(&steps, |l| {
            while noise.chance(40) {
                noise_event(&mut noise, l);
            }
        });
        assert_eq!(
            ok(derive_messages(&noisy.json())),
            ok(derive_messages(&clean.json())),
            "seed {seed}"
        );
    }
}

#[test]
fn every_derived_message_has_a_known_role() {
    for seed in 0..200u64 {
        let mut rng = Lcg::new(seed + 99);
        let log = build(&random_steps(&mut rng, 12), |_| {});
        for m in ok(derive_messages(&log.json())).as_array().unwrap() {
            assert!(
                ["user", "assistant"].contains(&m["role"].as_str().unwrap()),
                "{m}"
            );
            assert!(m["id"].as_str().is_some_and(|id| !id.is_empty()));
        }
    }
}
