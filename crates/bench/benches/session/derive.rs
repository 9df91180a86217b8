//! The per-step derive figures: one more step appended, then one derive
//! call timed, at a small and at a large history, interleaved.

use std::time::{Duration, Instant};

use ::dsh_session_ffi::dsh_session_derive_since;
use serde_json::{json, Map, Value};

use crate::abi::{check, Buf, Session, Store};
use crate::mix::{Ev, Stream};
use crate::report::{fmt_n, row, Report};
use crate::util::{median, median_secs, percentile, Secs, Timer};
use crate::Ctx;

/// Append `evs[from..]` up to and including the next index in `ends` that
/// is ≥ from; returns the new position.
pub fn append_until(s: &Session, evs: &[Ev], from: usize, ends: &[usize], out: &mut Buf) -> usize {
    let k = ends.partition_point(|&e| e < from);
    let end = ends[k];
    for ev in &evs[from..=end] {
        s.append(ev, out);
    }
    end + 1
}

/// What one per-step derive loop measured.
struct StepStats {
    /// Median time of one derive call.
    median: Secs,
    /// 90th percentile CPU seconds.
    p90_cpu: f64,
    /// Median output bytes.
    bytes: usize,
    samples: usize,
    /// The event index after the last appended step.
    pos: usize,
}

/// One session of a per-step derive comparison.
struct Lane<'a> {
    s: &'a Session,
    pos: usize,
    times: Vec<Secs>,
    bytes: Vec<f64>,
}

