//! Shared helpers for the checklist tests (`tests/checklist_*.rs`): thin
//! wrappers over the core store and engine API that answer in the JSON
//! shapes the C ABI gives (so the expectations read as JSON values), JSON
//! builders for events and messages, and a deterministic pseudo-random
//! generator for the property-style tests.
//!
//! Appends, validations and batches go through the sessions' JSON-text
//! doors (`append_text`, `validate_text`, `append_batch_text`), so a test
//! that feeds raw text feeds the core exactly that text.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use dsh_session::engine::derive::{derive_log, value_message};
use dsh_session::engine::event::typed_log;
use dsh_session::engine::repair;
use dsh_session::engine::session::parse_input;
use dsh_session::engine::surface::{self, Fold, Markers};
use dsh_session::engine::{Admission, Event, Vocabulary};
use dsh_session::json::{self as core_json, Value};
use dsh_session::store::{self as core, CreateOptions, ForkOptions, LiveSession, Notice, Observer};
use dsh_session::{Error, Rule, Status};

pub use serde_json::{json, Value as J};

mod outcome;

pub use outcome::*;

/// A status as the number the C ABI gives it (`dsh_status`).
#[allow(non_camel_case_types)]
pub type dsh_status = i32;

pub const DSH_OK: dsh_status = Status::Ok as i32;
pub const DSH_E_INVALID_JSON: dsh_status = Status::InvalidJson as i32;
pub const DSH_E_REJECTED: dsh_status = Status::Rejected as i32;
pub const DSH_E_CORRUPT: dsh_status = Status::Corrupt as i32;
pub const DSH_E_SCHEMA_MISMATCH: dsh_status = Status::SchemaMismatch as i32;
pub const DSH_E_IO: dsh_status = Status::Io as i32;
pub const DSH_E_NOT_FOUND: dsh_status = Status::NotFound as i32;
pub const DSH_E_CONFLICT: dsh_status = Status::Conflict as i32;
pub const DSH_E_INVALID_ARGUMENT: dsh_status = Status::InvalidArgument as i32;
pub const DSH_E_CLOSED: dsh_status = Status::Closed as i32;
pub const DSH_E_INTERNAL: dsh_status = Status::Internal as i32;

/// A test input as a core value (serde_json writes ordinary JSON, which
/// the core's lossless parser reads back as the same value).
pub fn value(v: &J) -> Value {
    core_json::parse(&v.to_string()).expect("serde_json writes JSON")
}

/// The error object of `e` (the fields the C ABI's error JSON carries).
fn error_text(e: &Error) -> String {
    let mut o = core_json::Object::new();
    o.insert_str("status", Value::str(&format!("{:?}", e.status)));
    o.insert_str("code", Value::Number(e.status.code() as f64));
    o.insert_str("rule", Value::str(e.rule.as_str()));
    o.insert_str("message", Value::str(&e.message));
    if let Some(i) = e.index {
        o.insert_str("index", Value::Number(i as f64));
    }
    if let Some(c) = e.code {
        o.insert_str("referenceCode", Value::str(c));
    }
    if let Some(c) = e.cause {
        o.insert_str("cause", Value::str(c.as_str()));
    }
    Value::Object(o).to_json()
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail {
            status: e.status.code(),
            rule: e.rule.as_str().to_string(),
            message: e.message.clone(),
            index: e.index.map(|i| i as u64),
            reference_code: e.code.map(str::to_string),
            text: error_text(&e),
        }
    }
}

// ------------------------------------------------------------- rendering

/// Events as a JSON array (each event's own text), as the ABI writes them.
pub fn events_json<'a>(events: impl IntoIterator<Item = &'a Event>) -> String {
    let mut out = String::from("[");
    for (i, e) in events.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        e.write_json(&mut out);
    }
    out.push(']');
    out
}

