//! A session restored from stored events handed over in batches (the
//! windowed open of a log that is never held whole): the same admission,
//! fold and repair as [`Session::from_seed`] in restore mode.

use std::sync::Arc;

use super::{Policy, Session};
use crate::engine::event::{Event, STEP_END, TURN_END, TURN_START};
use crate::engine::repair;
use crate::engine::seed::{self, SeedMode};
use crate::engine::surface::Markers;
use crate::engine::window::EventSource;
use crate::error::Result;
use crate::json::{JsString, Value};

/// A session being restored (see [`Session::restoring`]).
#[derive(Debug)]
pub struct Restoring {
    session: Session,
}

impl Session {
    /// Start restoring session `id` from its stored `header` (checked
    /// first, as in restore mode); push its stored events in order, then
    /// [`Restoring::finish`]. Appends after it are checked under `policy`.
    pub fn restoring(
        id: &str,
        header: Value,
        markers: Markers,
        policy: Policy,
    ) -> Result<Restoring> {
        seed::validate_header(&header, id)?;
        Ok(Restoring {
            session: Session::bare(id, header, markers, policy),
        })
    }

    /// The closers crash repair appends to this log (repair.rs): it reads
    /// the log from the last `turn/start`, `turn/end` or `step/end` on,
    /// and after a `step/end` the last `turn/start` or `turn/end` before
    /// it, so only those are handed to it (types are found in place).
    pub fn closers(&self) -> Result<Vec<Event>> {
        let view = self.view();
        let len = self.log.len();
        let turn = |t: &JsString| t == TURN_START || t == TURN_END;
        let reset = view.rfind(len, |t| turn(t) || t == STEP_END)?;
        let from = reset.as_ref().map_or(0, |e| e.seq as usize);
        let mut tail = Vec::new();
        if reset.is_some_and(|e| e.ty == STEP_END) {
            tail.extend(view.rfind(from, turn)?);
        }
        view.visit_range(from, len, |e| tail.push(e.clone()))?;
        Ok(repair::closers(tail.iter().map(|e| &**e)))
    }
}

impl Restoring {
    /// Keep only about the last `keep` events resident as events arrive
    /// (see [`Session::set_window`]).
    pub fn set_window(&mut self, source: Arc<dyn EventSource>, keep: usize) {
        self.session.set_window(source, keep);
    }

    /// The next stored event: admitted by the seed rules (restore mode)
    /// and folded into the surface.
    pub fn push(&mut self, e: Arc<Event>) -> Result<()> {
        let i = self.session.log.len();
        seed::admit_event(&e, i, SeedMode::Restore)?;
        self.session.push_seeded(e, i)
    }

    /// How many events were pushed.
    pub fn len(&self) -> usize {
        self.session.log.len()
    }

    /// True before the first event.
    pub fn is_empty(&self) -> bool {
        self.session.log.is_empty()
    }

    /// Evict what lies before the window (between batches).
    pub fn evict_old(&mut self) {
        self.session.evict_old();
    }

    /// Append the closers crash repair finds and the end-seed marker; the
    /// session and the closers.
    pub fn finish(mut self, now: i64) -> Result<(Session, Vec<Arc<Event>>)> {
        let closers = self.session.closers()?;
        repair::check_closers(&closers)?;
        let closers: Vec<Arc<Event>> = closers.into_iter().map(Arc::new).collect();
        for c in &closers {
            self.push(c.clone())?;
        }
        let mut s = self.session;
        s.seal(now)?;
        Ok((s, closers))
    }
}
