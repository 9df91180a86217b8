//! The reading commands: `list`, `show`, `derive` and `stats`. They open
//! the backend of an existing store, read with `load`, and rebuild a
//! session in memory with the restore pipeline; nothing is written.

use super::args::{DeriveArgs, ListArgs, ShowArgs, StatsArgs, StoreArgs};
use super::output::{clip, get, iso_ms, message_text, plain, surface_text, table, Out};
use super::{progress, scan, CliError, Ctx, Target, EXIT_OK};
use dsh_session::engine::derive::event_message;
use dsh_session::engine::event::{is_surface_type, TURN_START};
use dsh_session::engine::request::token_usage;
use dsh_session::engine::surface::{self, Markers};
use dsh_session::engine::Vocabulary;
use dsh_session::error::{Error, Status};
use dsh_session::json::{Object, Value};
use dsh_session::store::backend::header_id;
use dsh_session::store::{restore, restore_lenient, Backend, Loaded, Restored};
use dsh_session::Rule;

/// An opened store.
pub(super) struct Opened {
    /// Where it is.
    pub target: Target,
    /// Its backend.
    pub backend: Box<dyn Backend>,
    /// The host event types `--event-types` declares.
    pub vocab: Vocabulary,
}

impl Opened {
    /// Open an existing store for reading.
    pub fn new(args: &StoreArgs) -> Result<Opened, CliError> {
        let target = Target::from_args(args)?;
        let vocab = target.vocabulary()?;
        let backend = target
            .open_existing()
            .map_err(|e| CliError::library(&target.path, None, &e))?;
        Ok(Opened {
            target,
            backend,
            vocab,
        })
    }

    /// A library error about session `id` of this store.
    pub fn fail(&self, id: Option<&str>, e: &Error) -> CliError {
        CliError::library(&self.target.file_of(id), id, e)
    }

    /// `load.not-found` for session `id`.
    pub fn not_found(&self, id: &str) -> CliError {
        self.fail(
            Some(id),
            &Error::new(
                Status::NotFound,
                Rule::LoadNotFound,
                format!("session \"{id}\" not found"),
            ),
        )
    }

    /// Read session `id` (`load.not-found` when absent).
    pub fn load(&mut self, id: &str) -> Result<Loaded, CliError> {
        match self.backend.load(id) {
            Ok(Some(loaded)) => Ok(loaded),
            Ok(None) => Err(self.not_found(id)),
            Err(e) => Err(self.fail(Some(id), &e)),
        }
    }

    /// Read session `id` and rebuild it in memory (the open pipeline
    /// without writing), with notes about what `open` would repair.
    pub fn restore(&mut self, ctx: Ctx, id: &str) -> Result<(Loaded, Restored), CliError> {
        let bar = progress::spinner(ctx, &format!("reading {id}"));
        let loaded = self.load(id)?;
        let restored = restore(id, &loaded, &self.vocab);
        bar.finish_and_clear();
        let restored = restored.map_err(|e| self.fail(Some(id), &e))?;
        self.repair_notes(ctx, id, &loaded, &restored);
        Ok((loaded, restored))
    }

    /// [`Opened::restore`] for a command that only reads: events a strict
    /// open refuses one by one (an undeclared type, a malformed message or
    /// request header) are read as stored, each named in a note with its
    /// seq and rule.
    pub fn restore_for_reading(
        &mut self,
        ctx: Ctx,
        id: &str,
    ) -> Result<(Loaded, Restored), CliError> {
        let bar = progress::spinner(ctx, &format!("reading {id}"));
        let loaded = self.load(id)?;
        let restored = restore_lenient(id, &loaded, &self.vocab);
        bar.finish_and_clear();
        let (restored, findings) = restored.map_err(|e| self.fail(Some(id), &e))?;
        for f in &findings {
            let rule = f.error.cause.unwrap_or(f.error.rule);
            ctx.note(&format!(
                "session \"{id}\" seq {}: {rule}: {} (read as stored; open refuses it{})",
                f.seq,
                f.error.message,
                if rule == Rule::LoadUnknownType {
                    " unless the type is declared with --event-types"
                } else {
                    ""
                }
            ));
        }
        self.repair_notes(ctx, id, &loaded, &restored);
        Ok((loaded, restored))
    }

