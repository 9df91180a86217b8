//! One session: the append-only log, its surface, and the cached views.
//! Pure: the caller supplies the clock (`now`) and does all I/O.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::admission::{Admission, Policy};
use super::chunked::CHUNK;
use super::derive::DeriveCache;
use super::event::{Event, APPEND_ORDER, END_SEED, TURN_END, TURN_START};
pub(crate) use super::input::{check_append_input, check_append_value};
use super::input::{check_input, ignorable_marker, Data, IntentArg};
pub use super::input::{parse_input, DataText};
pub use super::intent::{Intent, NewEvent, SurfaceOp};
use super::request::RequestFolds;
use super::seed::{self, SeedMode};
use super::surface::{Candidate, CandidateData, EventLookup, Markers, Plan, Surface};
use super::window::{View, Window};
use crate::error::{Error, Result};
use crate::json::{JsString, Object, Value};

/// A seed: a complete event array to construct a session from.
#[derive(Debug)]
pub enum Seed {
    /// Events given as JSON values (create, replay).
    Values(Vec<Value>),
    /// Events taken from another session (fork): shared, not copied.
    Events(Vec<Arc<Event>>),
}

/// The answer of [`Session::derive_since`]: the messages as values, or
/// (`DeriveDelta<String>`, the C ABI's form) as one JSON array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeriveDelta<M = Vec<Value>> {
    /// The replace generation now (the cursor to pass next time).
    pub generation: u64,
    /// The number of derived messages now (the cursor to pass next time).
    pub count: u64,
    /// True when the cursor was invalidated: `messages` is the whole list.
    pub reset: bool,
    /// The new messages (or all of them after a reset).
    pub messages: M,
}

pub use super::log::Log;

/// The session engine.
#[derive(Debug)]
pub struct Session {
    id: String,
    header: Value,
    log: Log,
    surface: Surface,
    markers: Markers,
    first_live_seq: u64,
    derive: DeriveCache,
    folds: RequestFolds,
    /// How many leading events are known to pass the seed admission of a
    /// fork (lossless, shape, fallback), so a fork checks only newer ones.
    admitted: AtomicUsize,
    /// Set for a windowed session: older chunks are evicted.
    window: Option<Window>,
    /// Full chunks `[0, evicted)` of the log are evicted.
    evicted: usize,
    /// The admission and vocabulary appends are checked under.
    policy: Policy,
}

/// The first `len` events of a log as the surface's lookup, plus the
/// events this one plan looks at that the log does not hold as objects
/// (made again from packed chunks, or read back from storage).
struct LogLookup<'a> {
    log: &'a Log,
    len: usize,
    extra: Vec<Arc<Event>>,
}

impl<'a> LogLookup<'a> {
    /// The lookup for planning an event whose `surfaceOp` is `op`: the
    /// events its replace names that sit in packed chunks are made again
    /// (a tool-result rewrite compares with its target).
    fn for_op(log: &'a Log, len: usize, op: Option<&Value>) -> LogLookup<'a> {
        let extra = replace_ends(op)
            .filter(|&seq| seq < len as u64 && log.resident(seq as usize).is_none())
            .filter_map(|seq| log.get(seq as usize))
            .collect();
        LogLookup { log, len, extra }
    }
}

impl EventLookup for LogLookup<'_> {
    fn type_and_data(&self, seq: u64) -> Option<(&JsString, CandidateData<'_>)> {
        let i = usize::try_from(seq).ok().filter(|&i| i < self.len)?;
        let e = match self.log.resident(i) {
            Some(e) => e,
            None => self.extra.iter().find(|e| e.seq == seq)?,
        };
        Some((&e.ty, CandidateData::Event(e)))
    }
}

/// The seqs a replace `op` names (`start`, `end`), whatever else it holds.
fn replace_ends(op: Option<&Value>) -> impl Iterator<Item = u64> + '_ {
    let o = op.and_then(Value::as_object);
    ["start", "end"]
        .into_iter()
        .filter_map(move |k| o?.get(k)?.as_safe_u64())
}

