//! The storage suites' wrapper over the core `Store` API: the same calls,
//! arguments and results as the C ABI's test wrapper
//! (crates/ffi-impl/tests/support/mod.rs), so a suite reads the same
//! whichever surface it runs against. Configurations and options are
//! JSON text, translated into the typed [`StoreConfig`],
//! [`CreateOptions`] and [`ForkOptions`] as the C ABI's
//! `options.rs` does for the keys the suites use; the translation checks
//! nothing the core would check (a refusal a suite sees is the core's),
//! and a shape the typed options cannot express at all (`"batchWindowMs":
//! 1.5`) is a mistake of the suite and panics here. Results are the JSON
//! shapes the ABI renders (`{"header","repaired","cut"}`, the listing,
//! the inspection, the error object) built from the core's typed results.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use ::dsh_session::engine::{Admission, Event, Markers, Vocabulary};
use ::dsh_session::json::{self, Object, Value};
use ::dsh_session::store::{
    self, BackendConfig, CreateOptions, ForkOptions, Inspection, LiveSession, StoreConfig,
    DEFAULT_SCHEMA, DEFAULT_STATEMENT_TIMEOUT_MS, HEADER_FIELDS,
};
use ::dsh_session::{Error, Status};

mod fixtures;
pub use fixtures::*;

/// The status codes, as the C ABI names them.
pub const DSH_OK: i32 = Status::Ok as i32;
pub const DSH_E_INVALID_JSON: i32 = Status::InvalidJson as i32;
pub const DSH_E_REJECTED: i32 = Status::Rejected as i32;
pub const DSH_E_CORRUPT: i32 = Status::Corrupt as i32;
pub const DSH_E_SCHEMA_MISMATCH: i32 = Status::SchemaMismatch as i32;
pub const DSH_E_IO: i32 = Status::Io as i32;
pub const DSH_E_NOT_FOUND: i32 = Status::NotFound as i32;
pub const DSH_E_CONFLICT: i32 = Status::Conflict as i32;
pub const DSH_E_INVALID_ARGUMENT: i32 = Status::InvalidArgument as i32;
pub const DSH_E_CLOSED: i32 = Status::Closed as i32;
pub const DSH_E_INTERNAL: i32 = Status::Internal as i32;

/// The C name of `status`.
pub fn status_name(status: Status) -> &'static str {
    match status {
        Status::Ok => "DSH_OK",
        Status::InvalidJson => "DSH_E_INVALID_JSON",
        Status::Rejected => "DSH_E_REJECTED",
        Status::Corrupt => "DSH_E_CORRUPT",
        Status::SchemaMismatch => "DSH_E_SCHEMA_MISMATCH",
        Status::Io => "DSH_E_IO",
        Status::NotFound => "DSH_E_NOT_FOUND",
        Status::Conflict => "DSH_E_CONFLICT",
        Status::InvalidArgument => "DSH_E_INVALID_ARGUMENT",
        Status::Closed => "DSH_E_CLOSED",
        Status::Internal => "DSH_E_INTERNAL",
    }
}

