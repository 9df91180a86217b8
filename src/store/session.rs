//! A live session: the engine session behind a lock, wired to its store's
//! backend and observer. Calls on one session are serialized; the observer
//! runs after the lock is released, and an append it makes on the session it
//! is being told about is refused (`append.reentrant`).

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::{now_ms, ForkOptions, Notice, Store};
use crate::engine::admission::Admission;
use crate::engine::session::{DataText, DeriveDelta};
use crate::engine::{Event, Intent, NewEvent, Session};
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

/// What a live session is now ([`LiveSession::info`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// The session header.
    pub header: Value,
    /// The number of events (the next seq).
    pub length: u64,
    /// The first seq written by this lifecycle (after the seed, or after
    /// what an open read back).
    pub first_live_seq: u64,
    /// The surface's replace generation.
    pub replace_generation: u64,
    /// The open turn, if any.
    pub open_turn: Option<Value>,
    /// The admission appends are checked under.
    pub admission: Admission,
    /// The host event types the store declared.
    pub event_types: Vec<String>,
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
    /// # use dsh_session::{engine::Intent, json::Value};
    /// # fn f(live: &dsh_session::store::LiveSession) {
    /// live.with(|s| s.append("x/y", Value::Null, &Intent::none(), 0)).unwrap();
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

    /// `append(type, data, intent)`: check the event against the log and
    /// the surface, commit it and hand it to the writer (no disk I/O unless
    /// the batch window is 0); [`LiveSession::flush`] makes it durable.
    ///
    /// ```
    /// use dsh_session::engine::Intent;
    /// use dsh_session::json::Value;
    /// use dsh_session::store::{CreateOptions, Store, StoreConfig};
    ///
    /// let store = Store::open(StoreConfig::memory())?;
    /// let live = store.create(CreateOptions::with_id("s1"))?;
    /// let start = Value::obj([("turn", Value::num(1.0))]);
    /// let e = live.append("turn/start", start, Intent::none())?;
    /// live.flush()?;
    /// assert_eq!(live.open_turn()?, Some(Value::num(1.0)));
    /// assert_eq!(live.events(e.seq, u64::MAX)?[0].data_text(), r#"{"turn":1}"#);
    /// # Ok::<(), dsh_session::Error>(())
    /// ```
    pub fn append(&self, ty: &str, data: Value, intent: Intent) -> Result<Arc<Event>> {
        if self.check_reentrant().is_err() {
            // docs/errors.md §3.1: the input checks come before `append.reentrant`.
            crate::engine::session::check_append_value(ty, &data, &intent)?;
        }
        let mut v = self.commit(|s, now| Ok(vec![s.append(ty, data, &intent, now)?]))?;
        Ok(v.remove(0))
    }

    /// [`LiveSession::append`] with `data` and the intent as JSON text,
    /// `data` possibly checked canonical already (the C ABI checks it while
    /// it checks the bytes are UTF-8): the ABI's fast path.
    #[doc(hidden)]
    pub fn append_text<'a>(
        &self,
        ty: &str,
        data: impl Into<DataText<'a>>,
        intent: Option<&str>,
    ) -> Result<Arc<Event>> {
        let data = data.into();
        if self.check_reentrant().is_err() {
            // docs/errors.md §3.1: the input checks come before `append.reentrant`.
            crate::engine::session::check_append_input(ty, data.as_str(), intent)?;
        }
        let mut v = self.commit(|s, now| Ok(vec![s.append_text(ty, data, intent, now)?]))?;
        Ok(v.remove(0))
    }

    /// All-or-nothing append of `events`: each is checked against the state
    /// after the ones before it; on the first refusal nothing is committed
    /// and the error carries the item's index.
    pub fn append_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Arc<Event>>> {
        self.commit(|s, now| s.append_batch(events, now))
    }

    /// [`LiveSession::append_batch`] of `[{"type","data","intent"?}, ...]`
    /// JSON text, possibly checked canonical already (the ABI's door).
    #[doc(hidden)]
    pub fn append_batch_text<'a>(&self, batch: impl Into<DataText<'a>>) -> Result<Vec<Arc<Event>>> {
        let batch = batch.into();
        self.commit(|s, now| s.append_batch_text(batch, now))
    }

    /// The event [`LiveSession::append`] would commit now; nothing changes.
    pub fn validate(&self, ty: &str, data: Value, intent: Intent) -> Result<Event> {
        self.with(|s| s.validate(ty, data, &intent, now_ms()))
    }

    /// [`LiveSession::validate`] with JSON text (the ABI's door).
    #[doc(hidden)]
    pub fn validate_text<'a>(
        &self,
        ty: &str,
        data: impl Into<DataText<'a>>,
        intent: Option<&str>,
    ) -> Result<Event> {
        let data = data.into();
        self.with(|s| s.validate_text(ty, data, intent, now_ms()))
    }

    /// The session header.
    pub fn header(&self) -> Result<Value> {
        self.with(|s| Ok(s.header().clone()))
    }

    /// The number of events in the log (the next seq).
    pub fn next_seq(&self) -> Result<u64> {
        self.with(|s| Ok(s.events().len() as u64))
    }

    /// The session's id, header, length, surface generation, open turn
    /// and admission, now.
    pub fn info(&self) -> Result<SessionInfo> {
        self.with(|s| {
            let policy = s.policy();
            Ok(SessionInfo {
                id: s.id().to_string(),
                header: s.header().clone(),
                length: s.events().len() as u64,
                first_live_seq: s.first_live_seq(),
                replace_generation: s.surface().generation(),
                open_turn: s.open_turn()?,
                admission: policy.admission,
                event_types: policy.vocabulary.declared().map(str::to_string).collect(),
            })
        })
    }

    /// The events with `from <= seq < to` (`to` past the end stops at the
    /// end; evicted events are read back from the store).
    pub fn events(&self, from: u64, to: u64) -> Result<Vec<Arc<Event>>> {
        self.with(|s| {
            let to = to.min(s.events().len() as u64);
            s.events_in(from.min(to) as usize, to as usize)
        })
    }

    /// The seqs of the surface nodes, in surface order, and the replace
    /// generation.
    pub fn surface(&self) -> Result<(Vec<u64>, u64)> {
        self.with(|s| {
            let surface = s.surface();
            Ok((surface.nodes().to_vec(), surface.generation()))
        })
    }

    /// The open turn (the `turn` of a `turn/start` not ended yet), if any.
    pub fn open_turn(&self) -> Result<Option<Value>> {
        self.with(|s| s.open_turn())
    }

    /// The derived LLM message list (docs/events.md §9), as values.
    pub fn derive(&self) -> Result<Vec<Value>> {
        self.with_mut(|s| s.derive())
    }

    /// The derived message list as one JSON array (the ABI's door).
    #[doc(hidden)]
    pub fn derive_json(&self) -> Result<String> {
        self.with_mut(|s| s.derive_json())
    }

    /// Call `f(seq, text)` with each derived message's JSON text, in list
    /// order, a page at a time (see [`Session::visit_derived`]).
    pub fn visit_derived(&self, f: impl FnMut(u64, &str) -> bool) -> Result<()> {
        self.with_mut(|s| s.visit_derived(f))
    }

    /// The messages a host holding `count` messages of generation
    /// `generation` lacks (see [`Session::derive_since`]).
    pub fn derive_since(&self, generation: u64, count: u64) -> Result<DeriveDelta> {
        self.with_mut(|s| s.derive_since(generation, count))
    }

    /// [`LiveSession::derive_since`] with the messages as one JSON array
    /// (the ABI's door).
    #[doc(hidden)]
    pub fn derive_since_json(&self, generation: u64, count: u64) -> Result<DeriveDelta<String>> {
        self.with_mut(|s| s.derive_since_json(generation, count))
    }

    /// The folded request header, if any.
    pub fn request_header(&self) -> Result<Option<Value>> {
        self.with_mut(|s| Ok(s.request_header()?.cloned()))
    }

    /// The data of the latest `request/context` event, if any.
    pub fn request_context(&self) -> Result<Option<Value>> {
        self.with_mut(|s| Ok(s.request_context()?.cloned()))
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
            // A dropped handle is closed as `close` would, and said so.
            let _ = self.store.drain(&self.id);
            self.store.release(&self.id);
            self.notify(Notice::Disposed);
        }
    }
}
