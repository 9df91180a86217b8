//! Baselines: raw computations over the same bytes in the same process
//! (serde_json parses, fsync, rusqlite insert, buffered file append).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use crate::report::{fmt_n, row, Report};
use crate::util::{median, Secs, Timer};
use crate::Ctx;

// ---------------------------------------------------------------------------
// Baseline (a): borrowed-raw parse of each full event line
// ---------------------------------------------------------------------------

/// Baseline (a): one event line with `data` borrowed raw, the cheapest
/// validating serde_json parse of the same bytes.
#[derive(serde::Deserialize)]
#[allow(dead_code)]
pub struct RawEvent<'a> {
    #[serde(rename = "type")]
    pub ty: &'a str,
    pub seq: u64,
    pub time: i64,
    #[serde(borrow)]
    pub data: &'a serde_json::value::RawValue,
}

pub fn parse_raw(line: &str) -> RawEvent<'_> {
    serde_json::from_str(line).expect("generated line parses")
}

/// Parse the first `checkpoints.last()` lines `reps` times; for each
/// checkpoint, the best wall and the best CPU time to parse that many lines.
fn time_parse(
    lines: &[&str],
    checkpoints: &[usize],
    reps: usize,
    parse: impl Fn(&str) -> usize,
) -> Vec<Secs> {
    let mut best = vec![
        Secs {
            wall: f64::INFINITY,
            cpu: f64::INFINITY
        };
        checkpoints.len()
    ];
    let mut sink = 0usize;
    for _ in 0..reps {
        let t = Timer::start();
        let mut k = 0;
        for (i, l) in lines[..*checkpoints.last().unwrap()].iter().enumerate() {
            sink = sink.wrapping_add(parse(l));
            if i + 1 == checkpoints[k] {
                let d = t.stop();
                best[k].wall = best[k].wall.min(d.wall);
                best[k].cpu = best[k].cpu.min(d.cpu);
                k += 1;
            }
        }
    }
    std::hint::black_box(sink);
    best
}

/// One fsync of a small write, `n` times; the median in seconds.
fn fsync_median(dir: &Path, n: usize) -> f64 {
    let path = dir.join("fsync.bin");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        f.write_all(format!("{{\"i\":{i}}}\n").as_bytes()).unwrap();
        let t = Instant::now();
        f.sync_all().unwrap();
        times.push(t.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_file(&path);
    median(&mut times)
}

/// Baseline (b): one rusqlite transaction inserting the lines, WAL and
/// synchronous=FULL as the SQLite backend configures; seconds including commit.
fn sqlite_insert(dir: &Path, lines: &[&str]) -> f64 {
    let path = dir.join("baseline.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    conn.execute_batch("PRAGMA synchronous = FULL; CREATE TABLE events (seq INTEGER PRIMARY KEY, data TEXT NOT NULL);")
        .unwrap();
    let mut conn = conn;
    let t = Instant::now();
    let tx = conn.transaction().unwrap();
    {
        let mut st = tx
            .prepare("INSERT INTO events (seq, data) VALUES (?1, ?2)")
            .unwrap();
        for (i, l) in lines.iter().enumerate() {
            st.execute(rusqlite::params![i as i64, l]).unwrap();
        }
    }
    tx.commit().unwrap();
    let secs = t.elapsed().as_secs_f64();
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    secs
}

/// Baseline (c): buffered append of the lines to `path`, then one fsync.
/// The file stays: the open children parse their baseline from it.
fn file_append(path: &Path, lines: &[&str]) -> f64 {
    let t = Instant::now();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    for l in lines {
        w.write_all(l.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
    }
    let f = w.into_inner().unwrap();
    f.sync_all().unwrap();
    t.elapsed().as_secs_f64()
}

/// What the baselines measured, for the figures compared against them.
pub struct Baselines {
    /// Borrowed-raw parse of the first n lines, for each size (best of 3).
    pub parse_raw_s: Vec<Secs>,
    /// `serde_json::Value` parse of the first n lines, for each size (best of 1).
    pub parse_value_s: Vec<Secs>,
    /// Baseline (a) at the largest size.
    pub pa: Secs,
    /// Baseline (d): the median of one fsync, in seconds.
    pub fsync_s: f64,
    /// Baseline (b) in seconds; NaN when not run.
    pub sqlite_s: f64,
    /// Baseline (c) in seconds; NaN when not run.
    pub append_file_s: f64,
    /// The file baseline (c) appends to; the open children parse it.
    pub lines_path: PathBuf,
}

/// The label of baseline (a) at `n` events.
pub fn raw_label(n: usize) -> String {
    format!("raw parse {}", fmt_n(n))
}

/// Measure the baselines and push their rows; `files` also runs (b) and
/// (c), which the write-behind and open figures compare against.
pub fn run(cx: &Ctx, files: bool, rep: &mut Report) -> Baselines {
    let Ctx {
        stream,
        sizes,
        big,
        total_bytes,
        tmp,
    } = *cx;
    eprintln!("baselines ...");
    let parse_raw_s = time_parse(&stream.lines, sizes, 3, |l| {
        let e = parse_raw(l);
        e.data.get().len() + e.seq as usize
    });
    let parse_value_s = time_parse(&stream.lines, sizes, 1, |l| {
        let v: Value = serde_json::from_str(l).expect("generated line parses");
        v.as_object().map_or(0, |o| o.len())
    });
    // Baseline (a) for each size: the borrowed-raw parse time of n lines.
    let parse_at = |n: usize| parse_raw_s[sizes.iter().position(|&s| s == n).unwrap()];
    let pa = parse_at(big);
    let parse_rate = big as f64 / pa.cpu;
    rep.push(
        row(
            format!("baseline (a) borrowed-raw parse, {}", fmt_n(big)),
            "cpu",
            parse_rate,
            "ev/s",
        )
        .note(format!(
            "serde_json into {{type, seq, time, data: &RawValue}}, best of 3; {:.0} MB/s CPU, {:.1}k ev/s wall",
            total_bytes as f64 / pa.cpu / 1e6,
            big as f64 / pa.wall / 1e3
        )),
    );
    let pv = parse_value_s[sizes.len() - 1];
    rep.push(
        row(
            format!("baseline serde_json::Value parse, {}", fmt_n(big)),
            "cpu",
            big as f64 / pv.cpu,
            "ev/s",
        )
        .base(parse_rate, "raw parse")
        .note("full DOM parse (preserve_order), best of 1; context only"),
    );
    let fsync_s = fsync_median(&tmp.0, 50);
    rep.push(row(
        "baseline (d) one fsync, p50 of 50",
        "wall",
        fsync_s,
        "s",
    ));
    let lines_path = tmp.0.join("lines.jsonl");
    let (sqlite_s, append_file_s) = if files {
        let a = sqlite_insert(&tmp.0, &stream.lines[..big]);
        let b = file_append(&lines_path, &stream.lines[..big]);
        rep.push(
            row(
                format!("baseline (b) rusqlite 1 tx insert, {}", fmt_n(big)),
                "wall",
                big as f64 / a,
                "ev/s",
            )
            .note(format!("{a:.3} s incl. commit, WAL, synchronous=FULL")),
        );
        rep.push(
            row(
                format!("baseline (c) buffered append + fsync, {}", fmt_n(big)),
                "wall",
                big as f64 / b,
                "ev/s",
            )
            .note(format!("{b:.3} s")),
        );
        (a, b)
    } else {
        (f64::NAN, f64::NAN)
    };
    Baselines {
        parse_raw_s,
        parse_value_s,
        pa,
        fsync_s,
        sqlite_s,
        append_file_s,
        lines_path,
    }
}
