//! Reading a store without opening its sessions for writing: the listing,
//! a lenient inspection, and repair as its own act.

use std::sync::Arc;

use super::backend::{Cut, Torn};
use super::restore::{restore, restore_lenient, Finding};
use super::writer::lock_backend;
use super::{not_found, Store};
use crate::engine::Event;
use crate::error::Result;
use crate::json::Value;
use crate::rule::Rule;

/// One stored session of [`Store::list`].
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// The stored session header.
    pub header: Value,
    /// The revision token: it changes exactly when the stored log changes.
    pub revision: String,
}

/// What [`Store::inspect`] read.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The stored session header.
    pub header: Value,
    /// The revision token of the log read.
    pub revision: String,
    /// The torn tail found after the last complete record, if any.
    pub torn: Option<Torn>,
    /// The stored events, up to the torn tail.
    pub events: Vec<Arc<Event>>,
    /// The closers a repair would append (nothing is written).
    pub repair: Vec<Arc<Event>>,
    /// The events a strict open refuses, one by one, with what it reports.
    pub problems: Vec<Finding>,
    /// The copies of what earlier repairs cut from this log, kept beside
    /// it (oldest first).
    pub quarantined: Vec<std::path::PathBuf>,
}

/// What [`Store::repair`] found and did.
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The torn tail found, if any (cut by the repair).
    pub torn: Option<Torn>,
    /// How many events were read from the complete part of the log.
    pub stored: usize,
    /// The closers of the interrupted turn, step or tool calls.
    pub closers: Vec<Arc<Event>>,
    /// True when the repair was written (not a dry run, and something to
    /// repair).
    pub applied: bool,
    /// The seq of the last event after a written repair.
    pub last_seq: Option<u64>,
    /// What a written repair cut, and where the copy of it is kept.
    pub cut: Option<Cut>,
}

/// How [`Store::repair`] repairs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// Only report what the repair would do.
    pub dry_run: bool,
    /// Salvage a damaged log: damage a plain repair (and an open) refuses
    /// (a zstd frame that fails its checksum, bytes after the last frame
    /// that no crash leaves) ends the readable prefix instead, and the
    /// rest is cut with a copy kept beside the log. What the damage held
    /// is lost to the log.
    pub salvage: bool,
}

impl RepairReport {
    /// True when the log has neither a torn tail nor an interrupted turn.
    pub fn is_clean(&self) -> bool {
        self.torn.is_none() && self.closers.is_empty()
    }
}

impl Store {
    /// Every stored session whose header reads, in the backend's order. A
    /// session whose stored header cannot be read is left out (the CLI's
    /// `list` and `verify` name it).
    pub fn list(&self) -> Result<Vec<SessionSummary>> {
        let rows = lock_backend(&self.backend).list()?;
        Ok(rows
            .into_iter()
            .filter(|r| r.problem.is_none())
            .map(|r| SessionSummary {
                id: r
                    .header
                    .as_object()
                    .and_then(|o| o.get("id"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                header: r.header,
                revision: r.revision,
            })
            .collect())
    }

    /// Read a stored session without repairing it: the stored events plus
    /// the closers repair would append (in memory only), whether a torn
    /// tail was found, and the events a strict open refuses one by one (an
    /// undeclared type, a malformed message or request header), read as
    /// stored and named in `problems`. Storage and revision stay
    /// untouched. An open session is read as it is now (after a flush).
    pub fn inspect(&self, id: &str) -> Result<Inspection> {
        if self.lock().live.contains(id) {
            self.writer.flush(id)?;
        }
        let (loaded, quarantined) = {
            let mut backend = lock_backend(&self.backend);
            let loaded = backend.load(id)?.ok_or_else(|| not_found(id))?;
            (loaded, backend.quarantined(id)?)
        };
        let (restored, problems) = restore_lenient(id, &loaded, &self.policy)?;
        // The stored events, without the closers and the end-seed marker
        // the constructor may have added.
        let events = restored.session.events().range(..restored.stored).collect();
        Ok(Inspection {
            header: loaded.header,
            revision: loaded.revision,
            torn: loaded.torn,
            events,
            repair: restored.closers,
            problems,
            quarantined,
        })
    }

    /// Repair a stored session that is not open, as an open would (cut a
    /// torn tail, keeping a copy of it beside the log, and write the
    /// closers of an interrupted turn), without handing out a session;
    /// `options` may ask for a dry run or a salvage of damage. The log is
    /// read once; a clean log is left as it is.
    pub fn repair(&self, id: &str, options: RepairOptions) -> Result<RepairReport> {
        let dry_run = options.dry_run;
        if !dry_run {
            self.check_writable("repair")?;
        }
        let _reserved = self.reserve(id, Rule::LoadLivePrepare, "repair")?;
        let mut backend = lock_backend(&self.backend);
        let loaded = match options.salvage {
            true => backend.load_salvaging(id)?,
            false => backend.load(id)?,
        };
        let loaded = loaded.ok_or_else(|| not_found(id))?;
        let restored = restore(id, &loaded, &self.policy)?;
        super::restore::check_before_repair(id, &restored.closers)?;
        let mut report = RepairReport {
            torn: loaded.torn.clone(),
            stored: loaded.events.len(),
            closers: restored.closers,
            applied: false,
            last_seq: None,
            cut: None,
        };
        if dry_run || report.is_clean() {
            return Ok(report);
        }
        // Everything after the durable prefix (recovered torn events, the
        // closers, the end-seed marker), as an open writes it.
        let events = restored.session.events();
        let tail: Vec<Arc<Event>> = events.range(restored.durable..).collect();
        report.cut = backend.commit_repair(&loaded.header, loaded.torn.as_ref(), &tail)?;
        report.applied = true;
        report.last_seq = (events.len() as u64).checked_sub(1);
        Ok(report)
    }
}
