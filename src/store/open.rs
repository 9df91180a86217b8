//! Opening a stored session: the whole log loaded, restored, repaired
//! durably and handed out; a windowed open streamed from the backend a
//! batch at a time when the log is clean; a read-only store's open, which
//! repairs nothing.

use std::sync::Arc;

use super::restore::{self, check_stored_header, fast_event, restore_for_reading, restore_taking};
use super::writer::lock_backend;
use super::{ids, not_found, now_ms, window, BackendKind, Opened, Store, Stored};
use crate::engine::session::Restoring;
use crate::engine::{upgrade, Event, Markers, Session};
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;

impl Store {
    /// Open a stored session: load, upgrade, validate, repair durably, and
    /// hand it out. Returns the session and the closers repair appended.
    pub fn open_session(self: &Arc<Store>, id: &str) -> Result<Opened> {
        self.open_session_with(id, None)
    }

    /// [`Store::open_session`] keeping only about the last `keep` events
    /// resident: older ones are read back from storage when a call needs
    /// them (a fork, `events` or a derive reaching back, a rewrite of an
    /// old tool result). Everything is validated, folded and repaired as
    /// in a full open. A log stored in an older format, which the open
    /// rewrites in memory, and a memory store's log stay fully resident.
    pub fn open_session_windowed(self: &Arc<Store>, id: &str, keep: usize) -> Result<Opened> {
        self.open_session_with(id, Some(keep))
    }

    fn open_session_with(self: &Arc<Store>, id: &str, window: Option<usize>) -> Result<Opened> {
        // Reserved before anything reads the log: no other open, repair or
        // delete of this id runs until the handle is closed.
        let reserved = self.reserve(id, Rule::LoadLivePrepare, "open")?;
        if self.read_only {
            return self.open_for_reading(reserved);
        }
        // Events an earlier handle left queued (its close failed to write
        // them) go first, or the open fails: the log read below must be
        // what the queue continues.
        match self.drain(id) {
            Err(e) if e.status != Status::Conflict => return Err(e),
            _ => {}
        }
        let reserved = match window {
            Some(keep) => match self.open_streaming(reserved, keep)? {
                Ok(opened) => return Ok(opened),
                Err(reserved) => reserved,
            },
            None => reserved,
        };
        let mut loaded = lock_backend(&self.backend)
            .load(id)?
            .ok_or_else(|| not_found(id))?;
        let restored = restore_taking(id, &mut loaded, &self.policy)?;
        restore::check_before_repair(id, &restored.closers)?;
        let mut session = restored.session;
        // Everything after the stored prefix (recovered torn events, closers,
        // the end-seed marker) is written before the handle is returned.
        let tail: Vec<Arc<Event>> = session.events().range(restored.durable..).collect();
        let mut cut = None;
        if loaded.torn.is_some() || !tail.is_empty() {
            cut = lock_backend(&self.backend).commit_repair(
                &loaded.header,
                loaded.torn.as_ref(),
                &tail,
            )?;
        }
        drop(loaded);
        if let Some(keep) =
            window.filter(|_| restored.as_stored && self.kind != BackendKind::Memory)
        {
            let source = Arc::new(window::StoredEvents::new(self, id));
            session.set_window(source, keep);
        }
        self.return_freed_memory();
        let live = self.register(reserved, session, true, None)?;
        Ok(Opened {
            session: live,
            repaired: restored.closers,
            cut,
        })
    }

    /// A read-only store's open: the stored log as it is, up to its last
    /// complete record, nothing repaired or written (a windowed open reads
    /// the whole log too).
    fn open_for_reading(self: &Arc<Store>, reserved: ids::Reserved<'_>) -> Result<Opened> {
        let id = reserved.id();
        let mut loaded = lock_backend(&self.backend)
            .load(id)?
            .ok_or_else(|| not_found(id))?;
        let restored = restore_for_reading(id, &mut loaded, &self.policy)?;
        drop(loaded);
        self.return_freed_memory();
        let live = self.register(reserved, restored.session, true, None)?;
        Ok(Opened {
            session: live,
            repaired: Vec::new(),
            cut: None,
        })
    }

