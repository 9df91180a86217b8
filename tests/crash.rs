//! Crash test: a child process appends through the core `Store` API (the
//! JSON-text doors the C ABI calls) with write-behind on and is killed with SIGKILL at random moments. After every kill the
//! store must reopen, keep every event acknowledged by a completed flush
//! (byte for byte), and end balanced (docs/lifecycle.md §6).
//!
//! `DSH_CRASH_TRIALS` sets the trials per backend (default 100 for JSONL
//! and SQLite, at most 30 on PostgreSQL, which needs a server:
//! `DSH_TEST_POSTGRES_URL`). `tests/soak.sh` runs many more.

mod store_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ::dsh_session::json::Value;
use store_support::*;

const CHILD_ENV: &str = "DSH_CRASH_CHILD_CONFIG";
const SEED_ENV: &str = "DSH_CRASH_CHILD_SEED";
/// Set: the child writes text that compresses poorly, eight times as
/// long, so its JSONL log merges frames while it is killed.
const NOISE_ENV: &str = "DSH_CRASH_CHILD_NOISE";

/// A small deterministic generator (no extra crate).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `n` filler characters: `letter` repeated, or (noisy) random letters.
    fn filler(&mut self, letter: char, n: u64, noisy: bool) -> String {
        if !noisy {
            return letter.to_string().repeat(n as usize);
        }
        (0..n * 8)
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect()
    }
}

