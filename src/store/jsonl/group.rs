//! Writing the batches of several sessions at once (a group commit): each
//! session has a log file of its own, so its append is prepared on the
//! backend's state, then the writes and syncs of all the appends run at
//! the same time, one thread per log (the file system can then commit
//! their syncs together), without the backend (so the writes of another
//! round, of other sessions, may run meanwhile), and each result is
//! recorded on its own.

use std::any::Any;

use super::append::AppendJob;
use super::batch::Scratch;
use super::{encode_segment, layout, JsonlBackend};
use crate::error::Result;
use crate::store::backend::{Batch, Detached};

/// Threads that write logs at once for one group, at most (beyond it a
/// thread writes several logs, one after another).
const MAX_THREADS: usize = 64;

/// The appends of a group, prepared: they run without the backend.
pub(super) struct GroupWrite {
    /// Each batch's result where it is known before the run (an empty
    /// batch, a new log published, a refusal).
    results: Vec<Option<Result<()>>>,
    jobs: Vec<(usize, AppendJob)>,
    /// The threads' scratches, lent by the backend.
    scratches: Vec<Scratch>,
    /// zstd workers for a group of one append (see `JsonlBackend::workers`).
    workers: u32,
}

impl Detached for GroupWrite {
    fn run(&mut self) {
        let workers = if self.jobs.len() == 1 {
            self.workers
        } else {
            0
        };
        let threads = self.jobs.len().clamp(1, MAX_THREADS);
        if self.scratches.len() < threads {
            self.scratches.resize_with(threads, Scratch::default);
        }
        let per = self.jobs.len().div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            let mut groups = self.jobs.chunks_mut(per).zip(self.scratches.iter_mut());
            let first = groups.next();
            for (group, scratch) in groups {
                scope.spawn(move || {
                    scratch.set_workers(0);
                    for (_, job) in group.iter_mut() {
                        job.run(scratch);
                    }
                });
            }
            if let Some((group, scratch)) = first {
                scratch.set_workers(workers);
                for (_, job) in group.iter_mut() {
                    job.run(scratch);
                }
            }
        });
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

impl JsonlBackend {
    /// [`crate::store::Backend::prepare_write`]: new logs are published
    /// now, one at a time; the appends to existing logs are prepared.
    pub(super) fn prepare_group(&mut self, batches: &[Batch<'_>]) -> GroupWrite {
        let mut results: Vec<Option<Result<()>>> = (0..batches.len()).map(|_| None).collect();
        let mut jobs = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            let events = b.events.to_slice();
            if events.is_empty() {
                results[i] = Some(Ok(()));
                continue;
            }
            let segment = match encode_segment(&layout::header_js_id(b.header)) {
                Ok(s) => s,
                Err(e) => {
                    results[i] = Some(Err(e));
                    continue;
                }
            };
            if b.materialize {
                results[i] = Some(self.materialize(&segment, b.header, &events));
                continue;
            }
            match self.prepare_append(&segment, b.header, &events) {
                Ok(job) => jobs.push((i, job)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        let lent = jobs.len().min(self.scratches.len());
        let scratches = self.scratches.split_off(self.scratches.len() - lent);
        GroupWrite {
            results,
            jobs,
            scratches,
            workers: self.workers(),
        }
    }

    /// [`crate::store::Backend::finish_write`] of a group.
    pub(super) fn finish_group(&mut self, group: GroupWrite) -> Vec<Result<()>> {
        let GroupWrite {
            mut results,
            jobs,
            scratches,
            ..
        } = group;
        self.scratches.extend(scratches);
        // Rounds that overlapped each lent some: keep no more than one
        // round of threads uses.
        self.scratches.truncate(MAX_THREADS);
        for (i, job) in jobs {
            results[i] = Some(self.finish_append(job));
        }
        results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
    }

    /// [`crate::store::Backend::write`]: a group prepared, run and
    /// finished in one go.
    pub(super) fn write_group(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        let mut group = self.prepare_group(batches);
        group.run();
        self.finish_group(group)
    }

    /// [`JsonlBackend::finish_group`] of a detached write.
    pub(super) fn finish_detached(&mut self, detached: Box<dyn Detached>) -> Vec<Result<()>> {
        // A write of another backend gives no results: each batch counts
        // as failed.
        match detached.into_any().downcast::<GroupWrite>() {
            Ok(group) => self.finish_group(*group),
            Err(_) => Vec::new(),
        }
    }
}