impl<'a> Lane<'a> {
    fn new((s, pos): (&'a Session, usize)) -> Lane<'a> {
        Lane {
            s,
            pos,
            times: Vec::new(),
            bytes: Vec::new(),
        }
    }
    fn stats(mut self) -> StepStats {
        StepStats {
            p90_cpu: percentile(
                &mut self.times.iter().map(|x| x.cpu).collect::<Vec<_>>(),
                0.9,
            ),
            median: median_secs(&self.times),
            bytes: median(&mut self.bytes) as usize,
            samples: self.times.len(),
            pos: self.pos,
        }
    }
}

/// Per-step derive on two sessions, interleaved so both see the same
/// machine load: `steps` times (at least 5, then within `budget`), for
/// each session append one more step, then time one derive call (which
/// returns the bytes it produced).
#[allow(clippy::too_many_arguments)]
fn per_step_pair(
    stream: &Stream,
    small: (&Session, usize),
    large: (&Session, usize),
    steps: usize,
    budget: Duration,
    mut d_small: impl FnMut(&Session) -> usize,
    mut d_large: impl FnMut(&Session) -> usize,
) -> (StepStats, StepStats) {
    let mut out = Buf::new();
    let (mut a, mut b) = (Lane::new(small), Lane::new(large));
    // Catch up: the per-step cost is measured from a warm cache.
    d_small(a.s);
    d_large(b.s);
    let started = Instant::now();
    while a.times.len() < steps && (a.times.len() < 5 || started.elapsed() < budget) {
        for (lane, derive) in [
            (&mut a, &mut d_small as &mut dyn FnMut(&Session) -> usize),
            (&mut b, &mut d_large),
        ] {
            lane.pos = append_until(
                lane.s,
                &stream.events,
                lane.pos,
                &stream.step_ends,
                &mut out,
            );
            let t = Timer::start();
            let n = derive(lane.s);
            lane.times.push(t.stop());
            lane.bytes.push(n as f64);
        }
    }
    (a.stats(), b.stats())
}

/// A host's cursor over `dsh_session_derive_since`: returns a closure
/// that calls it with the cursor of the previous answer, keeps the new
/// cursor, counts resets and returns the answer's size.
fn since_cursor(resets: &std::cell::Cell<usize>) -> impl FnMut(&Session) -> usize + '_ {
    let mut cursor = (0u64, 0u64);
    move |s: &Session| {
        let mut out = Buf::new();
        // SAFETY: valid handle and buffer.
        let st = unsafe { dsh_session_derive_since(s.0, cursor.0, cursor.1, out.out()) };
        check(st, &out, "dsh_session_derive_since");
        // `{"generation":g,"count":n,"reset":b,"messages":[...]}`: read the head.
        let text = out.text();
        let field = |name: &str| -> &str {
            let at = text.find(name).expect("derive_since field") + name.len();
            let rest = &text[at..];
            &rest[..rest.find([',', '}']).unwrap()]
        };
        cursor = (
            field("\"generation\":").parse().unwrap(),
            field("\"count\":").parse().unwrap(),
        );
        if field("\"reset\":") == "true" {
            resets.set(resets.get() + 1);
        }
        out.0.len
    }
}

/// Per-step derive (`derive_since` with a host cursor, then the full list)
/// on a fresh 1k-event session against `s`, the appended session of
/// `cx.big` events; returns the event index after `s`'s last appended step.
pub fn per_step(
    cx: &Ctx,
    store: &Store,
    s: &Session,
    rep: &mut Report,
    extra: &mut Map<String, Value>,
) -> usize {
    let Ctx { stream, big, .. } = *cx;
    let small_hist = 1_000;
    let mut out = Buf::new();
    eprintln!("derive per step ...");
    let msgs_small = stream.surface_at(small_hist);
    let msgs_big = stream.surface_at(big);
    // Small history: a fresh session with the first 1k events.
    let small = store.create("bench-derive-1k");
    for ev in &stream.events[..small_hist] {
        small.append(ev, &mut out);
    }
    // Interleaved with the large history: the appended session.
    let small_resets = std::cell::Cell::new(0);
    let big_resets = std::cell::Cell::new(0);
    let (small_since, big_since) = per_step_pair(
        stream,
        (&small, small_hist),
        (s, big),
        50,
        Duration::from_secs(10),
        since_cursor(&small_resets),
        since_cursor(&big_resets),
    );
    let (small_full, big_full) = per_step_pair(
        stream,
        (&small, small_since.pos),
        (s, big_since.pos),
        30,
        Duration::from_secs(10),
        |s| s.derive(&mut Buf::new()),
        |s| s.derive(&mut Buf::new()),
    );
    small.close();
    rep.push(
        row(
            format!("derive_since per step at {} events", fmt_n(small_hist)),
            "cpu",
            small_since.median.cpu,
            "s",
        )
        .note(format!(
            "dsh_session_derive_since with the host's cursor; median of {}, p90 {:.1} µs, wall median {:.1} µs, {} resets; ~{msgs_small} messages held",
            small_since.samples,
            small_since.p90_cpu * 1e6,
            small_since.median.wall * 1e6,
            small_resets.get()
        )),
    );
    let ratio = big_since.median.cpu / small_since.median.cpu;
    rep.push(
        row(
            format!("derive_since per step at {} vs {}", fmt_n(big), fmt_n(small_hist)),
            "cpu",
            big_since.median.cpu,
            "s",
        )
        .base(small_since.median.cpu, format!("at {}", fmt_n(small_hist)))
        .target("≤ 1.5×", ratio <= 1.5)
        .note(format!(
            "median of {}, p90 {:.1} µs, wall median {:.1} µs, {} resets (a compaction replace returns the whole list); ~{msgs_big} messages held; median answer {} B",
            big_since.samples,
            big_since.p90_cpu * 1e6,
            big_since.median.wall * 1e6,
            big_resets.get(),
            big_since.bytes
        )),
    );
    rep.push(
        row(
            format!("full-list derive per step at {}", fmt_n(small_hist)),
            "cpu",
            small_full.median.cpu,
            "s",
        )
        .note(format!(
            "dsh_session_derive; median of {}; {:.2} MB out",
            small_full.samples,
            small_full.bytes as f64 / 1e6
        )),
    );
    rep.push(
        row(
            format!("full-list derive per step at {} vs {}", fmt_n(big), fmt_n(small_hist)),
            "cpu",
            big_full.median.cpu,
            "s",
        )
        .base(small_full.median.cpu, format!("at {}", fmt_n(small_hist)))
        .note(format!(
            "dsh_session_derive copies the whole list by contract (~{msgs_big} messages, {:.1} MB); median of {}",
            big_full.bytes as f64 / 1e6,
            big_full.samples
        )),
    );
    extra.insert(
        "derivePerStep".into(),
        json!({
            "sinceSmall": small_since.median.json(), "sinceBig": big_since.median.json(),
            "fullSmall": small_full.median.json(), "fullBig": big_full.median.json(),
            "messagesSmall": msgs_small, "messagesBig": msgs_big,
        }),
    );
    big_full.pos
}