/// The child: keep appending turns, flushing at random points; print every
/// committed event (`EV <json>`) and every completed flush (`ACK <length>`).
#[test]
fn crash_child_process() {
    let Ok(config) = std::env::var(CHILD_ENV) else {
        return;
    };
    let seed: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut rng = Lcg(seed);
    let noisy = std::env::var_os(NOISE_ENV).is_some();
    let store = Store::open(&config).expect("child store open");
    let session = match store.open_session("crash") {
        Ok((s, _)) => s,
        Err(_) => store.create(r#"{"id":"crash"}"#).expect("child create"),
    };
    let mut out = std::io::stdout().lock();
    let mut turn = session
        .info()
        .as_object()
        .unwrap()
        .get("length")
        .and_then(Value::as_f64)
        .unwrap_or(0.0) as u64
        + 1;
    let emit = |out: &mut std::io::StdoutLock<'_>, ty: &str, data: &str, intent: Option<&str>| {
        let e = session.append_ok(ty, data, intent);
        writeln!(out, "EV {}", e.to_json()).unwrap();
        e.as_object()
            .unwrap()
            .get("seq")
            .and_then(Value::as_f64)
            .unwrap() as u64
    };
    loop {
        emit(
            &mut out,
            "turn/start",
            &format!(r#"{{"turn":{turn}}}"#),
            None,
        );
        let user = format!(
            r#"{{"id":"u{turn}","role":"user","content":[{{"type":"text","text":"question {turn}"}}],"source":{{"kind":"user"}}}}"#
        );
        emit(
            &mut out,
            "user/message",
            &user,
            Some(r#"{"surfaceOp":"append"}"#),
        );
        emit(
            &mut out,
            "step/start",
            &format!(r#"{{"turn":{turn},"step":1}}"#),
            None,
        );
        let mut chunks = Vec::new();
        for i in 0..(3 + rng.below(20)) {
            let data = format!(
                r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"word {i} {}"}}}}"#,
                {
                    let n = rng.below(200);
                    rng.filler('x', n, noisy)
                }
            );
            chunks.push(emit(&mut out, "assistant/chunk", &data, None));
            if rng.below(8) == 0 {
                let (st, text) = session.flush();
                assert_eq!(st, DSH_OK, "{text}");
                writeln!(out, "ACK {}", chunks.last().unwrap() + 1).unwrap();
            }
        }
        let cited: Vec<String> = chunks.iter().map(u64::to_string).collect();
        let message = format!(
            r#"{{"turn":{turn},"step":1,"message":{{"id":"a{turn}","role":"assistant","content":[{{"type":"tool-call","id":"c{turn}","name":"t","arguments":"{{}}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#
        );
        let intent = format!(
            r#"{{"surfaceOp":"append","sourceEventSeqs":[{}]}}"#,
            cited.join(",")
        );
        emit(&mut out, "assistant/message", &message, Some(&intent));
        let call = emit(
            &mut out,
            "tool/call",
            &format!(
                r#"{{"turn":{turn},"step":1,"callId":"c{turn}","name":"t","arguments":"{{}}"}}"#
            ),
            None,
        );
        let result = format!(
            r#"{{"turn":{turn},"step":1,"message":{{"id":"t{turn}","role":"user","content":[{{"type":"tool-result","toolCallId":"c{turn}","content":[{{"type":"text","text":"{}"}}]}}],"source":{{"kind":"tool","callId":"c{turn}"}}}}}}"#,
            {
                let n = rng.below(3000);
                rng.filler('r', n, noisy)
            }
        );
        emit(
            &mut out,
            "tool/result",
            &result,
            Some(&format!(
                r#"{{"surfaceOp":"append","sourceEventSeqs":[{call}]}}"#
            )),
        );
        emit(
            &mut out,
            "step/end",
            &format!(r#"{{"turn":{turn},"step":1}}"#),
            None,
        );
        let last = emit(
            &mut out,
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            None,
        );
        let (st, text) = session.flush();
        assert_eq!(st, DSH_OK, "{text}");
        writeln!(out, "ACK {}", last + 1).unwrap();
        out.flush().unwrap();
        if noisy {
            // The model call after a turn: the writer is idle meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        turn += 1;
    }
}

/// Run `trials` kill-and-reopen cycles against one store configuration.
fn crash_trials(config: &str, trials: u64) {
    crash_trials_with(config, trials, false);
}

/// [`crash_trials`], the child writing noisy text when `noisy`.
fn crash_trials_with(config: &str, trials: u64, noisy: bool) {
    let exe = std::env::current_exe().expect("test binary");
    let mut baseline: Vec<Value> = Vec::new();
    let mut rng = Lcg(0x5eed);
    let (mut verified, mut lost_unacked, mut torn, mut repaired) = (0u64, 0u64, 0u64, 0u64);
    for trial in 0..trials {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, config)
            .env(SEED_ENV, (trial + 1).to_string())
            .envs(noisy.then_some((NOISE_ENV, "1")))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let lines_before_kill = 5 + rng.below(if noisy { 1500 } else { 400 });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut events: BTreeMap<u64, Value> = BTreeMap::new();
        let mut acked = baseline.len() as u64;
        let mut seen = 0;
        while seen < lines_before_kill && Instant::now() < deadline {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    seen += 1;
                    record(&line, &mut events, &mut acked);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        // SAFETY: plain syscall on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let status = child.wait().expect("wait child");
        assert!(
            !status.success(),
            "trial {trial}: the child ended by itself: {status}"
        );
        // Lines printed before the kill still count; a line cut by the kill
        // is not an acknowledgement (it does not parse).
        reader.join().ok();
        for line in rx.try_iter() {
            record(&line, &mut events, &mut acked);
        }

        let store =
            Store::open(config).unwrap_or_else(|e| panic!("trial {trial}: reopen store: {e:?}"));
        if let Ok(inspected) = store.try_inspect("crash") {
            let o = inspected.as_object().unwrap();
            torn += u64::from(o.get("torn") == Some(&Value::Bool(true)));
            repaired += u64::from(!o.get("repair").unwrap().as_array().unwrap().is_empty());
        }
        let (session, _) = match store.open_session("crash") {
            Ok(s) => s,
            Err((st, _)) if st == DSH_E_NOT_FOUND && acked == 0 => {
                drop(store);
                continue;
            }
            Err(e) => panic!("trial {trial}: open after SIGKILL: {e:?}"),
        };
        let log = session.events();
        let log = log.as_array().unwrap();
        assert!(
            log.len() as u64 >= acked,
            "trial {trial}: {} events after reopen, {acked} acknowledged",
            log.len()
        );
        assert_eq!(
            &log[..baseline.len()],
            &baseline[..],
            "trial {trial}: earlier history changed"
        );
        for seq in baseline.len() as u64..acked {
            assert_eq!(
                Some(&log[seq as usize]),
                events.get(&seq),
                "trial {trial}: acknowledged event {seq} was lost or changed"
            );
        }
        let info = session.info();
        assert_eq!(
            info.as_object().unwrap().get("openTurn"),
            Some(&Value::Null),
            "trial {trial}: unbalanced log"
        );
        verified += acked - baseline.len() as u64;
        lost_unacked += (events.len() as u64).saturating_sub(acked - baseline.len() as u64);
        baseline = log.to_vec();
        drop(session);
        drop(store);
    }
    println!(
        "{trials} SIGKILL trials ({config}): {verified} acknowledged events verified, {lost_unacked} unacknowledged in flight at a kill, {torn} torn tails cut, {repaired} interrupted turns closed, final log {} events",
        baseline.len()
    );
}

/// Take one line of the child's output into the record.
fn record(line: &str, events: &mut BTreeMap<u64, Value>, acked: &mut u64) {
    // libtest may print "test crash_child_process ... " in front of the
    // child's first line.
    let line = line
        .find("EV {")
        .or_else(|| line.find("ACK "))
        .map_or(line, |i| &line[i..]);
    if let Some(e) = line.strip_prefix("EV ") {
        if let Ok(e) = ::dsh_session::json::parse(e) {
            if let Some(seq) = e
                .as_object()
                .and_then(|o| o.get("seq"))
                .and_then(Value::as_safe_u64)
            {
                events.insert(seq, e);
            }
        }
    } else if let Some(n) = line.strip_prefix("ACK ") {
        if let Ok(n) = n.trim().parse() {
            *acked = n;
        }
    }
}

fn trials() -> u64 {
    std::env::var("DSH_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}

fn config_for(backend: &str, dir: &std::path::Path) -> String {
    match backend {
        "sqlite" => format!(
            r#"{{"backend":"sqlite","path":{},"batchWindowMs":5}}"#,
            Value::str(dir.join("crash.db").to_str().unwrap()).to_json()
        ),
        _ => format!(
            r#"{{"backend":"jsonl","path":{},"batchWindowMs":5}}"#,
            Value::str(dir.join("root").to_str().unwrap()).to_json()
        ),
    }
}

#[test]
fn sigkill_during_write_behind_keeps_every_acknowledged_event_jsonl() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = temp_dir("crash-jsonl");
    crash_trials(&config_for("jsonl", &dir), trials());
}

/// The zstd frames of the file at `path`: how many, and the most text
/// one of them holds.
fn zstd_frames(path: &std::path::Path) -> (usize, u64) {
    let bytes = std::fs::read(path).unwrap();
    let mut rest = &bytes[..];
    let (mut n, mut most) = (0, 0);
    while let Ok(len) = zstd::zstd_safe::find_frame_compressed_size(rest) {
        let text = zstd::zstd_safe::get_frame_content_size(rest).ok().flatten();
        most = most.max(text.unwrap_or(0));
        rest = &rest[len.min(rest.len())..];
        n += 1;
        if rest.is_empty() {
            break;
        }
    }
    (n, most)
}

/// SIGKILL while the writer merges the log's small frames (a child that
/// writes poorly compressible steps merges every few dozen flushes): the
/// merge's copy, sync and rename may each be cut, and every acknowledged
/// event still reads back byte for byte.
#[test]
fn sigkill_during_frame_merges_keeps_every_acknowledged_event_jsonl() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = temp_dir("crash-merge");
    let config = config_for("jsonl", &dir);
    crash_trials_with(&config, trials().min(30), true);
    let log = dir.join("root/_no-cwd/crash/session.jsonl.zstd");
    let (frames, most) = zstd_frames(&log);
    let size = std::fs::metadata(&log).unwrap().len();
    println!("log: {frames} frames, {size} bytes, the longest frame {most} bytes of text");
    // A child's frame holds one turn at most (under 60 KB of text); a
    // merged one holds many.
    assert!(
        most > 200_000,
        "some trials merged frames: at most {most} bytes in one"
    );
}

#[test]
fn sigkill_during_write_behind_keeps_every_acknowledged_event_postgres() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let Some(config) = postgres_config(r#","batchWindowMs":5"#) else {
        return;
    };
    // One schema for all trials: every kill and reopen grows one log.
    crash_trials(&config, trials().min(30));
}

#[test]
fn sigkill_during_write_behind_keeps_every_acknowledged_event_sqlite() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = temp_dir("crash-sqlite");
    crash_trials(&config_for("sqlite", &dir), trials());
}
