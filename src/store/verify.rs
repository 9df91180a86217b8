//! Read-only verification of stored sessions (the `dsh-session verify`
//! command): every rule the cold read pipeline applies (docs/lifecycle.md §8,
//! docs/errors.md §3.5) is checked on the stored data, and every finding is
//! reported with its rule id and seq instead of stopping at the first one.
//!
//! Nothing is written: the backend is only asked to `list` and read. A log
//! first streams through the checks of a windowed open
//! ([`super::stream_read::read_streaming`]), keeping a window of it
//! resident, so a long clean log is verified in bounded memory; such a log
//! can only be clean or end inside a turn. A log the stream leaves (a torn
//! tail, damage, a broken rule, an older format) is read whole: the
//! per-event passes below re-run the same engine checks event by event so
//! that a log with several problems reports all of them, and
//! `store::restore` then runs as the authority, so verification never
//! passes a session that `open` would refuse.
//!
//! Two findings are not errors but what `open` repairs (docs/lifecycle.md §6):
//! a torn tail ([`TORN_TAIL`]) and an interrupted turn ([`INTERRUPTED_TURN`]).

use std::collections::HashSet;

use std::sync::Arc;

use super::backend::{header_id, Backend, Loaded, ReadProgress, TornAt};
use super::stream_read::{read_progress, read_streaming};
use super::writer::{lock_backend, SharedBackend};

use crate::engine::event::{Event, TURN_END, TURN_START};
use crate::engine::seed::{self, SeedMode};
use crate::engine::surface::{candidate_of, Markers, Surface, ValueLog};
use crate::engine::{upgrade, Policy};
use crate::error::{Error, Status};
use crate::json::Value;
use crate::rule::Rule;

/// Rule id of a torn tail (cut by `open`): a finding of `verify`, not an
/// error (docs/errors.md §6.6).
pub const TORN_TAIL: Rule = Rule::RepairTornTail;

/// Rule id of a log that ends inside a turn (`open` appends the closers of
/// docs/lifecycle.md §6).
pub const INTERRUPTED_TURN: Rule = Rule::RepairInterruptedTurn;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// What `open` would repair (a record being written, a turn not ended)
    /// while the store's writer is running: its work in progress, not a
    /// problem.
    Live,
    /// `open` repairs it (torn tail, interrupted turn).
    Repairable,
    /// `open` refuses the session or the store (damaged, foreign, unreadable).
    Corrupt,
}

/// One finding.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The session it belongs to (`None` for the store as a whole).
    pub session: Option<String>,
    /// The stable rule id (docs/errors.md, or [`TORN_TAIL`] / [`INTERRUPTED_TURN`]).
    pub rule: Rule,
    /// The inner rule of a wrapping rule (`load.validation`, `load.corrupt-committed-row`).
    pub cause: Option<Rule>,
    /// The C status the library reports for it.
    pub status: Status,
    /// The seq the finding is about, when known.
    pub seq: Option<u64>,
    /// A human message carrying the values that matter.
    pub message: String,
    /// Repairable or corrupt.
    pub severity: Severity,
}

impl Problem {
    /// A corrupt-severity finding from a library error; `seq` overrides the
    /// seq found in the error (its index, or "seq N" in its message).
    pub fn from_error(session: Option<&str>, e: &Error, seq: Option<u64>) -> Problem {
        Problem {
            session: session.map(str::to_string),
            rule: e.rule,
            cause: e.cause,
            status: e.status,
            seq: seq.or_else(|| seq_hint(e)),
            message: e.message.clone(),
            severity: Severity::Corrupt,
        }
    }

    /// The rule that identifies the condition: the cause of a wrapper, else the rule.
    pub fn inner_rule(&self) -> Rule {
        self.cause.unwrap_or(self.rule)
    }
}

/// The seq an error is about: its seq, else its index (seed errors, where
/// index = seq).
pub fn seq_hint(e: &Error) -> Option<u64> {
    e.seq.or(e.index.map(|i| i as u64))
}

/// The verification of one session.
#[derive(Debug, Clone)]
pub struct SessionReport {
    /// The session id.
    pub id: String,
    /// How many events the backend read (the valid prefix), when it could.
    pub events: Option<usize>,
    /// Every finding, in log order per pass.
    pub problems: Vec<Problem>,
    /// The copies earlier repairs kept beside the log of what they cut
    /// (oldest first).
    pub quarantined: Vec<std::path::PathBuf>,
}

impl SessionReport {
    /// The worst severity found, `None` when the session is clean.
    pub fn worst(&self) -> Option<Severity> {
        self.problems.iter().map(|p| p.severity).max()
    }
}