fn write_seqs<'a>(out: &mut String, seqs: impl IntoIterator<Item = &'a u64>) {
    let seqs: Vec<String> = seqs.into_iter().map(u64::to_string).collect();
    out.push('[');
    out.push_str(&seqs.join(","));
    out.push(']');
}

/// `{"nodes":[...],"replacements":[{"seq","start","end","shadowedSeqs"}]}`.
fn fold_json(fold: &Fold) -> String {
    let mut out = String::from("{\"nodes\":");
    write_seqs(&mut out, fold.surface.nodes());
    out.push_str(",\"replacements\":[");
    for (i, r) in fold.replacements.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"seq\":{},\"start\":{},\"end\":{},\"shadowedSeqs\":",
            r.seq, r.start, r.end
        ));
        write_seqs(&mut out, &r.shadowed);
        out.push('}');
    }
    out.push_str("]}");
    out
}

/// An optional value as JSON text (`null` when absent).
fn opt_json(v: Option<Value>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_json())
}

// ----------------------------------------------------------------- store

/// A memory store; its pending writes are drained on drop.
pub struct Store {
    pub core: Arc<core::Store>,
}

impl Store {
    /// A memory store under the reference's admission: the checklist
    /// states the reference's behaviour, permissive appends included.
    pub fn open() -> Store {
        Store::open_config(r#"{"admission":"reference"}"#)
    }

    /// A memory store of `config`, JSON text with the keys the C ABI's
    /// store configuration gives these settings: `admission` and
    /// `eventTypes` (the checklist uses no other).
    pub fn open_config(config: &str) -> Store {
        let config = parse(config);
        let mut c = core::StoreConfig::memory();
        for (k, v) in config.as_object().expect("configuration object") {
            match k.as_str() {
                "admission" => {
                    c.admission = v
                        .as_str()
                        .and_then(Admission::from_name)
                        .expect("admission name")
                }
                "eventTypes" => {
                    let names = v.as_array().expect("eventTypes array").iter();
                    let names = names.map(|n| n.as_str().expect("type name"));
                    c.vocabulary = Vocabulary::new(names).expect("event types")
                }
                other => panic!("no checklist store takes \"{other}\""),
            }
        }
        Store {
            core: core::Store::open(c).expect("store open"),
        }
    }

    /// Create a session with `CreateOptions`; the header it returns.
    pub fn create_with(&self, options: CreateOptions) -> R<Sess> {
        let live = self.core.create(options)?;
        Ok(Sess::new(live))
    }

    /// Create a session with options as JSON text, mapped as the C ABI's
    /// `dsh_session_create` maps them: `id`, `seed` (an array of events),
    /// `legacy` and the header fields.
    pub fn create(&self, options: &str) -> R<Sess> {
        let mut opts = CreateOptions::default();
        let value = parse_input(options, "session options")?;
        let mut o = value.into_object().expect("options object");
        for (k, _) in o.iter() {
            let known = k == "id"
                || k == "seed"
                || k == "legacy"
                || core::HEADER_FIELDS.iter().any(|f| k == *f);
            assert!(known, "unknown option {}", k.to_string_lossy());
        }
        opts.id = o
            .remove("id")
            .map(|v| v.as_str().expect("id string").to_string());
        opts.seed = o
            .remove("seed")
            .map(|s| s.into_array().expect("seed array"));
        if let Some(legacy) = o.remove("legacy") {
            if legacy.as_bool().expect("legacy boolean") {
                opts.markers = Markers::LegacyAppend;
            }
        }
        for f in core::HEADER_FIELDS {
            if let Some(v) = o.remove(f) {
                opts.header_fields.insert_str(f, v);
            }
        }
        self.create_with(opts)
    }

    /// Create with options as a JSON value.
    pub fn create_json(&self, options: &J) -> R<Sess> {
        self.create(&options.to_string())
    }

    /// A session with id `id` and no seed.
    pub fn session(&self, id: &str) -> Sess {
        ok(self.create_json(&json!({ "id": id })))
    }

    /// A session seeded with `seed`.
    pub fn seeded(&self, id: &str, seed: &J) -> Sess {
        ok(self.create_json(&json!({ "id": id, "seed": seed })))
    }

    /// Open a stored session: `(session, {"header","repaired","cut"})`.
    pub fn open_session(&self, id: &str) -> R<(Sess, J)> {
        let opened = self.core.open_session(id)?;
        let cut = match &opened.cut {
            None => J::Null,
            Some(c) => json!({"at": c.at, "length": c.length, "why": c.why.as_str(),
                              "copy": c.copy.to_string_lossy()}),
        };
        let repaired = parse(&events_json(opened.repaired.iter().map(|e| &**e)));
        let s = Sess::new(opened.session);
        let out = json!({"header": s.header.clone(), "repaired": repaired, "cut": cut});
        Ok((s, out))
    }

    /// The stored sessions: `[{...header, "revision"}]`.
    pub fn list(&self) -> J {
        let rows = ok(self.core.list().map_err(Fail::from));
        let rows = rows.iter().map(|s| {
            let mut o = s.header.as_object().cloned().unwrap_or_default();
            o.insert_str("revision", Value::str(&s.revision));
            Value::Object(o)
        });
        parse(&Value::Array(rows.collect()).to_json())
    }

    /// The ids of the stored sessions.
    pub fn ids(&self) -> Vec<String> {
        let list = self.list();
        list.as_array()
            .expect("list is an array")
            .iter()
            .map(|h| h["id"].as_str().expect("id").to_string())
            .collect()
    }

    /// Install (or with `None` remove) the store's observer.
    pub fn set_observer(&self, observer: Option<Observer>) {
        self.core.set_observer(observer);
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.core.flush();
    }
}

// --------------------------------------------------------------- session

/// A live session, closed on drop.
#[derive(Debug)]
pub struct Sess {
    pub live: Arc<LiveSession>,
    /// The header returned at creation.
    pub header: J,
    closed: bool,
}

impl Sess {
    fn new(live: Arc<LiveSession>) -> Sess {
        let header = parse(&ok(live.header().map_err(Fail::from)).to_json());
        Sess {
            live,
            header,
            closed: false,
        }
    }

