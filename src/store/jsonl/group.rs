//! Writing the batches of several sessions at once (a group commit): each
//! session has a log file of its own, so its append is prepared on the
//! backend's state, then the writes and syncs of all the appends run at
//! the same time, one thread per log (the file system can then commit
//! their syncs together), and each result is recorded on its own.

use std::borrow::Cow;
use std::sync::Arc;

use super::append::AppendJob;
use super::batch::Scratch;
use super::{encode_segment, layout, JsonlBackend};
use crate::engine::Event;
use crate::error::Result;
use crate::store::backend::Batch;

/// Threads that write logs at once, at most (beyond it a thread writes
/// several logs, one after another).
const MAX_THREADS: usize = 64;

impl JsonlBackend {
    /// [`crate::store::Backend::write`]: new logs are published one at a
    /// time; appends to existing logs run at the same time.
    pub(super) fn write_group(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        let slices: Vec<Cow<'_, [Arc<Event>]>> =
            batches.iter().map(|b| b.events.to_slice()).collect();
        let mut results: Vec<Option<Result<()>>> = (0..batches.len()).map(|_| None).collect();
        let mut jobs: Vec<(usize, AppendJob<'_>)> = Vec::new();
        for (i, (b, events)) in batches.iter().zip(&slices).enumerate() {
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
                results[i] = Some(self.materialize(&segment, b.header, events));
                continue;
            }
            match self.prepare_append(&segment, b.header, events) {
                Ok(job) => jobs.push((i, job)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        self.run_jobs(&mut jobs);
        for (i, job) in jobs {
            results[i] = Some(self.finish_append(job));
        }
        results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
    }

    /// Run the appends `jobs`: one on this thread with the backend's own
    /// scratch (zstd workers as it would use them alone), several on
    /// threads of their own, each with a scratch kept for the next group.
    fn run_jobs(&mut self, jobs: &mut [(usize, AppendJob<'_>)]) {
        let compression = self.compression;
        if jobs.len() <= 1 {
            self.scratch.set_workers(self.workers());
            for (_, job) in jobs.iter_mut() {
                job.run(compression, &mut self.scratch);
            }
            return;
        }
        let threads = jobs.len().min(MAX_THREADS);
        if self.scratches.len() < threads {
            self.scratches.resize_with(threads, Scratch::default);
        }
        let per = jobs.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let mut groups = jobs.chunks_mut(per).zip(self.scratches.iter_mut());
            let first = groups.next();
            for (group, scratch) in groups {
                scope.spawn(move || {
                    scratch.set_workers(0);
                    for (_, job) in group.iter_mut() {
                        job.run(compression, scratch);
                    }
                });
            }
            if let Some((group, scratch)) = first {
                scratch.set_workers(0);
                for (_, job) in group.iter_mut() {
                    job.run(compression, scratch);
                }
            }
        });
    }
}
