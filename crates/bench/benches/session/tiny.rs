//! Memory per small event: a streaming agent writes one `assistant/chunk`
//! per token delta, about 113 bytes of JSON each, so the fixed cost of an
//! event dominates its session. Measured in a child process of its own
//! (nothing else resident): the growth of resident memory over 1M such
//! appends to a memory store, per byte of their JSON, and the CPU of the
//! first and the last 10k appends (the per-append cost stays flat).

use std::ffi::CString;
use std::process::Command;

use serde_json::{json, Map, Value};

use crate::abi::{Buf, Store};
use crate::mix::Ev;
use crate::report::{fmt_n, row, Report};
use crate::util::{median, proc_status, process_cpu};

/// Events appended (the issue's figure: 1M tiny chunks).
const EVENTS: usize = 1_000_000;

/// Appends timed at each end, in blocks of [`BLOCK`] (the median block
/// counts: one page-fault burst or preemption moves a sum).
const ENDS: usize = 10_000;
const BLOCK: usize = 1_000;

/// The child: append `n` tiny chunk events and print what it measured.
pub fn child(n: usize) {
    let before = proc_status("VmRSS:");
    let store = Store::open(r#"{"backend":"memory"}"#);
    let s = store.create("tiny");
    let mut out = Buf::new();
    let ev = |ty: &'static std::ffi::CStr, data: String| Ev {
        ty,
        data: CString::new(data).unwrap(),
        intent: None,
    };
    s.append(&ev(c"turn/start", r#"{"turn":1}"#.into()), &mut out);
    s.append(
        &ev(c"step/start", r#"{"turn":1,"step":1}"#.into()),
        &mut out,
    );
    let mut json_bytes = 0usize;
    let (mut first, mut last) = (Vec::new(), Vec::new());
    let mut block_start = process_cpu();
    for i in 0..n {
        let data = format!(
            r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"t{}"}}}}"#,
            i % 1000
        );
        // The stored event: the envelope around the data.
        json_bytes += data.len()
            + r#"{"type":"assistant/chunk","seq":,"time":1796000000000,"data":}"#.len()
            + (i + 2).to_string().len();
        let e = ev(c"assistant/chunk", data);
        if i % BLOCK == 0 {
            block_start = process_cpu();
        }
        s.append(&e, &mut out);
        if i % BLOCK == BLOCK - 1 {
            let block = process_cpu() - block_start;
            if i < ENDS {
                first.push(block);
            } else if i >= n - ENDS {
                last.push(block);
            }
        }
    }
    let per_end = (ENDS / BLOCK) as f64;
    let (first, last) = (median(&mut first) * per_end, median(&mut last) * per_end);
    let after = proc_status("VmRSS:");
    println!(
        "{}",
        json!({"rss": after - before, "json": json_bytes, "first": first, "last": last})
    );
    s.close();
    store.close();
}

/// Run the child and report its rows.
pub fn run(rep: &mut Report, extra: &mut Map<String, Value>) {
    eprintln!("memory per tiny chunk event, {} events ...", fmt_n(EVENTS));
    // Three children; the medians (the ends' CPU moves ±50 % between
    // runs on this VM).
    let runs: Vec<Value> = (0..3)
        .map(|_| {
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--child-tiny", &EVENTS.to_string()])
                .output()
                .expect("spawn the tiny-events child");
            assert!(
                out.status.success(),
                "tiny-events child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    let mid = |key: &str| {
        median(
            &mut runs
                .iter()
                .map(|v| v[key].as_f64().unwrap())
                .collect::<Vec<_>>(),
        )
    };
    let (rss, bytes) = (mid("rss"), mid("json"));
    let (first, last) = (mid("first"), mid("last"));
    let v = Value::Array(runs);
    rep.push(
        row(
            format!(
                "RSS growth, {} tiny chunk events (memory store)",
                fmt_n(EVENTS)
            ),
            "—",
            rss,
            "B",
        )
        .base(bytes, "their JSON")
        .target("≤ 1.5×", rss <= 1.5 * bytes)
        .note(format!(
            "{:.0} B of JSON an event, {:.0} B resident an event",
            bytes / EVENTS as f64,
            rss / EVENTS as f64
        )),
    );
    rep.push(
        row(
            format!(
                "  last 10k appends vs first 10k ({} tiny events)",
                fmt_n(EVENTS)
            ),
            "cpu",
            last,
            "s",
        )
        .base(first, "the first 10k")
        .note("median block of 1000 at each end, times 10; median of 3 children")
        .target("≤ 1.5× (flat)", last <= 1.5 * first),
    );
    extra.insert("tinyEvents".into(), v);
}
