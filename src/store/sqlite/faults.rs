//! Fault injection points of the SQLite backend. The backend calls [`hit`]
//! right before a statement whose failure cannot be provoked from outside
//! at will: a journal-mode switch answered by an instant SQLITE_BUSY (a
//! real one waits in SQLite's busy handler for the whole busy timeout) or
//! by another SQLite error. Outside tests [`hit`] does nothing; in tests a
//! hook installed on the calling thread (`install`, in test builds) sees the point and
//! may fail the statement instead of letting it run.

use std::time::Instant;

/// A place in the backend where a test hook runs, named after the
/// statement that comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Open, step 5 of docs/formats.md §4.3: a `PRAGMA journal_mode`
    /// attempt runs next. `cutoff` is `busyTimeoutMs` after the open
    /// started, the instant from which no attempt may start.
    JournalMode {
        /// The open's start plus its busy timeout.
        cutoff: Instant,
    },
}

/// Run the test hook of this thread, if any, at `point`. An error stands
/// for the failure of the statement that follows, which then does not run.
#[cfg(not(test))]
#[inline(always)]
pub fn hit(_point: Point) -> rusqlite::Result<()> {
    Ok(())
}

/// Run the test hook of this thread, if any, at `point`. An error stands
/// for the failure of the statement that follows, which then does not run.
#[cfg(test)]
pub fn hit(point: Point) -> rusqlite::Result<()> {
    crate::store::faults::hit(&HOOK, point)
}

#[cfg(test)]
thread_local! {
    static HOOK: crate::store::faults::Slot<Point, rusqlite::Error> =
        const { crate::store::faults::Slot::new() };
}

/// Keeps a hook installed on this thread; dropping it removes the hook.
#[cfg(test)]
pub type Installed = crate::store::faults::Installed<Point, rusqlite::Error>;

/// Install `hook`, called at every [`Point`], on the calling thread
/// (replacing any other) until the returned guard drops.
#[cfg(test)]
pub fn install(hook: impl FnMut(Point) -> rusqlite::Result<()> + 'static) -> Installed {
    crate::store::faults::install(&HOOK, hook)
}