    /// Append with data and intent as JSON text; the committed event.
    pub fn append_raw(&self, ty: &str, data: &str, intent: Option<&str>) -> R<J> {
        let e = self.live.append_text(ty, data, intent)?;
        Ok(parse(e.text()))
    }

    /// Append with data and intent as values.
    pub fn append(&self, ty: &str, data: &J, intent: Option<&J>) -> R<J> {
        self.append_raw(ty, &data.to_string(), intent.map(J::to_string).as_deref())
    }

    /// Append a log-only event that must succeed; return its seq.
    #[track_caller]
    pub fn log(&self, ty: &str, data: J) -> u64 {
        ok(self.append(ty, &data, None))["seq"]
            .as_u64()
            .expect("seq")
    }

    /// Append a surface event that must succeed; return its seq.
    #[track_caller]
    pub fn surf(&self, ty: &str, data: J, intent: J) -> u64 {
        ok(self.append(ty, &data, Some(&intent)))["seq"]
            .as_u64()
            .expect("seq")
    }

    /// Validate with text arguments; the event an append would commit.
    pub fn validate_raw(&self, ty: &str, data: &str, intent: Option<&str>) -> R<J> {
        let e = self.live.validate_text(ty, data, intent)?;
        Ok(parse(e.text()))
    }

    /// Append `[{"type","data","intent"?}, ...]` all or nothing.
    pub fn batch(&self, items: &J) -> R<J> {
        let text = items.to_string();
        let events = self.live.append_batch_text(&text)?;
        Ok(parse(&events_json(events.iter().map(|e| &**e))))
    }

    /// The whole log as text.
    pub fn events_text(&self) -> String {
        let events = ok(self.live.events(0, u64::MAX).map_err(Fail::from));
        events_json(events.iter().map(|e| &**e))
    }