    /// With `"trimHeap": true`, give the heap pages freed by a large open
    /// (read buffers, decompressed frames, the stored rows) back to the
    /// system, so resident memory after an open tracks the session rather
    /// than the peak of reading it. Process-wide, so the host's choice.
    fn return_freed_memory(&self) {
        // Elsewhere than glibc there is no call for it: nothing to do.
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        let _ = self.trim_heap;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if self.trim_heap {
            // SAFETY: malloc_trim only releases free heap memory; no pointer
            // is involved and it is safe to call at any time from any thread.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    }

    /// The windowed open of a clean, current-format log streamed from the
    /// backend a batch at a time, so the whole log is never in memory.
    /// `None` sends the open down the whole-log path, which decides about
    /// (and reports) everything unusual: a torn tail, an older format, a
    /// rule broken, a backend that cannot stream.
    pub(super) fn open_streaming<'s>(
        self: &'s Arc<Store>,
        reserved: ids::Reserved<'s>,
        keep: usize,
    ) -> Result<std::result::Result<Opened, ids::Reserved<'s>>> {
        let id = reserved.id().to_string();
        let id = id.as_str();
        let source: Arc<dyn crate::engine::window::EventSource> =
            Arc::new(window::StoredEvents::new(self, id));
        let start = |header: &Value| -> Result<Restoring> {
            check_stored_header(id, header)?;
            let mut r =
                Session::restoring(id, header.clone(), Markers::Required, self.policy.clone())?;
            r.set_window(source.clone(), keep);
            Ok(r)
        };
        // Two stages: this thread reads and decodes the stored log (the
        // backend's streaming read), a worker checks and folds each batch
        // as it comes, so the open keeps both cores busy as a full open
        // does. Anything unusual leaves the open to the whole-log path.
        let (streamed, restoring) = std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(Option<Value>, Vec<Stored>)>(2);
            let worker = scope.spawn(move || -> Result<Option<Restoring>> {
                let mut restoring: Option<Restoring> = None;
                for (header, batch) in rx {
                    let r = match (&mut restoring, header) {
                        (Some(r), _) => r,
                        (None, Some(h)) => restoring.insert(start(&h)?),
                        (None, None) => return Ok(None),
                    };
                    for item in batch {
                        let e = fast_event(item).map_err(|_| {
                            Error::new(Status::Internal, Rule::OpenNotStreamable, "an older format")
                        })?;
                        upgrade::check_known_types(
                            id,
                            std::iter::once(&*e),
                            &self.policy.vocabulary,
                        )?;
                        r.push(e)?;
                    }
                    r.evict_old();
                }
                Ok(restoring)
            });
            let mut first = true;
            let mut send = |header: &Value, batch: Vec<Stored>| -> Result<()> {
                let header = std::mem::take(&mut first).then(|| header.clone());
                tx.send((header, batch)).map_err(|_| {
                    Error::new(
                        Status::Internal,
                        Rule::OpenNotStreamable,
                        "the fold stopped",
                    )
                })
            };
            let streamed = {
                let mut backend = lock_backend(&self.backend);
                match backend.range_reads() {
                    Some(reads) => reads.load_streaming(id, &mut send),
                    None => Ok(None),
                }
            };
            drop(tx);
            let restoring = worker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (streamed, restoring)
        });
        let (Ok(Some(streamed)), Ok(restoring)) = (streamed, restoring) else {
            return Ok(Err(reserved));
        };
        let restoring = match restoring {
            Some(r) => r,
            None => match start(&streamed.header) {
                Ok(r) => r,
                Err(_) => return Ok(Err(reserved)),
            },
        };
        let stored = restoring.len();
        let finished = restoring.finish(now_ms());
        let Ok((mut session, closers)) = finished else {
            return Ok(Err(reserved));
        };
        if restore::check_before_repair(id, &closers).is_err() {
            // The whole-log open refuses, naming the rule.
            return Ok(Err(reserved));
        }
        // The closers and the end-seed marker are written before the
        // handle is returned, as in a full open.
        let tail = session
            .events_in(stored, session.events().len())
            .map_err(|e| e.prefixed("windowed open: "))?;
        if !tail.is_empty() {
            lock_backend(&self.backend).commit_repair(&streamed.header, None, &tail)?;
        }
        session.evict_old();
        self.return_freed_memory();
        let live = self.register(reserved, session, true, None)?;
        Ok(Ok(Opened {
            session: live,
            repaired: closers,
            cut: None,
        }))
    }
}
