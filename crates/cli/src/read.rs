//! The reading commands `list` and `show`, and what every reading command
//! shares: a store opened for reading and a session read from it. A
//! session streams through the checks of a windowed open, a window of it
//! resident, and only a log that cannot (a torn tail, damage, events a
//! strict open refuses) is read whole. Nothing is written.

use std::sync::{Arc, Mutex};

use super::args::{BackendKind, ListArgs, ShowArgs, StoreArgs};
use super::output::{clip, get, iso_ms, plain, surface_text, Out};
use super::progress::{self, Reading};
use super::scan::{self, Flow, Ranged};
use super::table::Table;
use super::{CliError, Ctx, Target, EXIT_OK};
use dsh_session::engine::{Event, Policy, Session};
use dsh_session::error::{Error, Status};
use dsh_session::json::{Object, Value};
use dsh_session::store::backend::header_id;
use dsh_session::store::stream_read::{read_progress, read_streaming};
use dsh_session::store::writer::{lock_backend, SharedBackend};
use dsh_session::store::{restore, restore_lenient, Loaded, ProgressUnit, Restored, Stored};
use dsh_session::Rule;

/// How many events a streamed read keeps resident (rounded up to whole
/// chunks of the log: the chunk holding the last event read).
const WINDOW: usize = 1;

/// An opened store.
pub(super) struct Opened {
    /// Where it is.
    pub target: Target,
    /// Its backend (shared with the sessions read from it, which read
    /// their evicted events back through it).
    pub backend: SharedBackend,
    /// The policy sessions are read under (the host event types
    /// `--event-types` declares).
    pub policy: Policy,
}

/// A session read by [`Opened::read`].
pub(super) struct ReadSession {
    /// The session: the stored events, then the closers crash repair
    /// would append (in memory only) and the end-seed marker.
    pub session: Session,
    /// How many events were read from storage.
    pub stored: usize,
}

