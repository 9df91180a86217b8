//! Processes racing as writers of one PostgreSQL session (through the
//! core's `Store`): several child processes each open the session, append a turn
//! tagged with their name, flush and close, over and over, with no
//! coordination but the database's. Whatever interleaving the server
//! allows, the stored log is contiguous, holds every turn a flush
//! acknowledged exactly once, and nothing but whole turns (and the
//! end-seed markers the opens write).
//!
//! Needs a server (`DSH_TEST_POSTGRES_URL`); skipped, saying so, without.

mod store_support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use ::dsh_session::json::Value;
use store_support::*;

const CHILD_ENV: &str = "DSH_RACE_CHILD_CONFIG";
const NAME_ENV: &str = "DSH_RACE_CHILD_NAME";
const TURNS: u64 = 12;
const WRITERS: usize = 4;

/// A child: open (waiting out the other writers), append one turn, flush,
/// close; print `ACK <name> <k>` for each turn a flush acknowledged.
#[test]
fn race_child_process() {
    let (Ok(config), Ok(name)) = (std::env::var(CHILD_ENV), std::env::var(NAME_ENV)) else {
        return;
    };
    let store = Store::open(&config).expect("child store open");
    let mut k = 0;
    let mut conflicts = 0;
    while k < TURNS {
        let s = match store.open_session("race") {
            Ok((s, _)) => s,
            // Another writer has the session live (its lock), or wrote
            // between this open's read and its end-seed marker: the
            // marker was refused, nothing was stored; open again.
            Err((st, text)) if st == DSH_E_CONFLICT => {
                assert!(
                    text.contains("postgres.session-locked")
                        || text.contains("postgres.append-seq-mismatch"),
                    "{text}"
                );
                conflicts += 1;
                continue;
            }
            Err(e) => panic!("{name}: open: {e:?}"),
        };
        let turn = s
            .info()
            .as_object()
            .and_then(|o| o.get("length"))
            .and_then(Value::as_f64)
            .unwrap() as u64
            + 1;
        s.append_ok("turn/start", &format!(r#"{{"turn":{turn}}}"#), None);
        let user = format!(
            r#"{{"id":"{name}-{k}","role":"user","content":[{{"type":"text","text":"{name} {k}"}}],"source":{{"kind":"user"}}}}"#
        );
        s.append_ok("user/message", &user, Some(r#"{"surfaceOp":"append"}"#));
        s.append_ok(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            None,
        );
        let (st, text) = s.flush();
        let (cst, ctext) = s.close();
        if st == DSH_OK {
            assert_eq!(cst, DSH_OK, "{ctext}");
            println!("ACK {name} {k}");
            k += 1;
        } else {
            // Another writer moved the session on between this open and
            // this write: the batch was refused whole.
            assert_eq!(st, DSH_E_CONFLICT, "{text}");
            conflicts += 1;
        }
    }
    println!("CONFLICTS {name} {conflicts}");
}

#[test]
fn processes_racing_as_writers_leave_one_contiguous_log() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let Some(config) = postgres_config(r#","batchWindowMs":5"#) else {
        return;
    };
    {
        let store = Store::open(&config).unwrap();
        let s = store.create(r#"{"id":"race"}"#).unwrap();
        s.append_ok("turn/start", r#"{"turn":1}"#, None);
        s.append_ok(
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
            None,
        );
        let (st, text) = s.close();
        assert_eq!(st, DSH_OK, "{text}");
    }
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..WRITERS)
        .map(|i| {
            Command::new(&exe)
                .args(["--exact", "race_child_process", "--nocapture"])
                .env(CHILD_ENV, &config)
                .env(NAME_ENV, format!("w{i}"))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut acked: BTreeMap<String, u64> = BTreeMap::new();
    let mut conflicts = 0u64;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "a writer failed: {stdout}");
        for line in stdout.lines() {
            let line = line.find("ACK ").map_or(line, |i| &line[i..]);
            if let Some(rest) = line.strip_prefix("ACK ") {
                let (name, k) = rest.split_once(' ').unwrap();
                *acked.entry(name.to_string()).or_default() += 1;
                assert!(k.trim().parse::<u64>().is_ok());
            } else if let Some(i) = line.find("CONFLICTS ") {
                conflicts += line[i..]
                    .rsplit(' ')
                    .next()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap();
            }
        }
    }
    assert_eq!(acked.len(), WRITERS);
    assert!(acked.values().all(|&n| n == TURNS), "{acked:?}");

    let store = Store::open(&config).unwrap();
    let (s, _) = store.open_session("race").unwrap();
    let events = s.events();
    let events = events.as_array().unwrap();
    let mut users: BTreeMap<String, u64> = BTreeMap::new();
    let mut open = false;
    for (i, e) in events.iter().enumerate() {
        let o = e.as_object().unwrap();
        assert_eq!(
            o.get("seq").and_then(Value::as_f64),
            Some(i as f64),
            "a gap or a duplicate"
        );
        match o.get("type").and_then(Value::as_str).unwrap() {
            "turn/start" => {
                assert!(!open, "a turn inside a turn at {i}");
                open = true;
            }
            "turn/end" => {
                assert!(open);
                open = false;
            }
            "user/message" => {
                let id = o
                    .get("data")
                    .unwrap()
                    .as_object()
                    .unwrap()
                    .get("id")
                    .unwrap();
                *users.entry(id.as_str().unwrap().to_string()).or_default() += 1;
            }
            "session/end-seed" => assert!(!open),
            other => panic!("unexpected {other} at {i}"),
        }
    }
    assert_eq!(
        users.len() as u64,
        WRITERS as u64 * TURNS,
        "every acknowledged turn"
    );
    assert!(users.values().all(|&n| n == 1), "a turn stored twice");
    println!(
        "{WRITERS} processes × {TURNS} turns raced as writers: {} events stored, {conflicts} conflicts refused whole",
        events.len()
    );
}
