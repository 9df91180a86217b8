//! The writing commands: `repair` and `fork` go through
//! [`dsh_session::store::Store`] (the library's own open / repair / fork path);
//! `convert` copies sessions with [`dsh_session::store::convert`].

use std::time::Instant;

use super::args::{ConvertArgs, ForkArgs, RepairArgs};
use super::output::{get, plain, Out};
use super::progress;
use super::read::Opened;
use super::table::Table;
use super::target::{Given, Side};
use super::{CliError, Ctx, Target, EXIT_FAILED, EXIT_OK};
use dsh_session::engine::Event;
use dsh_session::error::{Error, Status};
use dsh_session::json::Value;
use dsh_session::store::convert::{check_absent, copy_session, session_ids, Step};
use dsh_session::store::{RepairOptions, Store, TornAt};
use dsh_session::Rule;

fn closer_text(e: &Event) -> String {
    let mut text = format!("seq {} {}", e.seq, e.ty.to_string_lossy());
    let data = e.data();
    if let Some(code) = get(data, "error").and_then(|x| get(x, "code")) {
        let call = get(data, "message")
            .and_then(|m| get(m, "source"))
            .and_then(|s| get(s, "callId"))
            .map(plain)
            .unwrap_or_default();
        text.push_str(&format!(" for call {call} ({})", plain(code)));
    }
    if let Some(kind) = get(data, "reason").and_then(|r| get(r, "kind")) {
        text.push_str(&format!(" ({})", plain(kind)));
    }
    text
}

fn open_store(target: &Target) -> Result<std::sync::Arc<Store>, CliError> {
    Store::open(target.store_config()?).map_err(|e| CliError::library(&target.path, None, &e))
}

/// `repair`.
pub fn repair(ctx: Ctx, a: &RepairArgs) -> Result<u8, CliError> {
    let id = a.id.as_str();
    // The store must exist and be one (a reader's open says so); the
    // library then reads the log once and repairs what it read.
    let target = Opened::new(&a.store)?.target;
    let mut config = target.store_config()?;
    if a.dry_run {
        config = config.read_only();
    }
    let store = Store::open(config).map_err(|e| CliError::library(&target.path, None, &e))?;
    let backend = store.backend_name();
    let fail = |e: Error| CliError::library(&target.file_of(Some(id)), Some(id), &e);
    let bar = progress::spinner(ctx, &format!("reading {id}"));
    let options = RepairOptions {
        dry_run: a.dry_run,
        salvage: a.salvage,
    };
    let report = store.repair(id, options);
    bar.finish_and_clear();
    let report = report.map_err(fail)?;
    store.flush().map_err(fail)?;
    let torn = report.torn.clone();
    let closers = report.closers.clone();
    let nothing = report.is_clean();
    let end_seed = report.last_seq;
    let mut out = Out::new();
    if ctx.json {
        let torn_json = torn.as_ref().map_or(Value::Null, |t| {
            Value::obj([
                ("marker", Value::num(t.at.value() as f64)),
                ("recovered", Value::num(t.recovered as f64)),
                ("length", Value::num(t.length as f64)),
                ("why", Value::str(t.why.as_str())),
            ])
        });
        let cut_json = report.cut.as_ref().map_or(Value::Null, |c| {
            Value::obj([
                ("at", Value::num(c.at as f64)),
                ("length", Value::num(c.length as f64)),
                ("why", Value::str(c.why.as_str())),
                ("copy", Value::str(&c.copy.to_string_lossy())),
            ])
        });
        let doc = Value::obj([
            ("id", Value::str(id)),
            ("backend", Value::str(backend)),
            ("dryRun", Value::Bool(a.dry_run)),
            ("applied", Value::Bool(end_seed.is_some())),
            ("tornTail", torn_json),
            ("cut", cut_json),
            (
                "closers",
                Value::Array(closers.iter().map(|e| e.to_value()).collect()),
            ),
            (
                "endSeed",
                end_seed.map_or(Value::Null, |s| Value::num(s as f64)),
            ),
        ]);
        out.line(&doc.to_json());
        return Ok(EXIT_OK);
    }
    out.line(&format!(
        "session \"{id}\" ({} {})",
        target.describe(),
        target.path.display()
    ));
    if nothing {
        out.line("  nothing to repair: no torn tail, no interrupted turn");
        return Ok(EXIT_OK);
    }
    if let Some(t) = &torn {
        let first = report.stored - t.recovered;
        let why = t.why.as_str();
        out.line(&match t.at {
            TornAt::Row(row) => format!(
                "  torn tail ({why}): the {} rows from seq {row} on are deleted",
                t.length
            ),
            TornAt::Byte(at) if t.recovered > 0 => format!(
                "  torn tail ({why}): the log is cut at byte {at} ({} bytes); the {} events readable from the torn frame (seq {first}..) are written again",
                t.length, t.recovered
            ),
            TornAt::Byte(at) => format!(
                "  torn tail ({why}): the log is cut at byte {at} ({} bytes, after seq {})",
                t.length,
                first as i64 - 1
            ),
        });
    }
    if let Some(c) = &report.cut {
        out.line(&format!("  a copy of what was cut: {}", c.copy.display()));
    } else if torn.is_some() && end_seed.is_none() {
        out.line("  a copy of what is cut is kept beside the log before the cut");
    }
    for c in &closers {
        out.line(&format!("  closer: {}", closer_text(c)));
    }
    match end_seed {
        Some(seq) => {
            out.line(&format!(
                "  then the session/end-seed marker at seq {seq}, as open writes it"
            ));
            out.line("repaired");
        }
        None => out.line("dry run: nothing written"),
    }
    Ok(EXIT_OK)
}

