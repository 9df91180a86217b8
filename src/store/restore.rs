//! The cold read pipeline (docs/lifecycle.md §8): a stored log becomes a
//! session (identity and version checks, the fast path for logs already
//! in the current format, upgrade of older ones, validation, repair).

use std::sync::Arc;

use super::backend::{Loaded, Stored};
use super::now_ms;
use crate::engine::event::{Checked, END_SEED};
use crate::engine::seed::{self, SeedMode};
use crate::engine::{repair, upgrade, Event, Markers, Policy, Seed, Session};
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;

/// A stored session rebuilt in memory.
pub struct Restored {
    /// The session: stored events + repair closers (+ end-seed marker).
    pub session: Session,
    /// The closers crash repair synthesized.
    pub closers: Vec<Arc<Event>>,
    /// How many leading events are durable as stored (before the torn part).
    pub durable: usize,
    /// How many events were read from storage (before the closers).
    pub stored: usize,
    /// True when the session's events are the stored ones as they are
    /// (current format: nothing was upgraded), so reading a stored event
    /// back gives the event the session holds.
    pub as_stored: bool,
}

/// The cold read pipeline (docs/lifecycle.md §8) over a backend's read.
/// Types outside the policy's vocabulary not marked `ignorable` refuse
/// the log; the session appends under `policy`.
pub fn restore(id: &str, loaded: &Loaded, policy: &Policy) -> Result<Restored> {
    restore_events(
        id,
        loaded,
        loaded.events.clone(),
        policy,
        None,
        Repair::Closers,
    )
}

/// A rule a stored event breaks, passed over by [`restore_lenient`].
#[derive(Debug, Clone)]
pub struct Finding {
    /// The event's seq.
    pub seq: u64,
    /// What a strict read reports for it.
    pub error: Error,
}

/// [`restore`] for reading a log that a strict read refuses because of
/// single events (an undeclared type, a message event breaking the
/// `msg.*` rules, a `request/header` breaking the seed header rules):
/// such events are kept as they are stored (an unknown type as an opaque
/// log-only event) and reported with their seq. Everything else refuses
/// as in [`restore`]. The session is for reading: never append to it.
pub fn restore_lenient(
    id: &str,
    loaded: &Loaded,
    policy: &Policy,
) -> Result<(Restored, Vec<Finding>)> {
    let mut findings = Vec::new();
    let restored = restore_events(
        id,
        loaded,
        loaded.events.clone(),
        policy,
        Some(&mut findings),
        Repair::Closers,
    )?;
    findings.sort_by_key(|f| f.seq);
    Ok((restored, findings))
}

/// [`restore`] that takes the events out of `loaded` instead of copying
/// them (the open path: a session's whole log is not held twice).
pub fn restore_taking(id: &str, loaded: &mut Loaded, policy: &Policy) -> Result<Restored> {
    let events = std::mem::take(&mut loaded.events);
    restore_events(id, loaded, events, policy, None, Repair::Closers)
}

/// [`restore_taking`] for a reader beside the writer (`"readOnly": true`):
/// the stored log as it is, up to its last complete record (a torn tail is
/// a write in progress: what was decoded of it is left out), with no
/// closer and no end-seed marker.
pub fn restore_for_reading(id: &str, loaded: &mut Loaded, policy: &Policy) -> Result<Restored> {
    let mut events = std::mem::take(&mut loaded.events);
    if let Some(torn) = loaded.torn.take() {
        events.truncate(events.len() - torn.recovered);
    }
    restore_events(id, loaded, events, policy, None, Repair::None)
}

/// Whether a restore appends what crash repair would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repair {
    /// The closers and the end-seed marker (an open).
    Closers,
    /// Nothing: the log as stored (a reader).
    None,
}

/// The stored events as engine events without value trees, when every one
/// is canonical text of the current format that the restore rules accept
/// as it is (no retired vocabulary, no legacy rewrite, `msg.*` rules pass).
/// Anything else gives the events back for the value path, which reports
/// errors in the reference's order. With the events comes whether every
/// one passes [`upgrade::check_known_types`] (checked while it is at hand).
fn fast_events(
    mut stored: Vec<Stored>,
) -> std::result::Result<(Vec<Arc<Event>>, bool), Vec<Stored>> {
    // Each event is checked on its own: a long log is checked in two
    // halves, the second on a scoped thread. Either way a refusal gives
    // every event back in log order.
    if stored.len() < FAST_SPLIT_FROM {
        return fast_run(stored);
    }
    let second = stored.split_off(stored.len() / 2);
    let (first, second) = std::thread::scope(|s| {
        let second = s.spawn(move || fast_run(second));
        let first = fast_run(stored);
        (
            first,
            second
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        )
    });
    match (first, second) {
        (Ok((mut first, known)), Ok((second, also))) => {
            first.extend(second);
            Ok((first, known && also))
        }
        (first, second) => {
            let mut back = given_back(first);
            back.extend(given_back(second));
            Err(back)
        }
    }
}

