//! The open figures: each stored session opened in a child process, a
//! fresh address space for clean RSS figures, against the child's own parse.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr;
use std::time::Instant;

use ::dsh_session_ffi::{dsh_session_open, dsh_session_open_windowed};
use serde_json::{json, Map, Value};

use crate::abi::{check, cstr, Buf, Session, Store};
use crate::baselines::parse_raw;
use crate::floor;
use crate::mix::json_bytes;
use crate::report::{fmt_n, row, Report};
use crate::util::{median, proc_status, process_cpu, Secs, Timer};
use crate::Ctx;

// ---------------------------------------------------------------------------
// The open child process: a fresh address space for clean RSS figures
// ---------------------------------------------------------------------------

/// The size of the window the windowed open keeps (events).
pub const WINDOW: usize = 8192;

/// The child's baseline: parse the first `bytes` of the lines file, best
/// of 2; (wall, CPU) seconds. The text is released on return.
fn parse_lines(lines_path: &str, bytes: u64) -> (f64, f64) {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(std::fs::File::open(lines_path).unwrap(), bytes),
        &mut text,
    )
    .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut best = (f64::INFINITY, f64::INFINITY);
    for _ in 0..2 {
        let t = Timer::start();
        let mut sink = 0usize;
        for l in &lines {
            sink = sink.wrapping_add(parse_raw(l).data.get().len());
        }
        std::hint::black_box(sink);
        let d = t.stop();
        best = (best.0.min(d.wall), best.1.min(d.cpu));
    }
    best
}

/// `--child-floor`: in a fresh process of its own (so the open's process
/// is not handed memory the floor faulted in), the raw parse as in
/// [`child_open`], then the open's floor (see `floor`).
/// With `per_event`, the floor that keeps each event apart.
pub fn child_floor(config: &str, id: &str, lines_path: &str, bytes: u64, per_event: bool) {
    let (_, parse_cpu) = parse_lines(lines_path, bytes);
    let (read, kept) = if per_event {
        floor::read_store_per_event(config, id)
    } else {
        floor::read_store(config, id, bytes)
    };
    println!(
        "{}",
        json!({"parse_cpu_s": parse_cpu, "read_cpu_s": read.cpu, "read_wall_s": read.wall, "kept_bytes": kept})
    );
}

