//! System-call fault injection: a shim (`syscall_faults/shim.c`, built here
//! and loaded with `LD_PRELOAD` into a child test process) fails one of
//! write, pwrite, fsync, fdatasync, ftruncate, link, rename and the fsync of
//! a directory with EIO, once or from then on, at every position a short
//! session reaches, on JSONL (zstd and raw) and SQLite stores, through the
//! C ABI. Every trial checks that
//!
//! - no call during which a fault was injected says `DSH_OK` (a flush that
//!   says OK means every event before it is durable), unless the fault was
//!   a failed directory sync and the call synced that directory again;
//! - once the fault clears, the next flush persists everything queued, or,
//!   when the session was closed during the fault, the close named the
//!   seqs it could not write and the store's close writes them;
//! - a reopen then returns every appended event, byte for byte;
//! - the process is alive at the end (the child reports every trial).
//!
//! The child counts the calls a fault-free session makes first, then runs
//! one trial per position. (Linux: `LD_PRELOAD`, `/proc/self/fd`; the
//! shim's `long` is the tests' `i64`.)

#![cfg(all(target_os = "linux", target_pointer_width = "64"))]

mod support;

use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use ::dsh_session::json::Value;
use ::dsh_session_ffi::*;
use support::*;

const CHILD_ENV: &str = "DSH_SYSCALL_FAULT_CHILD";

/// The calls the shim fails, one at a time; `a>b` fails `a` once at each
/// position and then `b` (once or from then on: a failed recovery).
const CASES: [&str; 10] = [
    "write",
    "pwrite",
    "fsync",
    "fdatasync",
    "ftruncate",
    "link",
    "rename",
    "dirsync",
    "fsync>ftruncate",
    "write>ftruncate",
];

/// Build the shim once per test binary run.
fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/syscall_faults/shim.c");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dsh-fault-shim.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let status = Command::new(cc)
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-ldl")
            .status()
            .expect("run the C compiler for the fault shim");
        assert!(status.success(), "building the fault shim failed");
        out
    })
}

/// The shim's controls, found in the running process.
struct Shim {
    arm: unsafe extern "C" fn(*const c_char, i64, c_int, *const c_char),
    also: unsafe extern "C" fn(*const c_char, i64, c_int),
    clear: unsafe extern "C" fn(),
    calls: unsafe extern "C" fn() -> i64,
    injected: unsafe extern "C" fn() -> i64,
    injected_in: unsafe extern "C" fn(*const c_char) -> i64,
    healed: unsafe extern "C" fn() -> i64,
}

impl Shim {
    fn find() -> Shim {
        /// The function `name` of the shim, as a `F` (a function pointer).
        ///
        /// # Safety
        /// `F` must be the function's true type.
        unsafe fn sym<F: Copy>(name: &str) -> F {
            let c = CString::new(name).unwrap();
            // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the
            // loaded objects, the preloaded shim among them.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) };
            assert!(!p.is_null(), "{name} not found: is the shim preloaded?");
            assert_eq!(std::mem::size_of::<F>(), std::mem::size_of_val(&p));
            // SAFETY: a non-NULL function address of the size of `F`, whose
            // type the caller vouches for.
            unsafe { std::mem::transmute_copy(&p) }
        }
        // SAFETY: the shim defines these functions with exactly these
        // signatures (syscall_faults/shim.c).
        unsafe {
            Shim {
                arm: sym("dsh_fault_arm"),
                also: sym("dsh_fault_also"),
                clear: sym("dsh_fault_clear"),
                calls: sym("dsh_fault_calls"),
                injected: sym("dsh_fault_injected"),
                injected_in: sym("dsh_fault_injected_in"),
                healed: sym("dsh_fault_healed"),
            }
        }
    }