/// Logs with at least this many events are checked on two threads (few in
/// tests, so that older formats take this path). Below it the second
/// thread's heap costs more memory than the thread saves time: a 10k-event
/// open grew from 1.19x to 1.20x of the log's JSON at 8192.
const FAST_SPLIT_FROM: usize = if cfg!(test) { 4 } else { 32768 };

/// The items of a [`fast_run`] result in log order, as stored items.
fn given_back(run: std::result::Result<(Vec<Arc<Event>>, bool), Vec<Stored>>) -> Vec<Stored> {
    match run {
        Ok((events, _)) => events
            .into_iter()
            .map(|e| Stored::Canonical(e.text().into()))
            .collect(),
        Err(back) => back,
    }
}

/// [`fast_events`] of one run of events, on this thread.
fn fast_run(stored: Vec<Stored>) -> std::result::Result<(Vec<Arc<Event>>, bool), Vec<Stored>> {
    let mut events: Vec<Arc<Event>> = Vec::with_capacity(stored.len());
    let mut known = true;
    let mut rest = stored.into_iter();
    while let Some(item) = rest.next() {
        match fast_event(item) {
            Ok(e) => {
                known &= upgrade::has_known_type(&e);
                events.push(e);
            }
            Err(item) => {
                let mut back = given_back(Ok((events, known)));
                back.push(item);
                back.extend(rest);
                return Err(back);
            }
        }
    }
    Ok((events, known))
}

/// One stored event as an engine event, when the restore rules take it as
/// it is (see [`fast_events`]); the item back otherwise.
pub(super) fn fast_event(item: Stored) -> std::result::Result<Arc<Event>, Stored> {
    match item {
        Stored::Canonical(text) => match Event::from_trusted_text(text) {
            Ok(e) if current_format(&e) => Ok(Arc::new(e)),
            Ok(e) => Err(Stored::Canonical(e.text().into())),
            Err(text) => Err(Stored::Canonical(text)),
        },
        Stored::Event(e) if current_format(&e) => Ok(Arc::new(e)),
        other => Err(other),
    }
}

/// Whether the restore rules take `e` as it is (see [`fast_events`]).
fn current_format(e: &Event) -> bool {
    use crate::engine::event::{REQUEST_HEADER, REQUEST_HEADER_DELTA, TURN_END, TURN_START};
    if e.ty == TURN_START || e.ty == TURN_END {
        return upgrade::is_current_turn(e);
    }
    if e.ty == REQUEST_HEADER {
        return !crate::engine::event::has_fallback_reason(e.data_text());
    }
    if e.ty == "steering/message" || e.ty == "mode/set" || e.ty == REQUEST_HEADER_DELTA {
        return false;
    }
    seed::check_event_message(e, &String::new).is_ok()
}

/// `load.validation` around `e` (a refusal of the stored session `id`),
/// as the cold read pipeline wraps every refusal but a format mismatch.
fn validation(id: &str, e: Error) -> Error {
    if e.status == Status::SchemaMismatch {
        e
    } else {
        e.wrapped(
            Status::Corrupt,
            Rule::LoadValidation,
            &format!("stored session \"{id}\" failed validation: "),
        )
    }
}

/// Before repair writes `closers` to the log of `id`: the rules the next
/// read applies to them (see [`repair::check_closers_reread`]). A refusal
/// is the one that read would give, and nothing is written.
pub(super) fn check_before_repair(id: &str, closers: &[Arc<Event>]) -> Result<()> {
    repair::check_closers_reread(id, closers.iter().map(|c| &**c)).map_err(|e| {
        validation(id, e).prefixed("crash repair would write a closer the next open refuses: ")
    })
}