/// Plan `e` as the event after the first `len` events of `log` (its
/// surface metadata read back from its text); `extra` holds events of
/// evicted chunks the plan may look at.
fn plan_event(
    surface: &Surface,
    e: &Event,
    markers: Markers,
    (log, len): (&Log, usize),
    extra: Vec<Arc<Event>>,
) -> Result<Plan> {
    let (op, sources) = (e.op(), e.sources());
    let mut lookup = LogLookup::for_op(log, len, op.as_ref());
    lookup.extra.extend(extra);
    let c = Candidate {
        ty: Some(&e.ty),
        seq: Some(e.seq),
        data: CandidateData::Event(e),
        op: op.as_ref(),
        sources: sources.as_ref(),
    };
    surface.plan(&c, len as u64, markers, &lookup)
}

mod batch;
mod fork;
mod reads;
mod restoring;
mod windowed;
pub use restoring::Restoring;
pub use windowed::Checkpoint;

impl Session {
    /// A session without a seed (no end-seed marker is written), whose
    /// appends are checked under `policy`.
    pub fn new(id: &str, header: Value, markers: Markers, policy: Policy) -> Result<Session> {
        seed::validate_header(&header, id)?;
        Ok(Session::bare(id, header, markers, policy))
    }

    fn bare(id: &str, header: Value, markers: Markers, policy: Policy) -> Session {
        Session {
            id: id.to_string(),
            header,
            log: Log::new(),
            surface: Surface::new(),
            markers,
            first_live_seq: 0,
            derive: DeriveCache::default(),
            folds: RequestFolds::default(),
            admitted: AtomicUsize::new(0),
            window: None,
            evicted: 0,
            policy,
        }
    }

    /// The admission and vocabulary appends are checked under.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The policy's checks of the inherited events (a seed given at
    /// create), which the seed rules alone let through; errors name the
    /// index.
    pub fn check_seed_policy(&self) -> Result<()> {
        let end = self.first_live_seq as usize;
        for (i, e) in self.log.iter().take(end).enumerate() {
            let subject = || format!("seed {} at index {i}", e.ty.to_string_lossy());
            self.policy
                .check(&e, &subject)
                .map_err(|err| err.at_index(i))?;
        }
        Ok(())
    }

    /// A session constructed from `seed` (docs/lifecycle.md §3): every event is
    /// admitted by the seed rules, the header is validated after the events
    /// (snapshot mode) or before them (restore mode), and a
    /// `session/end-seed` marker is appended unless the seed ends with one.
    /// Later appends are checked under `policy`.
    pub fn from_seed(
        id: &str,
        header: Value,
        seed: Seed,
        mode: SeedMode,
        (markers, policy): (Markers, Policy),
        now: i64,
    ) -> Result<Session> {
        if mode == SeedMode::Restore {
            seed::validate_header(&header, id)?;
        }
        let mut s = Session::bare(id, header, markers, policy);
        match seed {
            Seed::Values(values) => {
                for (i, v) in values.into_iter().enumerate() {
                    let e = seed::admit_value(v, i, mode)?;
                    s.push_seeded(Arc::new(e), i)?;
                }
            }
            Seed::Events(events) => {
                for (i, e) in events.into_iter().enumerate() {
                    seed::admit_event(&e, i, mode)?;
                    s.push_seeded(e, i)?;
                }
            }
        }
        if mode == SeedMode::Snapshot {
            seed::validate_header(&s.header, id)?;
        }
        s.seal(now)?;
        Ok(s)
    }

    /// A stored log as it is, for reading (a read-only store): admitted
    /// and folded as in restore mode, but no closer and no end-seed marker
    /// is added, so its events are exactly the stored ones. Never append
    /// to it (`policy` is the one its store reports).
    pub fn from_stored(
        id: &str,
        header: Value,
        events: Vec<Arc<Event>>,
        (markers, policy): (Markers, Policy),
    ) -> Result<Session> {
        seed::validate_header(&header, id)?;
        let mut s = Session::bare(id, header, markers, policy);
        for (i, e) in events.into_iter().enumerate() {
            seed::admit_event(&e, i, SeedMode::Restore)?;
            s.push_seeded(e, i)?;
        }
        s.first_live_seq = s.log.len() as u64;
        Ok(s)
    }