    fn repair_notes(&self, ctx: Ctx, id: &str, loaded: &Loaded, restored: &Restored) {
        if loaded.torn.is_some() {
            ctx.note(&format!(
                "session \"{id}\" has a torn tail; it is left out (`dsh-session repair` cuts it)"
            ));
        }
        if !restored.closers.is_empty() {
            ctx.note(&format!(
                "session \"{id}\" ends inside a turn; the {} closer(s) open would append are included in memory (`dsh-session repair` writes them)",
                restored.closers.len()
            ));
        }
    }
}

/// `N` of a SQLite revision (`…:revision:N`), else the revision itself.
fn short_revision(revision: &str) -> &str {
    revision
        .rsplit_once(":revision:")
        .map_or(revision, |(_, n)| n)
}

fn created_at(header: &Value) -> String {
    get(header, "createdAt")
        .and_then(Value::as_safe_i64)
        .map_or_else(|| "-".to_string(), iso_ms)
}

/// `list`.
pub fn list(ctx: Ctx, a: &ListArgs) -> Result<u8, CliError> {
    let mut o = Opened::new(&a.store)?;
    let rows = o.backend.list().map_err(|e| o.fail(None, &e))?;
    let bar = progress::sessions(ctx, rows.len());
    let mut out = Out::new();
    let mut json = Vec::new();
    let mut lines = Vec::new();
    for row in rows {
        let id = header_id(&row.header).to_string();
        let mut item = Object::new();
        item.insert_str("id", Value::str(&id));
        item.insert_str("header", row.header.clone());
        item.insert_str("revision", Value::str(&row.revision));
        bar.set_message(id.clone());
        let (events, turn, note) = match scan::summary(&mut *o.backend, &id, &mut |_| {}) {
            Ok(Some(sum)) => {
                item.insert_str("events", Value::num(sum.events as f64));
                item.insert_str("openTurn", sum.open_turn.clone().unwrap_or_default());
                item.insert_str("tornTail", Value::Bool(sum.torn));
                let note = if sum.torn { "torn tail" } else { "" };
                let turn = sum.open_turn.map_or_else(|| "-".to_string(), |t| plain(&t));
                (sum.events.to_string(), turn, note.to_string())
            }
            Ok(None) => ("-".into(), "-".into(), "not found".into()),
            Err(e) => {
                let err = Value::obj([
                    ("rule", Value::str(e.rule.as_str())),
                    ("message", Value::str(&e.message)),
                ]);
                item.insert_str("error", err);
                ("-".into(), "-".into(), format!("unreadable: {}", e.rule))
            }
        };
        bar.inc(1);
        json.push(Value::Object(item));
        let revision = short_revision(&row.revision).to_string();
        lines.push(vec![
            id,
            created_at(&row.header),
            events,
            turn,
            revision,
            note,
        ]);
    }
    bar.finish_and_clear();
    if ctx.json {
        out.line(&Value::Array(json).to_json());
    } else if lines.is_empty() {
        ctx.note(&format!("no sessions in {}", o.target.path.display()));
    } else {
        let header = ["ID", "CREATED", "EVENTS", "OPEN TURN", "REVISION", "NOTE"];
        for line in table(&header, &lines, &[false, false, true, true, false, false]) {
            out.line(&line);
        }
    }
    Ok(EXIT_OK)
}

fn type_matches(types: &[String], ty: &str) -> bool {
    types.is_empty()
        || types.iter().any(|t| match t.strip_suffix('*') {
            Some(prefix) => ty.starts_with(prefix),
            None => ty == t,
        })
}

