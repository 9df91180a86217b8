//! `stats`: counts and bytes per type, token usage and compaction
//! savings, counted as the log streams (nothing of it is kept but the
//! length of each message, for the surface's bytes).

use std::collections::BTreeMap;

use super::args::{BackendKind, StatsArgs};
use super::output::{get, plain, Out};
use super::progress::Reading;
use super::read::Opened;
use super::table::Table;
use super::{CliError, Ctx, EXIT_OK};
use dsh_session::engine::derive::Message;
use dsh_session::engine::event::{is_surface_type, TURN_END, TURN_START};
use dsh_session::engine::request::TokenUsage;
use dsh_session::engine::Event;
use dsh_session::json::{Object, Value};

/// What `stats` counts of the stored events, one at a time.
#[derive(Default)]
struct Tally {
    /// Per type: events and bytes of JSON.
    types: BTreeMap<String, (u64, u64)>,
    events: u64,
    bytes: u64,
    turns: u64,
    message_events: u64,
    message_bytes: u64,
    tokens: TokenUsage,
    /// `data.turn` of a `turn/start` no `turn/end` followed yet.
    open: Option<Value>,
    /// The length of the message of each event that projects one, by
    /// seq (in seq order).
    messages: Vec<(u64, u32)>,
}

impl Tally {
    fn add(&mut self, e: &Event) {
        let len = e.text().len() as u64;
        let t = self.types.entry(e.ty.to_string_lossy()).or_default();
        t.0 += 1;
        t.1 += len;
        self.events += 1;
        self.bytes += len;
        if e.ty == TURN_START {
            self.turns += 1;
            self.open = Some(get(e.data(), "turn").cloned().unwrap_or_default());
        } else if e.ty == TURN_END {
            self.open = None;
        }
        self.tokens.add(e);
        if let Some(len) = self.message(e) {
            if is_surface_type(&e.ty) {
                self.message_events += 1;
                self.message_bytes += len;
            }
        }
    }

    /// Keep the length of the message `e` projects, if any.
    fn message(&mut self, e: &Event) -> Option<u64> {
        let m = Message::of(e)?;
        self.messages.push((e.seq, m.len() as u32));
        Some(m.len() as u64)
    }

    /// The length of the message of event `seq`, if it projects one.
    fn message_len(&self, seq: u64) -> Option<u64> {
        let i = self.messages.binary_search_by_key(&seq, |m| m.0).ok()?;
        Some(u64::from(self.messages[i].1))
    }
}

