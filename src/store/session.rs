//! A live session: the engine session behind a lock, wired to its store's
//! backend and observer. Calls on one session are serialized; the observer
//! runs after the lock is released, and an append it makes on the session it
//! is being told about is refused (`append.reentrant`).

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::{now_ms, ForkOptions, Notice, Store};
use crate::engine::session::{DataText, DeriveDelta};
use crate::engine::{Event, Session};
use crate::error::{Error, Result, Status};
use crate::json::Value;
use crate::rule::Rule;

thread_local! {
    /// Sessions whose notifications this thread is delivering right now.
    static PUBLISHING: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

#[cfg(test)]
thread_local! {
    /// A test hook run by a flush once it found the handle open, before
    /// it waits for the writer.
    pub(crate) static FLUSH_CHECKED: crate::store::faults::Slot<(), Error> =
        const { crate::store::faults::Slot::new() };
}

/// A session handed out by a store.
pub struct LiveSession {
    store: Arc<Store>,
    id: String,
    state: Mutex<Option<Session>>,
    /// Flushes hold it shared, the close exclusively: a close waits for
    /// the flushes under way, and a flush that starts after the close
    /// began finds the handle closed. So a flush answers for this handle's
    /// events alone, never for what the store does with them after the
    /// handle is gone (drops them on a conflict, or writes another
    /// handle's events under the same id).
    closing: RwLock<()>,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn closed(id: &str) -> Error {
    Error::new(
        Status::Closed,
        Rule::HandleClosed,
        format!("session \"{id}\" is closed"),
    )
}

impl LiveSession {
    pub(crate) fn new(store: Arc<Store>, session: Session) -> LiveSession {
        LiveSession {
            store,
            id: session.id().to_string(),
            state: Mutex::new(Some(session)),
            closing: RwLock::new(()),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The store this session belongs to.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn lock(&self) -> Result<MutexGuard<'_, Option<Session>>> {
        // A panic while the lock was held may have left the session half
        // updated: it is poisoned for good.
        self.state.lock().map_err(|_| {
            Error::new(
                Status::Closed,
                Rule::HandlePoisoned,
                format!(
                    "session \"{}\" is poisoned by an earlier internal failure",
                    self.id
                ),
            )
        })
    }

    /// Run `f` on the open session, to read it. The session is lent
    /// shared, so nothing outside the store can append an event the writer
    /// does not see; appends go through [`LiveSession::append`]:
    ///
    /// ```compile_fail,E0596
    /// # fn f(live: &dsh_session::store::LiveSession) {
    /// live.with(|s| s.append("x/y", "{}", None, 0)).unwrap();
    /// # }
    /// ```
    pub fn with<T>(&self, f: impl FnOnce(&Session) -> Result<T>) -> Result<T> {
        let guard = self.lock()?;
        let session = guard.as_ref().ok_or_else(|| closed(&self.id))?;
        f(session)
    }

    /// Run `f` on the open session, which it may change (its derive
    /// cache; the store's own appends).
    pub(crate) fn with_mut<T>(&self, f: impl FnOnce(&mut Session) -> Result<T>) -> Result<T> {
        let mut guard = self.lock()?;
        let session = guard.as_mut().ok_or_else(|| closed(&self.id))?;
        f(session)
    }

    fn key(&self) -> usize {
        self as *const LiveSession as usize
    }

    fn check_reentrant(&self) -> Result<()> {
        let key = self.key();
        if PUBLISHING.with(|p| p.borrow().contains(&key)) {
            return Err(Error::new(
                Status::Conflict,
                Rule::AppendReentrant,
                "session append cannot re-enter during publication",
            ));
        }
        Ok(())
    }

    pub(crate) fn notify(&self, notice: Notice<'_>) {
        let Some(observer) = self.store.observer() else {
            return;
        };
        let key = self.key();
        PUBLISHING.with(|p| p.borrow_mut().push(key));
        struct Pop;
        impl Drop for Pop {
            fn drop(&mut self) {
                PUBLISHING.with(|p| {
                    p.borrow_mut().pop();
                });
            }
        }
        let _pop = Pop;
        observer(&self.id, notice);
    }

    /// Commit events produced by `f` and hand them to the writer (no disk
    /// I/O unless the batch window is 0 or memory is above the high-water
    /// mark); the observer hears about each one afterwards.
    fn commit(
        &self,
        f: impl FnOnce(&mut Session, i64) -> Result<Vec<Arc<Event>>>,
    ) -> Result<Vec<Arc<Event>>> {
        self.check_reentrant()?;
        self.store.check_writable("append")?;
        self.store.writer().reserve()?;
        let events = {
            let mut guard = self.lock()?;
            let session = guard.as_mut().ok_or_else(|| closed(&self.id))?;
            let len = session.events().len();
            // A windowed session cannot refold its whole log to undo a
            // commit, so it keeps the state to go back to.
            let sync = self.store.writer().is_sync();
            let undo = (sync && session.is_windowed()).then(|| session.checkpoint());
            let events = f(session, now_ms())?;
            if let Err(e) = self.store.writer().enqueue(&self.id, &events) {
                // Only a synchronous write (window 0) can fail here: nothing
                // was stored, so the append is undone.
                match undo {
                    Some(cp) => session.rollback(cp),
                    None => session.truncate_uncommitted(len),
                }
                return Err(e);
            }
            session.evict_old();
            events
        };
        for e in &events {
            self.notify(Notice::Event(e));
        }
        Ok(events)
    }

    /// `append(type, data, intent)`.
    pub fn append(&self, ty: &str, data: &str, intent: Option<&str>) -> Result<Arc<Event>> {
        self.append_text(ty, data.into(), intent)
    }

    /// [`LiveSession::append`] with `data` possibly checked canonical
    /// already (the C ABI checks it while it checks the bytes are UTF-8).
    pub fn append_text(
        &self,
        ty: &str,
        data: DataText<'_>,
        intent: Option<&str>,
    ) -> Result<Arc<Event>> {
        if self.check_reentrant().is_err() {
            // docs/errors.md §3.1: the input checks come before `append.reentrant`.
            crate::engine::session::check_append_input(ty, data.as_str(), intent)?;
        }
        let mut v = self.commit(|s, now| Ok(vec![s.append_text(ty, data, intent, now)?]))?;
        Ok(v.remove(0))
    }

    /// `append` with the data and intent as values: the typed form of
    /// [`LiveSession::append`], held to the same rules.
    pub fn append_value(&self, ty: &str, data: Value, intent: Option<Value>) -> Result<Arc<Event>> {
        let mut v = self.commit(|s, now| Ok(vec![s.append_value(ty, data, intent, now)?]))?;
        Ok(v.remove(0))
    }

    /// The LLM message list derived from the surface, as values.
    pub fn derive(&self) -> Result<Vec<Value>> {
        self.with_mut(|s| s.derive())
    }

    /// The LLM message list as one JSON array.
    pub fn derive_json(&self) -> Result<String> {
        self.with_mut(|s| s.derive_json())
    }

    /// The messages a host holding `count` messages of generation
    /// `generation` lacks (see [`Session::derive_since`]).
    pub fn derive_since(&self, generation: u64, count: u64) -> Result<DeriveDelta> {
        self.with_mut(|s| s.derive_since(generation, count))
    }

    /// The folded request header, if any.
    pub fn request_header(&self) -> Result<Option<Value>> {
        self.with_mut(|s| Ok(s.request_header()?.cloned()))
    }

    /// The data of the latest `request/context` event, if any.
    pub fn request_context(&self) -> Result<Option<Value>> {
        self.with_mut(|s| Ok(s.request_context()?.cloned()))
    }

    /// All-or-nothing batch append.
    pub fn append_batch(&self, batch: &str) -> Result<Vec<Arc<Event>>> {
        self.append_batch_text(batch.into())
    }

    /// [`LiveSession::append_batch`] with the text possibly checked
    /// canonical already.
    pub fn append_batch_text(&self, batch: DataText<'_>) -> Result<Vec<Arc<Event>>> {
        self.commit(|s, now| s.append_batch_text(batch, now))
    }

    /// The event `append` would commit now.
    pub fn validate(&self, ty: &str, data: &str, intent: Option<&str>) -> Result<Event> {
        self.with(|s| s.validate(ty, data, intent, now_ms()))
    }

    /// Wait until everything appended so far is durable.
    pub fn flush(&self) -> Result<()> {
        let _open = self.closing.read().unwrap_or_else(|p| p.into_inner());
        self.with(|_| Ok(()))?;
        #[cfg(test)]
        crate::store::faults::hit(&FLUSH_CHECKED, ())?;
        let result = self.store.writer().flush(&self.id);
        self.notify(Notice::Flush(result.as_ref().map(|_| ())));
        result
    }

    /// Fork this session into a new live session of the same store, after
    /// the boundary of `options` (the last event when it has none).
    pub fn fork(&self, options: ForkOptions) -> Result<Arc<LiveSession>> {
        let guard = self.lock()?;
        let session = guard.as_ref().ok_or_else(|| closed(&self.id))?;
        self.store
            .fork(session, options.boundary.as_ref(), options.id)
    }

    /// Drain pending writes and release the session. A second close reports
    /// `DSH_E_CLOSED`. When the drain fails the session is released anyway
    /// and the error is returned: its events stay queued in the store,
    /// which retries them at its next flush, unless the failure was a
    /// conflict (another writer moved the stored log on), which no retry
    /// can resolve: those events, never acknowledged, are dropped.
    pub fn close(&self) -> Result<()> {
        let _closing = self.closing.write().unwrap_or_else(|p| p.into_inner());
        let session = self.lock()?.take();
        if session.is_none() {
            return Err(closed(&self.id));
        }
        let result = self.store.drain(&self.id);
        self.store.release(&self.id);
        self.notify(Notice::Disposed);
        result
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        let open = self.state.get_mut().map(|s| s.is_some()).unwrap_or(true);
        if open {
            let _ = self.store.drain(&self.id);
            self.store.release(&self.id);
        }
    }
}
