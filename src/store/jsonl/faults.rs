//! Fault injection points of the JSONL backend. The backend calls [`hit`]
//! right before a filesystem step whose failure, or a change of the file
//! just before it, cannot be provoked from outside. Outside tests [`hit`]
//! does nothing; in tests a hook installed on the calling thread
//! (`install`, in test builds) may change the filesystem there or fail the step.

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
    /// Publishing a new log: it was linked into place; the fsync of its
    /// directory is next.
    PublishDirSync,
    /// Merging frames: the new log was written and synced; the check that
    /// the log is unchanged and the rename over it are next.
    CompactRename,
    /// Merging frames: the new log was renamed into place; the fsync of
    /// its directory is next.
    CompactDirSync,
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
    crate::store::faults::hit(&HOOK, (point, path.to_path_buf()))
}

#[cfg(test)]
thread_local! {
    static HOOK: crate::store::faults::Slot<(Point, std::path::PathBuf), io::Error> =
        const { crate::store::faults::Slot::new() };
}

/// Keeps a hook installed on this thread; dropping it removes the hook.
#[cfg(test)]
pub type Installed = crate::store::faults::Installed<(Point, std::path::PathBuf), io::Error>;

/// Install `hook`, called at every [`Point`] with the path concerned, on
/// the calling thread (replacing any other) until the returned guard drops.
#[cfg(test)]
pub fn install(mut hook: impl FnMut(Point, &Path) -> io::Result<()> + 'static) -> Installed {
    crate::store::faults::install(&HOOK, move |(point, path): (Point, std::path::PathBuf)| {
        hook(point, &path)
    })
}