/// The verification of a store.
#[derive(Debug, Clone, Default)]
pub struct StoreReport {
    /// Findings about the store itself (listing failures).
    pub problems: Vec<Problem>,
    /// One report per session.
    pub sessions: Vec<SessionReport>,
}

impl StoreReport {
    /// The worst severity found anywhere, `None` when everything is clean.
    pub fn worst(&self) -> Option<Severity> {
        let store = self.problems.iter().map(|p| p.severity).max();
        let sessions = self.sessions.iter().filter_map(SessionReport::worst).max();
        store.max(sessions)
    }
}

/// What a verification tells while it runs, for a progress display.
#[derive(Debug)]
pub enum Step<'a> {
    /// Session `id`, the `index`th of `of`, is read next; `progress`
    /// follows the read when the backend can tell (see
    /// [`super::RangeReads::progress`]).
    Session {
        /// The session.
        id: &'a str,
        /// Its place among the sessions checked (from 0).
        index: usize,
        /// How many sessions are checked.
        of: usize,
        /// The log's length and how far its read has got.
        progress: Option<ReadProgress>,
    },
    /// The log could not be checked as it streamed: it is read whole
    /// (what was counted for it starts again).
    WholeLog,
    /// This many more events of the session were checked.
    Events(u64),
}

/// How many events a streamed verification keeps resident (rounded up to
/// whole chunks of the log: the chunk holding the last event read).
const VERIFY_WINDOW: usize = 1;

