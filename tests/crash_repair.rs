//! Crash repair of an open turn whose values are malformed: under the
//! reference's admission the open does what the reference does (the
//! closers it computes, or its refusal, with the file left untouched);
//! under strict admission such values are refused at append, so every
//! log an append accepted reopens after a crash, and again after that.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_session::engine::{Admission, Intent, Vocabulary};
use dsh_session::json::{parse, Value};
use dsh_session::store::{BackendConfig, CreateOptions, ForkOptions, Store, StoreConfig};
use dsh_session::{Rule, Status};

mod common;

use common::{Lcg, Temp};

/// A raw JSONL store in `dir` with the given admission.
fn jsonl(dir: &Temp, admission: Admission) -> Arc<Store> {
    let mut c = StoreConfig::new(BackendConfig::Jsonl {
        path: dir.0.clone(),
        zstd: false,
    });
    c.admission = admission;
    c.batch_window_ms = 0;
    c.vocabulary = Vocabulary::new(["test/note"]).unwrap();
    Store::open(c).unwrap()
}

/// Every file below `dir` with its bytes.
fn files(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

fn v(text: &str) -> Value {
    parse(text).unwrap()
}

/// An assistant message of `turn`/`step` asking for tool calls whose
/// block ids are the JSON texts in `ids` (`None`: the block has no id).
fn assistant(step: &str, ids: &[Option<&str>]) -> Value {
    let blocks: Vec<String> = ids
        .iter()
        .map(|id| match id {
            Some(id) => {
                format!(r#"{{"type":"tool-call","id":{id},"name":"read","arguments":{{}}}}"#)
            }
            None => r#"{"type":"tool-call","name":"read","arguments":{}}"#.to_string(),
        })
        .collect();
    v(&format!(
        r#"{{"turn":1,"step":{step},"message":{{"id":"a1","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#,
        blocks.join(",")
    ))
}

fn append_intent() -> Intent {
    Intent::append()
}

/// Write `events` (type, data, intent) into a new session `id` of a
/// reference-admission store, close it, and open it again.
fn crash_and_open(
    events: &[(&str, Value, Intent)],
) -> (
    Temp,
    dsh_session::Result<Vec<Arc<dsh_session::engine::Event>>>,
) {
    let dir = Temp::new("repair-case");
    let store = jsonl(&dir, Admission::Reference);
    let s = store.create(CreateOptions::with_id("r")).unwrap();
    for (ty, data, intent) in events {
        s.append(ty, data.clone(), intent.clone()).unwrap();
    }
    s.close().unwrap();
    let before = files(&dir.0);
    let opened = store.open_session("r").map(|opened| {
        opened.session.close().unwrap();
        opened.repaired
    });
    if let Err(refused) = &opened {
        assert_eq!(files(&dir.0), before, "a refused open changed the store");
        // The next open refuses the same way, and nothing was written.
        let again = store.open_session("r").unwrap_err();
        assert_eq!(again.rule, refused.rule);
        assert_eq!(files(&dir.0), before);
    }
    drop(store);
    (dir, opened)
}

#[test]
fn r1_a_turn_numbered_other_than_a_safe_integer_refuses_the_open_and_writes_nothing() {
    for turn in ["0", "-1", "1.5", r#""1""#] {
        let events = [(
            "turn/start",
            v(&format!(r#"{{"turn":{turn}}}"#)),
            Intent::none(),
        )];
        let (_dir, opened) = crash_and_open(&events);
        let e = opened.unwrap_err();
        assert_eq!(
            (e.status, e.rule, e.cause),
            (
                Status::Corrupt,
                Rule::LoadValidation,
                Some(Rule::LoadLegacyMalformedTurnEnd)
            ),
            "turn {turn}: {e}"
        );
    }
}

#[test]
fn r2_a_null_turn_is_not_open_no_closers_and_no_fork_at_the_end() {
    let events = [
        ("turn/start", v(r#"{"turn":null}"#), Intent::none()),
        ("test/note", v("{}"), Intent::none()),
    ];
    let (dir, opened) = crash_and_open(&events);
    assert!(opened.unwrap().is_empty(), "a null turn got closers");
    let store = jsonl(&dir, Admission::Reference);
    let dsh_session::store::Opened {
        session: live,
        repaired: closers,
        ..
    } = store.open_session("r").unwrap();
    assert!(closers.is_empty());
    let e = live.fork(ForkOptions::default()).unwrap_err();
    assert_eq!(e.rule, Rule::ForkOpenTurn);
}

#[test]
fn r3_r4_a_pending_call_whose_id_is_not_a_non_empty_string_refuses_the_open() {
    for ids in [[Some(r#""""#)], [Some("7")], [None]] {
        let events = [
            ("turn/start", v(r#"{"turn":1}"#), Intent::none()),
            ("step/start", v(r#"{"turn":1,"step":1}"#), Intent::none()),
            ("assistant/message", assistant("1", &ids), append_intent()),
        ];
        let (_dir, opened) = crash_and_open(&events);
        let e = opened.unwrap_err();
        assert_eq!(
            (e.status, e.rule, e.cause),
            (
                Status::Corrupt,
                Rule::LoadValidation,
                Some(Rule::MsgToolSource)
            ),
            "ids {ids:?}: {e}"
        );
    }
}

#[test]
fn r4_calls_keyed_as_stored_a_numbered_call_is_not_a_string_call() {
    // The call "7" is answered; the call 7 is a different call and stays
    // pending, so the open refuses.
    let result = v(
        r#"{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"7"},"content":[{"type":"tool-result","toolCallId":"7","content":[]}]}}"#,
    );
    let events = [
        ("turn/start", v(r#"{"turn":1}"#), Intent::none()),
        ("step/start", v(r#"{"turn":1,"step":1}"#), Intent::none()),
        (
            "assistant/message",
            assistant("1", &[Some("7"), Some(r#""7""#)]),
            append_intent(),
        ),
        ("tool/result", result, append_intent()),
    ];
    let (_dir, opened) = crash_and_open(&events);
    assert_eq!(opened.unwrap_err().cause, Some(Rule::MsgToolSource));
}

#[test]
fn r5_a_null_step_gets_no_step_end_and_a_missing_step_one_without_a_number() {
    for (step, closer) in [("null", None), ("absent", Some(r#"{"turn":1}"#))] {
        let start = if step == "absent" {
            v(r#"{"turn":1}"#)
        } else {
            v(&format!(r#"{{"turn":1,"step":{step}}}"#))
        };
        let events = [
            ("turn/start", v(r#"{"turn":1}"#), Intent::none()),
            ("step/start", start, Intent::none()),
        ];
        let (_dir, opened) = crash_and_open(&events);
        let closers = opened.unwrap();
        let step_end: Vec<String> = closers
            .iter()
            .filter(|e| e.ty == "step/end")
            .map(|e| e.data().to_json())
            .collect();
        assert_eq!(
            step_end,
            closer.into_iter().map(String::from).collect::<Vec<_>>(),
            "{step}"
        );
        assert_eq!(closers.last().unwrap().ty, "turn/end");
    }
}

#[test]
fn strict_admission_refuses_the_values_repair_cannot_close() {
    let dir = Temp::new("repair-strict");
    let store = jsonl(&dir, Admission::Strict);
    let s = store.create(CreateOptions::with_id("s")).unwrap();
    for turn in ["0", "-1", "1.5", r#""1""#, "null"] {
        let e = s
            .append(
                "turn/start",
                v(&format!(r#"{{"turn":{turn}}}"#)),
                Intent::none(),
            )
            .unwrap_err();
        assert_eq!(
            (e.status, e.rule),
            (Status::Rejected, Rule::AdmitTurnShape),
            "{turn}"
        );
    }
    s.append("turn/start", v(r#"{"turn":1}"#), Intent::none())
        .unwrap();
    for step in [
        r#"{"turn":1,"step":null}"#,
        r#"{"turn":1}"#,
        r#"{"turn":1,"step":0}"#,
    ] {
        let e = s.append("step/start", v(step), Intent::none()).unwrap_err();
        assert_eq!(
            (e.status, e.rule),
            (Status::Rejected, Rule::AdmitStepShape),
            "{step}"
        );
    }
    s.append("step/start", v(r#"{"turn":1,"step":1}"#), Intent::none())
        .unwrap();
    for ids in [[Some(r#""""#)], [Some("7")], [None]] {
        let e = s
            .append("assistant/message", assistant("1", &ids), append_intent())
            .unwrap_err();
        assert_eq!(
            (e.status, e.rule),
            (Status::Rejected, Rule::AdmitToolCallId),
            "{ids:?}"
        );
    }
    s.append(
        "assistant/message",
        assistant("1", &[Some(r#""c1""#)]),
        append_intent(),
    )
    .unwrap();
    s.close().unwrap();
    // What strict admission accepted repairs into a log that reopens.
    for _ in 0..2 {
        let live = store.open_session("s").unwrap().session;
        live.close().unwrap();
    }
}

/// A random event in an agent-like order, sometimes with the malformed
/// values strict admission must refuse.
fn random_event(rng: &mut Lcg, turn: &mut u64, step: &mut u64) -> (String, Value, Intent) {
    let bad_number = |rng: &mut Lcg, good: u64| -> String {
        if rng.below(8) == 0 {
            rng.pick(&["0", "-1", "1.5", r#""2""#, "null"]).to_string()
        } else {
            good.to_string()
        }
    };
    match rng.below(12) {
        0 | 1 => {
            *turn += 1;
            *step = 0;
            let t = bad_number(rng, *turn);
            (
                "turn/start".into(),
                v(&format!(r#"{{"turn":{t}}}"#)),
                Intent::none(),
            )
        }
        2 => {
            let data = format!(r#"{{"turn":{},"reason":{{"kind":"completed"}}}}"#, *turn);
            ("turn/end".into(), v(&data), Intent::none())
        }
        3 | 4 => {
            *step += 1;
            let s = bad_number(rng, *step);
            let data = format!(r#"{{"turn":{},"step":{s}}}"#, *turn);
            ("step/start".into(), v(&data), Intent::none())
        }
        5 => {
            let data = format!(r#"{{"turn":{},"step":{}}}"#, *turn, *step);
            ("step/end".into(), v(&data), Intent::none())
        }
        6 | 7 => {
            let n = rng.below(3);
            let ids: Vec<String> = (0..n)
                .map(|i| match rng.below(10) {
                    0 => r#""""#.to_string(),
                    1 => "5".to_string(),
                    _ => format!(r#""c{}""#, rng.below(4) + i),
                })
                .collect();
            let ids: Vec<Option<&str>> = ids.iter().map(|s| Some(s.as_str())).collect();
            let e = assistant(&step.max(&mut 1).to_string(), &ids);
            ("assistant/message".into(), e, append_intent())
        }
        8 => {
            let id = format!("c{}", rng.below(5));
            let data = format!(
                r#"{{"turn":{},"step":{},"callId":"{id}","name":"read","arguments":{{}}}}"#,
                *turn, *step
            );
            ("tool/call".into(), v(&data), Intent::none())
        }
        9 => {
            let id = format!("c{}", rng.below(5));
            let data = format!(
                r#"{{"turn":{},"step":{},"message":{{"id":"r{}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[]}}]}}}}"#,
                *turn,
                *step,
                rng.below(1000)
            );
            ("tool/result".into(), v(&data), append_intent())
        }
        _ => ("test/note".into(), v(r#"{"x":1}"#), Intent::none()),
    }
}

/// Random strict sessions cut at every event boundary (as a crash leaves
/// them) reopen after repair, and reopen again.
#[test]
fn every_prefix_of_a_strict_session_reopens_after_repair_twice() {
    let mut c = StoreConfig::memory();
    c.vocabulary = Vocabulary::new(["test/note"]).unwrap();
    let store = Store::open(c).unwrap();
    let mut rng = Lcg(0x2e9a1);
    let mut boundaries = 0;
    for n in 0..40 {
        // The events strict admission accepts, in order.
        let probe = store
            .create(CreateOptions::with_id(format!("probe{n}")))
            .unwrap();
        let (mut turn, mut step) = (0, 0);
        let mut accepted = Vec::new();
        for _ in 0..40 {
            let (ty, data, intent) = random_event(&mut rng, &mut turn, &mut step);
            if probe.append(&ty, data.clone(), intent.clone()).is_ok() {
                accepted.push((ty, data, intent));
            }
        }
        probe.close().unwrap();
        for k in 1..=accepted.len() {
            let id = format!("p{n}-{k}");
            let s = store.create(CreateOptions::with_id(&id)).unwrap();
            for (ty, data, intent) in &accepted[..k] {
                s.append(ty, data.clone(), intent.clone()).unwrap();
            }
            s.close().unwrap();
            for round in 0..2 {
                let live = store
                    .open_session(&id)
                    .unwrap_or_else(|e| panic!("{id}, open {round}: {e}"))
                    .session;
                live.close().unwrap();
            }
            let after = store.inspect(&id).unwrap();
            assert!(after.torn.is_none() && after.repair.is_empty(), "{id}");
            boundaries += 1;
        }
    }
    assert!(boundaries > 500, "{boundaries}");
}
