//! `verify`: the report of [`dsh_session::store::verify`] as text or JSON, and
//! its exit status (0 clean, 1 repairable, 2 corrupt or unreadable).

use dsh_session_ffi::status_name;

use super::args::{BackendKind, VerifyArgs};
use super::output::{terminal_safe, Out};
use super::progress::Reading;
use super::{
    exit_status, CliError, Ctx, Target, EXIT_CORRUPT, EXIT_FAILED, EXIT_OK, EXIT_REPAIRABLE,
};
use console::Style;
use dsh_session::json::Value;
use dsh_session::store::jsonl::session_ids as jsonl_session_ids;
use dsh_session::store::verify::{
    verify_session, verify_store, Problem, Severity, Step, StoreReport,
};
use dsh_session::Rule;

fn status_word(worst: Option<Severity>) -> &'static str {
    match worst {
        None => "clean",
        Some(Severity::Live) => "open (live writer)",
        Some(Severity::Repairable) => "repairable",
        Some(Severity::Corrupt) => "corrupt",
    }
}

/// [`status_word`], coloured on a terminal that takes colour: clean
/// green, open cyan, repairable yellow, corrupt red.
fn painted(ctx: Ctx, worst: Option<Severity>) -> String {
    let style = match worst {
        None => Style::new().green(),
        Some(Severity::Live) => Style::new().cyan(),
        Some(Severity::Repairable) => Style::new().yellow(),
        Some(Severity::Corrupt) => Style::new().red().bold(),
    };
    style
        .force_styling(ctx.term.colour)
        .apply_to(status_word(worst))
        .to_string()
}

fn exit_of(worst: Option<Severity>) -> u8 {
    match worst {
        None | Some(Severity::Live) => EXIT_OK,
        Some(Severity::Repairable) => EXIT_REPAIRABLE,
        Some(Severity::Corrupt) => EXIT_CORRUPT,
    }
}

/// `FILE: seq N: RULE [cause C] (STATUS): message`.
fn problem_line(target: &Target, p: &Problem) -> String {
    let mut line = format!("{}: ", target.file_of(p.session.as_deref()).display());
    if let Some(seq) = p.seq {
        line.push_str(&format!("seq {seq}: "));
    }
    line.push_str(p.rule.as_str());
    if let Some(cause) = p.cause {
        line.push_str(&format!(" [cause {cause}]"));
    }
    let status = match p.severity {
        Severity::Live => "live writer",
        Severity::Repairable => "repairable",
        Severity::Corrupt => status_name(p.status),
    };
    line.push_str(&format!(" ({status}): {}", p.message));
    line
}

fn problem_json(target: &Target, p: &Problem) -> Value {
    let opt = |v: Option<&str>| v.map_or(Value::Null, Value::str);
    Value::obj([
        ("rule", Value::str(p.rule.as_str())),
        ("cause", opt(p.cause.map(Rule::as_str))),
        ("status", Value::str(status_name(p.status))),
        ("severity", Value::str(status_word(Some(p.severity)))),
        ("seq", p.seq.map_or(Value::Null, |s| Value::num(s as f64))),
        (
            "file",
            Value::str(&target.file_of(p.session.as_deref()).display().to_string()),
        ),
        ("message", Value::str(&p.message)),
    ])
}