    /// End a seed: what is in the log now is inherited (`firstLiveSeq`),
    /// and a `session/end-seed` marker follows unless the seed ends with
    /// one (docs/lifecycle.md §3, §4).
    fn seal(&mut self, now: i64) -> Result<()> {
        self.first_live_seq = self.log.len() as u64;
        if self.log.last().is_some_and(|e| e.ty == END_SEED) {
            return Ok(());
        }
        let marker = Event::new(
            JsString::from(END_SEED),
            self.log.len() as u64,
            now,
            Value::Object(Object::new()),
            None,
            None,
            APPEND_ORDER,
        );
        self.commit_checked(marker)?;
        Ok(())
    }

    fn forget_admitted(&self, len: usize) {
        self.admitted.fetch_min(len, Ordering::Relaxed);
    }

    fn push_seeded(&mut self, e: Arc<Event>, i: usize) -> Result<()> {
        let plan = plan_event(&self.surface, &e, self.markers, (&self.log, i), Vec::new())
            .map_err(|err| {
                err.prefixed(&format!("invalid seed event at index {i}: "))
                    .at_index(i)
            })?;
        self.surface.apply(e.seq, &plan);
        self.log.push(e);
        Ok(())
    }

    /// Plan and commit an event built by the library itself (markers, closers).
    pub fn commit_checked(&mut self, event: Event) -> Result<Arc<Event>> {
        let plan = self.plan(&event)?;
        Ok(self.commit(event, &plan))
    }

    fn plan(&self, e: &Event) -> Result<Plan> {
        let extra = self.evicted_targets(e.op().as_ref())?;
        plan_event(
            &self.surface,
            e,
            self.markers,
            (&self.log, self.log.len()),
            extra,
        )
    }

    /// The events a replace names that are evicted, read back so a plan
    /// can look at them (tool-result rewrites compare with their target).
    fn evicted_targets(&self, op: Option<&Value>) -> Result<Vec<Arc<Event>>> {
        if self.window.is_none() {
            return Ok(Vec::new());
        }
        let view = self.view();
        replace_ends(op)
            .filter(|&seq| seq < self.log.len() as u64 && self.log.is_evicted(seq as usize / CHUNK))
            .map(|seq| view.event(seq as usize))
            .collect()
    }

