//! The on-disk size figure: a JSONL (zstd) log written with a flush after
//! every step, against `zstd -3` of the same lines in one frame.

use serde_json::{json, Map, Value};

use crate::abi::{Buf, Store};
use crate::report::{fmt_n, row, Report};
use crate::Ctx;

/// Events written (the agent path of a long session, flushed per step).
const EVENTS: usize = 15_000;

/// Bytes this process has had written to storage so far
/// (`/proc/self/io`), when the kernel counts them.
fn written_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

/// Write `EVENTS` events with a flush at each step and turn end; compare
/// the log's size while the session is open and after its close with
/// `zstd -3` of the log's text.
pub fn run(cx: &Ctx, rep: &mut Report, extra: &mut Map<String, Value>) {
    let n = EVENTS.min(cx.big);
    eprintln!("jsonl size, {} events flushed per step ...", fmt_n(n));
    let dir = cx.tmp.0.join("size-jsonl");
    let config = json!({ "backend": "jsonl", "path": dir.to_str().unwrap() }).to_string();
    let store = Store::open(&config);
    let s = store.create("bench-size");
    let mut out = Buf::new();
    // Where each flush ends (exclusive), for the floor below.
    let mut ends = Vec::new();
    let written_before = written_bytes();
    for (i, ev) in cx.stream.events[..n].iter().enumerate() {
        s.append(ev, &mut out);
        if ev.ty == c"step/end" || ev.ty == c"turn/end" {
            s.flush();
            ends.push(i + 1);
        }
    }
    let flushes = ends.len();
    s.flush();
    if ends.last() != Some(&n) {
        ends.push(n);
    }
    let log = dir.join("_no-cwd/bench-size/session.jsonl.zstd");
    let open_bytes = std::fs::metadata(&log).unwrap().len();
    s.close();
    store.close();
    let written = written_bytes()
        .zip(written_before)
        .map(|(after, before)| after - before);
    let bytes = std::fs::read(&log).unwrap();
    // The log's text: every frame decoded in order, as a reader does.
    let text = zstd::stream::decode_all(&bytes[..]).unwrap();
    let floor = zstd::bulk::compress(&text, 3).unwrap().len() as f64;
    let closed = bytes.len() as f64;
    extra.insert(
        "jsonlSize".into(),
        json!({"events": n, "flushes": flushes, "text": text.len(), "zstd3": floor,
               "open": open_bytes, "closed": closed, "written": written}),
    );
    rep.push(
        row(
            format!("jsonl log size, {} events flushed per step", fmt_n(n)),
            "—",
            closed,
            "B",
        )
        .base(floor, "zstd -3 of the same lines")
        .target("≤ 1.2×", closed <= 1.2 * floor)
        .note(format!(
            "{flushes} flushes; {open_bytes} B while the session is open ({:.2}×), {} B of text",
            open_bytes as f64 / floor,
            text.len(),
        )),
    );
    // The flushes' own frames, over the same lines the session flushed.
    let groups: Vec<_> = ends
        .iter()
        .scan(0, |from, &end| {
            Some(&cx.stream.lines[std::mem::replace(from, end)..end])
        })
        .collect();
    let frame_count = groups.len();
    let frames = crate::zstd_floor::flush_frames(groups.into_iter());
    match written {
        Some(w) => rep.push(
            row(
                format!("  bytes written over the session, {}", fmt_n(n)),
                "—",
                w as f64,
                "B",
            )
            .base(closed, "the final log")
            .target("≤ 3×", w as f64 <= 3.0 * closed)
            .note("/proc/self/io write_bytes over the appends, flushes, merges and the close"),
        ),
        None => eprintln!("  bytes written over the session: not counted here (no /proc/self/io)"),
    }
    rep.push(
        row(
            "    floor: every flush's frame + the final log once",
            "—",
            (frames as f64) + closed,
            "B",
        )
        .base(closed, "the final log")
        .note(format!(
            "the {frame_count} flushes' lines each compressed alone at level 1: {frames} B; \
             a log that ends in long frames writes them at least once more"
        )),
    );
    if std::env::var_os("DSH_BENCH_KEEP").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
