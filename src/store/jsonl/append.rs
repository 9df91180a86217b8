//! Writing a session's log: publishing a new log atomically (with the
//! finish of a publish whose directory sync failed) and appending a batch
//! durably, noting what a merge of small frames may take.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use super::{
    batch, compact, fsio, header_line, layout, zstd_frames, Compression, JsonlBackend, HANDLES_KEPT,
};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;
use crate::store::seqs::check_contiguous;

impl JsonlBackend {
    /// Publish the new log of `header` holding `events` (from seq 0).
    pub(super) fn materialize(
        &mut self,
        segment: &str,
        header: &Value,
        events: &[Arc<Event>],
    ) -> Result<()> {
        let id = layout::header_js_id(header).to_string_lossy();
        check_contiguous(&id, 0, events)?;
        let project = layout::project_dir_of(header)?;
        if let Some(existing) = layout::find_log(&self.root, segment, self.compression)? {
            if let Some(&(file, stored)) = self.half_published.get(segment) {
                if fsio::file_id(&existing)? == file {
                    return self.finish_publish(segment, header, existing, stored, events);
                }
            }
            return Err(Error::new(
                Status::Conflict,
                Rule::JsonlExistsOnMaterialize,
                format!(
                    "refusing to materialize {id}: a log already exists at {}",
                    existing.display()
                ),
            ));
        }
        let project_dir = self.root.join(project);
        let dir = project_dir.join(segment);
        // The root is the configured path, a link or not; below it nothing is.
        fsio::ensure_root(&self.root)?;
        fsio::ensure_dir(&project_dir)?;
        fsio::ensure_dir(&dir)?;
        layout::check_encoding(&dir, self.compression)?;
        let path = dir.join(layout::log_name(self.compression));
        let line = header_line(header);
        let compression = self.compression;
        self.scratch.set_workers(self.workers());
        let scratch = &mut self.scratch;
        let mut linked = None;
        let published = fsio::publish(&path, &mut linked, |mut file| {
            match compression {
                Compression::None => file.write_all(line.as_bytes())?,
                Compression::Zstd => {
                    let mut frame = Vec::new();
                    zstd_frames::compress_frame(line.as_bytes(), &mut frame)?;
                    file.write_all(&frame)?;
                }
            }
            batch::write_batch(file, events, compression, scratch)
        });
        if let Err(e) = published {
            if let Some(file) = linked {
                self.half_published
                    .insert(segment.to_string(), (file, events.len() as u64));
            }
            return Err(e);
        }
        self.remember(segment, path, Some(events.len() as u64));
        Ok(())
    }

    /// Finish a publish of `segment` that failed after its log `path`,
    /// holding `stored` events, was linked into place: make the directory
    /// entry durable, then append what of `events` (from seq 0, as the
    /// writer retries them) the log does not hold yet. The writer goes on
    /// from what is on disk, never writing an event twice.
    fn finish_publish(
        &mut self,
        segment: &str,
        header: &Value,
        path: PathBuf,
        stored: u64,
        events: &[Arc<Event>],
    ) -> Result<()> {
        if let Some(dir) = path.parent() {
            fsio::fsync_dir(dir)?;
        }
        self.half_published.remove(segment);
        self.remember(segment, path, Some(stored));
        let rest = &events[(stored as usize).min(events.len())..];
        if rest.is_empty() {
            return Ok(());
        }
        self.append_batch(segment, header, rest)
    }

    /// Append `events` to the existing log of `header`, durably.
    pub(super) fn append_batch(
        &mut self,
        segment: &str,
        header: &Value,
        events: &[Arc<Event>],
    ) -> Result<()> {
        let mut job = self.prepare_append(segment, header, events)?;
        self.scratch.set_workers(self.workers());
        job.run(&mut self.scratch);
        self.finish_append(job)
    }