pub fn child_open(config: &str, id: &str, lines_path: &str, bytes: u64, window: Option<usize>) {
    // The baseline first: parse the session's n lines (best of 2), then
    // release them before anything is measured for memory.
    let (parse_wall, parse_cpu) = parse_lines(lines_path, bytes);
    let store = Store::open(config);
    // Reset the peak (VmHWM) so it covers the open only, not the
    // baseline parse above (Linux: "5" resets the resident high-water mark).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = proc_status("VmRSS:");
    let cid = cstr(id);
    let mut s = ptr::null_mut();
    let mut out = Buf::new();
    let cpu = process_cpu();
    let t = Instant::now();
    let options = window.map(|w| cstr(&format!(r#"{{"window":{w}}}"#)));
    let st = match &options {
        // SAFETY: valid handle and pointers.
        None => unsafe { dsh_session_open(store.0, cid.as_ptr(), &mut s, out.out()) },
        // SAFETY: as above.
        Some(o) => unsafe {
            dsh_session_open_windowed(store.0, cid.as_ptr(), o.as_ptr(), &mut s, out.out())
        },
    };
    let open_s = t.elapsed().as_secs_f64();
    let open_cpu = process_cpu() - cpu;
    check(st, &out, "dsh_session_open");
    let repaired = serde_json::from_str::<Value>(out.text())
        .ok()
        .and_then(|v| v["repaired"].as_array().map(Vec::len))
        .unwrap_or(0);
    out.free();
    let after = proc_status("VmRSS:");
    let hwm = proc_status("VmHWM:");
    if std::env::var_os("DSH_BENCH_HEAP").is_some() {
        heap_report();
    }
    let session = Session(s);
    let t = Instant::now();
    let derived = session.derive(&mut out);
    let derive_s = t.elapsed().as_secs_f64();
    let after_derive = proc_status("VmRSS:");
    session.close();
    store.close();
    println!(
        "{}",
        json!({
            "open_s": open_s, "open_cpu_s": open_cpu, "parse_wall_s": parse_wall, "parse_cpu_s": parse_cpu,
            "rss_before": before, "rss_after": after, "hwm": hwm,
            "repaired": repaired, "derive_s": derive_s, "derived_bytes": derived,
            "rss_after_derive": after_derive,
        })
    );
}

/// glibc's allocator statistics on stderr (`DSH_BENCH_HEAP`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_report() {
    // SAFETY: mallinfo2 only reads allocator statistics.
    let mi = unsafe { libc::mallinfo2() };
    eprintln!(
        "heap: in use {} MB, free {} MB, mmapped {} MB",
        mi.uordblks >> 20,
        mi.fordblks >> 20,
        mi.hblkhd >> 20
    );
}

/// Elsewhere there is no mallinfo2: the figures are unavailable.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_report() {
    eprintln!("heap: unavailable (mallinfo2 is glibc's)");
}

fn spawn_open(config: &str, id: &str, lines: &Path, bytes: u64, window: Option<usize>) -> Value {
    spawn_child("--child-open", config, id, lines, bytes, window)
}

fn spawn_child(
    flag: &str,
    config: &str,
    id: &str,
    lines: &Path,
    bytes: u64,
    window: Option<usize>,
) -> Value {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([flag, config, id])
        .arg(lines)
        .arg(bytes.to_string())
        .args(window.map(|w| w.to_string()))
        .output()
        .expect("spawn the open child");
    if !out.status.success() {
        panic!(
            "open child failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("")).expect("child output")
}

/// Open every stored session (`(backend, config, path)` from the
/// write-behind figures) at each size in a child process; `lines_path` holds
/// the event lines the child parses for its baseline.
pub fn run(
    cx: &Ctx,
    stored: &[(&'static str, String, PathBuf)],
    lines_path: &Path,
    rep: &mut Report,
    extra: &mut Map<String, Value>,
) {
    let Ctx {
        stream, sizes, big, ..
    } = *cx;
    for (backend, config, _) in stored {
        for &n in sizes {
            eprintln!("open {backend} {} (child process) ...", fmt_n(n));
            let r = spawn_open(
                config,
                &format!("s{n}"),
                lines_path,
                json_bytes(&stream.lines, n),
                None,
            );
            let open_s = r["open_s"].as_f64().unwrap();
            let open_cpu = r["open_cpu_s"].as_f64().unwrap();
            // Baseline: the child's own parse of the same n lines, just before the open.
            let p = Secs {
                wall: r["parse_wall_s"].as_f64().unwrap(),
                cpu: r["parse_cpu_s"].as_f64().unwrap(),
            };
            let ratio = open_cpu / p.cpu;
            rep.push(
                row(format!("open {backend} {}", fmt_n(n)), "cpu", open_cpu, "s")
                    .base(p.cpu, format!("raw parse {}, same process", fmt_n(n)))
                    .target("≤ 2.0×", ratio <= 2.0)
                    .note(format!(
                        "dsh_session_open in a fresh process (CPU of all its threads); repair appended {}; first derive after open {:.3} s",
                        r["repaired"],
                        r["derive_s"].as_f64().unwrap_or(0.0)
                    )),
            );
            let mut wall = row(
                format!("  open {backend} {}, elapsed", fmt_n(n)),
                "wall",
                open_s,
                "s",
            )
            .base(p.wall, format!("raw parse {}, same process", fmt_n(n)));
            if n == 100_000 {
                wall = wall.target("≤ 0.3 s", open_s <= 0.3);
            }
            rep.push(wall);
            let f = spawn_child(
                "--child-floor",
                config,
                &format!("s{n}"),
                lines_path,
                json_bytes(&stream.lines, n),
                None,
            );
            let read = f["read_cpu_s"].as_f64().unwrap();
            let fp = f["parse_cpu_s"].as_f64().unwrap();
            let floor_s = read + fp;
            // A sixth argument asks the floor child to keep events apart.
            let apart = spawn_child(
                "--child-floor",
                config,
                &format!("s{n}"),
                lines_path,
                json_bytes(&stream.lines, n),
                Some(1),
            );
            let apart_read = apart["read_cpu_s"].as_f64().unwrap();
            let apart_fp = apart["parse_cpu_s"].as_f64().unwrap();
            let apart_s = apart_read + apart_fp;
            rep.push(
                row(
                    format!("  floor: read + decompress the store + raw parse, {backend} {}", fmt_n(n)),
                    "cpu",
                    floor_s,
                    "s",
                )
                .base(fp, format!("raw parse {}, same process", fmt_n(n)))
                .note(format!(
                    "the least an open that checks what it loads costs, in a fresh process of its own: reading and decompressing every stored byte ({:.1} MB kept) took {:.2} ms; the open costs {:.2}× this floor (each against its own process's raw parse)",
                    f["kept_bytes"].as_f64().unwrap_or(0.0) / 1e6,
                    read * 1e3,
                    (open_cpu / p.cpu) / (floor_s / fp)
                )),
            );
            rep.push(
                row(
                    format!("  floor, each event kept apart, {backend} {}", fmt_n(n)),
                    "cpu",
                    apart_s,
                    "s",
                )
                .base(apart_fp, format!("raw parse {}, same process", fmt_n(n)))
                .note(format!(
                    "the same reading and decompressing into a reused buffer, each event's bytes then copied into an allocation of its own, as a session keeps them ({:.1} MB kept), in a fresh process of its own: {:.2} ms; the open costs {:.2}× this floor",
                    apart["kept_bytes"].as_f64().unwrap_or(0.0) / 1e6,
                    apart_read * 1e3,
                    (open_cpu / p.cpu) / (apart_s / apart_fp)
                )),
            );
            let bytes = json_bytes(&stream.lines, n) as f64;
            let rss =
                (r["rss_after"].as_f64().unwrap() - r["rss_before"].as_f64().unwrap()).max(0.0);
            let ratio = rss / bytes;
            rep.push(
                row(
                    format!("  RSS growth by open, {backend} {}", fmt_n(n)),
                    "—",
                    rss,
                    "B",
                )
                .base(bytes, "log JSON")
                .target("≤ 1.2×", ratio <= 1.2)
                .note(format!(
                    "VmRSS after open {:.1} MB; child peak (VmHWM) at open {:.1} MB",
                    r["rss_after"].as_f64().unwrap() / 1e6,
                    r["hwm"].as_f64().unwrap() / 1e6
                )),
            );
            if n == big {
                let hwm = r["hwm"].as_f64().unwrap();
                rep.push(
                    row(
                        format!("  peak RSS of the open process, {backend} {}", fmt_n(n)),
                        "—",
                        hwm,
                        "B",
                    )
                    .base(bytes, "log JSON")
                    .note("VmHWM after dsh_session_open, before the first derive"),
                );
            }
            if n >= 100_000 {
                windowed(cx, backend, config, n, lines_path, &r, rep, extra);
            }
            extra.insert(format!("open_{backend}_{n}"), r);
        }
    }
}

/// The windowed open of the same session: its time against the full
/// open's (`full`, a child process just before), resident memory after
/// it (target "far below" the full open's 1.2×, read as ≤ 0.1× at 1M).
#[allow(clippy::too_many_arguments)]
fn windowed(
    cx: &Ctx,
    backend: &str,
    config: &str,
    n: usize,
    lines_path: &Path,
    full: &Value,
    rep: &mut Report,
    extra: &mut Map<String, Value>,
) {
    eprintln!("open windowed {backend} {} (child process) ...", fmt_n(n));
    let bytes = json_bytes(&cx.stream.lines, n);
    let r = spawn_open(config, &format!("s{n}"), lines_path, bytes, Some(WINDOW));
    let rss = (r["rss_after"].as_f64().unwrap() - r["rss_before"].as_f64().unwrap()).max(0.0);
    let ratio = rss / bytes as f64;
    let mut row_rss = row(
        format!("open windowed {backend} {}: RSS growth", fmt_n(n)),
        "—",
        rss,
        "B",
    )
    .base(bytes as f64, "log JSON")
    .note(format!(
        "dsh_session_open_windowed, window {WINDOW} events; open took {:.3} s CPU, {:.3} s elapsed; peak (VmHWM) {:.1} MB; a full derive after it (reading old chunks back) {:.3} s, VmRSS then {:.1} MB",
        r["open_cpu_s"].as_f64().unwrap(),
        r["open_s"].as_f64().unwrap(),
        r["hwm"].as_f64().unwrap() / 1e6,
        r["derive_s"].as_f64().unwrap_or(0.0),
        r["rss_after_derive"].as_f64().unwrap_or(0.0) / 1e6,
    ));
    if n >= 1_000_000 {
        row_rss = row_rss.target("≤ 0.1× (far below 1.2×)", ratio <= 0.1);
    }
    // Time: full and windowed opens of the same session, alternating,
    // five each up to 100k and three at 1M (the first windowed one is `r`
    // above, the first full one `full`), medians: one pair alone moves by
    // ±20 % on this machine, a median of three by about ±10 %.
    let rounds = if n <= 100_000 { 5 } else { 3 };
    let secs = |v: &Value| {
        (
            v["open_s"].as_f64().unwrap(),
            v["open_cpu_s"].as_f64().unwrap(),
        )
    };
    let (mut f, mut w) = (vec![secs(full)], vec![secs(&r)]);
    for _ in 1..rounds {
        f.push(secs(&spawn_open(
            config,
            &format!("s{n}"),
            lines_path,
            bytes,
            None,
        )));
        w.push(secs(&spawn_open(
            config,
            &format!("s{n}"),
            lines_path,
            bytes,
            Some(WINDOW),
        )));
    }
    let med = |v: &[(f64, f64)], cpu: bool| {
        median(
            &mut v
                .iter()
                .map(|p| if cpu { p.1 } else { p.0 })
                .collect::<Vec<_>>(),
        )
    };
    let (f_wall, f_cpu, w_wall, w_cpu) =
        (med(&f, false), med(&f, true), med(&w, false), med(&w, true));
    rep.push(
        row(format!("open windowed {backend} {} vs full, elapsed", fmt_n(n)), "wall", w_wall, "s")
            .base(f_wall, "full open, same session, interleaved")
            .target("≤ 1.1×", w_wall <= 1.1 * f_wall)
            .note(format!(
                "medians of {rounds} alternating fresh child processes each; CPU {w_cpu:.3} s against {f_cpu:.3} s ({:.2}×)",
                w_cpu / f_cpu
            )),
    );
    rep.push(row_rss);
    rep.push(
        row(
            format!("  peak RSS of the windowed open process, {backend} {}", fmt_n(n)),
            "—",
            r["hwm"].as_f64().unwrap(),
            "B",
        )
        .base(bytes as f64, "log JSON")
        .note("VmHWM after dsh_session_open_windowed (JSONL streams the log; SQLite reads it whole, then evicts)"),
    );
    extra.insert(format!("open_windowed_{backend}_{n}"), r);
}
