//! The JSON texts the ABI takes as configuration and options, parsed into
//! the core's typed [`StoreConfig`], [`CreateOptions`], [`ForkOptions`] and
//! [`OpenOptions`]. Only the shape of the JSON is checked here; what a
//! value means (a session id, a read-only memory store, an exclusive lock
//! on a directory) the core checks, for Rust callers too.

use std::path::PathBuf;

use ::dsh_session::engine::session::parse_input;
use ::dsh_session::engine::{Admission, Markers, Vocabulary};
use ::dsh_session::error::{Error, Result};
use ::dsh_session::json::{JsString, Object, Value};
use ::dsh_session::store::{
    check_batch_window, check_session_id, check_statement_timeout, BackendConfig, CreateOptions,
    ForkOptions, OpenOptions, RepairOptions, StoreConfig, DEFAULT_SCHEMA,
    DEFAULT_STATEMENT_TIMEOUT_MS, HEADER_FIELDS,
};
use ::dsh_session::Rule;

fn config_error(message: impl Into<String>) -> Error {
    Error::invalid_argument(Rule::ConfigInvalid, message)
}

/// `arg.option-unknown` for the first key of `o` that `known` refuses
/// (`what` names the options: "unknown fork option …").
fn only_keys(o: &Object, what: &str, known: impl Fn(&JsString) -> bool) -> Result<()> {
    match o.iter().find(|(k, _)| !known(k)) {
        Some((k, _)) => Err(Error::invalid_argument(
            Rule::ArgOptionUnknown,
            format!("unknown {what} option \"{}\"", k.to_string_lossy()),
        )),
        None => Ok(()),
    }
}

fn object_or_null(text: Option<&str>, what: &str) -> Result<Option<Object>> {
    let Some(text) = text else { return Ok(None) };
    let value = parse_input(text, what)?;
    if value.is_null() {
        return Ok(None);
    }
    value.into_object().map(Some).map_err(|_| {
        Error::invalid_argument(
            Rule::ArgNotObject,
            format!("{what} must be a JSON object or null"),
        )
    })
}

/// A boolean member, `config.invalid` otherwise.
fn flag(o: &Object, key: &str) -> Result<Option<bool>> {
    o.get(key)
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| config_error(format!("{key} must be true or false")))
        })
        .transpose()
}

const BACKENDS: &str = "backend must be \"memory\", \"sqlite\", \"jsonl\" or \"postgres\"";

/// Parse a `dsh_store_open` configuration (NULL or `null` = memory).
pub fn store_config(text: Option<&str>) -> Result<StoreConfig> {
    let mut config = StoreConfig::memory();
    let Some(o) = object_or_null(text, "store configuration")? else {
        return Ok(config);
    };
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
        if !known.iter().any(|n| k == *n) {
            return Err(config_error(format!(
                "unknown store configuration key \"{}\"",
                k.to_string_lossy()
            )));
        }
    }
    if let Some(w) = o.get("batchWindowMs") {
        // A window that is no integer is refused as one out of range.
        config.batch_window_ms = w.as_safe_u64().unwrap_or(u64::MAX);
        check_batch_window(config.batch_window_ms)?;
    }
    if let Some(a) = o.get("admission") {
        config.admission = a
            .as_str()
            .and_then(Admission::from_name)
            .ok_or_else(|| config_error("admission must be \"strict\" or \"reference\""))?;
    }
    if let Some(types) = o.get("eventTypes") {
        let names = types
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
            .ok_or_else(|| {
                Error::invalid_argument(
                    Rule::ConfigEventType,
                    "eventTypes must be an array of event type names",
                )
            })?;
        config.vocabulary = Vocabulary::new(names)?;
    }
    let path = match o.get("path") {
        None => None,
        Some(p) => match p.as_str() {
            Some(p) if !p.is_empty() && !p.contains('\0') => Some(PathBuf::from(p)),
            _ => return Err(config_error("path must be a non-empty string")),
        },
    };
    let backend = match o.get("backend") {
        None => "memory",
        Some(b) => b.as_str().ok_or_else(|| config_error(BACKENDS))?,
    };
    let text = |key: &str| match o.get(key) {
        None => Ok(None),
        Some(v) => match v.as_str() {
            Some(t) if !t.is_empty() && !t.contains('\0') => Ok(Some(t.to_string())),
            _ => Err(config_error(format!("{key} must be a non-empty string"))),
        },
    };
    let url = text("url")?;
    let schema = text("schema")?;
    let statement_timeout_ms = match o.get("statementTimeoutMs") {
        None => None,
        // A timeout that is no integer is refused as one out of range.
        Some(t) => {
            let ms = t.as_safe_u64().unwrap_or(u64::MAX);
            check_statement_timeout(ms)?;
            Some(ms)
        }
    };
    if backend != "postgres"
        && (url.is_some() || schema.is_some() || statement_timeout_ms.is_some())
    {
        return Err(config_error(
            "url, schema and statementTimeoutMs apply to the postgres backend only",
        ));
    }
    let zstd = match o.get("compression").map(|c| c.as_str()) {
        None | Some(Some("zstd")) => true,
        Some(Some("none")) => false,
        _ => return Err(config_error("compression must be \"zstd\" or \"none\"")),
    };
    config.trim_heap = flag(&o, "trimHeap")?.unwrap_or(false);
    config.access.read_only = flag(&o, "readOnly")?.unwrap_or(false);
    if let Some(l) = o.get("locking") {
        config.access.exclusive = match l.as_str() {
            Some("shared") => false,
            Some("exclusive") => true,
            _ => return Err(config_error("locking must be \"shared\" or \"exclusive\"")),
        };
    }
    if backend != "jsonl" && o.contains_key("compression") {
        return Err(config_error(
            "compression applies to the jsonl backend only",
        ));
    }
    config.backend = match (backend, path) {
        ("postgres", None) => BackendConfig::Postgres {
            url: url.ok_or_else(|| config_error("the postgres backend needs a \"url\""))?,
            schema: schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_string()),
            statement_timeout_ms: statement_timeout_ms.unwrap_or(DEFAULT_STATEMENT_TIMEOUT_MS),
        },
        ("postgres", Some(_)) => {
            return Err(config_error(
                "the postgres backend takes a \"url\", not a \"path\"",
            ))
        }
        ("memory", None) => BackendConfig::Memory,
        ("memory", Some(_)) => return Err(config_error("the memory backend takes no path")),
        ("sqlite", Some(path)) => BackendConfig::Sqlite { path },
        ("jsonl", Some(path)) => BackendConfig::Jsonl { path, zstd },
        ("sqlite" | "jsonl", None) => {
            return Err(config_error(format!(
                "the {backend} backend needs a \"path\""
            )))
        }
        _ => return Err(config_error(BACKENDS)),
    };
    config.check()?;
    Ok(config)
}