/// Verify every session of a store: those `list` returns, plus `extra`
/// ids (e.g. the JSONL layout's `session_ids`, which also finds logs `list` skips
/// silently because their header is unreadable).
/// Types outside the policy's vocabulary are reported unless marked `ignorable`. `step`
/// hears of each session and of the events checked.
pub fn verify_store(
    backend: &SharedBackend,
    extra: &[String],
    policy: &Policy,
    step: &mut dyn FnMut(Step<'_>),
) -> StoreReport {
    let mut report = StoreReport::default();
    let mut ids: Vec<String> = Vec::new();
    let listed = lock_backend(backend).list();
    match listed {
        Ok(rows) => ids.extend(rows.iter().map(|r| header_id(&r.header).to_string())),
        Err(e) => report.problems.push(Problem::from_error(None, &e, None)),
    }
    let listed = ids.len();
    let mut seen: HashSet<String> = ids.iter().cloned().collect();
    for id in extra {
        if seen.insert(id.clone()) {
            ids.push(id.clone());
        }
    }
    for (i, id) in ids.iter().enumerate() {
        let session = verify_one(backend, id, policy, (i, ids.len()), step);
        // A directory name that does not lead back to a log (an id the
        // walk could not decode exactly) is not a finding.
        let lost = i >= listed
            && session
                .problems
                .iter()
                .any(|p| p.rule == Rule::LoadNotFound);
        if !lost {
            report.sessions.push(session);
        }
    }
    report
}

/// Verify one stored session (read-only). `step` hears of the events
/// checked.
pub fn verify_session(
    backend: &SharedBackend,
    id: &str,
    policy: &Policy,
    step: &mut dyn FnMut(Step<'_>),
) -> SessionReport {
    verify_one(backend, id, policy, (0, 1), step)
}

/// [`verify_session`] of the `at.0`th session of `at.1`. A log streams
/// through the checks of a windowed open, a window of it resident; one
/// that cannot (a torn tail, damage, a broken rule, an older format) is
/// read whole and checked rule by rule, so that every finding is named.
fn verify_one(
    backend: &SharedBackend,
    id: &str,
    policy: &Policy,
    (index, of): (usize, usize),
    step: &mut dyn FnMut(Step<'_>),
) -> SessionReport {
    let mut report = SessionReport {
        id: id.to_string(),
        events: None,
        problems: Vec::new(),
        quarantined: Vec::new(),
    };
    let progress = read_progress(backend, id);
    step(Step::Session {
        id,
        index,
        of,
        progress,
    });
    // The last turn boundary read, for the finding of an open turn.
    let mut boundary: Option<Arc<Event>> = None;
    let streamed = read_streaming(backend, id, policy, VERIFY_WINDOW, &mut |batch| {
        if let Some(e) = batch
            .iter()
            .rev()
            .find(|e| e.ty == TURN_START || e.ty == TURN_END)
        {
            boundary = Some(e.clone());
        }
        step(Step::Events(batch.len() as u64));
    });
    let mut backend = lock_backend(backend);
    if let Ok(Some(read)) = streamed {
        // Everything an open checks passed as the log streamed.
        report.events = Some(read.stored);
        report.quarantined = backend.quarantined(id).unwrap_or_default();
        if !read.closers.is_empty() {
            let start = boundary.as_deref().filter(|e| e.ty == TURN_START);
            report.problems.push(interrupted(id, start, &read.closers));
        }
        mark_live(&mut **backend, id, &mut report);
        return report;
    }
    step(Step::WholeLog);
    verify_whole(&mut **backend, id, policy, report, step)
}

/// The whole-log verification: every rule checked event by event, then
/// the restore pipeline as the authority.
fn verify_whole(
    backend: &mut dyn Backend,
    id: &str,
    policy: &Policy,
    mut report: SessionReport,
    step: &mut dyn FnMut(Step<'_>),
) -> SessionReport {
    let loaded = match backend.load(id) {
        Ok(Some(loaded)) => loaded,
        Ok(None) => {
            let e = Error::new(
                Status::NotFound,
                Rule::LoadNotFound,
                format!("session \"{id}\" not found"),
            );
            report
                .problems
                .push(Problem::from_error(Some(id), &e, None));
            return report;
        }
        Err(e) => {
            report
                .problems
                .push(Problem::from_error(Some(id), &e, None));
            return report;
        }
    };
    report.events = Some(loaded.events.len());
    step(Step::Events(loaded.events.len() as u64));
    report.quarantined = backend.quarantined(id).unwrap_or_default();
    if let Some(p) = torn_problem(id, &loaded) {
        report.problems.push(p);
    }
    report.problems.extend(check_events(id, &loaded, policy));
    match super::restore(id, &loaded, policy) {
        Err(e) => {
            let rule = e.cause.unwrap_or(e.rule);
            if !report.problems.iter().any(|p| p.inner_rule() == rule) {
                report
                    .problems
                    .push(Problem::from_error(Some(id), &e, None));
            }
        }
        Ok(restored) if !restored.closers.is_empty() => {
            // Closers the next open would refuse: the open refuses now.
            if let Err(e) = super::restore::check_before_repair(id, &restored.closers) {
                report
                    .problems
                    .push(Problem::from_error(Some(id), &e, None));
                dedupe(&mut report.problems);
                return report;
            }
            let stored: Vec<_> = restored
                .session
                .events()
                .range(..restored.durable)
                .collect();
            let start = stored
                .iter()
                .rev()
                .find(|e| e.ty == TURN_START || e.ty == TURN_END)
                .filter(|e| e.ty == TURN_START);
            report
                .problems
                .push(interrupted(id, start.map(|e| &**e), &restored.closers));
        }
        Ok(_) => {}
    }
    dedupe(&mut report.problems);
    mark_live(backend, id, &mut report);
    report
}

/// Beside a running writer, what `open` would repair is the writer's work
/// in progress.
fn mark_live(backend: &mut dyn Backend, id: &str, report: &mut SessionReport) {
    let repairable = |p: &Problem| p.severity == Severity::Repairable;
    if report.problems.iter().any(repairable) && backend.writer_running(id) == Some(true) {
        for p in report.problems.iter_mut().filter(|p| repairable(p)) {
            p.severity = Severity::Live;
            p.message
                .push_str(" (the store's writer is running: this is its work in progress)");
        }
    }
}

fn torn_problem(id: &str, loaded: &Loaded) -> Option<Problem> {
    let torn = loaded.torn.as_ref()?;
    let first = (loaded.events.len() - torn.recovered) as u64;
    let why = torn.why.as_str();
    let (message, seq) = match torn.at {
        TornAt::Row(row) => (
            format!(
                "the {} rows from seq {row} on do not decode into the log after the last \
                 turn/end ({why}); open deletes them, keeping a copy beside the database",
                torn.length
            ),
            row,
        ),
        TornAt::Byte(at) if torn.recovered > 0 => (
            format!(
                "the log is torn at byte {at} ({why}, {} bytes); open cuts it there, keeping a \
                 copy beside the log, and writes the {} events readable from the torn frame \
                 (seq {first}..) again",
                torn.length, torn.recovered
            ),
            first,
        ),
        TornAt::Byte(at) => (
            format!(
                "the log is torn at byte {at} ({why}, {} bytes, after seq {}); open cuts the \
                 bytes after it, keeping a copy beside the log",
                torn.length,
                first.wrapping_sub(1) as i64
            ),
            first,
        ),
    };
    Some(Problem {
        session: Some(id.to_string()),
        rule: TORN_TAIL,
        cause: None,
        status: Status::Ok,
        seq: Some(seq),
        message,
        severity: Severity::Repairable,
    })
}

/// The finding of a log that ends inside a turn: `start` is its last
/// `turn/start` (when no `turn/end` follows it), `closers` what `open`
/// appends.
fn interrupted(id: &str, start: Option<&Event>, closers: &[Arc<Event>]) -> Problem {
    let turn = start
        .and_then(|e| e.data().as_object())
        .and_then(|d| d.get("turn"))
        .map_or_else(|| "?".to_string(), Value::to_json);
    let list: Vec<String> = closers
        .iter()
        .map(|c| format!("seq {} {}", c.seq, c.ty.to_string_lossy()))
        .collect();
    Problem {
        session: Some(id.to_string()),
        rule: INTERRUPTED_TURN,
        cause: None,
        status: Status::Ok,
        seq: start.map(|e| e.seq),
        message: format!(
            "turn {turn} is open at the end of the log; open appends {} closer(s): {}",
            closers.len(),
            list.join(", ")
        ),
        severity: Severity::Repairable,
    }
}

/// Keep the first finding of each (rule, seq).
fn dedupe(problems: &mut Vec<Problem>) {
    let mut seen = HashSet::new();
    problems.retain(|p| seen.insert((p.inner_rule(), p.seq)));
}

/// The restore rules, event by event, collecting every failure: header,
/// retired vocabulary, legacy upgrade, envelope, message shape, known
/// types, seed admission and surface admission.
fn check_events(id: &str, loaded: &Loaded, policy: &Policy) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut found = |e: Error, seq: Option<u64>| out.push(Problem::from_error(Some(id), &e, seq));
    // Header rules: the pipeline on the header alone.
    let header_only = Loaded {
        header: loaded.header.clone(),
        events: Vec::new(),
        torn: None,
        revision: loaded.revision.clone(),
    };
    if let Err(e) = super::restore(id, &header_only, policy) {
        found(e, None);
    }
    let values = upgraded(id, &loaded.values(), &mut found);
    let mut surface = Surface::new();
    for (i, v) in values.iter().enumerate() {
        let seq = Some(i as u64);
        let what = format!("session event at seq {i}");
        match Event::from_envelope(v.clone(), &what) {
            Err(e) => found(e, seq),
            Ok(event) => {
                if let Err(e) = seed::check_event_message(&event, &|| what.clone()) {
                    found(e, seq);
                }
                if let Err(e) =
                    upgrade::check_known_types(id, std::slice::from_ref(&event), &policy.vocabulary)
                {
                    found(e, seq);
                }
                if let Err(e) = seed::admit_event(&event, i, SeedMode::Restore) {
                    found(e, seq);
                }
            }
        }
        let log = ValueLog(&values[..i]);
        match surface.plan(&candidate_of(v), i as u64, Markers::Required, &log) {
            Ok(plan) => surface.apply(i as u64, &plan),
            Err(e) => found(e, seq),
        }
    }
    out
}

/// The stored events after the retired-vocabulary refusal and the legacy
/// upgrade; an event whose upgrade fails is reported and kept as stored.
fn upgraded(id: &str, events: &[Value], found: &mut impl FnMut(Error, Option<u64>)) -> Vec<Value> {
    let mut failed = vec![false; events.len()];
    for (i, e) in events.iter().enumerate() {
        if let Err(err) = upgrade::refuse_retired(id, std::slice::from_ref(e)) {
            found(err, Some(i as u64));
        }
        if let Err(err) = upgrade::upgrade(id, vec![e.clone()]) {
            found(err, Some(i as u64));
            failed[i] = true;
        }
    }
    // The message rewrite needs the ids of earlier events, so the events
    // that upgrade alone are upgraded together.
    let good: Vec<Value> = events
        .iter()
        .zip(&failed)
        .filter(|(_, f)| !**f)
        .map(|(e, _)| e.clone())
        .collect();
    let mut good = match upgrade::upgrade(id, good) {
        Ok(v) => v.into_iter(),
        Err(_) => return events.to_vec(),
    };
    events
        .iter()
        .zip(&failed)
        .map(|(e, f)| match f {
            true => e.clone(),
            false => good.next().unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_hints() {
        let e = Error::new(Status::Corrupt, Rule::LoadCorruptSeqGap, "seq gap").at_seq(3);
        assert_eq!(seq_hint(&e), Some(3));
        let e = Error::new(Status::Rejected, Rule::SeedEnvelopeInvalid, "seed").at_index(4);
        assert_eq!(seq_hint(&e), Some(4));
        // A seq in the message alone is not one.
        let e = Error::new(Status::Corrupt, Rule::LoadCorruptCommittedRow, "at seq 12");
        assert_eq!(seq_hint(&e), None);
    }
}
