//! `derive`: the derived message list of a session read a batch at a
//! time, printed as its messages are read back (never built whole), and
//! `--surface`, the surface nodes and replacements of a log read whole.

use super::args::DeriveArgs;
use super::output::{clip, get, message_text, plain, surface_text, terminal_safe, Out};
use super::progress::{self, Reading};
use super::read::Opened;
use super::table::Table;
use super::{CliError, Ctx, EXIT_OK};
use dsh_session::engine::derive::event_message;
use dsh_session::engine::surface::{self, Markers};
use dsh_session::json::{self, Value};

/// `derive`.
pub fn derive(ctx: Ctx, a: &DeriveArgs) -> Result<u8, CliError> {
    let mut o = Opened::new(&a.store)?;
    if a.surface {
        return derive_surface(ctx, &mut o, a);
    }
    let mut reading = Reading::new(ctx, &a.id, false);
    let mut read = o.read(ctx, &a.id, &mut reading, &mut |_| {})?;
    drop(reading);
    let session = &mut read.session;
    let mut out = Out::paged(ctx);
    let fail = |e| o.fail(Some(&a.id), &e);
    if ctx.json {
        // The derived message list as one array, a message at a time.
        out.raw("[");
        let mut first = true;
        session
            .visit_derived(|_, text| {
                if !std::mem::take(&mut first) {
                    out.raw(",");
                }
                out.raw(&terminal_safe(text));
                !out.is_closed()
            })
            .map_err(fail)?;
        out.raw("]\n");
        return Ok(EXIT_OK);
    }
    let nodes = session.surface().nodes().len();
    let events = session.events().len();
    let header = ["#", "SEQ", "ROLE", "ID", "CONTENT"];
    let mut table = Table::new(ctx, &header, &[true, true])
        .min_width(0, nodes.to_string().len())
        .min_width(1, events.to_string().len());
    let content_max = ctx.term.width.unwrap_or(160);
    let mut n = 0usize;
    session
        .visit_derived(|seq, text| {
            let m = json::parse(text).unwrap_or_default();
            let role = get(&m, "role").map(plain).unwrap_or_default();
            let id = get(&m, "id").map(plain).unwrap_or_default();
            let content = clip(&message_text(&m), content_max);
            table.push(
                &mut out,
                vec![n.to_string(), seq.to_string(), role, id, content],
            );
            n += 1;
            !out.is_closed()
        })
        .map_err(fail)?;
    table.finish(&mut out);
    Ok(EXIT_OK)
}

/// `derive --surface`: the surface fold of the whole log, as values.
fn derive_surface(ctx: Ctx, o: &mut Opened, a: &DeriveArgs) -> Result<u8, CliError> {
    let bar = progress::spinner(ctx, &format!("reading {}", a.id));
    let (_, restored) = o.restore_for_reading(ctx, &a.id)?;
    let values: Vec<Value> = restored
        .session
        .events()
        .iter()
        .map(|e| e.to_value())
        .collect();
    let fold = surface::fold(&values, Markers::Required).map_err(|e| o.fail(Some(&a.id), &e))?;
    drop(bar);
    let mut out = Out::paged(ctx);
    print_surface(ctx, &mut out, &values, &fold)
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
    let mut table = Table::new(ctx, &["SEQ", "TYPE", "MESSAGE", "SURFACE"], &[true]).indent("  ");
    for &seq in fold.surface.nodes() {
        let e = &values[seq as usize];
        let ty = get(e, "type").map(plain).unwrap_or_default();
        let id = message_id(e).unwrap_or_else(|| "-".to_string());
        table.push(out, vec![seq.to_string(), ty, id, surface_text(e)]);
    }
    table.finish(out);
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