/// `show`.
pub fn show(ctx: Ctx, a: &ShowArgs) -> Result<u8, CliError> {
    let mut o = Opened::new(&a.store)?;
    let from = a.from.unwrap_or(0);
    let to = a.to.unwrap_or(u64::MAX);
    // Only the range is kept, never the whole log.
    let bar = progress::reading(ctx, &a.id);
    let seekable = matches!(
        o.target.kind,
        super::args::BackendKind::Sqlite | super::args::BackendKind::Postgres
    );
    let read = scan::range(&mut *o.backend, &a.id, (from, to), seekable, &mut |n| {
        bar.inc(n)
    });
    bar.finish_and_clear();
    let (values, torn) = match read {
        Ok(Some(read)) => read,
        Ok(None) => return Err(o.not_found(&a.id)),
        Err(e) => return Err(o.fail(Some(&a.id), &e)),
    };
    if torn {
        ctx.note(&format!(
            "session \"{}\" has a torn tail after the events shown",
            a.id
        ));
    }
    let shown = values.iter().enumerate().filter(|(_, e)| {
        let ty = get(e, "type").map(plain).unwrap_or_default();
        type_matches(&a.types, &ty)
    });
    let mut out = Out::new();
    if ctx.json {
        for (_, e) in shown {
            out.line(&e.to_json());
        }
        return Ok(EXIT_OK);
    }
    let rows: Vec<Vec<String>> = shown
        .map(|(i, e)| {
            let time = get(e, "time")
                .and_then(Value::as_safe_i64)
                .map_or_else(String::new, iso_ms);
            let mut flags = surface_text(e);
            if get(e, "ignorable").is_some() {
                flags = format!("{flags} ignorable").trim().to_string();
            }
            let data = get(e, "data").map(Value::to_json).unwrap_or_default();
            let ty = get(e, "type").map(plain).unwrap_or_default();
            vec![
                (from + i as u64).to_string(),
                time,
                ty,
                flags,
                clip(&data, 120),
            ]
        })
        .collect();
    for line in table(&["SEQ", "TIME", "TYPE", "SURFACE", "DATA"], &rows, &[true]) {
        out.line(&line);
    }
    Ok(EXIT_OK)
}

/// `derive`.
pub fn derive(ctx: Ctx, a: &DeriveArgs) -> Result<u8, CliError> {
    let mut o = Opened::new(&a.store)?;
    let (_, restored) = o.restore_for_reading(ctx, &a.id)?;
    let mut session = restored.session;
    let mut out = Out::new();
    if a.surface {
        let values: Vec<Value> = session.events().iter().map(|e| e.to_value()).collect();
        let fold =
            surface::fold(&values, Markers::Required).map_err(|e| o.fail(Some(&a.id), &e))?;
        return print_surface(ctx, &mut out, &values, &fold);
    }
    if ctx.json {
        let json = session.derive_json().map_err(|e| o.fail(Some(&a.id), &e))?;
        out.line(&json);
        return Ok(EXIT_OK);
    }
    let mut rows = Vec::new();
    let events = session.events();
    for &seq in session.surface().nodes() {
        let Some(e) = events.get(seq as usize) else {
            continue;
        };
        if let Some(m) = event_message(&e.ty, e.data()) {
            let role = get(m, "role").map(plain).unwrap_or_default();
            let id = get(m, "id").map(plain).unwrap_or_default();
            rows.push(vec![
                rows.len().to_string(),
                seq.to_string(),
                role,
                id,
                clip(&message_text(m), 160),
            ]);
        }
    }
    for line in table(&["#", "SEQ", "ROLE", "ID", "CONTENT"], &rows, &[true, true]) {
        out.line(&line);
    }
    Ok(EXIT_OK)
}

fn seqs_json(seqs: &[u64]) -> Value {
    Value::Array(seqs.iter().map(|s| Value::num(*s as f64)).collect())
}