    /// Arm `case` (see [`CASES`]) at position `at` of its first call.
    fn arm(&self, case: &str, at: i64, persistent: bool, root: &Path) {
        let root = c(root.to_str().unwrap());
        let (first, then) = match case.split_once('>') {
            Some((a, b)) => (a, Some(b)),
            None => (case, None),
        };
        let op = c(first);
        // SAFETY: valid strings; the shim copies them.
        unsafe {
            (self.arm)(
                op.as_ptr(),
                at,
                (persistent && then.is_none()) as c_int,
                root.as_ptr(),
            )
        }
        if let Some(then) = then {
            let then = c(then);
            // SAFETY: a valid string; the shim reads it during the call.
            unsafe { (self.also)(then.as_ptr(), 0, persistent as c_int) }
        }
    }
    fn clear(&self) {
        // SAFETY: no arguments.
        unsafe { (self.clear)() }
    }
    fn calls(&self) -> i64 {
        // SAFETY: no arguments.
        unsafe { (self.calls)() }
    }
    fn injected(&self) -> i64 {
        // SAFETY: no arguments.
        unsafe { (self.injected)() }
    }
    /// The failures injected on paths inside session `name`'s directory.
    fn injected_in(&self, name: &str) -> i64 {
        let name = c(name);
        // SAFETY: a valid string, read during the call.
        unsafe { (self.injected_in)(name.as_ptr()) }
    }
    /// Failed directory syncs whose directory synced fine afterwards.
    fn healed(&self) -> i64 {
        // SAFETY: no arguments.
        unsafe { (self.healed)() }
    }
}

fn config(backend: &str, dir: &Path) -> String {
    let (backend, extra, path) = match backend {
        "jsonl-zstd" => ("jsonl", r#","compression":"zstd""#, dir.to_path_buf()),
        "jsonl-raw" => ("jsonl", r#","compression":"none""#, dir.to_path_buf()),
        "sqlite" => ("sqlite", "", dir.join("store.db")),
        other => panic!("unknown backend {other}"),
    };
    // A long batch window: writes happen at the flushes only, so the
    // positions of a trial are those of the counting run.
    declaring(&format!(
        r#"{{"backend":"{backend}","path":{},"batchWindowMs":3600000{extra}}}"#,
        Value::str(path.to_str().unwrap()).to_json()
    ))
}

/// What one trial saw.
#[derive(Default)]
struct Outcome {
    injected: i64,
    /// The shim's count of calls when the fault cleared.
    calls: i64,
    refused_calls: usize,
}

/// The checks of one trial, in the order the calls happen.
struct Watch<'a> {
    shim: &'a Shim,
    /// The shim's (injected, healed, injected in `s`'s directory,
    /// injected in `f`'s) counts when the last call returned.
    seen: (i64, i64, i64, i64),
    what: String,
    outcome: Outcome,
}

impl Watch<'_> {
    /// `call` said `status`/`text`: it must not say OK when a fault was
    /// injected while it ran. Returns whether it succeeded.
    fn check(&mut self, call: &str, status: dsh_status, text: &str) -> bool {
        self.check_of(None, call, status, text)
    }

    /// [`Watch::check`] of a call on session `of` (`s`, or the fork `f`):
    /// a write round serves every session with pending events (a group
    /// commit), and a fault that hit only the other session's log is
    /// that session's failure, not this call's.
    fn check_of(&mut self, of: Option<&str>, call: &str, status: dsh_status, text: &str) -> bool {
        // A failed directory sync that a later sync of the same directory
        // made good (inside this call) left nothing undurable.
        let now = (
            self.shim.injected(),
            self.shim.healed(),
            self.shim.injected_in("s"),
            self.shim.injected_in("f"),
        );
        let other = match of {
            Some("s") => now.3 - self.seen.3,
            Some(_) => now.2 - self.seen.2,
            None => 0,
        };
        let faulted = now.0 - self.seen.0 - other > now.1 - self.seen.1;
        self.seen = now;
        if status == DSH_OK {
            assert!(
                !faulted,
                "{}: {call} returned DSH_OK although a fault was injected while it ran",
                self.what
            );
            true
        } else {
            assert_ne!(status, DSH_E_INTERNAL, "{}: {call}: {text}", self.what);
            assert!(
                text.contains("\"rule\""),
                "{}: {call} failed without a rule id: {text}",
                self.what
            );
            self.outcome.refused_calls += 1;
            false
        }
    }
}

fn texts(events: &[Value]) -> Vec<String> {
    events.iter().map(Value::to_json).collect()
}

/// `events` without its trailing end-seed markers (and the `Null` that
/// stands for "no fork was made").
fn without_markers(events: &[Value]) -> &[Value] {
    let mut n = events.len();
    while n > 0
        && (events[n - 1] == Value::Null
            || types_of(&events[n - 1..n]) == ["session/end-seed".to_string()])
    {
        n -= 1;
    }
    &events[..n]
}

fn seq_of(e: &Value) -> u64 {
    e.as_object().unwrap().get("seq").unwrap().as_f64().unwrap() as u64
}

