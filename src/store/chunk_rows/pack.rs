//! Packing (docs/formats.md §3.3): runs of eligible `assistant/chunk`
//! deltas in a batch become packed rows, read from each event's canonical
//! text.

use std::sync::Arc;

use super::{is_number, is_string, members_exactly, Bounds, PackedRow, Record};
use super::{REASONING_TAG, TEXT_TAG, TOOL_TAG};
use crate::engine::event::MAX_SAFE;
use crate::engine::Event;
use crate::json::{canon, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Reasoning,
    Tool,
}

/// The packable view of one event, if it is eligible (§6.4), read from
/// the event's canonical text: numbers and strings are held as their JSON
/// text (canonical text is equal exactly when the values are).
struct Delta<'a> {
    kind: Kind,
    seq: u64,
    time: i64,
    turn: &'a str,
    step: &'a str,
    index: &'a str,
    id: Option<&'a str>,
    name: Option<&'a str>,
    member: &'a str,
}

fn delta(e: &Event) -> Option<Delta<'_>> {
    if e.ty != "assistant/chunk"
        || e.sources_text().is_some()
        || e.op_text().is_some()
        || e.ignorable
    {
        return None;
    }
    let [turn, step, chunk] = members_exactly(e.data_text(), ["turn", "step", "chunk"])?;
    if !is_number(turn) || !is_number(step) {
        return None;
    }
    let index = canon::member(chunk, "index")?;
    let ty = canon::member(chunk, "type")?;
    if !is_number(index) {
        return None;
    }
    let (kind, id, name, member) = match ty {
        "\"text-delta\"" | "\"reasoning-delta\"" => {
            let [_, _, text] = members_exactly(chunk, ["type", "index", "text"])?;
            let kind = if ty == "\"text-delta\"" {
                Kind::Text
            } else {
                Kind::Reasoning
            };
            (kind, None, None, text)
        }
        "\"tool-call-delta\"" => {
            let (id, name, args) =
                match members_exactly(chunk, ["type", "index", "id", "name", "argumentsDelta"]) {
                    Some([_, _, id, name, args]) => (id, Some(name), args),
                    None => {
                        let [_, _, id, args] =
                            members_exactly(chunk, ["type", "index", "id", "argumentsDelta"])?;
                        (id, None, args)
                    }
                };
            if !is_string(id) || !name.is_none_or(is_string) {
                return None;
            }
            (Kind::Tool, Some(id), name, args)
        }
        _ => return None,
    };
    if !is_string(member) {
        return None;
    }
    Some(Delta {
        kind,
        seq: e.seq,
        time: e.time,
        turn,
        step,
        index,
        id,
        name,
        member,
    })
}

fn continues(prev: &Delta<'_>, next: &Delta<'_>) -> bool {
    let dt = next.time.checked_sub(prev.time);
    next.kind == prev.kind
        && next.seq == prev.seq + 1
        && dt.is_some_and(|d| d.unsigned_abs() <= MAX_SAFE)
        && next.turn == prev.turn
        && next.step == prev.step
        && next.index == prev.index
        && next.id == prev.id
        && next.name == prev.name
}

/// The row's data text: `{"turn","step","index","dt",("texts" | "id","name"?,"args")}`.
fn row_of(run: &[Delta<'_>]) -> PackedRow {
    use std::fmt::Write;
    let first = &run[0];
    let members: usize = run.iter().map(|d| d.member.len() + 1).sum();
    let mut data = String::with_capacity(members + run.len() * 4 + 96);
    let _ = write!(
        data,
        "{{\"turn\":{},\"step\":{},\"index\":{},\"dt\":[",
        first.turn, first.step, first.index
    );
    for (i, w) in run.windows(2).enumerate() {
        if i > 0 {
            data.push(',');
        }
        // A difference of two safe integers is exact as a double.
        Value::Number((w[1].time - w[0].time) as f64).write_json(&mut data);
    }
    data.push(']');
    let tag = match first.kind {
        Kind::Text => TEXT_TAG,
        Kind::Reasoning => REASONING_TAG,
        Kind::Tool => TOOL_TAG,
    };
    if first.kind == Kind::Tool {
        data.push_str(",\"id\":");
        data.push_str(first.id.unwrap_or("\"\""));
        if let Some(name) = first.name {
            data.push_str(",\"name\":");
            data.push_str(name);
        }
        data.push_str(",\"args\":[");
    } else {
        data.push_str(",\"texts\":[");
    }
    for (i, d) in run.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        data.push_str(d.member);
    }
    data.push_str("]}");
    PackedRow {
        tag,
        seq0: first.seq,
        time0: first.time,
        data,
    }
}

fn fits(row: &PackedRow, bounds: Bounds) -> bool {
    bounds
        .max_data_bytes
        .is_none_or(|max| row.data.len() <= max)
}

/// Split one maximal run into rows and plain events (§7.5).
fn emit_run<'a>(
    events: &'a [Arc<Event>],
    run: &[Delta<'_>],
    start: usize,
    bounds: Bounds,
    out: &mut Vec<Record<'a>>,
) {
    let min = bounds.min_members;
    let mut offset = 0;
    while run.len() - offset >= min {
        let mut high = bounds
            .max_members
            .map_or(run.len() - offset, |m| m.min(run.len() - offset));
        let row = row_of(&run[offset..offset + high]);
        if fits(&row, bounds) {
            out.push(Record::Row(row));
            offset += high;
            continue;
        }
        high -= 1;
        let (mut low, mut best) = (min, None);
        while low <= high {
            let mid = (low + high) / 2;
            if fits(&row_of(&run[offset..offset + mid]), bounds) {
                best = Some(mid);
                low = mid + 1;
            } else {
                high = mid - 1;
            }
        }
        match best {
            None => {
                out.push(Record::Event(&events[start + offset]));
                offset += 1;
            }
            Some(m) => {
                out.push(Record::Row(row_of(&run[offset..offset + m])));
                offset += m;
            }
        }
    }
    for i in offset..run.len() {
        out.push(Record::Event(&events[start + i]));
    }
}

/// Turn a batch of events into storage records, packing every run of at
/// least `bounds.min_members` eligible deltas.
pub fn pack(events: &[Arc<Event>], bounds: Bounds) -> Vec<Record<'_>> {
    let mut out = Vec::with_capacity(events.len());
    let mut run: Vec<Delta<'_>> = Vec::new();
    let mut run_start = 0;
    for (i, e) in events.iter().enumerate() {
        match delta(e) {
            Some(d) if run.last().is_some_and(|p| continues(p, &d)) => run.push(d),
            Some(d) => {
                emit_run(events, &run, run_start, bounds, &mut out);
                run.clear();
                run.push(d);
                run_start = i;
            }
            None => {
                emit_run(events, &run, run_start, bounds, &mut out);
                run.clear();
                out.push(Record::Event(e));
                run_start = i + 1;
            }
        }
    }
    emit_run(events, &run, run_start, bounds, &mut out);
    out
}
