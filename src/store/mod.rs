//! Stores: a backend plus the registry of live sessions, the clock, and the
//! lifecycle notifications (persistence.md §2). `open` = load + validate +
//! repair, made durable before the session is handed out.

pub mod backend;
mod config;
pub mod memory;
mod session;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

pub use backend::{Backend, Listed, Stored};
pub use config::{CreateOptions, StoreConfig};
pub use session::LiveSession;

use crate::engine::seed::SeedMode;
use crate::engine::{repair, Event, Seed, Session};
use crate::error::{Error, Result, Status};
use crate::json::{Object, Value};

/// What a store tells its observer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice<'a> {
    /// A session was created or opened; the payload is its header.
    Created(&'a str),
    /// An event was committed; the payload is the event.
    Event(&'a str),
    /// A flush completed; the payload is `{"ok":true}` or the error object.
    Flush(&'a str),
    /// A session handle was closed; the payload is `null`.
    Disposed,
}

/// A host callback: `(session id, notice)`.
pub type Observer = Arc<dyn Fn(&str, Notice<'_>) + Send + Sync>;

/// The wall clock in epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) struct StoreState {
    pub(crate) backend: Box<dyn Backend>,
    live: HashSet<String>,
    next_id: u64,
    observer: Option<Observer>,
}

/// A store: shared by its handle and every session opened from it.
pub struct Store {
    state: Mutex<StoreState>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Open a store from its JSON configuration (`None` = memory).
    pub fn open(config: Option<&str>) -> Result<Arc<Store>> {
        let config = StoreConfig::parse(config)?;
        let backend: Box<dyn Backend> = match config {
            StoreConfig::Memory => Box::new(memory::MemoryBackend::new()),
        };
        Ok(Arc::new(Store {
            state: Mutex::new(StoreState {
                backend,
                live: HashSet::new(),
                next_id: 0,
                observer: None,
            }),
        }))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, StoreState> {
        // A panic never happens while this lock is held across user code,
        // so a poisoned lock still guards consistent data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Install (or with `None` remove) the lifecycle observer.
    pub fn set_observer(&self, observer: Option<Observer>) {
        self.lock().observer = observer;
    }

    pub(crate) fn observer(&self) -> Option<Observer> {
        self.lock().observer.clone()
    }

    /// The name of the backend.
    pub fn backend_name(&self) -> &'static str {
        self.lock().backend.name()
    }

    /// Create a session from `options` (c-api.md `dsh_session_create`).
    pub fn create(self: &Arc<Store>, options: Option<&str>) -> Result<Arc<LiveSession>> {
        let opts = CreateOptions::parse(options)?;
        let now = now_ms();
        let id = match &opts.id {
            Some(id) => id.clone(),
            None => self.mint_id(),
        };
        self.check_new_id(&id, "store.duplicate-id")?;
        let mut header = Object::new();
        header.insert_str("version", Value::Number(0.0));
        header.insert_str("id", Value::str(&id));
        header.insert_str("createdAt", Value::Number(now as f64));
        for (k, v) in opts.header_fields.iter() {
            header.insert(k.clone(), v.clone());
        }
        let header = Value::Object(header);
        let session = match opts.seed {
            Some(seed) => Session::from_seed(
                &id,
                header,
                Seed::Values(seed),
                SeedMode::Snapshot,
                opts.markers,
                now,
            )?,
            None => Session::new(&id, header, opts.markers)?,
        };
        self.register(session, Vec::new())
    }

    /// Fork `source` at `boundary` into a new session of this store.
    pub fn fork(
        self: &Arc<Store>,
        source: &Session,
        boundary: Option<&Value>,
        child_id: Option<String>,
    ) -> Result<Arc<LiveSession>> {
        if let Some(id) = &child_id {
            self.check_new_id(id, "fork.child-exists")
                .map_err(|e| e.with_code("SESSION_ALREADY_EXISTS"))?;
        }
        let prefix = source.fork_prefix(boundary)?;
        let id = child_id.unwrap_or_else(|| self.mint_id());
        let now = now_ms();
        let header = source.fork_header(&id, prefix.len(), now);
        let child = Session::from_seed(
            &id,
            header,
            Seed::Events(prefix),
            SeedMode::Snapshot,
            source.markers(),
            now,
        )?;
        self.register(child, Vec::new())
    }

    /// Open a stored session: load, repair durably, and hand it out.
    /// Returns the session and the closers that repair appended.
    pub fn open_session(
        self: &Arc<Store>,
        id: &str,
    ) -> Result<(Arc<LiveSession>, Vec<Arc<Event>>)> {
        if self.lock().live.contains(id) {
            return Err(Error::new(
                Status::Conflict,
                "store.duplicate-id",
                format!("session \"{id}\" is already open"),
            ));
        }
        let stored = self.lock().backend.load(id)?.ok_or_else(|| {
            Error::new(
                Status::NotFound,
                "load.not-found",
                format!("session \"{id}\" not found"),
            )
        })?;
        let closers = repair::closers(stored.events.iter().map(|e| &**e));
        let mut events = stored.events;
        let stored_len = events.len();
        events.extend(closers.into_iter().map(Arc::new));
        let session = Session::from_seed(
            id,
            stored.header,
            Seed::Events(events),
            SeedMode::Restore,
            crate::engine::Markers::Required,
            now_ms(),
        )
        .map_err(|e| {
            let inner = e.rule;
            Error::new(
                Status::Corrupt,
                "load.validation",
                format!(
                    "stored session \"{id}\" failed validation: {} ({inner})",
                    e.message
                ),
            )
        })?;
        let added: Vec<Arc<Event>> = session.events()[stored_len..].to_vec();
        let repaired: Vec<Arc<Event>> = added
            .iter()
            .filter(|e| {
                e.ty != crate::engine::event::END_SEED
                    || e.seq as usize != session.events().len() - 1
            })
            .cloned()
            .collect();
        let live = self.register(session, added)?;
        Ok((live, repaired))
    }

    /// Every stored session: `[{"id","createdAt","revision","length",...header}]`.
    pub fn list(&self) -> Result<String> {
        let rows = self.lock().backend.list()?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut o = row.header.as_object().cloned().unwrap_or_default();
            o.insert_str("revision", Value::Number(row.revision as f64));
            o.insert_str("length", Value::Number(row.length as f64));
            out.push(Value::Object(o));
        }
        Ok(Value::Array(out).to_json())
    }

    /// Drain every pending write.
    pub fn flush(&self) -> Result<()> {
        self.lock().backend.flush()
    }

    fn mint_id(&self) -> String {
        let mut st = self.lock();
        loop {
            st.next_id += 1;
            let id = format!("session-{}", st.next_id);
            let taken = st.live.contains(&id) || st.backend.load(&id).ok().flatten().is_some();
            if !taken {
                return id;
            }
        }
    }

    fn check_new_id(&self, id: &str, rule: &'static str) -> Result<()> {
        if self.lock().live.contains(id) {
            return Err(Error::new(
                Status::Conflict,
                rule,
                format!("session \"{id}\" already exists"),
            ));
        }
        Ok(())
    }

    /// Make `session` live: persist it (whole log for a new session, the
    /// `pending` tail for an opened one) and register its id.
    fn register(
        self: &Arc<Store>,
        session: Session,
        pending: Vec<Arc<Event>>,
    ) -> Result<Arc<LiveSession>> {
        let id = session.id().to_string();
        {
            let mut st = self.lock();
            if st.live.contains(&id) {
                return Err(Error::new(
                    Status::Conflict,
                    "store.duplicate-id",
                    format!("session \"{id}\" already exists"),
                ));
            }
            let is_new = st.backend.load(&id)?.is_none();
            if is_new {
                st.backend.create(&id, session.header(), session.events())?;
            } else if !pending.is_empty() {
                st.backend.append(&id, &pending)?;
                st.backend.flush()?;
            }
            st.live.insert(id.clone());
        }
        let header = session.header().to_json();
        let live = Arc::new(LiveSession::new(self.clone(), session));
        live.notify(Notice::Created(&header));
        Ok(live)
    }

    pub(crate) fn release(&self, id: &str) {
        self.lock().live.remove(id);
    }
}
