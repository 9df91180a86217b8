//! The dsh-session benchmark program (`cargo bench --bench session`).
//!
//! Everything is measured through the public C ABI (`dsh_session_ffi`),
//! exactly as a C host would call it, next to raw baselines computed in the
//! same process over the same bytes. See docs/performance.md.
//!
//! ```text
//! cargo bench --bench session                      # 10k / 100k / 1M events
//! cargo bench --bench session -- --quick           # 10k / 100k events
//! cargo bench --bench session -- --json out.json   # default target/bench/session.json
//! cargo bench --bench session -- --only append,derive,fork
//! ```
//!
//! Phases (names for `--only`): `baseline`, `append`, `admission`, `batch`, `derive`,
//! `fork`, `flush`, `concurrent`, `size`, `tiny`, `writebehind`, `open`, `postgres` (needs a server:
//! `DSH_BENCH_POSTGRES_URL`). `derive` and `fork` run on the
//! session built by `append`; `open` opens the sessions stored by
//! `writebehind`, so selecting them runs their producer too. The program
//! is a measurement, not a test: it exits 0 whether targets are met or not.
//!
//! Modules: `abi` (C ABI wrappers), `mix` (the event generator), `util`
//! (timing, RSS, machine), `baselines`, the figures (`append`, `derive`,
//! `disk`, `open`) and `report` (the table and JSON rows).

mod abi;
mod append;
mod baselines;
mod concurrent;
mod derive;
mod disk;
mod floor;
mod mix;
mod open;
mod postgres;
mod report;
mod size;
mod tiny;
mod util;
mod zstd_floor;

use std::ffi::CStr;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use ::dsh_session_ffi::dsh_version;
use serde_json::{json, Value};

use crate::baselines::Baselines;
use crate::mix::{generate, json_bytes, Stream};
use crate::report::{fmt_n, row, Report};
use crate::util::{loadavg, machine, proc_status, tree, Secs, TempDir};

