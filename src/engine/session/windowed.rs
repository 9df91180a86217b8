//! Windowed sessions: eviction of the log's older chunks and the undo of
//! commits that a windowed session cannot refold.

use std::sync::Arc;

use super::Session;
use crate::engine::chunked::CHUNK;
use crate::engine::derive::DeriveCache;
use crate::engine::request::RequestFolds;
use crate::engine::surface::Surface;
use crate::engine::window::{EventSource, Window};

/// The state a windowed session goes back to when a commit is undone
/// ([`Session::checkpoint`]).
#[derive(Debug)]
pub struct Checkpoint {
    len: usize,
    surface: Surface,
    derive: DeriveCache,
    folds: RequestFolds,
}

impl Session {
    /// Make this session windowed: from now on only the last `keep` events
    /// (rounded up to whole chunks of the log) stay resident, and calls
    /// that need older events read them back from `source`. (Eviction
    /// folds the request header and context over what it evicts first.)
    pub fn set_window(&mut self, source: Arc<dyn EventSource>, keep: usize) {
        self.window = Some(Window { source, keep });
        self.evict_old();
    }

    /// True for a windowed session ([`Session::set_window`]).
    pub fn is_windowed(&self) -> bool {
        self.window.is_some()
    }

    /// How many events are resident (all of them unless windowed).
    pub fn resident_events(&self) -> usize {
        self.log.len() - self.evicted * CHUNK
    }

    /// Evict the full chunks that lie entirely before the window. Commits
    /// never evict by themselves: the caller evicts once the events it
    /// committed can no longer be undone (see [`Session::checkpoint`]).
    pub fn evict_old(&mut self) {
        let Some(w) = &self.window else {
            return;
        };
        // The chunk holding the last event always stays.
        let upto =
            (self.log.len().saturating_sub(w.keep.max(1)) / CHUNK).min(self.log.full_chunks());
        if self.evicted >= upto {
            return;
        }
        // The request folds see every event before it leaves memory (the
        // events not folded yet are all resident).
        for e in self.log.range(self.folds.folded().min(self.log.len())..) {
            self.folds.fold(&e);
        }
        while self.evicted < upto {
            self.log.evict_chunk(self.evicted);
            self.evicted += 1;
        }
    }

    /// What [`Session::rollback`] needs to undo the commits that follow
    /// (used by windowed sessions, which cannot refold their whole log
    /// cheaply).
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            len: self.log.len(),
            surface: self.surface.clone(),
            derive: self.derive.clone(),
            folds: self.folds.clone(),
        }
    }

    /// Undo every commit made since `cp` was taken (events the store could
    /// not accept). Nothing was evicted since `cp` was taken, so the
    /// dropped events are resident.
    pub fn rollback(&mut self, cp: Checkpoint) {
        self.log.truncate(cp.len);
        self.forget_admitted(cp.len);
        self.surface = cp.surface;
        self.derive = cp.derive;
        self.folds = cp.folds;
    }
}