    /// Everything an append to the existing log of `segment` needs before
    /// its write, done on this backend's state: the seqs checked, the log
    /// open, a directory entry a merge left unsynced made durable. The
    /// open file moves into the job.
    pub(super) fn prepare_append(
        &mut self,
        segment: &str,
        header: &Value,
        events: &[Arc<Event>],
    ) -> Result<AppendJob> {
        let id = layout::header_js_id(header).to_string_lossy();
        let state = self.state(segment, header)?;
        check_contiguous(&id, state.next.unwrap_or(events[0].seq), events)?;
        if state.file.is_none() {
            let open = fsio::open_append(&state.path)?;
            let open = open.ok_or_else(|| {
                Error::new(
                    Status::NotFound,
                    Rule::LoadNotFound,
                    format!("session \"{id}\" has no stored log"),
                )
            })?;
            let open_handles = self.logs.values().filter(|s| s.file.is_some()).count();
            if open_handles >= HANDLES_KEPT {
                self.logs.values_mut().for_each(|s| s.file = None);
            }
            self.logs.get_mut(segment).expect("state exists").file = Some(open);
        }
        let state = self.logs.get_mut(segment).expect("state exists");
        if state.dir_unsynced {
            if let Some(dir) = state.path.parent() {
                fsio::fsync_dir(dir)?;
            }
            state.dir_unsynced = false;
        }
        state.in_flight = true;
        Ok(AppendJob {
            segment: segment.to_string(),
            file: state.file.take().expect("opened above"),
            path: state.path.clone(),
            rollback: state.rollback.take(),
            events: events.to_vec(),
            compression: self.compression,
            lengths: (None, None),
            result: Ok(()),
        })
    }

    /// Record what the append `job` did on this backend's state: the log
    /// continues after its events, or (after a failure) is opened again
    /// by the next write, which first finishes a rollback that failed.
    pub(super) fn finish_append(&mut self, job: AppendJob) -> Result<()> {
        let compression = self.compression;
        let Some(state) = self.logs.get_mut(&job.segment) else {
            // Kept while in flight (`remember`); only a delete drops it.
            return job.result;
        };
        state.in_flight = false;
        state.rollback = job.rollback;
        match &job.result {
            Ok(()) => {
                state.next = Some(job.events[job.events.len() - 1].seq + 1);
                state.file = Some(job.file);
            }
            Err(_) => state.file = None,
        }
        if job.result.is_ok() && compression == Compression::Zstd {
            match job.lengths {
                (Some(before), Some(after)) => state.tail.appended(before, after),
                _ => state.tail = compact::Tail::default(),
            }
            if state.tail.due(false) {
                self.merges_due.insert(job.segment);
            }
        }
        job.result
    }
}

/// One append to an existing log, between [`JsonlBackend::prepare_append`]
/// and [`JsonlBackend::finish_append`]: [`AppendJob::run`] needs nothing of
/// the backend but a scratch, so the appends of several sessions run on
/// threads of their own and their syncs overlap, without the backend.
pub(super) struct AppendJob {
    segment: String,
    file: File,
    path: PathBuf,
    rollback: Option<u64>,
    events: Vec<Arc<Event>>,
    compression: Compression,
    /// The log's length before and after the write (zstd: what a merge
    /// may take).
    lengths: (Option<u64>, Option<u64>),
    result: Result<()>,
}

impl AppendJob {
    /// Write the batch and sync it (or cut a failed write back off).
    pub(super) fn run(&mut self, scratch: &mut batch::Scratch) {
        let compression = self.compression;
        let len = |file: &File| {
            let zstd = compression == Compression::Zstd;
            zstd.then(|| file.metadata().map(|m| m.len()).ok())
                .flatten()
        };
        let before = len(&self.file);
        let events = &self.events;
        let write = |file: &File| batch::write_batch(file, events, compression, scratch);
        self.result = fsio::append_durable(&self.file, &self.path, &mut self.rollback, write);
        self.lengths = (before, len(&self.file));
    }
}
