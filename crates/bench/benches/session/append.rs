//! The in-memory append figures: `dsh_session_append` against the
//! interleaved raw parse, the first full derive, fork, and `append_batch`.

use std::ffi::CString;
use std::fmt::Write as _;
use std::ptr;

use ::dsh_session_ffi::{dsh_session_append_batch, dsh_session_fork, DSH_OK};
use serde_json::{json, Map, Value};

use crate::abi::{check, cstr, Buf, Session, Store};
use crate::baselines::{parse_raw, raw_label, Baselines};
use crate::derive::{self, append_until};
use crate::floor;
use crate::mix::Ev;
use crate::report::{fmt_n, row, Report};
use crate::util::{median_secs, Secs, Timer};
use crate::Ctx;

/// Build the `dsh_session_append_batch` text of `evs`.
fn batch_text(evs: &[Ev]) -> CString {
    let mut s = String::from("[");
    for (i, e) in evs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            r#"{{"type":"{}","data":{}"#,
            e.ty.to_str().unwrap(),
            e.data.to_str().unwrap()
        );
        if let Some(intent) = &e.intent {
            let _ = write!(s, r#","intent":{}"#, intent.to_str().unwrap());
        }
        s.push('}');
    }
    s.push(']');
    cstr(&s)
}

/// Append the largest size to a memory store through `dsh_session_append`,
/// then time the first full derive, the per-step derive figures (`derive`)
/// and fork at the last event (`fork`) on that session.
pub fn run(
    cx: &Ctx,
    derive: bool,
    fork: bool,
    base: &Baselines,
    rep: &mut Report,
    extra: &mut Map<String, Value>,
) {
    let Ctx {
        stream,
        big,
        total_bytes,
        ..
    } = *cx;
    let pa = base.pa;
    eprintln!(
        "append {} events through dsh_session_append ...",
        fmt_n(big)
    );
    let store = Store::open(r#"{"backend":"memory"}"#);
    let s = store.create("bench-append");
    let mut out = Buf::new();
    // Interleaved in blocks of 1000 with the baseline parse of the same
    // lines, so both see the same machine load.
    let mut d = Secs::default();
    let mut base = Secs::default();
    let mut sink = 0usize;
    // The floor: keeping each parsed line's bytes (see `floor`).
    let mut keep = Secs::default();
    let mut kept = Vec::with_capacity(stream.lines[..big].iter().map(|l| l.len()).sum());
    for (evs, lines) in stream.events[..big]
        .chunks(1000)
        .zip(stream.lines[..big].chunks(1000))
    {
        let t = Timer::start();
        for l in lines {
            sink = sink.wrapping_add(parse_raw(l).data.get().len());
        }
        base += t.stop();
        keep += floor::keep_lines(lines, &mut kept);
        let t = Timer::start();
        for ev in evs {
            s.append(ev, &mut out);
        }
        d += t.stop();
    }
    std::hint::black_box(sink);
    drop(kept);
    let rate = big as f64 / d.cpu;
    let base_rate = big as f64 / base.cpu;
    let ratio = rate / base_rate;
    extra.insert(
        "append".into(),
        json!({"ours": d.json(), "interleavedParse": base.json(), "interleavedKeep": keep.json()}),
    );
    rep.push(
        row(
            format!("append via dsh_session_append, {}", fmt_n(big)),
            "cpu",
            rate,
            "ev/s",
        )
        .base(base_rate, "raw parse, interleaved")
        .target("≥ 0.60×", ratio >= 0.6)
        .note(format!(
            "wall {:.1}k ev/s ({:.3} s per 100k events; wall ratio {:.3}); {:.0} MB/s CPU",
            big as f64 / d.wall / 1e3,
            d.wall * 100_000.0 / big as f64,
            base.wall / d.wall,
            total_bytes as f64 / d.cpu / 1e6
        )),
    );

    // The floor: the raw parse plus keeping the bytes, at the raw parse's rate.
    let floor_rate = big as f64 / (base.cpu + keep.cpu);
    let floor_ratio = floor_rate / base_rate;
    rep.push(
        row(
            format!("  floor: raw parse + keeping each event's bytes, {}", fmt_n(big)),
            "cpu",
            floor_rate,
            "ev/s",
        )
        .base(base_rate, "raw parse, interleaved")
        .note(format!(
            "the least an append that validates and keeps its event costs; keeping alone {:.2} µs per event; append reaches {:.0} % of this floor's rate",
            keep.cpu / big as f64 * 1e6,
            ratio / floor_ratio * 100.0
        )),
    );

    // Full derive: the first derive after the bulk append projects everything.
    let t = Timer::start();
    let full_bytes = s.derive(&mut out);
    let d = t.stop();
    extra.insert("fullDerive".into(), d.json());
    rep.push(
        row(
            format!("full derive at {} (first call)", fmt_n(big)),
            "cpu",
            d.cpu,
            "s",
        )
        .base(pa.cpu, raw_label(big))
        .note(format!(
            "dsh_session_derive; {:.1} MB of messages; wall {:.3} s",
            full_bytes as f64 / 1e6,
            d.wall
        )),
    );

    let pos = if derive {
        derive::per_step(cx, &store, &s, rep, extra)
    } else {
        big
    };
    // Bring the session to a closed turn for the fork.
    append_until(&s, &stream.events, pos, &stream.turn_ends, &mut out);

    if fork {
        eprintln!("fork ...");
        let mut times = Vec::new();
        for i in 0..5 {
            let opts = cstr(&format!(r#"{{"id":"bench-fork-{i}"}}"#));
            let mut child = ptr::null_mut();
            let t = Timer::start();
            // SAFETY: valid handle and pointers.
            let st = unsafe { dsh_session_fork(s.0, -1, opts.as_ptr(), &mut child, out.out()) };
            times.push(t.stop());
            check(st, &out, "dsh_session_fork");
            out.free();
            Session(child).close();
        }
        let d = median_secs(&times);
        extra.insert("fork".into(), d.json());
        rep.push(
            row(
                format!("fork at -1 of {} (memory)", fmt_n(big)),
                "cpu",
                d.cpu,
                "s",
            )
            .base(pa.cpu, raw_label(big))
            .target("≤ 1 ms", d.cpu <= 1e-3)
            .note(format!("median of 5; wall {:.3} s", d.wall)),
        );
    }
    s.close();
    store.close();
}

/// `dsh_session_append_batch` of the largest size in batches of 100,
/// interleaved with the raw parse of the same lines.
pub fn batch(cx: &Ctx, rep: &mut Report, extra: &mut Map<String, Value>) {
    let Ctx { stream, big, .. } = *cx;
    eprintln!("append_batch of {} in batches of 100 ...", fmt_n(big));
    let store = Store::open(r#"{"backend":"memory"}"#);
    let s = store.create("bench-batch");
    let mut out = Buf::new();
    let mut total = Secs::default();
    let mut base = Secs::default();
    let mut sink = 0usize;
    for (chunk, lines) in stream.events[..big]
        .chunks(100)
        .zip(stream.lines[..big].chunks(100))
    {
        let text = batch_text(chunk);
        let t = Timer::start();
        for l in lines {
            sink = sink.wrapping_add(parse_raw(l).data.get().len());
        }
        base += t.stop();
        let t = Timer::start();
        // SAFETY: valid handle, NUL-terminated text.
        let st = unsafe { dsh_session_append_batch(s.0, text.as_ptr(), out.out()) };
        if st != DSH_OK {
            check(st, &out, "dsh_session_append_batch");
        }
        out.free();
        total += t.stop();
    }
    std::hint::black_box(sink);
    let rate = big as f64 / total.cpu;
    extra.insert(
        "appendBatch".into(),
        json!({"ours": total.json(), "interleavedParse": base.json()}),
    );
    rep.push(
        row(
            format!("append_batch (100/batch), {}", fmt_n(big)),
            "cpu",
            rate,
            "ev/s",
        )
        .base(big as f64 / base.cpu, "raw parse, interleaved")
        .note(format!(
            "wall {:.1}k ev/s ({:.3} s per 100k events; wall ratio {:.3})",
            big as f64 / total.wall / 1e3,
            total.wall * 100_000.0 / big as f64,
            base.wall / total.wall
        )),
    );
    s.close();
    store.close();
}

/// Strict admission's cost: the same events appended to a strict (default)
/// and a reference-admission memory store, in alternating blocks of 1000
/// (which store goes first alternates too), at most 200k events.
pub fn admission(cx: &Ctx, rep: &mut Report, extra: &mut Map<String, Value>) {
    let Ctx { stream, big, .. } = *cx;
    let n = big.min(200_000);
    eprintln!(
        "strict vs reference admission, {} appends each ...",
        fmt_n(n)
    );
    let strict = Store::open(r#"{"backend":"memory"}"#);
    let reference = Store::open(r#"{"backend":"memory","admission":"reference"}"#);
    let (a, b) = (
        strict.create("bench-strict"),
        reference.create("bench-reference"),
    );
    let mut out = Buf::new();
    let (mut ts, mut tr) = (Secs::default(), Secs::default());
    for (k, evs) in stream.events[..n].chunks(1000).enumerate() {
        let mut time = |s: &Session| {
            let t = Timer::start();
            for ev in evs {
                s.append(ev, &mut out);
            }
            t.stop()
        };
        if k % 2 == 0 {
            ts += time(&a);
            tr += time(&b);
        } else {
            tr += time(&b);
            ts += time(&a);
        }
    }
    let ratio = ts.cpu / tr.cpu;
    extra.insert(
        "admission".into(),
        json!({"strict": ts.json(), "reference": tr.json()}),
    );
    rep.push(
        row(
            format!("append, strict admission, {}", fmt_n(n)),
            "cpu",
            n as f64 / ts.cpu,
            "ev/s",
        )
        .base(n as f64 / tr.cpu, "reference admission, interleaved")
        .target("≤ 1.10× the time", ratio <= 1.10)
        .note(format!(
            "strict takes {ratio:.3}× the reference admission's CPU time (wall {:.3}×)",
            ts.wall / tr.wall
        )),
    );
    a.close();
    b.close();
    strict.close();
    reference.close();
}
