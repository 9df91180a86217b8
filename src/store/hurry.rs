//! The writer's hint to its backend: whether a flush is waiting.

use std::sync::{Condvar, Mutex, MutexGuard};

/// How many flushes are waiting for the writer: a hint the store gives its
/// backend when it opens it (the JSONL and SQLite backends' `set_hurry`)
/// and its writer counts. While a flush waits, whoever asked for it is
/// blocked anyway and the backend may use spare cores for the write in
/// progress; otherwise appends may be running and it must not.
#[derive(Debug, Default)]
pub struct Hurry {
    waiting: Mutex<usize>,
    changed: Condvar,
}

impl Hurry {
    fn count(&self) -> MutexGuard<'_, usize> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a flush is waiting now.
    pub fn is_on(&self) -> bool {
        *self.count() > 0
    }

    /// Block until a flush is waiting or `done()` holds (re-checked at
    /// every [`Hurry::poke`]).
    pub fn wait_for(&self, done: impl Fn() -> bool) {
        let mut waiting = self.count();
        while *waiting == 0 && !done() {
            waiting = self
                .changed
                .wait(waiting)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Wake [`Hurry::wait_for`] callers to re-check their condition.
    pub fn poke(&self) {
        let _waiting = self.count();
        self.changed.notify_all();
    }

    /// Count a waiting flush until the guard drops.
    pub(crate) fn enter(&self) -> Waiting<'_> {
        *self.count() += 1;
        self.changed.notify_all();
        Waiting(self)
    }
}

/// A flush counted in [`Hurry`].
pub(crate) struct Waiting<'a>(&'a Hurry);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self.0.count();
        *waiting = waiting.saturating_sub(1);
    }
}