/// `fork`.
pub fn fork(ctx: Ctx, a: &ForkArgs) -> Result<u8, CliError> {
    let id = a.id.as_str();
    let mut o = Opened::new(&a.store)?;
    let bar = progress::spinner(ctx, &format!("reading {id}"));
    let loaded = o.load(id);
    bar.finish_and_clear();
    let loaded = loaded?;
    if a.at >= loaded.events.len() as u64 {
        let e = Error::new(
            Status::InvalidArgument,
            Rule::ForkOutOfRange,
            format!(
                "fork boundary {} is not a stored seq of session \"{id}\" (stored: 0..={})",
                a.at,
                loaded.events.len() as i64 - 1
            ),
        );
        return Err(o.fail(Some(id), &e));
    }
    let (_, restored) = o.restore(ctx, id)?;
    let target = o.target.clone();
    drop(o);
    let store = open_store(&target)?;
    let fail = |e: Error| CliError::library(&target.file_of(Some(id)), Some(id), &e);
    let boundary = Value::num(a.at as f64);
    let child = store
        .fork(&restored.session, Some(&boundary), a.child.clone())
        .map_err(fail)?;
    let info = child.info().map_err(fail)?;
    let (child_id, header, len) = (info.id, info.header, info.length);
    child.close().map_err(fail)?;
    store.flush().map_err(fail)?;
    let mut out = Out::new();
    if ctx.json {
        let doc = Value::obj([
            ("id", Value::str(&child_id)),
            ("parent", Value::str(id)),
            ("at", boundary),
            ("events", Value::num(len as f64)),
            ("header", header),
        ]);
        out.line(&doc.to_json());
    } else {
        out.line(&format!(
            "forked \"{id}\" at seq {} into \"{child_id}\": {} inherited events and a session/end-seed marker",
            a.at,
            a.at + 1
        ));
    }
    Ok(EXIT_OK)
}