/// `verify`.
pub fn verify(ctx: Ctx, a: &VerifyArgs) -> Result<u8, CliError> {
    let target = Target::from_args(&a.store)?;
    let policy = target.policy()?;
    let mut report = StoreReport::default();
    let mut reading = Reading::new(ctx, "verifying", false);
    let mut step = |s: Step<'_>| match s {
        Step::Session {
            id,
            index,
            of,
            progress,
        } => {
            let what = match of {
                1 => id.to_string(),
                _ => format!("{id} ({}/{of})", index + 1),
            };
            reading.start(&what, progress);
        }
        Step::WholeLog => reading.restart(),
        Step::Events(n) => reading.tick(n),
    };
    match target.open_existing() {
        // Locked by another process, or no store there: the check could
        // not run at all.
        Err(e) if exit_status(e.status) == EXIT_FAILED || e.rule == Rule::CliNoStore => {
            return Err(CliError::library(&target.path, None, &e))
        }
        Err(e) => report.problems.push(Problem::from_error(None, &e, None)),
        Ok(backend) => match &a.id {
            Some(id) => {
                let backend = std::sync::Arc::new(std::sync::Mutex::new(backend));
                let session = verify_session(&backend, id, &policy, &mut step);
                if session
                    .problems
                    .iter()
                    .any(|p| p.rule == Rule::LoadNotFound)
                {
                    return Err(CliError::failed(
                        EXIT_FAILED,
                        format!("{}: session \"{id}\" not found", target.path.display()),
                    ));
                }
                report.sessions.push(session);
            }
            None => {
                let extra = match target.kind {
                    BackendKind::Jsonl => jsonl_session_ids(&target.path),
                    BackendKind::Sqlite | BackendKind::Postgres => Vec::new(),
                };
                let backend = std::sync::Arc::new(std::sync::Mutex::new(backend));
                report = verify_store(&backend, &extra, &policy, &mut step);
            }
        },
    }
    drop(reading);
    let worst = report.worst();
    let exit = exit_of(worst);
    let mut out = Out::paged(ctx);
    if ctx.json {
        let sessions = report.sessions.iter().map(|s| {
            Value::obj([
                ("id", Value::str(&s.id)),
                (
                    "events",
                    s.events.map_or(Value::Null, |n| Value::num(n as f64)),
                ),
                ("status", Value::str(status_word(s.worst()))),
                (
                    "quarantined",
                    Value::Array(
                        s.quarantined
                            .iter()
                            .map(|p| Value::str(&p.display().to_string()))
                            .collect(),
                    ),
                ),
                (
                    "problems",
                    Value::Array(
                        s.problems
                            .iter()
                            .map(|p| problem_json(&target, p))
                            .collect(),
                    ),
                ),
            ])
        });
        let doc = Value::obj([
            ("store", Value::str(&target.path.display().to_string())),
            ("backend", Value::str(&target.describe())),
            ("status", Value::str(status_word(worst))),
            ("exit", Value::num(f64::from(exit))),
            (
                "problems",
                Value::Array(
                    report
                        .problems
                        .iter()
                        .map(|p| problem_json(&target, p))
                        .collect(),
                ),
            ),
            ("sessions", Value::Array(sessions.collect())),
        ]);
        out.line(&doc.to_json());
        return Ok(exit);
    }
    out.line(&format!(
        "store {} ({}): {} session(s) checked",
        target.path.display(),
        target.describe(),
        report.sessions.len()
    ));
    for p in &report.problems {
        out.line(&format!("  {}", problem_line(&target, p)));
    }
    // Sessions by their worst finding: clean, open, repairable, corrupt.
    let mut counts = [0usize; 4];
    for s in &report.sessions {
        let worst = s.worst();
        counts[worst.map_or(0, |w| w as usize + 1)] += 1;
        let events = s
            .events
            .map_or_else(String::new, |n| format!(" ({n} events)"));
        out.raw(&format!(
            "{}: {}{events}\n",
            terminal_safe(&s.id),
            painted(ctx, worst)
        ));
        for p in &s.problems {
            out.line(&format!("  {}", problem_line(&target, p)));
        }
        for copy in &s.quarantined {
            out.line(&format!(
                "  kept copy of a cut tail: {} (remove it once looked at)",
                copy.display()
            ));
        }
    }
    let mut summary = format!(
        "{} clean, {} repairable, {} corrupt",
        counts[0], counts[2], counts[3]
    );
    if counts[1] > 0 {
        summary.push_str(&format!(", {} open (live writer)", counts[1]));
    }
    if let Some(store) = report.problems.iter().map(|p| p.severity).max() {
        summary.push_str(&format!(
            "; the store itself: {} ({} problem(s))",
            status_word(Some(store)),
            report.problems.len()
        ));
    }
    out.raw(&format!("{summary}: {}\n", painted(ctx, worst)));
    Ok(exit)
}