    fn view(&self) -> View<'_> {
        View {
            log: &self.log,
            window: self.window.as_ref(),
        }
    }

    fn commit(&mut self, event: Event, plan: &Plan) -> Arc<Event> {
        let e = Arc::new(event);
        self.surface.apply(e.seq, plan);
        self.log.push(e.clone());
        e
    }

    /// Build the candidate of `append(type, data, intent)` and plan it
    /// (docs/events.md §3.2, docs/errors.md §3.1). Nothing changes.
    fn prepare(
        &self,
        ty: &str,
        data: Data<'_>,
        intent: IntentArg<'_>,
        now: i64,
    ) -> Result<(Event, Plan)> {
        // check_input proves data and surface metadata lossless.
        let (sources, op, ignorable) = check_input(ty, &data, intent)?;
        // The reference ignores intent keys it does not know.
        let ignorable = match self.policy.admission {
            Admission::Strict => ignorable_marker(ty, ignorable)?,
            Admission::Reference => false,
        };
        let (sources, op) = (sources.as_ref(), op.as_ref());
        let seq = self.log.len() as u64;
        let ty = super::vocabulary::event_type_str(ty);
        let event = match data {
            Data::Canonical(text) => {
                Event::with_canonical_data(ty, seq, now, text, (sources, op), ignorable)
            }
            Data::Value(v, _) => {
                Event::with_canonical_data(ty, seq, now, &v.to_json(), (sources, op), ignorable)
            }
        };
        // Planned with the metadata values at hand (not read back).
        let c = Candidate {
            ty: Some(&event.ty),
            seq: Some(seq),
            data: CandidateData::Event(&event),
            op,
            sources,
        };
        let mut lookup = LogLookup::for_op(&self.log, self.log.len(), op);
        lookup.extra.extend(self.evicted_targets(op)?);
        let plan = self.surface.plan(&c, seq, self.markers, &lookup)?;
        let subject = || format!("appended {} at seq {seq}", event.ty.to_string_lossy());
        self.policy.check(&event, &subject)?;
        Ok((event, plan))
    }

    fn prepare_text(
        &self,
        ty: &str,
        data: DataText<'_>,
        intent: Option<&str>,
        now: i64,
    ) -> Result<(Event, Plan)> {
        self.prepare(
            ty,
            Data::from_text(data)?,
            intent.map_or(IntentArg::None, IntentArg::Text),
            now,
        )
    }

    /// `append(type, data, intent)`: check the event against the log and
    /// the surface and commit it.
    pub fn append(
        &mut self,
        ty: &str,
        data: Value,
        intent: &Intent,
        now: i64,
    ) -> Result<Arc<Event>> {
        self.append_value(ty, data, intent.to_value(), now)
    }

    /// [`Session::append`] with `data` and the intent as JSON text (`data`
    /// possibly checked canonical already): the C ABI's fast path, which
    /// reads canonical text in place.
    #[doc(hidden)]
    pub fn append_text<'a>(
        &mut self,
        ty: &str,
        data: impl Into<DataText<'a>>,
        intent: Option<&str>,
        now: i64,
    ) -> Result<Arc<Event>> {
        let (event, plan) = self.prepare_text(ty, data.into(), intent, now)?;
        Ok(self.commit(event, &plan))
    }

    /// `append` with the intent as the object the text form gives.
    fn append_value(
        &mut self,
        ty: &str,
        data: Value,
        intent: Option<Value>,
        now: i64,
    ) -> Result<Arc<Event>> {
        let (event, plan) =
            self.prepare(ty, Data::Value(data, false), IntentArg::Value(intent), now)?;
        Ok(self.commit(event, &plan))
    }

    /// The event [`Session::append`] would commit now; nothing changes.
    pub fn validate(&self, ty: &str, data: Value, intent: &Intent, now: i64) -> Result<Event> {
        let intent = IntentArg::Value(intent.to_value());
        Ok(self.prepare(ty, Data::Value(data, false), intent, now)?.0)
    }

    /// [`Session::validate`] with JSON text (the C ABI's door).
    #[doc(hidden)]
    pub fn validate_text<'a>(
        &self,
        ty: &str,
        data: impl Into<DataText<'a>>,
        intent: Option<&str>,
        now: i64,
    ) -> Result<Event> {
        Ok(self.prepare_text(ty, data.into(), intent, now)?.0)
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session header.
    pub fn header(&self) -> &Value {
        &self.header
    }

    /// The whole log.
    pub fn events(&self) -> &Log {
        &self.log
    }

    /// The live surface.
    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    /// The first seq written by this lifecycle.
    pub fn first_live_seq(&self) -> u64 {
        self.first_live_seq
    }

    /// Whether legacy (marker-less) message events are accepted.
    pub fn markers(&self) -> Markers {
        self.markers
    }

    /// The number of the open turn (`data.turn` of an unclosed `turn/start`).
    pub fn open_turn(&self) -> Result<Option<Value>> {
        let last = self
            .view()
            .rfind(self.log.len(), |t| t == TURN_START || t == TURN_END)?;
        Ok(last.filter(|e| e.ty == TURN_START).map(|e| {
            e.data()
                .as_object()
                .and_then(|d| d.get("turn"))
                .cloned()
                .unwrap_or(Value::Null)
        }))
    }

    /// Drop the events from `len` on (events the store could not accept)
    /// and rebuild the surface; the cached views notice by themselves.
    /// Windowed sessions use [`Session::checkpoint`] instead.
    pub fn truncate_uncommitted(&mut self, len: usize) {
        debug_assert!(self.window.is_none(), "windowed sessions roll back");
        if len >= self.log.len() {
            return;
        }
        self.log.truncate(len);
        self.forget_admitted(len);
        // Every remaining event was accepted before, against the same prefix.
        self.surface = refold(&self.log, self.markers).unwrap_or_default();
        self.derive = DeriveCache::default();
        self.folds = RequestFolds::default();
    }
}

/// The surface of `log` folded from scratch; errors name the seed index.
fn refold(log: &Log, markers: Markers) -> Result<Surface> {
    let mut surface = Surface::new();
    for (i, e) in log.iter().enumerate() {
        let plan = plan_event(&surface, &e, markers, (log, i), Vec::new()).map_err(|err| {
            err.prefixed(&format!("invalid seed event at index {i}: "))
                .at_index(i)
        })?;
        surface.apply(e.seq, &plan);
    }
    Ok(surface)
}