    /// The whole log.
    pub fn events(&self) -> J {
        parse(&self.events_text())
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.events().as_array().expect("array").len()
    }

    /// `{"nodes","replaceGeneration"}`.
    pub fn surface(&self) -> J {
        let (nodes, generation) = ok(self.live.surface().map_err(Fail::from));
        json!({"nodes": nodes, "replaceGeneration": generation})
    }

    /// The surface nodes.
    pub fn nodes(&self) -> Vec<u64> {
        seqs(&self.surface()["nodes"])
    }

    /// The derived messages as text.
    pub fn derive_text(&self) -> String {
        ok(self.live.derive_json().map_err(Fail::from))
    }

    /// The derived messages.
    pub fn derive(&self) -> J {
        parse(&self.derive_text())
    }

    /// `{"id","header","length","firstLiveSeq","replaceGeneration",
    /// "openTurn","admission","eventTypes"}`.
    pub fn info(&self) -> J {
        let i = ok(self.live.info().map_err(Fail::from));
        json!({
            "id": i.id,
            "header": parse(&i.header.to_json()),
            "length": i.length,
            "firstLiveSeq": i.first_live_seq,
            "replaceGeneration": i.replace_generation,
            "openTurn": parse(&opt_json(i.open_turn)),
            "admission": i.admission.as_str(),
            "eventTypes": i.event_types,
        })
    }

    /// The folded request header, or `null`.
    pub fn request_header(&self) -> J {
        parse(&opt_json(ok(self
            .live
            .request_header()
            .map_err(Fail::from))))
    }

    /// The latest request context, or `null`.
    pub fn request_context(&self) -> J {
        parse(&opt_json(ok(self
            .live
            .request_context()
            .map_err(Fail::from))))
    }

    /// Fork with the C ABI's arguments: `boundary` is the seq of the last
    /// event kept, `-1` meaning the last event unless `options` carries
    /// `"boundary"` (any JSON value); `options` may name the child `id`.
    pub fn fork(&self, boundary: i64, options: Option<&J>) -> R<Sess> {
        let mut opts = ForkOptions::default();
        if let Some(o) = options {
            let o = o.as_object().expect("fork options object");
            for k in o.keys() {
                assert!(k == "id" || k == "boundary", "unknown fork option {k}");
            }
            opts.id = o.get("id").map(|v| v.as_str().expect("id").to_string());
            opts.boundary = o.get("boundary").map(value);
        }
        if boundary != -1 {
            assert!(opts.boundary.is_none(), "boundary given twice");
            opts.boundary = Some(Value::Number(boundary as f64));
        }
        Ok(Sess::new(self.live.fork(opts)?))
    }

    /// Fork with `{"id": child, "boundary": boundary}` (argument -1).
    pub fn fork_at(&self, child: &str, boundary: J) -> R<Sess> {
        self.fork(-1, Some(&json!({ "id": child, "boundary": boundary })))
    }

    /// Close now; return the status.
    pub fn close(mut self) -> dsh_status {
        self.closed = true;
        match self.live.close() {
            Ok(()) => DSH_OK,
            Err(e) => e.status.code(),
        }
    }
}

impl Drop for Sess {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.live.close();
        }
    }
}

// ------------------------------------------------------- pure functions

/// A log given as JSON text, as the pure functions read it.
fn parse_log(text: &str) -> dsh_session::Result<Vec<Value>> {
    core_json::parse(text)
        .map_err(|e| {
            Error::invalid_json(
                Rule::JsonParse,
                format!("events_json is not valid JSON: {e}"),
            )
        })?
        .into_array()
        .map_err(|_| {
            Error::invalid_argument(
                Rule::ArgNotArray,
                "events_json must be a JSON array of events",
            )
        })
}

/// The pure full fold of a log given as text:
/// `{"nodes","replacements"}`.
pub fn fold_text(events: &str) -> R<J> {
    let log = parse_log(events)?;
    Ok(parse(&fold_json(&surface::fold(&log, Markers::Required)?)))
}