/// A session id option (`arg.id` unless a string the core accepts).
fn session_id(v: &Value) -> Result<String> {
    let id = v.as_str().unwrap_or("");
    check_session_id(id)?;
    Ok(id.to_string())
}

/// Parse `dsh_session_create` options (NULL or `null` = defaults).
pub fn create_options(text: Option<&str>) -> Result<CreateOptions> {
    let mut opts = CreateOptions::default();
    let Some(mut o) = object_or_null(text, "session options")? else {
        return Ok(opts);
    };
    only_keys(&o, "session", |k| {
        k == "id" || k == "seed" || k == "legacy" || HEADER_FIELDS.iter().any(|f| k == *f)
    })?;
    opts.id = o.remove("id").map(|v| session_id(&v)).transpose()?;
    if let Some(seed) = o.remove("seed") {
        let seed = seed.into_array().map_err(|_| {
            Error::invalid_argument(Rule::ArgSeed, "seed must be an array of events")
        })?;
        opts.seed = Some(seed);
    }
    match o.remove("legacy") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => opts.markers = Markers::LegacyAppend,
        Some(_) => {
            return Err(Error::invalid_argument(
                Rule::ArgLegacy,
                "legacy must be a boolean",
            ))
        }
    }
    for f in HEADER_FIELDS {
        if let Some(v) = o.remove(f) {
            opts.header_fields.insert_str(f, v);
        }
    }
    Ok(opts)
}

/// Parse `dsh_session_fork` options (NULL or `null` = defaults) together
/// with the integer boundary argument: `-1` means "the last event" unless
/// the options carry `"boundary"` (any JSON value, for boundaries an
/// integer cannot express); giving both is `arg.boundary`.
pub fn fork_options(text: Option<&str>, boundary: i64) -> Result<ForkOptions> {
    let mut opts = ForkOptions::default();
    if let Some(mut o) = object_or_null(text, "fork options")? {
        only_keys(&o, "fork", |k| k == "id" || k == "boundary")?;
        opts.id = o.remove("id").map(|v| session_id(&v)).transpose()?;
        opts.boundary = o.remove("boundary");
    }
    match (opts.boundary.is_some(), boundary) {
        (_, -1) => {}
        (true, _) => {
            return Err(Error::invalid_argument(
                Rule::ArgBoundary,
                "give the boundary either as the argument or as the \"boundary\" option (with the argument -1)",
            ))
        }
        (false, b) => opts.boundary = Some(Value::Number(b as f64)),
    }
    Ok(opts)
}

/// Parse `dsh_session_open_windowed` options (NULL or `null` = defaults):
/// `{"window": n}` with `n` a non-negative safe integer.
pub fn open_options(text: Option<&str>) -> Result<OpenOptions> {
    let mut opts = OpenOptions::default();
    if let Some(o) = object_or_null(text, "open options")? {
        only_keys(&o, "open", |k| k == "window")?;
        if let Some(v) = o.get("window") {
            let n = v.as_safe_u64().ok_or_else(|| {
                Error::invalid_argument(
                    Rule::ArgWindow,
                    format!(
                        "\"window\" must be a non-negative safe integer, got {}",
                        v.to_json()
                    ),
                )
            })?;
            opts.window = usize::try_from(n).unwrap_or(usize::MAX);
        }
    }
    Ok(opts)
}

/// Parse `dsh_store_repair` options (NULL or `null` = defaults):
/// `{"dryRun": bool, "salvage": bool}`.
pub fn repair_options(text: Option<&str>) -> Result<RepairOptions> {
    let mut opts = RepairOptions::default();
    if let Some(o) = object_or_null(text, "repair options")? {
        only_keys(&o, "repair", |k| k == "dryRun" || k == "salvage")?;
        let flag = |key: &str| -> Result<bool> {
            match o.get(key) {
                None => Ok(false),
                Some(v) => v.as_bool().ok_or_else(|| {
                    Error::invalid_argument(
                        Rule::ArgRepairOption,
                        format!("\"{key}\" must be true or false, got {}", v.to_json()),
                    )
                }),
            }
        };
        opts.dry_run = flag("dryRun")?;
        opts.salvage = flag("salvage")?;
    }
    Ok(opts)
}
