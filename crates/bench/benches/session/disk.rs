//! The disk-store figures: flush latency against an interleaved fsync and
//! (SQLite) a plain per-step SQLite commit of the same rows, and
//! write-behind throughput against baselines (b) and (c).

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::abi::{Buf, Store};
use crate::baselines::Baselines;
use crate::floor;
use crate::report::{fmt_n, row, Report};
use crate::util::{dir_size, median, percentile, TempDir};
use crate::Ctx;

/// Flush latency of the jsonl and sqlite backends: append one event, then
/// time `dsh_session_flush`, each followed by a raw write + fdatasync of
/// the same bytes and (SQLite) a plain SQLite commit of them.
pub fn flush(cx: &Ctx, rep: &mut Report, extra: &mut Map<String, Value>) {
    let Ctx { stream, tmp, .. } = *cx;
    for backend in ["jsonl", "sqlite"] {
        eprintln!("flush latency ({backend}) ...");
        let (_, config) = store_at(tmp, "flush", backend);
        let store = Store::open(&config);
        let s = store.create("bench-flush");
        let mut out = Buf::new();
        for ev in &stream.events[..200] {
            s.append(ev, &mut out);
        }
        s.flush();
        // Each flush is followed by the baseline: a small write + fsync
        // of a file next to the store, so both see the same disk load.
        let mut raw = std::fs::File::create(tmp.0.join(format!("fsync-{backend}.bin"))).unwrap();
        let mut peer = (backend == "sqlite").then(|| Peer::open(&tmp.0.join("peer.db")));
        let mut times = Vec::new();
        let mut fsyncs = Vec::new();
        let mut peer_times = Vec::new();
        for ev in &stream.events[200..260] {
            s.append(ev, &mut out);
            let t = Instant::now();
            s.flush();
            times.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            raw.write_all(ev.data.to_bytes()).unwrap();
            raw.sync_data().unwrap();
            fsyncs.push(t.elapsed().as_secs_f64());
            if let Some(peer) = &mut peer {
                let text = ev.data.to_str().unwrap_or("{}");
                let t = Instant::now();
                peer.step(text);
                peer_times.push(t.elapsed().as_secs_f64());
            }
        }
        let p50 = median(&mut times);
        let f50 = median(&mut fsyncs);
        extra.insert(
            format!("flush_{backend}"),
            json!({"p50": p50, "p90": percentile(&mut times, 0.9), "fsyncP50": f50}),
        );
        rep.push(
            row(format!("flush latency p50, {backend}"), "wall", p50, "s")
                .base(f50, "write + fdatasync of the event, interleaved")
                .target("≤ 2×", p50 <= 2.0 * f50)
                .note(format!(
                    "append 1 event then dsh_session_flush, 60 times (batchWindowMs 25); p90 {:.2} ms",
                    percentile(&mut times, 0.9) * 1e3
                )),
        );
        if !peer_times.is_empty() {
            let peer50 = median(&mut peer_times);
            rep.push(
                row(
                    "per-step durable sqlite vs a plain per-step commit",
                    "wall",
                    p50,
                    "s",
                )
                .base(peer50, "plain SQLite commit, interleaved")
                .target("≤ 0.67× (1.5× faster)", p50 <= peer50 / 1.5)
                .note(
                    "the same events: one INSERT and a sessions-row UPDATE per step, \
                         committed (WAL, synchronous=FULL), as an agents SDK's SQLite session does",
                ),
            );
        }
        s.close();
        store.close();
    }
}

/// A plain SQLite session store, the peer of the per-step figure: one row
/// per item and a commit per step, WAL with `synchronous=FULL`.
struct Peer(rusqlite::Connection);

impl Peer {
    fn open(path: &std::path::Path) -> Peer {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
             CREATE TABLE sessions (session_id TEXT PRIMARY KEY, updated_at INTEGER);
             CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
                 message_data TEXT NOT NULL, created_at INTEGER);
             CREATE INDEX messages_session ON messages (session_id, id);
             INSERT INTO sessions VALUES ('bench-flush', 0);",
        )
        .unwrap();
        Peer(conn)
    }

    /// One step: insert the item, touch the session, commit.
    fn step(&mut self, text: &str) {
        let tx = self.0.transaction().unwrap();
        tx.prepare_cached(
            "INSERT INTO messages (session_id, message_data, created_at) VALUES ('bench-flush', ?1, 1)",
        )
        .and_then(|mut st| st.execute([text]))
        .unwrap();
        tx.prepare_cached(
            "UPDATE sessions SET updated_at = updated_at + 1 WHERE session_id = 'bench-flush'",
        )
        .and_then(|mut st| st.execute([]))
        .unwrap();
        tx.commit().unwrap();
    }
}