/// The pure full fold.
pub fn fold(events: &J) -> R<J> {
    fold_text(&events.to_string())
}

/// The derived messages of a log given as text, as text.
pub fn derive_messages_text(events: &str) -> R<String> {
    let log = parse_log(events)?;
    let mut out = String::from("[");
    for (i, m) in derive_log(&log)?.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        m.write_json(&mut out);
    }
    out.push(']');
    Ok(out)
}

/// The derived messages of a complete log.
pub fn derive_messages(events: &J) -> R<J> {
    Ok(parse(&derive_messages_text(&events.to_string())?))
}

/// The closing events crash repair would append to a complete log.
pub fn repair(events: &J) -> R<J> {
    let log = typed_log(parse_log(&events.to_string())?)?;
    Ok(parse(&events_json(&repair::closers(&log))))
}

/// The message one event (JSON text) contributes, as text (`null` for none).
pub fn event_message_text(event: &str) -> R<String> {
    let v = core_json::parse(event).map_err(|e| {
        Error::invalid_json(
            Rule::JsonParse,
            format!("event_json is not valid JSON: {e}"),
        )
    })?;
    Ok(value_message(&v).map_or_else(|| "null".to_string(), Value::to_json))
}

/// The message one event contributes, or `null`.
pub fn event_message(event: &J) -> R<J> {
    Ok(parse(&event_message_text(&event.to_string())?))
}

/// A JSON array of seqs as numbers.
pub fn seqs(v: &J) -> Vec<u64> {
    v.as_array()
        .expect("seq array")
        .iter()
        .map(|s| s.as_u64().expect("seq"))
        .collect()
}

/// Remove `time` from an event or from each event of an array.
pub fn strip_time(v: &J) -> J {
    let mut v = v.clone();
    match &mut v {
        J::Object(o) => {
            o.remove("time");
        }
        J::Array(a) => {
            for e in a.iter_mut() {
                if let J::Object(o) = e {
                    o.remove("time");
                }
            }
        }
        _ => {}
    }
    v
}

mod build;
#[allow(unused_imports)]
pub use build::*;

// ------------------------------------------------------------ pseudo-random

/// A 64-bit linear congruential generator (Knuth's MMIX constants).
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        u64::from(self.next_u32()) % n
    }

    /// True with probability `p` percent.
    pub fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

// ---------------------------------------------------------------- observer

/// The `(kind, payload)` the C ABI's observer hears for `notice`.
pub fn notice_text(notice: Notice<'_>) -> (&'static str, String) {
    match notice {
        Notice::Created(h) => ("created", h.to_json()),
        Notice::Event(e) => ("event", e.text().to_string()),
        Notice::Flush(Ok(())) => ("flush", "{\"ok\":true}".to_string()),
        Notice::Flush(Err(e)) => ("flush", format!("{{\"ok\":false,\"rule\":\"{}\"}}", e.rule)),
        Notice::Disposed => ("disposed", "null".to_string()),
    }
}

/// Records every notice `(session id, kind, payload)`.
#[derive(Default)]
pub struct Recorder {
    pub notices: Arc<Mutex<Vec<(String, String, String)>>>,
}

impl Recorder {
    pub fn kinds(&self) -> Vec<String> {
        self.notices
            .lock()
            .unwrap()
            .iter()
            .map(|n| n.1.clone())
            .collect()
    }

    pub fn take(&self) -> Vec<(String, String, String)> {
        std::mem::take(&mut *self.notices.lock().unwrap())
    }
}

/// Record the notices of `store` into `recorder`.
pub fn observe(store: &Store, recorder: &Recorder) {
    let notices = recorder.notices.clone();
    store.set_observer(Some(Arc::new(move |id: &str, notice: Notice<'_>| {
        let (kind, payload) = notice_text(notice);
        notices
            .lock()
            .unwrap()
            .push((id.to_string(), kind.to_string(), payload));
    })));
}