/// `convert`.
pub fn convert(ctx: Ctx, a: &ConvertArgs) -> Result<u8, CliError> {
    let started = Instant::now();
    let src_t = Target::detect(Given {
        path: &a.src,
        backend: a.from_backend,
        compression: a.from_compression,
        schema: a.from_schema.as_deref(),
        side: Side::Src,
    })?;
    let dst_t = Target::detect(Given {
        path: &a.dst,
        backend: a.to_backend,
        compression: a.to_compression,
        schema: a.to_schema.as_deref(),
        side: Side::Dst,
    })?;
    if src_t.same_place(&dst_t) {
        return Err(CliError::usage("SRC and DST are the same store"));
    }
    let dst_fail = |id: Option<&str>, e: &Error| CliError::library(&dst_t.file_of(id), id, e);
    let holds_data = dst_t.holds_data().map_err(|e| dst_fail(None, &e))?;
    if holds_data && !a.into_existing {
        return Err(CliError::failed(EXIT_FAILED, format!(
                "{}: the destination already holds data; pass --into-existing to add the sessions to that store",
                dst_t.path.display()
            )));
    }
    let src_fail = |id: Option<&str>, e: &Error| CliError::library(&src_t.file_of(id), id, e);
    let mut src = src_t.open_existing().map_err(|e| src_fail(None, &e))?;
    let ids = if a.sessions.is_empty() {
        session_ids(&mut *src).map_err(|e| src_fail(None, &e))?
    } else {
        for id in &a.sessions {
            if src
                .revision(id)
                .map_err(|e| src_fail(Some(id), &e))?
                .is_none()
            {
                let e = Error::new(
                    Status::NotFound,
                    Rule::LoadNotFound,
                    format!("session \"{id}\" not found"),
                );
                return Err(src_fail(Some(id), &e));
            }
        }
        a.sessions.clone()
    };
    let mut dst = dst_t.open().map_err(|e| dst_fail(None, &e))?;
    check_absent(&mut *dst, &ids).map_err(|e| dst_fail(None, &e))?;
    let bar = progress::events(ctx);
    let mut done: Vec<(String, usize)> = Vec::new();
    for id in &ids {
        bar.set_message(format!("{id} (reading)"));
        let mut on_step = |step: Step<'_>| match step {
            Step::Session { id, events } => {
                bar.inc_length(events as u64);
                bar.set_message(id.to_string());
            }
            Step::Events(n) => bar.inc(n as u64),
        };
        match copy_session(&mut *src, &mut *dst, id, &mut on_step) {
            Ok(n) => done.push((id.clone(), n)),
            Err(e) => {
                bar.abandon();
                let mut err = if e.rule == Rule::ConvertExists {
                    dst_fail(Some(id), &e)
                } else {
                    src_fail(Some(id), &e)
                };
                err.message.push_str(&format!(
                    " ({} session(s) converted before this one are complete in {})",
                    done.len(),
                    dst_t.path.display()
                ));
                return Err(err);
            }
        }
    }
    bar.finish_and_clear();
    for (id, _) in done.iter().filter(|(_, n)| *n == 0) {
        ctx.note(&format!(
            "session \"{id}\" has a header but no events; nothing was written for it"
        ));
    }
    let total: usize = done.iter().map(|(_, n)| n).sum();
    let mut out = Out::new();
    if ctx.json {
        let side = |t: &Target| {
            Value::obj([
                ("path", Value::str(&t.path.display().to_string())),
                ("backend", Value::str(&t.describe())),
            ])
        };
        let sessions = done
            .iter()
            .map(|(id, n)| Value::obj([("id", Value::str(id)), ("events", Value::num(*n as f64))]));
        let doc = Value::obj([
            ("source", side(&src_t)),
            ("destination", side(&dst_t)),
            ("sessions", Value::Array(sessions.collect())),
            ("events", Value::num(total as f64)),
        ]);
        out.line(&doc.to_json());
        return Ok(EXIT_OK);
    }
    out.line(&format!(
        "converted {} session(s), {total} event(s): {} ({}) -> {} ({}) in {:.1} s",
        done.len(),
        src_t.path.display(),
        src_t.describe(),
        dst_t.path.display(),
        dst_t.describe(),
        started.elapsed().as_secs_f64()
    ));
    let mut table = Table::new(ctx, &["ID", "EVENTS"], &[false, true]).indent("  ");
    for (id, n) in &done {
        table.push(&mut out, vec![id.clone(), n.to_string()]);
    }
    table.finish(&mut out);
    Ok(EXIT_OK)
}