/// Write-behind throughput of the jsonl and sqlite backends at each size;
/// returns the stores written, `(backend, config, path)`, for the open figures.
pub fn write_behind(
    cx: &Ctx,
    base: &Baselines,
    rep: &mut Report,
    extra: &mut Map<String, Value>,
) -> Vec<(&'static str, String, PathBuf)> {
    let Ctx {
        stream,
        sizes,
        big,
        tmp,
        ..
    } = *cx;
    let (fsync_s, sqlite_s, append_file_s) = (base.fsync_s, base.sqlite_s, base.append_file_s);
    let mut stored: Vec<(&'static str, String, PathBuf)> = Vec::new();
    for backend in ["jsonl", "sqlite"] {
        let (path, config) = store_at(tmp, "store", backend);
        let store = Store::open(&config);
        for &n in sizes {
            eprintln!("write-behind {backend} {} ...", fmt_n(n));
            let id = format!("s{n}");
            // The floor of the appends' latency, just before them: the
            // kept copy of the same lines ([`kept_copies`]), the second of
            // two passes, so its pages come back from the kernel as warm
            // as the ones the appends will get.
            let floor = (n == big).then(|| {
                kept_copies(&stream.lines[..n]);
                kept_copies(&stream.lines[..n])
            });
            let s = store.create(&id);
            let mut out = Buf::new();
            let mut lat = Vec::with_capacity(n);
            let faults = thread_counts()[0];
            let t = Instant::now();
            for ev in &stream.events[..n] {
                let a = Instant::now();
                s.append(ev, &mut out);
                lat.push(a.elapsed().as_secs_f64());
            }
            let appended = t.elapsed().as_secs_f64();
            let faults = thread_counts()[0] - faults;
            s.flush();
            let total = t.elapsed().as_secs_f64();
            s.close();
            let rate = n as f64 / total;
            let (p50, p99, p999, max) = spread(&mut lat);
            extra.insert(
                format!("writebehind_{backend}_{n}"),
                json!({"events": n, "appendSeconds": appended, "totalSeconds": total,
                       "appendP50": p50, "appendP99": p99, "appendP999": p999, "appendMax": max,
                       "pageFaults": faults}),
            );
            if n == big {
                let (base_s, label, target) = if backend == "jsonl" {
                    (append_file_s, "buffered append+fsync", 250_000.0)
                } else {
                    (sqlite_s, "rusqlite 1 tx", 100_000.0)
                };
                rep.push(
                    row(
                        format!("write-behind {backend}, {} + flush", fmt_n(n)),
                        "wall",
                        rate,
                        "ev/s",
                    )
                    .base(big as f64 / base_s, label)
                    .target(format!("≥ {}k ev/s", target as u64 / 1000), rate >= target)
                    .note(format!(
                        "batchWindowMs 25; appends {appended:.3} s, final flush {:.3} s",
                        total - appended
                    )),
                );
                if backend == "jsonl" {
                    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
                    let f = floor::write_behind_zstd(&stream.lines[..n], base.pa.cpu, cores);
                    rep.push(
                        row(
                            format!("  floor: write-behind to zstd JSONL, {}", fmt_n(n)),
                            "wall",
                            n as f64 / f.seconds,
                            "ev/s",
                        )
                        .base(big as f64 / base_s, label)
                        .note(format!(
                            "(raw parse {:.3} s + keeping each line {:.3} s + zstd level 1 of the same bytes {:.3} s of CPU) over {} cores; the write-behind reaches {:.2} of this floor",
                            base.pa.cpu,
                            f.keep.cpu,
                            f.compress.cpu,
                            f.cores,
                            rate * f.seconds / n as f64
                        )),
                    );
                }
                rep.push(
                    row(
                        format!("  max single append ({backend}, {})", fmt_n(n)),
                        "wall",
                        max,
                        "s",
                    )
                    .base(fsync_s, "one fsync")
                    .target("< one fsync", max < fsync_s)
                    .note(format!(
                        "p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs; the thread's page faults {faults}",
                        p50 * 1e6,
                        p99 * 1e6,
                        p999 * 1e6
                    )),
                );
                let k = floor.expect("measured at the large size");
                extra.insert(format!("keptCopies_{backend}_{n}"), k.json());
                rep.push(
                    row(
                        format!("  kept copies of the lines, max ({backend}, {})", fmt_n(n)),
                        "wall",
                        k.max,
                        "s",
                    )
                    .base(fsync_s, "one fsync")
                    .note(k.note()),
                );
                rep.push(
                    row(
                        format!("  append p99.9 / p50 ({backend}, {})", fmt_n(n)),
                        "wall",
                        p999 / p50,
                        "×",
                    )
                    .base(k.p999 / k.p50, "kept copies' p99.9 / p50")
                    .target("≤ 10×", p999 <= 10.0 * p50),
                );
            }
        }
        store.close();
        extra.insert(format!("storeBytes_{backend}"), json!(dir_size(&path)));
        stored.push((backend, config, path));
    }
    fault_probe(cx, rep, extra);
    stored
}

/// p50, p99, p99.9 and the maximum of `lat` (sorted in place).
fn spread(lat: &mut [f64]) -> (f64, f64, f64, f64) {
    let max = lat.iter().cloned().fold(0.0, f64::max);
    let p99 = percentile(lat, 0.99);
    let p999 = percentile(lat, 0.999);
    (percentile(lat, 0.5), p99, p999, max)
}

/// The floor of an append's latency: each line copied into a new
/// allocation that is kept (as a session keeps its events), timed alone.
struct KeptCopies {
    seconds: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    faults: i64,
}

impl KeptCopies {
    fn json(&self) -> Value {
        json!({"seconds": self.seconds, "p50": self.p50, "p99": self.p99,
               "p999": self.p999, "max": self.max, "pageFaults": self.faults})
    }

    fn note(&self) -> String {
        format!(
            "each line copied into a new allocation that is kept, timed alone (second of two passes, \
             just before the appends): {:.3} s; p50 {:.2} µs, p99 {:.1} µs, p99.9 {:.1} µs; \
             the thread's page faults {}",
            self.seconds,
            self.p50 * 1e6,
            self.p99 * 1e6,
            self.p999 * 1e6,
            self.faults
        )
    }
}

/// Copy each of `lines` into a new kept allocation, each copy timed; the
/// copies are freed at the end, so the next pass gets the pages back.
fn kept_copies(lines: &[&str]) -> KeptCopies {
    let mut kept: Vec<Box<str>> = Vec::with_capacity(lines.len());
    let mut lat = Vec::with_capacity(lines.len());
    let faults = thread_counts()[0];
    let t = Instant::now();
    for line in lines {
        let a = Instant::now();
        kept.push(Box::from(*line));
        lat.push(a.elapsed().as_secs_f64());
    }
    let seconds = t.elapsed().as_secs_f64();
    let faults = thread_counts()[0] - faults;
    std::hint::black_box(&kept);
    drop(kept);
    let (p50, p99, p999, max) = spread(&mut lat);
    KeptCopies {
        seconds,
        p50,
        p99,
        p999,
        max,
        faults,
    }
}

/// Whose counts [`thread_counts`] reads: the calling thread's on Linux
/// (`RUSAGE_THREAD`); elsewhere (macOS) the whole process's, the only
/// scope getrusage has there, so the writer thread's faults and switches
/// count too.
#[cfg(target_os = "linux")]
const RUSAGE_WHO: (libc::c_int, &str) = (libc::RUSAGE_THREAD, "the thread's");
#[cfg(not(target_os = "linux"))]
const RUSAGE_WHO: (libc::c_int, &str) = (
    libc::RUSAGE_SELF,
    "the process's (no per-thread counts here)",
);

/// The calling thread's minor page faults, voluntary context switches
/// (it blocked) and involuntary ones (it was preempted), so far (see
/// [`RUSAGE_WHO`]).
fn thread_counts() -> [i64; 3] {
    // SAFETY: a zeroed rusage is a valid out-parameter for getrusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD or RUSAGE_SELF with a valid, writable rusage.
    unsafe { libc::getrusage(RUSAGE_WHO.0, &mut u) };
    [u.ru_minflt, u.ru_nvcsw, u.ru_nivcsw]
}

/// Run `op(i)` for `i` in `0..n`, each timed alone with the thread's
/// counts ([`thread_counts`]) read around it, outside the timed part.
/// Pushes one row: how many took over 60 µs, their median, and whether
/// each took a page fault, blocked, was preempted, or none of these.
fn slow_ops(
    key: &str,
    name: String,
    what: &'static str,
    n: usize,
    mut op: impl FnMut(usize),
    rep: &mut Report,
    extra: &mut Map<String, Value>,
) {
    let mut slow = Vec::new();
    for i in 0..n {
        let before = thread_counts();
        let a = Instant::now();
        op(i);
        let d = a.elapsed().as_secs_f64();
        if d > 60e-6 {
            let after = thread_counts();
            slow.push((d, [0, 1, 2].map(|k| after[k] - before[k] > 0)));
        }
    }
    let count = |k: usize| slow.iter().filter(|x| x.1[k]).count();
    let (faulted, blocked, preempted) = (count(0), count(1), count(2));
    let none = slow.iter().filter(|x| !x.1.iter().any(|&b| b)).count();
    let mut times: Vec<f64> = slow.iter().map(|x| x.0).collect();
    let typical = if times.is_empty() {
        0.0
    } else {
        median(&mut times)
    };
    extra.insert(
        key.into(),
        json!({"ops": n, "over60us": slow.len(), "pageFault": faulted, "blocked": blocked,
               "preempted": preempted, "none": none, "medianSlowSeconds": typical}),
    );
    rep.push(
        row(name, "wall", slow.len() as f64, what).note(format!(
            "each timed alone, getrusage ({}) read around it: median of the slow ones {:.0} µs; {faulted} took a page fault, {blocked} blocked, {preempted} were preempted, {none} none of these",
            RUSAGE_WHO.1,
            typical * 1e6
        )),
    );
}

/// Where the slow appends go, apart from the figures above (two system
/// calls around each operation): up to 100k appends to a new JSONL session
/// (batchWindowMs 25) and to a memory store (no writer thread, no disk),
/// and as their baseline the same lines copied into memory already
/// resident ([`slow_ops`] for each).
fn fault_probe(cx: &Ctx, rep: &mut Report, extra: &mut Map<String, Value>) {
    let Ctx {
        stream, big, tmp, ..
    } = *cx;
    let n = big.min(100_000);
    let lines = &stream.lines[..n];
    let mut buf = vec![0u8; lines.iter().map(|l| l.len()).sum()];
    buf.fill(1);
    let mut at = 0;
    slow_ops(
        "slowCopyProbe",
        format!("  plain copies of a line over 60 µs ({})", fmt_n(n)),
        "copies",
        n,
        |i| {
            let l = lines[i].as_bytes();
            buf[at..at + l.len()].copy_from_slice(l);
            at += l.len();
        },
        rep,
        extra,
    );
    std::hint::black_box(&buf);
    drop(buf);
    for backend in ["jsonl", "memory"] {
        eprintln!("slow-append probe ({backend}) {} ...", fmt_n(n));
        let config = if backend == "memory" {
            json!({"backend": "memory"}).to_string()
        } else {
            store_at(tmp, "probe", backend).1
        };
        let store = Store::open(&config);
        let s = store.create("bench-probe");
        let mut out = Buf::new();
        slow_ops(
            &format!("slowAppendProbe_{backend}"),
            format!("  appends over 60 µs ({backend}, {})", fmt_n(n)),
            "appends",
            n,
            |i| s.append(&stream.events[i], &mut out),
            rep,
            extra,
        );
        s.close();
        store.close();
    }
}

/// The path of a bench store `<name>-<backend>` (`.db` for SQLite) under
/// the bench's temp dir, and its store config.
fn store_at(tmp: &TempDir, name: &str, backend: &str) -> (PathBuf, String) {
    let path = tmp.0.join(format!("{name}-{backend}"));
    let path = if backend == "sqlite" {
        path.with_extension("db")
    } else {
        path
    };
    // A host that holds sessions long trims the heap after an open: the
    // open and memory figures are measured as such a host sees them.
    let config =
        json!({ "backend": backend, "path": path.to_str().unwrap(), "trimHeap": true }).to_string();
    (path, config)
}