/// `e` as the C ABI's error object (docs/c-api.md):
/// `{"status","code","rule","message","index"?,"referenceCode"?,"cause"?}`.
pub fn error_json(e: &Error) -> String {
    let mut o = Object::new();
    o.insert_str("status", Value::str(status_name(e.status)));
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

/// A failed call as the suites check it: (status code, error object).
pub type Failure = (i32, String);

fn failure(e: Error) -> Failure {
    (e.status.code(), error_json(&e))
}

/// A call's (status, text): `ok` on success, the error object otherwise.
fn status_of(r: ::dsh_session::Result<()>) -> (i32, String) {
    match r {
        Ok(()) => (DSH_OK, "{\"ok\":true}".to_string()),
        Err(e) => failure(e),
    }
}

/// The object of a JSON text the suite wrote (`null` = none).
fn suite_object(text: &str, what: &str) -> Object {
    let value = json::parse(text)
        .unwrap_or_else(|e| panic!("the suite's {what} is no JSON: {e:?}: {text}"));
    if value.is_null() {
        return Object::new();
    }
    value
        .into_object()
        .unwrap_or_else(|_| panic!("the suite's {what} is no JSON object: {text}"))
}

/// A string member of a suite's configuration.
fn string_member(o: &Object, key: &str) -> Option<String> {
    o.get(key).map(|v| {
        v.as_str()
            .unwrap_or_else(|| panic!("{key} of the suite's configuration is no string"))
            .to_string()
    })
}

/// A boolean member of a suite's configuration.
fn bool_member(o: &Object, key: &str) -> Option<bool> {
    o.get(key).map(|v| {
        v.as_bool()
            .unwrap_or_else(|| panic!("{key} of the suite's configuration is no boolean"))
    })
}

/// An integer member of a suite's configuration.
fn integer_member(o: &Object, key: &str) -> Option<u64> {
    o.get(key).map(|v| {
        v.as_safe_u64()
            .unwrap_or_else(|| panic!("{key} of the suite's configuration is no integer"))
    })
}

/// The [`StoreConfig`] a store configuration text names, translated as the
/// C ABI translates it (crates/ffi-impl/src/options.rs) for the keys the
/// suites use. The core checks the result when the store opens; the only
/// error here is the vocabulary's own (`Vocabulary::new`).
pub fn store_config(text: &str) -> ::dsh_session::Result<StoreConfig> {
    let o = suite_object(text, "store configuration");
    for (k, _) in o.iter() {
        let known = [
            "backend",
            "path",
            "compression",
            "batchWindowMs",
            "admission",
            "eventTypes",
            "readOnly",
            "locking",
            "trimHeap",
            "url",
            "schema",
            "statementTimeoutMs",
        ];
        assert!(
            known.iter().any(|n| k == *n),
            "unknown key {} in the suite's configuration",
            k.to_string_lossy()
        );
    }
    let backend = string_member(&o, "backend").unwrap_or_else(|| "memory".to_string());
    let path = string_member(&o, "path").map(PathBuf::from);
    let url = string_member(&o, "url");
    let schema = string_member(&o, "schema");
    let timeout = integer_member(&o, "statementTimeoutMs");
    let zstd = match string_member(&o, "compression").as_deref() {
        None | Some("zstd") => true,
        Some("none") => false,
        Some(other) => panic!("compression {other:?} in the suite's configuration"),
    };
    let only = |applies: bool, what: &str| {
        assert!(
            applies,
            "{what} on the {backend} backend: the typed configuration has no place for it"
        )
    };
    only(
        backend == "postgres" || (url.is_none() && schema.is_none() && timeout.is_none()),
        "url, schema or statementTimeoutMs",
    );
    only(
        backend == "jsonl" || !o.contains_key("compression"),
        "compression",
    );
    let backend = match (backend.as_str(), path) {
        ("memory", None) => BackendConfig::Memory,
        ("sqlite", Some(path)) => BackendConfig::Sqlite { path },
        ("jsonl", Some(path)) => BackendConfig::Jsonl { path, zstd },
        ("postgres", None) => BackendConfig::Postgres {
            url: url.expect("the suite's postgres configuration has a url"),
            schema: schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_string()),
            statement_timeout_ms: timeout.unwrap_or(DEFAULT_STATEMENT_TIMEOUT_MS),
        },
        (b, p) => panic!("the suite's configuration: backend {b} with path {p:?}"),
    };
    let mut config = StoreConfig::new(backend);
    if let Some(w) = integer_member(&o, "batchWindowMs") {
        config.batch_window_ms = w;
    }
    if let Some(a) = string_member(&o, "admission") {
        config.admission =
            Admission::from_name(&a).unwrap_or_else(|| panic!("admission {a:?} in the suite"));
    }
    if let Some(types) = o.get("eventTypes") {
        let names: Vec<&str> = types
            .as_array()
            .expect("the suite's eventTypes is an array")
            .iter()
            .map(|t| t.as_str().expect("the suite's eventTypes are strings"))
            .collect();
        config.vocabulary = Vocabulary::new(names)?;
    }
    config.trim_heap = bool_member(&o, "trimHeap").unwrap_or(false);
    config.access.read_only = bool_member(&o, "readOnly").unwrap_or(false);
    if let Some(l) = string_member(&o, "locking") {
        config.access.exclusive = match l.as_str() {
            "shared" => false,
            "exclusive" => true,
            other => panic!("locking {other:?} in the suite's configuration"),
        };
    }
    Ok(config)
}

