//! SIGKILL crash trials of a C host (`tests/c/crash_host.c`, nothing but
//! the C ABI) writing to PostgreSQL: `{"backend":"postgres","url":…}` with
//! a fresh database per trial. The host appends with write-behind on and
//! prints every committed event and every completed flush; it is killed
//! at a random moment, then a second run of the host opens the session
//! (crash repair runs) and prints what is stored. Every event a flush
//! acknowledged must be there, unchanged, with no gap or duplicate, and
//! the log must end balanced.
//!
//! Needs a server (`DSH_TEST_POSTGRES_URL`, set by `scripts/test.sh`);
//! without one it says it was skipped. `DSH_PG_CRASH_TRIALS` sets the
//! number of trials (default 20).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

/// `url` with its database name replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    let scheme = &base[..base.len() - rest.len()];
    let host = rest.split_once('/').map_or(rest, |(h, _)| h);
    format!("{scheme}{host}/{db}{query}")
}

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// The host's `dump`: `None` when nothing is stored, else (info, events).
fn dump(host: &std::path::Path, config: &str) -> Option<(Value, Vec<Value>)> {
    let out = Command::new(host)
        .args(["dump", config])
        .output()
        .expect("run crash_host dump");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "dump failed ({}): {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    if stdout.trim() == "NOTFOUND" {
        return None;
    }
    let mut info = None;
    let mut events = None;
    for line in stdout.lines() {
        if let Some(t) = line.strip_prefix("INFO ") {
            info = Some(serde_json::from_str(t).expect("info JSON"));
        } else if let Some(t) = line.strip_prefix("EVENTS ") {
            events = serde_json::from_str::<Vec<Value>>(t).ok();
        }
    }
    Some((info.expect("INFO line"), events.expect("EVENTS line")))
}

#[test]
fn c_host_sigkill_trials_on_postgres_lose_no_flushed_event() {
    let Some(url) = std::env::var("DSH_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!(
            "skipped: no PostgreSQL server (set DSH_TEST_POSTGRES_URL, as scripts/test.sh does)"
        );
        return;
    };
    let trials: u64 = std::env::var("DSH_PG_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let (lib_dir, out_dir) = library();
    let host = compile(&out_dir, &lib_dir, "crash_host", "crash_host", &[]);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let mut rng = Lcg(0x5eed);
    let (mut verified, mut in_flight) = (0usize, 0usize);
    for trial in 0..trials {
        let db = format!("dsh_crash_{}_{trial}", std::process::id());
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .expect("create the trial's database");
        let config = format!(
            r#"{{"backend":"postgres","url":{},"batchWindowMs":5}}"#,
            serde_json::to_string(&with_database(&url, &db)).unwrap()
        );
        let mut child = Command::new(&host)
            .args(["write", &config, &(trial + 1).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn crash_host write");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let wanted = 5 + rng.below(300);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut lines = Vec::new();
        while (lines.len() as u64) < wanted && Instant::now() < deadline {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => lines.push(line),
                Err(RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        // SAFETY: a plain syscall on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let status = child.wait().expect("wait for the host");
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        assert!(
            !status.success() && err.is_empty(),
            "trial {trial}: the host ended by itself ({status}): {err}"
        );
        reader.join().ok();
        lines.extend(rx.try_iter());

        // What the host saw committed, and what a flush acknowledged.
        let mut events = Vec::new();
        let mut acked = 0usize;
        for line in &lines {
            if let Some(t) = line.strip_prefix("EV ") {
                if let Ok(v) = serde_json::from_str::<Value>(t) {
                    events.push(v);
                }
            } else if let Some(n) = line.strip_prefix("ACK ") {
                if let Ok(n) = n.trim().parse() {
                    acked = n;
                }
            }
        }
        match dump(&host, &config) {
            None => assert_eq!(acked, 0, "trial {trial}: acknowledged events, no session"),
            Some((info, log)) => {
                assert!(
                    log.len() >= acked,
                    "trial {trial}: {} events stored, {acked} acknowledged",
                    log.len()
                );
                for (seq, e) in log.iter().enumerate() {
                    assert_eq!(e["seq"], Value::from(seq), "trial {trial}: a gap");
                }
                assert_eq!(
                    &log[..acked],
                    &events[..acked],
                    "trial {trial}: an acknowledged event was lost or changed"
                );
                // What was stored beyond the acknowledgements is what the
                // host committed (then crash repair's closers).
                let stored_committed = log.iter().take_while(|e| {
                    let seq = e["seq"].as_u64().unwrap() as usize;
                    events.get(seq) == Some(e)
                });
                in_flight += stored_committed.count() - acked;
                assert_eq!(info["openTurn"], Value::Null, "trial {trial}: unbalanced");
                verified += acked;
            }
        }
        admin
            .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
            .expect("drop the trial's database");
    }
    println!(
        "{trials} SIGKILL trials of a C host on PostgreSQL, a fresh database each: \
         {verified} acknowledged events verified, {in_flight} unacknowledged ones stored too"
    );
}
