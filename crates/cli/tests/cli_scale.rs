//! The CLI at scale: the peak resident memory of `show`, `derive`,
//! `verify` and `stats` on a 200 000-event session (SQLite and zstd JSONL)
//! against a bound of 64 MB, and `show`'s first line arriving long before
//! the whole log is read (`show | head` ends at once).
//!
//! Each command runs as a child process; its peak resident set comes from
//! `wait4`'s `ru_maxrss`, which also counts what the child shared with
//! this process until its exec (about 20 MB here), so the figure is an
//! upper bound of the command's own. In a debug build the library reads a long log
//! many times slower and holds debug-sized frames, so these tests are
//! ignored there; `scripts/test.sh` runs them on the release build
//! (`cargo test --release -p dsh-session-cli --test cli_scale`).

mod cli_support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::*;
use dsh_session::store::BackendConfig;

/// The bound on a reading command's peak resident memory.
const PEAK_BOUND_MB: f64 = 64.0;

/// 10 000 turns of 20 events.
const TURNS: u64 = 10_000;
const EVENTS: u64 = TURNS * 20;

/// The binary under test: the one cargo built, or `DSH_SESSION_BIN` (to
/// measure another build the same way).
fn binary() -> PathBuf {
    std::env::var_os("DSH_SESSION_BIN").map_or_else(
        || assert_cmd::cargo::cargo_bin("dsh-session"),
        PathBuf::from,
    )
}

/// Two stores in `dir`, each holding session `big`: a SQLite file and a
/// zstd JSONL directory.
fn stores(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let db = dir.join("big.db");
    let root = dir.join("jsonl");
    let t = Instant::now();
    write_big_session(&BackendConfig::Sqlite { path: db.clone() }, "big", TURNS);
    write_big_session(
        &BackendConfig::Jsonl {
            path: root.clone(),
            zstd: true,
        },
        "big",
        TURNS,
    );
    eprintln!(
        "two stores of {EVENTS} events written in {:.2?}",
        t.elapsed()
    );
    // A child's peak counts what it shared with this process until its
    // exec: give the memory the writes freed back first.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap memory.
    unsafe {
        libc::malloc_trim(0);
    }
    vec![("sqlite", db), ("jsonl", root)]
}

/// What one run of the binary did.
struct Run {
    code: i32,
    /// Peak resident set (`ru_maxrss`), MB.
    peak_mb: f64,
    stdout_bytes: u64,
    lines: u64,
    stderr: String,
    /// From spawn to the first byte on stdout.
    first_byte: Option<Duration>,
    /// From spawn to exit.
    elapsed: Duration,
}

/// Run `dsh-session ARGS…`, reading its stdout as it comes (at most
/// `keep_lines` lines, then the pipe is closed, as `| head` does), and
/// wait for it with `wait4` to learn its peak resident set.
fn measure(args: &[&str], keep_lines: Option<u64>) -> Run {
    let started = Instant::now();
    // Reaped by `wait4` below, which std's `wait` cannot stand in for (it
    // gives no resource usage).
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(binary())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let (mut bytes, mut lines, mut first) = (0u64, 0u64, None);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            first.get_or_insert_with(|| started.elapsed());
            bytes += n as u64;
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
            if keep_lines.is_some_and(|k| lines >= k) {
                break; // dropping the pipe closes it
            }
        }
        (bytes, lines, first)
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not reaped yet (std never waited for
    // it); the pointers are valid for the call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let elapsed = started.elapsed();
    let (stdout_bytes, lines, first_byte) = reader.join().expect("reader");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    };
    Run {
        code,
        peak_mb: usage.ru_maxrss as f64 / 1024.0,
        stdout_bytes,
        lines,
        stderr: errors.join().expect("stderr reader"),
        first_byte,
        elapsed,
    }
}

fn path(p: &Path) -> &str {
    s(p)
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a 200k-event store is measured on the release build (scripts/test.sh)"
)]
fn reading_commands_stay_under_64_mb_on_a_200k_event_session() {
    let dir = temp_dir("scale-peak");
    let mut over = Vec::new();
    for (backend, store) in &stores(&dir) {
        let store = path(store);
        let commands: [&[&str]; 8] = [
            &["show", store, "big"],
            &["--json", "show", store, "big"],
            &["derive", store, "big"],
            &["--json", "derive", store, "big"],
            &["verify", store, "big"],
            &["--json", "verify", store],
            &["stats", store, "big"],
            &["--json", "stats", store, "big"],
        ];
        for args in commands {
            let run = measure(args, None);
            eprintln!(
                "{backend:6} {:40} peak {:6.1} MB, {:6.2} s, first output after {:.3?}, {} lines, {} bytes",
                args[..args.len() - 1].join(" ").replace(store, "STORE"),
                run.peak_mb,
                run.elapsed.as_secs_f64(),
                run.first_byte.unwrap_or_default(),
                run.lines,
                run.stdout_bytes,
            );
            assert_eq!(run.code, 0, "{backend} {args:?}: {}", run.stderr);
            if run.peak_mb > PEAK_BOUND_MB {
                over.push(format!("{backend} {args:?}: {:.1} MB", run.peak_mb));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {PEAK_BOUND_MB} MB of peak resident memory: {over:?}"
    );
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a 200k-event store is measured on the release build (scripts/test.sh)"
)]
fn show_prints_its_first_line_before_the_log_is_read_and_stops_at_a_closed_pipe() {
    let dir = temp_dir("scale-head");
    for (backend, store) in &stores(&dir) {
        let store = path(store);
        for json in [false, true] {
            let mut args = vec!["show", store, "big"];
            if json {
                args.insert(0, "--json");
            }
            let whole = measure(&args, None);
            assert_eq!(whole.code, 0, "{backend}: {}", whole.stderr);
            assert!(whole.lines >= EVENTS, "{backend}: {} lines", whole.lines);
            let head = measure(&args, Some(1));
            eprintln!(
                "{backend:6} {} show: whole {:.2} s (first byte {:.3?}); | head -1 {:.3} s",
                if json { "--json" } else { "text  " },
                whole.elapsed.as_secs_f64(),
                whole.first_byte.unwrap_or_default(),
                head.elapsed.as_secs_f64()
            );
            let first = whole.first_byte.expect("output");
            assert!(
                first * 4 < whole.elapsed,
                "{backend}: the first line came after {first:?} of {:?}",
                whole.elapsed
            );
            // A closed pipe ends the command quietly, long before the end.
            assert_eq!(head.code, 0, "{backend}: {}", head.stderr);
            assert_eq!(head.stderr, "", "{backend}: no message for a closed pipe");
            assert!(
                head.elapsed * 3 < whole.elapsed,
                "{backend}: `show | head -1` took {:?}, the whole show {:?}",
                head.elapsed,
                whole.elapsed
            );
        }
    }
}