/// The [`CreateOptions`] a session options text names (`id`, `seed`,
/// `legacy` and the header fields, as the C ABI reads them).
pub fn create_options(text: &str) -> CreateOptions {
    let mut o = suite_object(text, "session options");
    let mut opts = CreateOptions {
        id: o
            .remove("id")
            .map(|v| v.as_str().expect("the suite's id is a string").to_string()),
        seed: o
            .remove("seed")
            .map(|s| s.into_array().expect("the suite's seed is an array")),
        ..CreateOptions::default()
    };
    match o.remove("legacy") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => opts.markers = Markers::LegacyAppend,
        Some(other) => panic!("legacy {} in the suite's options", other.to_json()),
    }
    for f in HEADER_FIELDS {
        if let Some(v) = o.remove(f) {
            opts.header_fields.insert_str(f, v);
        }
    }
    assert!(
        o.is_empty(),
        "session options the suite cannot pass: {text}"
    );
    opts
}

/// The [`ForkOptions`] of a fork after `boundary` (`-1`: the last event)
/// with the options text (`{"id"}`).
pub fn fork_options(boundary: i64, text: &str) -> ForkOptions {
    let mut o = suite_object(text, "fork options");
    let opts = ForkOptions {
        id: o
            .remove("id")
            .map(|v| v.as_str().expect("the suite's id is a string").to_string()),
        boundary: (boundary != -1).then_some(Value::Number(boundary as f64)),
    };
    assert!(o.is_empty(), "fork options the suite cannot pass: {text}");
    opts
}

/// Events as a JSON array of their own texts.
pub fn events_json<'a>(events: impl IntoIterator<Item = &'a Arc<Event>>) -> String {
    let texts: Vec<&str> = events.into_iter().map(|e| e.text()).collect();
    format!("[{}]", texts.join(","))
}

/// A tail's place, size and kind.
fn tail(at: u64, length: u64, why: &str) -> Object {
    let mut o = Object::new();
    o.insert_str("at", Value::num(at as f64));
    o.insert_str("length", Value::num(length as f64));
    o.insert_str("why", Value::str(why));
    o
}

/// An inspection as `dsh_store_inspect` renders it: `{"header",
/// "revision","torn","tornTail","events","repair","problems",
/// "quarantined"}`, `events` being the stored log then the closers.
pub fn inspection_json(i: &Inspection) -> Value {
    let torn = i.torn.as_ref().map_or(Value::Null, |t| {
        Value::Object(tail(t.at.value(), t.length, t.why.as_str()))
    });
    let events = parse(&events_json(i.events.iter().chain(&i.repair)));
    let repair = parse(&events_json(&i.repair));
    let problems = i.problems.iter().map(|f| {
        Value::obj([
            ("seq", Value::num(f.seq as f64)),
            (
                "rule",
                Value::str(f.error.cause.unwrap_or(f.error.rule).as_str()),
            ),
            ("status", Value::str(status_name(f.error.status))),
            ("message", Value::str(&f.error.message)),
        ])
    });
    let quarantined = i
        .quarantined
        .iter()
        .map(|p| Value::str(&p.to_string_lossy()));
    Value::obj([
        ("header", i.header.clone()),
        ("revision", Value::str(&i.revision)),
        ("torn", Value::Bool(i.torn.is_some())),
        ("tornTail", torn),
        ("events", events),
        ("repair", repair),
        ("problems", Value::Array(problems.collect())),
        ("quarantined", Value::Array(quarantined.collect())),
    ])
}

/// A store, opened from a configuration text.
pub struct Store(pub Arc<store::Store>);

impl Store {
    pub fn open(config: &str) -> Result<Store, Failure> {
        Store::open_typed(store_config(config).map_err(failure)?)
    }

    /// Open a store from a typed configuration (for what a configuration
    /// text cannot say).
    pub fn open_typed(config: StoreConfig) -> Result<Store, Failure> {
        store::Store::open(config).map(Store).map_err(failure)
    }

    pub fn create(&self, options: &str) -> Result<Session, Failure> {
        self.0
            .create(create_options(options))
            .map(Session)
            .map_err(failure)
    }