/// The identity and format-version checks of a stored header (the first
/// steps of the cold read pipeline).
pub(super) fn check_stored_header(id: &str, header: &Value) -> Result<()> {
    let stored_id = header
        .as_object()
        .and_then(|h| h.get("id"))
        .and_then(Value::as_str);
    if stored_id != Some(id) {
        return Err(Error::new(
            Status::Corrupt,
            Rule::LoadIdentityMismatch,
            format!(
                "stored identity mismatch: requested \"{id}\", header has {:?}",
                stored_id.unwrap_or("")
            ),
        ));
    }
    if let Some(v) = header
        .as_object()
        .and_then(|h| h.get("version"))
        .and_then(Value::as_f64)
    {
        if v != 0.0 {
            let (rule, what) = if v > 0.0 {
                (
                    Rule::LoadVersionNewer,
                    "was written by a newer harness; upgrade to open it",
                )
            } else {
                (
                    Rule::LoadVersionOlder,
                    "is older than v0 and no upgrade path exists",
                )
            };
            return Err(Error::new(
                Status::SchemaMismatch,
                rule,
                format!("session \"{id}\" uses format v{v}, which {what}"),
            ));
        }
    }
    Ok(())
}

fn restore_events(
    id: &str,
    loaded: &Loaded,
    stored: Vec<Stored>,
    policy: &Policy,
    mut lenient: Option<&mut Vec<Finding>>,
    repair: Repair,
) -> Result<Restored> {
    let header = &loaded.header;
    check_stored_header(id, header)?;
    let wrap = |e: Error| validation(id, e);
    let mut as_stored = true;
    let (events, known) = match fast_events(stored) {
        Ok(fast) => fast,
        Err(stored) => {
            as_stored = false;
            let stored: Vec<Value> = stored.into_iter().map(Stored::into_value).collect();
            upgrade::refuse_retired(id, &stored).map_err(wrap)?;
            let values = upgrade::upgrade(id, stored).map_err(wrap)?;
            // The reference's order: each event is adopted (the msg.*
            // rules), then the vocabulary is checked, then the seed rules
            // (the envelope first) run over the whole log.
            let mut excused = Vec::new();
            for (i, v) in values.iter().enumerate() {
                let subject = || format!("session event at seq {i}");
                if let Err(err) = seed::check_value_message(v, &subject) {
                    let err = err.at_seq(i as u64);
                    let found = lenient.as_deref_mut().ok_or_else(|| wrap(err.clone()))?;
                    found.push(Finding {
                        seq: i as u64,
                        error: wrap(err),
                    });
                    excused.push(i);
                }
            }
            // (A lenient read reports unknown types below, event by event.)
            if lenient.is_none() {
                upgrade::check_known_values(id, &values, &policy.vocabulary)?;
            }
            let mut events = Vec::with_capacity(values.len());
            for (i, v) in values.into_iter().enumerate() {
                let subject = || format!("session event at seq {i}");
                let e = Event::from_envelope(v, "stored event")
                    .map_err(|e| wrap(e.prefixed(&format!("{}: ", subject())).at_seq(i as u64)))?;
                if excused.binary_search(&i).is_ok() {
                    // A lenient read keeps the message as stored.
                    e.mark_checked(Checked::SHAPE);
                }
                events.push(Arc::new(e));
            }
            (events, false)
        }
    };
    if let Some(found) = lenient {
        for e in &events {
            if !policy.vocabulary.admits_type(e) {
                let error = upgrade::unknown_type(id, &e.ty.to_string_lossy(), &e.seq.to_string());
                found.push(Finding { seq: e.seq, error });
            }
            let subject = || format!("session event at seq {}", e.seq);
            if let Err(err) = seed::check_event_header(e, &subject) {
                found.push(Finding {
                    seq: e.seq,
                    error: wrap(err.at_seq(e.seq)),
                });
                e.mark_checked(Checked::SHAPE);
            }
        }
    } else if !known {
        upgrade::check_known_types(id, events.iter().map(|e| &**e), &policy.vocabulary)?;
    }
    let stored = events.len();
    let durable = stored - loaded.torn.as_ref().map_or(0, |t| t.recovered);
    if repair == Repair::None {
        let session = Session::from_stored(
            id,
            header.clone(),
            events,
            (Markers::Required, policy.clone()),
        )
        .map_err(wrap)?;
        return Ok(Restored {
            session,
            closers: Vec::new(),
            durable,
            stored,
            as_stored,
        });
    }
    let closers = repair::closers(events.iter().map(|e| &**e));
    repair::check_closers(&closers).map_err(wrap)?;
    let closers: Vec<Arc<Event>> = closers.into_iter().map(Arc::new).collect();
    let mut all = events;
    all.extend(closers.iter().cloned());
    let session = Session::from_seed(
        id,
        header.clone(),
        Seed::Events(all),
        SeedMode::Restore,
        (Markers::Required, policy.clone()),
        now_ms(),
    )
    .map_err(wrap)?;
    debug_assert!(session.events().last().is_some_and(|e| e.ty == END_SEED));
    Ok(Restored {
        session,
        closers,
        durable,
        stored,
        as_stored,
    })
}