impl Opened {
    /// Open an existing store for reading.
    pub fn new(args: &StoreArgs) -> Result<Opened, CliError> {
        let target = Target::from_args(args)?;
        let policy = target.policy()?;
        let backend = target
            .open_existing()
            .map_err(|e| CliError::library(&target.path, None, &e))?;
        Ok(Opened {
            target,
            backend: Arc::new(Mutex::new(backend)),
            policy,
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

    /// Read session `id` whole (`load.not-found` when absent).
    pub fn load(&mut self, id: &str) -> Result<Loaded, CliError> {
        let loaded = lock_backend(&self.backend).load(id);
        match loaded {
            Ok(Some(loaded)) => Ok(loaded),
            Ok(None) => Err(self.not_found(id)),
            Err(e) => Err(self.fail(Some(id), &e)),
        }
    }

    /// Read session `id` whole and rebuild it in memory (the open pipeline
    /// without writing), with notes about what `open` would repair.
    pub fn restore(&mut self, ctx: Ctx, id: &str) -> Result<(Loaded, Restored), CliError> {
        let bar = progress::spinner(ctx, &format!("reading {id}"));
        let loaded = self.load(id)?;
        let restored = restore(id, &loaded, &self.policy);
        bar.finish_and_clear();
        let restored = restored.map_err(|e| self.fail(Some(id), &e))?;
        self.repair_notes(ctx, id, loaded.torn.is_some(), restored.closers.len());
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
        let loaded = self.load(id)?;
        let restored = restore_lenient(id, &loaded, &self.policy);
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
        self.repair_notes(ctx, id, loaded.torn.is_some(), restored.closers.len());
        Ok((loaded, restored))
    }

    /// Read session `id` for a reading command: streamed a batch at a
    /// time when the log allows it, else whole as
    /// [`Opened::restore_for_reading`] does. `each` sees the stored events
    /// a batch at a time, in order, exactly once.
    pub fn read(
        &mut self,
        ctx: Ctx,
        id: &str,
        reading: &mut Reading,
        each: &mut dyn FnMut(&[Arc<Event>]),
    ) -> Result<ReadSession, CliError> {
        reading.start(id, read_progress(&self.backend, id));
        let mut seen = 0usize;
        let streamed = read_streaming(&self.backend, id, &self.policy, WINDOW, &mut |batch| {
            seen += batch.len();
            reading.tick(batch.len() as u64);
            each(batch);
        });
        // Anything else: the whole read decides and reports.
        if let Ok(Some(read)) = streamed {
            self.repair_notes(ctx, id, false, read.closers.len());
            return Ok(ReadSession {
                session: read.session,
                stored: read.stored,
            });
        }
        reading.restart();
        let (_, restored) = self.restore_for_reading(ctx, id)?;
        // The events streamed before the read stopped were handed over
        // already: the same events, as stored (the stream takes only
        // events of the current format, which a read keeps as they are).
        let events = restored.session.events();
        reading.tick(seen.min(restored.stored) as u64);
        let mut at = seen;
        while at < restored.stored {
            let end = restored.stored.min(at + 4096);
            let batch: Vec<Arc<Event>> = events.range(at..end).collect();
            reading.tick(batch.len() as u64);
            each(&batch);
            at = end;
        }
        Ok(ReadSession {
            session: restored.session,
            stored: restored.stored,
        })
    }

    fn repair_notes(&self, ctx: Ctx, id: &str, torn: bool, closers: usize) {
        if torn {
            ctx.note(&format!(
                "session \"{id}\" has a torn tail; it is left out (`dsh-session repair` cuts it)"
            ));
        }
        if closers > 0 {
            ctx.note(&format!(
                "session \"{id}\" ends inside a turn; the {closers} closer(s) open would append are included in memory (`dsh-session repair` writes them)"
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
    let o = Opened::new(&a.store)?;
    let mut backend = lock_backend(&o.backend);
    let rows = backend.list().map_err(|e| o.fail(None, &e))?;
    let bar = progress::sessions(ctx, rows.len());
    let mut json = Vec::new();
    let mut lines = Vec::new();
    for row in rows {
        let id = header_id(&row.header).to_string();
        let mut item = Object::new();
        item.insert_str("id", Value::str(&id));
        item.insert_str("header", row.header.clone());
        item.insert_str("revision", Value::str(&row.revision));
        bar.set_message(id.clone());
        let (events, turn, note) = match scan::summary(&mut **backend, &id, &mut |_| {}) {
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
    drop(bar);
    let mut out = Out::paged(ctx);
    if ctx.json {
        out.line(&Value::Array(json).to_json());
    } else if lines.is_empty() {
        ctx.note(&format!("no sessions in {}", o.target.path.display()));
    } else {
        let header = ["ID", "CREATED", "EVENTS", "OPEN TURN", "REVISION", "NOTE"];
        let right = [false, false, true, true, false, false];
        let mut table = Table::new(ctx, &header, &right);
        for line in lines {
            table.push(&mut out, line);
        }
        table.finish(&mut out);
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

/// The JSON text of a stored event (canonical text as it is stored).
fn stored_json(e: Stored) -> String {
    match e {
        Stored::Canonical(text) => text.into(),
        Stored::Event(e) => e.text().to_string(),
        Stored::Value(v) => v.to_json(),
    }
}

/// The table row `show` prints for event `e` at `seq`; `data_max`: the
/// display columns its data may take.
fn show_row(seq: u64, e: &Value, data_max: usize) -> Vec<String> {
    let time = get(e, "time")
        .and_then(Value::as_safe_i64)
        .map_or_else(String::new, iso_ms);
    let mut flags = surface_text(e);
    if get(e, "ignorable").is_some() {
        flags = format!("{flags} ignorable").trim().to_string();
    }
    let data = get(e, "data").map(Value::to_json).unwrap_or_default();
    let ty = get(e, "type").map(plain).unwrap_or_default();
    vec![seq.to_string(), time, ty, flags, clip(&data, data_max)]
}

/// `show`: the events are printed as they are read, and the read stops
/// when the reader of stdout goes away (`show | head`).
pub fn show(ctx: Ctx, a: &ShowArgs) -> Result<u8, CliError> {
    let o = Opened::new(&a.store)?;
    let from = a.from.unwrap_or(0);
    let to = a.to.unwrap_or(u64::MAX);
    let mut reading = Reading::new(ctx, &a.id, true);
    let mut read = read_progress(&o.backend, &a.id);
    let events = read.as_mut().filter(|r| r.unit == ProgressUnit::Events);
    // The widest seq shown, for the width of its column.
    let last = events.as_ref().map_or(9_999_999, |r| r.total.min(to));
    if let Some(r) = events {
        // The events of the range are counted.
        r.total = r.total.min(to).saturating_sub(from);
    }
    reading.start(&a.id, read);
    let seekable = matches!(o.target.kind, BackendKind::Sqlite | BackendKind::Postgres);
    let mut out = Out::paged(ctx);
    let data_max = ctx.term.width.unwrap_or(120);
    let mut table = (!ctx.json).then(|| {
        let header = ["SEQ", "TIME", "TYPE", "SURFACE", "DATA"];
        Table::new(ctx, &header, &[true]).min_width(0, last.to_string().len())
    });
    let mut each = |seq: u64, e: Stored| -> Flow {
        if !a.types.is_empty() || table.is_some() {
            let v = e.into_value();
            let ty = get(&v, "type").map(plain).unwrap_or_default();
            if type_matches(&a.types, &ty) {
                match &mut table {
                    Some(t) => t.push(&mut out, show_row(seq, &v, data_max)),
                    None => out.line(&v.to_json()),
                }
            }
        } else {
            out.line(&stored_json(e));
        }
        match out.is_closed() {
            true => Flow::Stop,
            false => Flow::Go,
        }
    };
    let mut backend = lock_backend(&o.backend);
    let ranged = scan::range(
        &mut **backend,
        &a.id,
        (from, to),
        seekable,
        &mut |n| reading.tick(n),
        &mut each,
    );
    drop(backend);
    drop(reading);
    match ranged {
        Ok(Ranged::Absent) => return Err(o.not_found(&a.id)),
        Err(e) => return Err(o.fail(Some(&a.id), &e)),
        Ok(Ranged::Read { torn: true }) => ctx.note(&format!(
            "session \"{}\" has a torn tail after the events shown",
            a.id
        )),
        Ok(_) => {}
    }
    if let Some(table) = table {
        table.finish(&mut out);
    }
    Ok(EXIT_OK)
}