    /// Open a stored session: (session, `{"header","repaired","cut"}`).
    pub fn open_session(&self, id: &str) -> Result<(Session, Value), Failure> {
        let opened = self.0.open_session(id).map_err(failure)?;
        let header = opened.session.header().map_err(failure)?;
        let cut = opened.cut.as_ref().map_or(Value::Null, |c| {
            let mut o = tail(c.at, c.length, c.why.as_str());
            o.insert_str("copy", Value::str(&c.copy.to_string_lossy()));
            Value::Object(o)
        });
        let out = Value::obj([
            ("header", header),
            ("repaired", parse(&events_json(&opened.repaired))),
            ("cut", cut),
        ]);
        Ok((Session(opened.session), out))
    }

    /// `[{...header, "revision"}]`, as `dsh_store_list` renders it.
    pub fn list(&self) -> Value {
        let sessions = self.0.list().unwrap_or_else(|e| panic!("list: {e}"));
        let rows = sessions.iter().map(|s| {
            let mut o = s.header.as_object().cloned().unwrap_or_default();
            o.insert_str("revision", Value::str(&s.revision));
            Value::Object(o)
        });
        Value::Array(rows.collect())
    }

    /// Read `id` without repairing it, as `dsh_store_inspect` renders it.
    pub fn try_inspect(&self, id: &str) -> Result<Value, Failure> {
        self.0
            .inspect(id)
            .map(|i| inspection_json(&i))
            .map_err(failure)
    }

    /// [`Store::try_inspect`], which must succeed.
    pub fn inspect(&self, id: &str) -> Value {
        self.try_inspect(id)
            .unwrap_or_else(|(_, text)| panic!("inspect {id}: {text}"))
    }

    pub fn delete(&self, id: &str) -> (i32, String) {
        status_of(self.0.delete(id))
    }

    /// Drain every pending write and let go of the store (the sessions
    /// opened from it keep it alive), as `dsh_store_close` does.
    pub fn close(self) -> (i32, String) {
        status_of(self.0.flush())
    }
}

/// A live session.
pub struct Session(pub Arc<LiveSession>);

impl Session {
    /// Append through the JSON-text door (the one the C ABI calls).
    pub fn append(&self, ty: &str, data: &str, intent: Option<&str>) -> (i32, String) {
        match self.0.append_text(ty, data, intent) {
            Ok(e) => (DSH_OK, e.text().to_string()),
            Err(e) => failure(e),
        }
    }

    pub fn append_ok(&self, ty: &str, data: &str, intent: Option<&str>) -> Value {
        let (st, text) = self.append(ty, data, intent);
        assert_eq!(st, DSH_OK, "append {ty}: {text}");
        parse(&text)
    }

    pub fn batch(&self, batch: &str) -> (i32, String) {
        match self.0.append_batch_text(batch) {
            Ok(events) => (DSH_OK, events_json(&events)),
            Err(e) => failure(e),
        }
    }

    pub fn events(&self) -> Value {
        let events = self
            .0
            .events(0, u64::MAX)
            .unwrap_or_else(|e| panic!("events: {e}"));
        parse(&events_json(&events))
    }

    pub fn derive(&self) -> Value {
        Value::Array(self.0.derive().unwrap_or_else(|e| panic!("derive: {e}")))
    }

    /// `{"id","header","length","firstLiveSeq","replaceGeneration",
    /// "openTurn","admission","eventTypes"}`, as `dsh_session_info`.
    pub fn info(&self) -> Value {
        let i = self.0.info().unwrap_or_else(|e| panic!("info: {e}"));
        Value::obj([
            ("id", Value::str(&i.id)),
            ("header", i.header),
            ("length", Value::num(i.length as f64)),
            ("firstLiveSeq", Value::num(i.first_live_seq as f64)),
            ("replaceGeneration", Value::num(i.replace_generation as f64)),
            ("openTurn", i.open_turn.unwrap_or(Value::Null)),
            ("admission", Value::str(i.admission.as_str())),
            (
                "eventTypes",
                Value::Array(i.event_types.iter().map(|t| Value::str(t)).collect()),
            ),
        ])
    }

    pub fn flush(&self) -> (i32, String) {
        status_of(self.0.flush())
    }

    pub fn fork(&self, boundary: i64, options: &str) -> Result<Session, Failure> {
        self.0
            .fork(fork_options(boundary, options))
            .map(Session)
            .map_err(failure)
    }

    /// Drain and release the session. (Dropping it does the same, through
    /// [`LiveSession`]'s own drop.)
    pub fn close(self) -> (i32, String) {
        status_of(self.0.close())
    }
}