fn print_surface(
    ctx: Ctx,
    out: &mut Out,
    values: &[Value],
    fold: &surface::Fold,
) -> Result<u8, CliError> {
    let sources = |seq: u64| get(&values[seq as usize], "sourceEventSeqs").cloned();
    let message_id = |e: &Value| {
        let ty = get(e, "type").and_then(Value::as_js_str)?;
        let m = event_message(ty, get(e, "data")?)?;
        get(m, "id").map(plain)
    };
    if ctx.json {
        let nodes = fold.surface.nodes().iter().map(|&seq| {
            let e = &values[seq as usize];
            Value::obj([
                ("seq", Value::num(seq as f64)),
                ("type", get(e, "type").cloned().unwrap_or_default()),
                (
                    "messageId",
                    message_id(e).map_or(Value::Null, |s| Value::str(&s)),
                ),
                (
                    "surfaceOp",
                    get(e, "surfaceOp").cloned().unwrap_or_default(),
                ),
                ("sourceEventSeqs", sources(seq).unwrap_or_default()),
            ])
        });
        let replacements = fold.replacements.iter().map(|r| {
            Value::obj([
                ("seq", Value::num(r.seq as f64)),
                ("start", Value::num(r.start as f64)),
                ("end", Value::num(r.end as f64)),
                ("shadowedSeqs", seqs_json(&r.shadowed)),
                ("sourceEventSeqs", sources(r.seq).unwrap_or_default()),
            ])
        });
        let doc = Value::obj([
            ("nodes", Value::Array(nodes.collect())),
            ("replacements", Value::Array(replacements.collect())),
        ]);
        out.line(&doc.to_json());
        return Ok(EXIT_OK);
    }
    out.line(&format!(
        "surface: {} node(s), {} replacement(s)",
        fold.surface.nodes().len(),
        fold.replacements.len()
    ));
    let rows: Vec<Vec<String>> = fold
        .surface
        .nodes()
        .iter()
        .map(|&seq| {
            let e = &values[seq as usize];
            let ty = get(e, "type").map(plain).unwrap_or_default();
            let id = message_id(e).unwrap_or_else(|| "-".to_string());
            vec![seq.to_string(), ty, id, surface_text(e)]
        })
        .collect();
    for line in table(&["SEQ", "TYPE", "MESSAGE", "SURFACE"], &rows, &[true]) {
        out.line(&format!("  {line}"));
    }
    if !fold.replacements.is_empty() {
        out.line("replacements:");
    }
    for r in &fold.replacements {
        let src = sources(r.seq).map_or_else(|| "none".to_string(), |s| s.to_json());
        out.line(&format!(
            "  seq {} replaced {}..{}, shadowing {}; provenance (sourceEventSeqs) {src}",
            r.seq,
            r.start,
            r.end,
            seqs_json(&r.shadowed).to_json()
        ));
    }
    Ok(EXIT_OK)
}

