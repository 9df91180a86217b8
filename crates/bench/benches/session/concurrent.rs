//! Many sessions in one store, each flushed at every step by a thread of
//! its own (a main agent with sub-agents, a service with many sessions):
//! durable steps per second at N = 1, 8 and 64 sessions, against two
//! floors measured in the same run on the same disk — N threads that each
//! write their step and `fdatasync` their own file, and one thread that
//! writes every session's step and syncs once per round (a group commit
//! of one file) — and against N threads on a plain SQLite session store
//! (one connection each, a commit per step, as an agents SDK's
//! `SQLiteSession` does).

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::abi::{Buf, Store};
use crate::mix::Ev;
use crate::report::{row, Report};
use crate::Ctx;

/// Sessions (threads) measured.
const COUNTS: [usize; 3] = [1, 8, 64];

/// Events appended before each flush: about one agent step.
const STEP: usize = 4;

/// How long each configuration runs.
fn span(quick: bool) -> Duration {
    Duration::from_millis(if quick { 1200 } else { 3000 })
}

/// Run `step(thread, k)` on `n` threads until the span is over; durable
/// steps per second.
fn steps_per_sec(n: usize, span: Duration, step: impl Fn(usize, usize) + Sync) -> f64 {
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let start = Barrier::new(n + 1);
    let elapsed = std::thread::scope(|scope| {
        for t in 0..n {
            let (done, stop, start, step) = (&done, &stop, &start, &step);
            scope.spawn(move || {
                start.wait();
                let mut k = 0;
                while !stop.load(Ordering::Relaxed) {
                    step(t, k);
                    k += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        start.wait();
        let t0 = Instant::now();
        std::thread::sleep(span);
        stop.store(true, Ordering::Relaxed);
        t0
    })
    .elapsed();
    done.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
}

/// The events of step `k`: the stream read in order (a session's log must
/// follow it: its compactions name earlier seqs).
fn step_events(events: &[Ev], k: usize) -> &[Ev] {
    let from = k * STEP;
    assert!(
        from + STEP <= events.len(),
        "the stream is too short for the span"
    );
    &events[from..from + STEP]
}

/// The bytes a step of `events` stores (its JSON data texts).
fn step_bytes(events: &[Ev], k: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for e in step_events(events, k) {
        b.extend_from_slice(e.data.to_bytes());
        b.push(b'\n');
    }
    b
}

/// CPU time (user + system) the whole process has used so far, in seconds:
/// the appending threads, the writer and its compression, together.
fn process_cpu() -> f64 {
    // SAFETY: a zeroed rusage is a valid out-parameter for getrusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// What one configuration of the library measured.
struct Measured {
    /// Durable steps per second.
    rate: f64,
    /// Process CPU seconds per durable step.
    cpu_per_step: f64,
}

/// The library: one store, `n` sessions, each thread appends a step and
/// flushes.
fn library(cx: &Ctx, backend: &str, compression: &str, n: usize, quick: bool) -> Measured {
    let dir = cx
        .tmp
        .0
        .join(format!("concurrent-{backend}-{compression}-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = if backend == "sqlite" {
        dir.join("s.db")
    } else {
        dir.join("root")
    };
    let mut config = json!({ "backend": backend, "path": path.to_str().unwrap() });
    if backend == "jsonl" {
        config["compression"] = json!(compression);
    }
    if backend == "postgres" {
        let url = std::env::var("DSH_BENCH_POSTGRES_URL").unwrap_or_default();
        let schema = format!("concurrent_{}_{n}", std::process::id());
        config = json!({ "backend": "postgres", "url": url, "schema": schema });
    }
    let store = Store::open(&config.to_string());
    // The stream's first events open a session (its turn and messages).
    let events = &cx.stream.events[..];
    let sessions: Vec<_> = (0..n).map(|i| store.create(&format!("c{i}"))).collect();
    let span = span(quick);
    let cpu0 = process_cpu();
    let rate = steps_per_sec(n, span, |t, k| {
        let mut out = Buf::new();
        for ev in step_events(events, k) {
            sessions[t].append(ev, &mut out);
        }
        sessions[t].flush();
    });
    let cpu = process_cpu() - cpu0;
    drop(sessions);
    store.close();
    let _ = std::fs::remove_dir_all(&dir);
    Measured {
        rate,
        cpu_per_step: cpu / (rate * span.as_secs_f64()).max(1.0),
    }
}

/// Floor (a): each thread writes its step to its own file and fdatasyncs.
fn own_files(cx: &Ctx, n: usize, quick: bool) -> f64 {
    let dir = cx.tmp.0.join(format!("concurrent-files-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let files: Vec<_> = (0..n)
        .map(|i| std::sync::Mutex::new(std::fs::File::create(dir.join(format!("f{i}"))).unwrap()))
        .collect();
    let events = &cx.stream.events[..];
    let rate = steps_per_sec(n, span(quick), |t, k| {
        let mut f = files[t].lock().unwrap();
        f.write_all(&step_bytes(events, k)).unwrap();
        f.sync_data().unwrap();
    });
    let _ = std::fs::remove_dir_all(&dir);
    rate
}

/// Floor (b): one thread writes every session's step into one file and
/// fdatasyncs once per round; steps per second over all sessions.
fn group_file(cx: &Ctx, n: usize, quick: bool) -> f64 {
    let path = cx.tmp.0.join(format!("concurrent-group-{n}"));
    let mut f = std::fs::File::create(&path).unwrap();
    let events = &cx.stream.events[..];
    let (t0, mut steps, mut k) = (Instant::now(), 0u64, 0);
    while t0.elapsed() < span(quick) {
        for _ in 0..n {
            f.write_all(&step_bytes(events, k)).unwrap();
        }
        f.sync_data().unwrap();
        steps += n as u64;
        k += 1;
    }
    let _ = std::fs::remove_file(&path);
    steps as f64 / t0.elapsed().as_secs_f64()
}

/// The peer: N threads on one plain SQLite session store, a connection
/// each, one INSERT and a sessions-row UPDATE committed per step (WAL,
/// synchronous=FULL).
fn sqlite_session(cx: &Ctx, n: usize, quick: bool) -> f64 {
    let path = cx.tmp.0.join(format!("concurrent-peer-{n}.db"));
    let _ = std::fs::remove_file(&path);
    let setup = rusqlite::Connection::open(&path).unwrap();
    setup
        .execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE sessions (session_id TEXT PRIMARY KEY, updated_at INTEGER);
             CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
                 message_data TEXT NOT NULL, created_at INTEGER);
             CREATE INDEX messages_session ON messages (session_id, id);",
        )
        .unwrap();
    for i in 0..n {
        setup
            .execute("INSERT INTO sessions VALUES (?1, 0)", [format!("c{i}")])
            .unwrap();
    }
    let conns: Vec<_> = (0..n)
        .map(|_| {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch("PRAGMA synchronous=FULL").unwrap();
            c.busy_timeout(Duration::from_secs(60)).unwrap();
            std::sync::Mutex::new(c)
        })
        .collect();
    let events = &cx.stream.events[..];
    let rate = steps_per_sec(n, span(quick), |t, k| {
        let mut c = conns[t].lock().unwrap();
        let tx = c
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        let id = format!("c{t}");
        for e in step_events(events, k) {
            tx.prepare_cached(
                "INSERT INTO messages (session_id, message_data, created_at) VALUES (?1, ?2, 1)",
            )
            .and_then(|mut st| st.execute((id.as_str(), e.data.to_str().unwrap_or("{}"))))
            .unwrap();
        }
        tx.prepare_cached("UPDATE sessions SET updated_at = updated_at + 1 WHERE session_id = ?1")
            .and_then(|mut st| st.execute([id.as_str()]))
            .unwrap();
        tx.commit().unwrap();
    });
    drop(conns);
    let _ = std::fs::remove_file(&path);
    rate
}

/// The `concurrent` phase.
pub fn concurrent(cx: &Ctx, quick: bool, rep: &mut Report, extra: &mut Map<String, Value>) {
    let mut figures = Map::new();
    let mut at_one: Map<String, Value> = Map::new();
    let mut cpu_at_one: Map<String, Value> = Map::new();
    for n in COUNTS {
        eprintln!("concurrent durable steps, N = {n} ...");
        let files = own_files(cx, n, quick);
        let group = group_file(cx, n, quick);
        let peer = sqlite_session(cx, n, quick);
        let mut fig = json!({ "ownFiles": files, "groupFile": group, "sqliteSession": peer });
        let postgres = std::env::var_os("DSH_BENCH_POSTGRES_URL").is_some();
        let backends = [
            ("sqlite", "sqlite", ""),
            ("jsonl-raw", "jsonl", "none"),
            ("jsonl-zstd", "jsonl", "zstd"),
            ("postgres", "postgres", ""),
        ];
        for (name, backend, compression) in backends {
            if (backend == "postgres" && !postgres) || !wanted(name) {
                continue;
            }
            let measured = library(cx, backend, compression, n, quick);
            let ours = measured.rate;
            fig[name] = json!(ours);
            fig[format!("{name}CpuPerStep")] = json!(measured.cpu_per_step);
            if n == 1 {
                at_one.insert(name.into(), json!(ours));
                cpu_at_one.insert(name.into(), json!(measured.cpu_per_step));
            }
            let mut r = row(
                format!("durable steps/s, {name}, N = {n}"),
                "wall",
                ours,
                "steps/s",
            )
            .base(files, "N threads each write + fdatasync its own file")
            .note(format!(
                "{STEP} events then dsh_session_flush per step, a session per thread; \
                 one thread syncing all N per round: {group:.0} steps/s; N threads on a \
                 plain SQLite session store: {peer:.0} steps/s"
            ));
            r = match n {
                1 => r.target("(reference for N > 1)", true),
                _ if name == "postgres" => {
                    let single = at_one.get(name).and_then(Value::as_f64).unwrap_or(0.0);
                    r.target("≥ N = 1 (a server's commits)", ours >= single)
                }
                _ => {
                    let single = at_one.get(name).and_then(Value::as_f64).unwrap_or(0.0);
                    let mut pass = ours >= 0.5 * files && ours >= single;
                    let mut want = "≥ 0.5× the floor, ≥ N = 1".to_string();
                    if name == "sqlite" && n == 8 {
                        pass &= ours >= 3.0 * peer;
                        want.push_str(", ≥ 3× SQLiteSession");
                    }
                    r.target(&want, pass)
                }
            };
            rep.push(r);
        }
        if n == 1 {
            zstd_cpu_row(cx, &cpu_at_one, rep);
        }
        figures.insert(n.to_string(), fig);
    }
    extra.insert("concurrent".into(), Value::Object(figures));
}

/// Whether the run measures the library configuration `name`
/// (`DSH_BENCH_CONCURRENT`: a comma-separated list of `sqlite`, `jsonl-raw`,
/// `jsonl-zstd`, `postgres`; all when unset). The floors run either way.
fn wanted(name: &str) -> bool {
    std::env::var("DSH_BENCH_CONCURRENT")
        .map_or(true, |list| list.split(',').any(|n| n.trim() == name))
}

/// CPU per durable step of the default zstd JSONL against raw JSONL, one
/// session (the N = 1 runs above): appends, the writer, compression and
/// syncs, all of the process's threads.
fn zstd_cpu_row(cx: &Ctx, cpu: &Map<String, Value>, rep: &mut Report) {
    let get = |name: &str| cpu.get(name).and_then(Value::as_f64);
    let (Some(zstd), Some(raw)) = (get("jsonl-zstd"), get("jsonl-raw")) else {
        return;
    };
    rep.push(
        row("CPU per durable step, jsonl-zstd, N = 1", "cpu", zstd, "s")
            .base(raw, "raw JSONL, same run")
            .target("≤ 1.3× raw", zstd <= 1.3 * raw)
            .note(format!(
                "process CPU (getrusage, every thread) over the N = 1 run / its steps; \
                 {STEP} events then a flush per step"
            )),
    );
    // The same steps' lines, compressed as the format needs at least.
    let steps = (cx.stream.lines.len() / STEP).min(FLOOR_STEPS);
    let lines = &cx.stream.lines[..steps * STEP];
    let extra = crate::zstd_floor::step_cpu(lines.chunks(STEP)).cpu / steps as f64;
    rep.push(
        row(
            "  floor: raw + a frame per step + one merge pass",
            "cpu",
            raw + extra,
            "s",
        )
        .base(raw, "raw JSONL, same run")
        .note(format!(
            "raw JSONL's CPU per step plus, measured on {steps} steps' lines: each step's \
                 frame at level 1 and every byte once more at level 3 in 4 MiB frames \
                 decoded from them ({:.1} µs a step)",
            extra * 1e6
        )),
    );
}

/// Steps whose lines the zstd CPU floor compresses.
const FLOOR_STEPS: usize = 4000;