/// `stats`.
pub fn stats(ctx: Ctx, a: &StatsArgs) -> Result<u8, CliError> {
    let mut o = Opened::new(&a.store)?;
    let mut tally = Tally::default();
    let mut reading = Reading::new(ctx, &a.id, false);
    let read = o.read(ctx, &a.id, &mut reading, &mut |batch| {
        batch.iter().for_each(|e| tally.add(e))
    })?;
    drop(reading);
    let session = read.session;
    // The closers (in memory) are on the surface, never in the counts.
    let closers = session
        .events_in(read.stored, session.events().len())
        .map_err(|e| o.fail(Some(&a.id), &e))?;
    for c in &closers {
        tally.message(c);
    }
    let (mut surface_messages, mut surface_bytes) = (0u64, 0u64);
    for &seq in session.surface().nodes() {
        if let Some(len) = tally.message_len(seq) {
            surface_messages += 1;
            surface_bytes += len;
        }
    }
    let replacements = session.surface().generation();
    let Tally {
        types,
        bytes,
        turns,
        message_events,
        message_bytes,
        ..
    } = &tally;
    let (bytes, turns, message_events, message_bytes) =
        (*bytes, *turns, *message_events, *message_bytes);
    let tokens = tally.tokens.totals();
    let types: Vec<(String, u64, u64)> = types
        .iter()
        .map(|(t, (c, b))| (t.clone(), *c, *b))
        .collect();
    let stored_len = tally.events;
    let saved_bytes = message_bytes.saturating_sub(surface_bytes);
    let saved_messages = message_events.saturating_sub(surface_messages);
    let ratio = if message_bytes == 0 {
        0.0
    } else {
        saved_bytes as f64 / message_bytes as f64
    };
    let file_bytes = (o.target.kind == BackendKind::Jsonl)
        .then(|| {
            std::fs::metadata(o.target.file_of(Some(&a.id)))
                .ok()
                .map(|m| m.len())
        })
        .flatten();
    let open = tally.open.clone();
    let mut out = Out::paged(ctx);
    if ctx.json {
        let n = |v: u64| Value::num(v as f64);
        let mut by_type = Object::new();
        for (ty, count, len) in &types {
            by_type.insert_str(ty, Value::obj([("count", n(*count)), ("bytes", n(*len))]));
        }
        let doc = Value::obj([
            ("id", Value::str(&a.id)),
            ("events", n(stored_len)),
            ("bytes", n(bytes)),
            ("fileBytes", file_bytes.map_or(Value::Null, n)),
            ("types", Value::Object(by_type)),
            ("turns", n(turns)),
            ("openTurn", open.unwrap_or_default()),
            (
                "tokens",
                Value::obj([
                    ("input", Value::num(tokens[0])),
                    ("output", Value::num(tokens[1])),
                    ("cacheRead", Value::num(tokens[2])),
                    ("cacheWrite", Value::num(tokens[3])),
                ]),
            ),
            (
                "messages",
                Value::obj([("events", n(message_events)), ("bytes", n(message_bytes))]),
            ),
            (
                "surface",
                Value::obj([
                    ("messages", n(surface_messages)),
                    ("bytes", n(surface_bytes)),
                    ("replacements", n(replacements)),
                ]),
            ),
            (
                "savings",
                Value::obj([
                    ("messages", n(saved_messages)),
                    ("bytes", n(saved_bytes)),
                    ("ratio", Value::num(ratio)),
                ]),
            ),
        ]);
        out.line(&doc.to_json());
        return Ok(EXIT_OK);
    }
    let open = open.map_or_else(|| "none".to_string(), |t| plain(&t));
    let mut lines = vec![
        vec![
            "session".into(),
            format!(
                "{} ({} {})",
                a.id,
                o.target.describe(),
                o.target.path.display()
            ),
        ],
        vec![
            "events".into(),
            format!("{stored_len} ({bytes} bytes of JSON)"),
        ],
        vec!["turns".into(), format!("{turns} (open: {open})")],
        vec![
            "tokens".into(),
            format!(
                "input {}, output {}, cache read {}, cache write {}",
                tokens[0], tokens[1], tokens[2], tokens[3]
            ),
        ],
        vec![
            "messages".into(),
            format!("{message_events} message events, {message_bytes} bytes"),
        ],
        vec![
            "surface".into(),
            format!(
                "{surface_messages} messages, {surface_bytes} bytes, {replacements} replacement(s)"
            ),
        ],
        vec![
            "savings".into(),
            format!(
                "{saved_messages} messages, {saved_bytes} bytes ({:.1}% of message bytes)",
                ratio * 100.0
            ),
        ],
    ];
    if let Some(f) = file_bytes {
        lines.push(vec!["log file".into(), format!("{f} bytes")]);
    }
    let mut table = Table::new(ctx, &["", ""], &[]).bare();
    for line in lines {
        table.push(&mut out, line);
    }
    table.finish(&mut out);
    out.line("");
    let mut table = Table::new(ctx, &["TYPE", "COUNT", "BYTES"], &[false, true, true]);
    for (t, c, b) in &types {
        table.push(&mut out, vec![t.clone(), c.to_string(), b.to_string()]);
    }
    table.finish(&mut out);
    Ok(EXIT_OK)
}