/// `stats`.
pub fn stats(ctx: Ctx, a: &StatsArgs) -> Result<u8, CliError> {
    let mut o = Opened::new(&a.store)?;
    let (loaded, restored) = o.restore_for_reading(ctx, &a.id)?;
    let mut session = restored.session;
    let stored: Vec<_> = session.events().range(..loaded.events.len()).collect();
    let mut types: Vec<(String, u64, u64)> = Vec::new();
    let (mut bytes, mut message_events, mut message_bytes, mut turns) = (0u64, 0u64, 0u64, 0u64);
    for e in &stored {
        let ty = e.ty.to_string_lossy();
        let len = e.to_json().len() as u64;
        bytes += len;
        match types.iter_mut().find(|t| t.0 == ty) {
            Some(t) => {
                t.1 += 1;
                t.2 += len;
            }
            None => types.push((ty, 1, len)),
        }
        turns += u64::from(e.ty == TURN_START);
        if is_surface_type(&e.ty) {
            if let Some(m) = event_message(&e.ty, e.data()) {
                message_events += 1;
                message_bytes += m.to_json().len() as u64;
            }
        }
    }
    types.sort_by(|x, y| x.0.cmp(&y.0));
    let tokens = token_usage(stored.iter().map(|e| &**e));
    let replacements = session.surface().generation();
    let derived = session
        .derived_messages()
        .map_err(|e| o.fail(Some(&a.id), &e))?;
    let surface_messages = derived.len() as u64;
    let surface_bytes: u64 = derived.iter().map(|m| m.len() as u64).sum();
    let saved_bytes = message_bytes.saturating_sub(surface_bytes);
    let saved_messages = message_events.saturating_sub(surface_messages);
    let ratio = if message_bytes == 0 {
        0.0
    } else {
        saved_bytes as f64 / message_bytes as f64
    };
    let file_bytes = (o.target.kind == super::args::BackendKind::Jsonl)
        .then(|| {
            std::fs::metadata(o.target.file_of(Some(&a.id)))
                .ok()
                .map(|m| m.len())
        })
        .flatten();
    let open = scan::open_turn(&loaded.events);
    let mut out = Out::new();
    if ctx.json {
        let n = |v: u64| Value::num(v as f64);
        let mut by_type = Object::new();
        for (ty, count, len) in &types {
            by_type.insert_str(ty, Value::obj([("count", n(*count)), ("bytes", n(*len))]));
        }
        let doc = Value::obj([
            ("id", Value::str(&a.id)),
            ("events", n(stored.len() as u64)),
            ("bytes", n(bytes)),
            ("fileBytes", file_bytes.map_or(Value::Null, n)),
            ("types", Value::Object(by_type)),
            ("turns", n(turns)),
            ("openTurn", open.unwrap_or_default()),
            (
                "tokens",
                Value::obj([
                    ("input", Value::num(tokens[0])),
                    ("output", Value::num(tokens[1])),
                    ("cacheRead", Value::num(tokens[2])),
                    ("cacheWrite", Value::num(tokens[3])),
                ]),
            ),
            (
                "messages",
                Value::obj([("events", n(message_events)), ("bytes", n(message_bytes))]),
            ),
            (
                "surface",
                Value::obj([
                    ("messages", n(surface_messages)),
                    ("bytes", n(surface_bytes)),
                    ("replacements", n(replacements)),
                ]),
            ),
            (
                "savings",
                Value::obj([
                    ("messages", n(saved_messages)),
                    ("bytes", n(saved_bytes)),
                    ("ratio", Value::num(ratio)),
                ]),
            ),
        ]);
        out.line(&doc.to_json());
        return Ok(EXIT_OK);
    }
    let open = open.map_or_else(|| "none".to_string(), |t| plain(&t));
    let mut lines = vec![
        vec![
            "session".into(),
            format!(
                "{} ({} {})",
                a.id,
                o.target.describe(),
                o.target.path.display()
            ),
        ],
        vec![
            "events".into(),
            format!("{} ({bytes} bytes of JSON)", stored.len()),
        ],
        vec!["turns".into(), format!("{turns} (open: {open})")],
        vec![
            "tokens".into(),
            format!(
                "input {}, output {}, cache read {}, cache write {}",
                tokens[0], tokens[1], tokens[2], tokens[3]
            ),
        ],
        vec![
            "messages".into(),
            format!("{message_events} message events, {message_bytes} bytes"),
        ],
        vec![
            "surface".into(),
            format!(
                "{surface_messages} messages, {surface_bytes} bytes, {replacements} replacement(s)"
            ),
        ],
        vec![
            "savings".into(),
            format!(
                "{saved_messages} messages, {saved_bytes} bytes ({:.1}% of message bytes)",
                ratio * 100.0
            ),
        ],
    ];
    if let Some(f) = file_bytes {
        lines.push(vec!["log file".into(), format!("{f} bytes")]);
    }
    for line in table(&["", ""], &lines, &[]).iter().skip(1) {
        out.line(line);
    }
    out.line("");
    let rows: Vec<Vec<String>> = types
        .iter()
        .map(|(t, c, b)| vec![t.clone(), c.to_string(), b.to_string()])
        .collect();
    for line in table(&["TYPE", "COUNT", "BYTES"], &rows, &[false, true, true]) {
        out.line(&line);
    }
    Ok(EXIT_OK)
}