/// What every figure reads: the generated stream, the sizes measured and
/// the scratch directory.
pub struct Ctx<'a> {
    pub stream: &'a Stream,
    pub sizes: &'a [usize],
    /// The largest size, the one most figures are measured at.
    pub big: usize,
    /// The bytes of the first `big` events as stored in JSONL.
    pub total_bytes: u64,
    pub tmp: &'a TempDir,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child-open") {
        let window = args.get(5).map(|w| w.parse().unwrap());
        open::child_open(
            &args[1],
            &args[2],
            &args[3],
            args[4].parse().unwrap(),
            window,
        );
        return;
    }
    if args.first().map(String::as_str) == Some("--child-tiny") {
        tiny::child(args[1].parse().unwrap());
        return;
    }
    if args.first().map(String::as_str) == Some("--child-floor") {
        open::child_floor(
            &args[1],
            &args[2],
            &args[3],
            args[4].parse().unwrap(),
            // Any sixth argument: the floor that keeps each event apart.
            args.get(5).is_some(),
        );
        return;
    }
    if args.is_empty() {
        // `cargo bench` passes `--bench`; `cargo test --benches` passes
        // nothing. The benchmark stays out of the test suite.
        eprintln!("dsh-session benchmark: run it with `cargo bench --bench session [-- --quick]`");
        return;
    }
    let mut quick = false;
    let mut json_path = PathBuf::from("target/bench/session.json");
    let mut only: Option<Vec<String>> = None;
    let mut dump: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--json" => json_path = PathBuf::from(it.next().expect("--json PATH")),
            "--only" => {
                only = Some(
                    it.next()
                        .expect("--only NAME,...")
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .collect(),
                )
            }
            "--dump-lines" => dump = Some(PathBuf::from(it.next().expect("--dump-lines PATH"))),
            "--bench" => {} // cargo passes it to harness = false benches
            other if other.starts_with("--") => eprintln!("ignoring unknown flag {other}"),
            _ => {}
        }
    }
    let want = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let run_append = want("append") || want("derive") || want("fork");
    let run_wb = want("writebehind") || want("open");

    let started = Instant::now();
    let sizes: Vec<usize> = if quick {
        vec![10_000, 100_000]
    } else {
        vec![10_000, 100_000, 1_000_000]
    };
    let big = *sizes.last().unwrap();
    // SAFETY: a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(dsh_version()) }
        .to_string_lossy()
        .into_owned();
    let tmp = TempDir(std::env::temp_dir().join(format!("dsh-bench-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let machine = machine();
    let load_start = loadavg();
    let tree = tree();
    eprintln!(
        "dsh-session {version} benchmark: sizes {:?}, {} cores, {}",
        sizes,
        machine["nproc"],
        machine["cpu"].as_str().unwrap_or("")
    );

    // ---- generate -------------------------------------------------------
    let t = Instant::now();
    let stream = generate(big + 4_000);
    let gen_s = t.elapsed().as_secs_f64();
    let total_bytes = json_bytes(&stream.lines, big);
    let chunks = stream.events[..big]
        .iter()
        .filter(|e| e.ty == c"assistant/chunk")
        .count();
    let tool_bytes: u64 = stream.events[..big]
        .iter()
        .zip(&stream.lines)
        .filter(|(e, _)| e.ty == c"tool/result")
        .map(|(_, l)| l.len() as u64 + 1)
        .sum();
    let turns = stream.turn_ends.partition_point(|&i| i < big);
    let mut by_type: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for (e, l) in stream.events[..big].iter().zip(&stream.lines) {
        let slot = by_type
            .entry(e.ty.to_string_lossy().into_owned())
            .or_default();
        slot.0 += 1;
        slot.1 += l.len() as u64 + 1;
    }
    let by_type: serde_json::Map<String, Value> = by_type
        .into_iter()
        .map(|(k, (n, b))| (k, json!({"events": n, "bytes": b})))
        .collect();
    let mix = json!({
        "events": big,
        "bytes": total_bytes,
        "bytesPerEvent": total_bytes as f64 / big as f64,
        "chunkShareByCount": chunks as f64 / big as f64,
        "toolResultShareOfBytes": tool_bytes as f64 / total_bytes as f64,
        "turns": turns,
        "compactions": turns / 50,
        "surfaceMessages": stream.surface_at(big),
        "byType": by_type,
    });
    eprintln!(
        "generated {} events in {:.1} s: {:.0} B/event ({:.2} GB), {:.1}% assistant/chunk by count, {:.1}% of bytes in tool/result, {} turns, {} compactions, {} messages on the surface",
        big,
        gen_s,
        total_bytes as f64 / big as f64,
        total_bytes as f64 / 1e9,
        100.0 * chunks as f64 / big as f64,
        100.0 * tool_bytes as f64 / total_bytes as f64,
        turns,
        turns / 50,
        stream.surface_at(big)
    );

    if let Some(path) = dump {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for l in &stream.lines[..big] {
            w.write_all(l.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
        }
        w.flush().unwrap();
        eprintln!("wrote the {} event lines to {}", big, path.display());
        return;
    }

    let mut rep = Report { rows: Vec::new() };
    let mut extra = serde_json::Map::new();

    let cx = Ctx {
        stream: &stream,
        sizes: &sizes,
        big,
        total_bytes,
        tmp: &tmp,
    };

    // ---- baselines ------------------------------------------------------
    let base = baselines::run(&cx, run_wb || want("baseline"), &mut rep);

    // ---- append (memory store) + full derive + per-step derive + fork --
    if run_append {
        append::run(
            &cx,
            want("derive"),
            want("fork"),
            &base,
            &mut rep,
            &mut extra,
        );
    }

    // ---- strict vs reference admission ----------------------------------
    if want("admission") {
        append::admission(&cx, &mut rep, &mut extra);
    }

    // ---- append_batch --------------------------------------------------
    if want("batch") {
        append::batch(&cx, &mut rep, &mut extra);
    }

    // ---- flush latency --------------------------------------------------
    if want("concurrent") {
        concurrent::concurrent(&cx, quick, &mut rep, &mut extra);
    }
    if want("flush") {
        disk::flush(&cx, &mut rep, &mut extra);
    }

    // ---- jsonl size written per step against zstd -3 --------------------
    if want("size") {
        size::run(&cx, &mut rep, &mut extra);
    }

    // ---- resident memory per tiny chunk event ----------------------------
    if want("tiny") {
        tiny::run(&mut rep, &mut extra);
    }

    // ---- write-behind throughput + stored sessions for open -------------
    let stored = if run_wb {
        disk::write_behind(&cx, &base, &mut rep, &mut extra)
    } else {
        Vec::new()
    };

    // ---- PostgreSQL against raw statements on the same server -----------
    if want("postgres") {
        postgres::run(&cx, &mut rep, &mut extra);
    }

    // ---- open (child processes) ------------------------------------------
    if want("open") {
        open::run(&cx, &stored, &base.lines_path, &mut rep, &mut extra);
    }

    let Baselines {
        parse_raw_s,
        parse_value_s,
        fsync_s,
        sqlite_s,
        append_file_s,
        ..
    } = base;
    let hwm = proc_status("VmHWM:") as f64;
    rep.push(
        row("peak RSS of the bench process (VmHWM)", "—", hwm, "B")
            .base(total_bytes as f64, format!("log JSON {}", fmt_n(big)))
            .note("includes the generated events, the baseline lines and the in-memory sessions"),
    );

    let elapsed = started.elapsed().as_secs_f64();
    let table = rep.table();
    println!();
    println!(
        "dsh-session {version}: {} ({} cores), sizes {}, mix {:.0} B/event, {:.1}% chunks, {:.1}% bytes in tool/result",
        machine["cpu"].as_str().unwrap_or(""),
        machine["nproc"],
        sizes.iter().map(|&n| fmt_n(n)).collect::<Vec<_>>().join("/"),
        total_bytes as f64 / big as f64,
        100.0 * chunks as f64 / big as f64,
        100.0 * tool_bytes as f64 / total_bytes as f64
    );
    println!("clock: cpu = CPU time of the calling thread (open: of the whole child process), wall = elapsed");
    println!();
    print!("{table}");
    println!();
    for r in &rep.rows {
        if !r.note.is_empty() {
            println!("{}: {}", r.name.trim(), r.note);
        }
    }
    println!();
    println!(
        "total run time {elapsed:.1} s; load average at start {load_start}, at end {}",
        loadavg()
    );
    println!(
        "tree: {} (changed under src/: {})",
        tree["head"].as_str().unwrap_or("?"),
        tree["changedUnderSrc"]
            .as_array()
            .map_or("?".into(), |a| if a.is_empty() {
                "none".to_string()
            } else {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
    );

    let secs_list = |v: &[Secs]| {
        sizes
            .iter()
            .zip(v)
            .map(|(n, s)| json!({"events": n, "wall": s.wall, "cpu": s.cpu}))
            .collect::<Vec<_>>()
    };
    let report = json!({
        "version": version,
        "machine": machine,
        "tree": tree,
        "quick": quick,
        "sizes": sizes,
        "mix": mix,
        "generateSeconds": gen_s,
        "baselines": {
            "parseRawSeconds": secs_list(&parse_raw_s),
            "parseValueSeconds": secs_list(&parse_value_s),
            "fsyncP50Seconds": fsync_s,
            "sqliteInsertSeconds": if sqlite_s.is_nan() { Value::Null } else { json!(sqlite_s) },
            "fileAppendSeconds": if append_file_s.is_nan() { Value::Null } else { json!(append_file_s) },
        },
        "figures": rep.json(),
        "details": extra,
        "table": table,
        "runSeconds": elapsed,
        "loadavgStart": load_start,
        "loadavgEnd": loadavg(),
    });
    if let Some(parent) = json_path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("wrote {}", json_path.display());
}