/// One short session under a fault armed at position `at` (`i64::MAX`: the
/// counting run). With `close_in_fault` the session is closed before the
/// fault clears.
fn trial(
    shim: &Shim,
    backend: &str,
    op: &str,
    at: i64,
    persistent: bool,
    close_in_fault: bool,
) -> Outcome {
    let dir = temp_dir("syscall-fault");
    let config = config(backend, &dir);
    let mut w = Watch {
        shim,
        seen: (0, 0, 0, 0),
        what: format!(
            "{backend} {op} {} at {at}{}",
            if persistent { "persistent" } else { "once" },
            if close_in_fault {
                " (closed in the fault)"
            } else {
                ""
            }
        ),
        outcome: Outcome::default(),
    };
    shim.arm(op, at, persistent, &dir);

    let store = loop {
        match Store::open(&config) {
            Ok(s) => {
                w.check("store open", DSH_OK, "");
                break s;
            }
            Err((st, text)) => {
                w.check("store open", st, &text);
                shim.clear();
            }
        }
    };
    let session = loop {
        match store.create(r#"{"id":"s"}"#) {
            Ok(s) => {
                w.check("create", DSH_OK, "");
                break s;
            }
            Err((st, text)) => {
                w.check("create", st, &text);
                shim.clear();
                // A create that failed may or may not have left the
                // session: either it opens, or creating it again works.
                if let Ok((s, _)) = store.open_session("s") {
                    break s;
                }
            }
        }
    };
    let mut appended: Vec<Value> = session.events().as_array().unwrap().to_vec();
    let mut fork = None;
    for turn in 1..=3 {
        appended.push(session.append_ok("turn/start", &format!(r#"{{"turn":{turn}}}"#), None));
        appended.push(session.append_ok(
            "user/message",
            &format!(
                r#"{{"id":"u{turn}","role":"user","content":[{{"type":"text","text":"q{turn}"}}],"source":{{"kind":"user"}}}}"#
            ),
            Some(r#"{"surfaceOp":"append"}"#),
        ));
        appended.push(session.append_ok(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            None,
        ));
        let (st, text) = session.flush();
        w.check_of(Some("s"), "flush", st, &text);
        if turn == 2 {
            // A fork at the closed boundary, written and closed under the
            // fault like its source.
            match session.fork(-1, r#"{"id":"f"}"#) {
                Ok(child) => {
                    w.check("fork", DSH_OK, "");
                    fork = Some(child.events().as_array().unwrap().to_vec());
                    let (st, text) = child.flush();
                    w.check_of(Some("f"), "fork flush", st, &text);
                    let (st, text) = child.close();
                    w.check_of(Some("f"), "fork close", st, &text);
                }
                Err((st, text)) => {
                    w.check("fork", st, &text);
                }
            }
        }
    }

    w.outcome.calls = shim.calls();
    if close_in_fault {
        let (st, text) = session.close();
        if !w.check_of(Some("s"), "session close", st, &text) {
            let first = appended
                .iter()
                .map(seq_of)
                .find(|s| text.contains(&s.to_string()));
            assert!(
                text.contains("not written") && first.is_some(),
                "{}: a failed close must name the seqs it did not write: {text}",
                w.what
            );
        }
        shim.clear();
        let (st, text) = store.close();
        assert_eq!(
            st, DSH_OK,
            "{}: store close after the fault: {text}",
            w.what
        );
    } else {
        shim.clear();
        let (st, text) = session.flush();
        assert_eq!(
            st, DSH_OK,
            "{}: flush after the fault cleared: {text}",
            w.what
        );
        let (st, text) = session.close();
        assert_eq!(st, DSH_OK, "{}: close: {text}", w.what);
        let (st, text) = store.close();
        assert_eq!(st, DSH_OK, "{}: store close: {text}", w.what);
    }
    w.outcome.injected = shim.injected();

    let store = Store::open(&config).unwrap_or_else(|e| panic!("{}: reopen: {e:?}", w.what));
    let (session, _) = store
        .open_session("s")
        .unwrap_or_else(|e| panic!("{}: reopen session: {e:?}", w.what));
    // A resumed session's log is the stored one plus its end-seed marker.
    let mut stored: Vec<Value> = session.events().as_array().unwrap().to_vec();
    let marker = stored.pop().map(|e| types_of(&[e]));
    assert_eq!(
        marker,
        Some(vec!["session/end-seed".to_string()]),
        "{}",
        w.what
    );
    assert_eq!(
        texts(&stored),
        texts(&appended),
        "{}: the reopened log differs",
        w.what
    );

    // The fork reopens as it was made; a fork that failed left no session,
    // or one that is the same fork.
    let expected = fork.unwrap_or_else(|| {
        let mut seed = appended[..6].to_vec();
        seed.push(Value::Null);
        seed
    });
    match store.open_session("f") {
        Ok((child, _)) => {
            let stored = child.events().as_array().unwrap().to_vec();
            assert_eq!(
                texts(without_markers(&stored)),
                texts(without_markers(&expected)),
                "{}: the reopened fork differs",
                w.what
            );
        }
        Err((st, text)) => {
            assert_eq!(st, DSH_E_NOT_FOUND, "{}: the failed fork: {text}", w.what);
            assert!(
                expected.last() == Some(&Value::Null),
                "{}: the fork is gone",
                w.what
            );
        }
    }
    w.outcome
}

/// The child: every position of one (backend, op, mode), once the calls of
/// a fault-free run are counted. Prints `DONE <calls> <trials> <injected>`.
#[test]
fn syscall_fault_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let (backend, op, persistent) = (parts[0], parts[1], parts[2] == "persistent");
    let shim = Shim::find();
    let calls = trial(&shim, backend, op, i64::MAX, persistent, false).calls;
    let mut injected = 0;
    let mut trials = 0;
    for at in 0..calls {
        injected += trial(&shim, backend, op, at, persistent, false).injected;
        trials += 1;
        if persistent {
            injected += trial(&shim, backend, op, at, persistent, true).injected;
            trials += 1;
        }
    }
    println!("DONE {calls} {trials} {injected}");
}

/// Run the child for every op and mode on `backend`; returns the calls
/// counted per op.
fn run_backend(backend: &str) -> Vec<(String, i64)> {
    let shim = shim();
    let exe = std::env::current_exe().unwrap();
    let mut counted = Vec::new();
    for op in CASES {
        for mode in ["once", "persistent"] {
            let out = Command::new(&exe)
                .args([
                    "--exact",
                    "syscall_fault_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, format!("{backend} {op} {mode}"))
                .env("LD_PRELOAD", shim)
                .output()
                .expect("spawn the fault child");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let done = stdout
                .lines()
                .find_map(|l| l.split_once("DONE ").map(|(_, d)| d))
                .map(|l| {
                    l.split(' ')
                        .map(|n| n.parse::<i64>().unwrap())
                        .collect::<Vec<_>>()
                });
            let Some(done) = done.filter(|_| out.status.success()) else {
                panic!(
                    "{backend} {op} {mode}: the child did not finish ({}):\n{stdout}\n{stderr}",
                    out.status
                );
            };
            let (calls, trials, injected) = (done[0], done[1], done[2]);
            eprintln!("{backend:10} {op:15} {mode:10} calls {calls:3} trials {trials:3} injected {injected:4}");
            if calls > 0 {
                assert!(injected > 0, "{backend} {op} {mode}: no fault was injected");
            }
            if mode == "once" {
                counted.push((op.to_string(), calls));
            }
        }
    }
    counted
}

fn calls_of(counted: &[(String, i64)], op: &str) -> i64 {
    counted.iter().find(|(o, _)| o == op).map_or(0, |(_, n)| *n)
}

/// Run every case on `backend` and check the shim saw each of `seen` (so
/// a shim that intercepts nothing cannot pass).
fn survives(backend: &str, seen: &[&[&str]]) {
    let counted = run_backend(backend);
    for any_of in seen {
        let calls: i64 = any_of.iter().map(|op| calls_of(&counted, op)).sum();
        assert!(calls > 0, "the shim saw none of {any_of:?} on {backend}");
    }
}

#[test]
fn jsonl_zstd_survives_every_failed_call() {
    survives(
        "jsonl-zstd",
        &[&["write"], &["fsync"], &["link"], &["dirsync"]],
    );
}

#[test]
fn jsonl_raw_survives_every_failed_call() {
    survives(
        "jsonl-raw",
        &[&["write"], &["fsync"], &["link"], &["dirsync"]],
    );
}

#[test]
fn sqlite_survives_every_failed_call() {
    survives(
        "sqlite",
        &[&["pwrite"], &["fsync", "fdatasync"], &["dirsync"]],
    );
}
