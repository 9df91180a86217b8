//! Fault injection points of the JSONL backend. The backend calls [`hit`]
//! right before a filesystem step whose failure, or a change of the file
//! just before it, cannot be provoked from outside. Outside tests [`hit`]
//! does nothing; in tests a hook installed on the calling thread
//! ([`install`]) may change the filesystem there or fail the step.

use std::io;
use std::path::Path;

/// A place in the backend where a test hook runs, named after the step
/// that comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// `list`: a session directory was found; its log is stat'ed next
    /// (the stat that gives the listed revision).
    ListStat,
    /// `revision`: the log's path is known (remembered or just found);
    /// it is stat'ed next.
    RevisionStat,
    /// Whole-log read: the bytes were read; the second stat is next.
    ReadRestat,
    /// Streaming read: the file was read to its end; the second stat is next.
    StreamRestat,
    /// Append: the batch was written; the fsync is next.
    AppendSync,
    /// Rollback of a failed append: the log was reopened; the truncate
    /// back to the old size is next.
    RollbackTruncate,
}

/// Run the test hook of this thread, if any, at `point` for `path`. An
/// error stands for the failure of the step that follows.
#[cfg(not(test))]
#[inline(always)]
pub fn hit(_point: Point, _path: &Path) -> io::Result<()> {
    Ok(())
}

/// Run the test hook of this thread, if any, at `point` for `path`. An
/// error stands for the failure of the step that follows.
#[cfg(test)]
pub fn hit(point: Point, path: &Path) -> io::Result<()> {
    // Taken out while it runs, so a hook may use the backend's helpers.
    let hook = HOOK.with(|h| h.borrow_mut().take());
    let Some(mut hook) = hook else {
        return Ok(());
    };
    let result = hook(point, path);
    HOOK.with(|h| {
        let mut slot = h.borrow_mut();
        if slot.is_none() {
            *slot = Some(hook);
        }
    });
    result
}

/// A test hook: called at every [`Point`] with the path concerned.
#[cfg(test)]
type Hook = Box<dyn FnMut(Point, &Path) -> io::Result<()>>;

#[cfg(test)]
thread_local! {
    static HOOK: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
}

/// Keeps a hook installed on this thread; dropping it removes the hook.
#[cfg(test)]
#[must_use = "the hook is removed when this guard drops"]
pub struct Installed(());

#[cfg(test)]
impl Drop for Installed {
    fn drop(&mut self) {
        HOOK.with(|h| h.borrow_mut().take());
    }
}

/// Install `hook` on the calling thread (replacing any other) until the
/// returned guard drops.
#[cfg(test)]
pub fn install(hook: impl FnMut(Point, &Path) -> io::Result<()> + 'static) -> Installed {
    HOOK.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    Installed(())
}
