//! The `dsh-session` command-line tool: list, show, derive, verify,
//! repair, convert, fork and stats over a SQLite or JSONL store, so that a
//! person never edits a log by hand.
//!
//! The binary (`src/bin/dsh-session.rs`) only calls [`main`]. Argument
//! parsing lives in [`args`]; the store logic the commands share lives in
//! the library ([`dsh_session::store::verify`], [`dsh_session::store::convert`], the
//! restore pipeline and [`dsh_session::store::Store`]).

#![warn(missing_docs)]

pub mod args;
mod check;
mod derive;
mod output;
mod progress;
mod read;
mod scan;
mod stats;
mod table;
mod target;
pub mod term;
mod write;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};
use dsh_session::error::{Error, Status};
use dsh_session::json::Value;
use dsh_session::store::verify::seq_hint;
use dsh_session::Rule;
use dsh_session_ffi::status_name;
pub use target::Target;

/// Exit status: success / clean.
pub const EXIT_OK: u8 = 0;
/// Exit status: `verify` found only repairable problems.
pub const EXIT_REPAIRABLE: u8 = 1;
/// Exit status: corrupt, refused or unreadable store.
pub const EXIT_CORRUPT: u8 = 2;
/// Exit status: the command could not be carried out.
pub const EXIT_FAILED: u8 = 3;
/// Exit status: invalid command line.
pub const EXIT_USAGE: u8 = 64;

/// A failed command: what to print on stderr and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// The exit status.
    pub exit: u8,
    /// The message (without the `error: ` prefix).
    pub message: String,
    /// What the library said, when the failure is the library's (boxed:
    /// it is rare, and keeps every `Result<_, CliError>` small).
    pub library: Option<Box<LibraryFailure>>,
}

/// The parts of a library error a `--json` error object carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryFailure {
    /// The C status.
    pub status: Status,
    /// The rule id.
    pub rule: Rule,
    /// The library's own message.
    pub message: String,
    /// The file concerned.
    pub file: String,
    /// The session concerned.
    pub session: Option<String>,
    /// The seq concerned, when one is known.
    pub seq: Option<u64>,
}

impl CliError {
    /// A failure of the command itself (not of the library) with `exit`.
    pub fn failed(exit: u8, message: impl Into<String>) -> CliError {
        CliError {
            exit,
            message: message.into(),
            library: None,
        }
    }

    /// An invalid command line ([`EXIT_USAGE`]).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::failed(EXIT_USAGE, message)
    }

    /// A library error about `file` (and session `id`), with the exit status
    /// of its C status.
    pub fn library(file: &Path, id: Option<&str>, e: &Error) -> CliError {
        CliError {
            exit: exit_status(e.status),
            message: describe(file, id, e),
            library: Some(Box::new(LibraryFailure {
                status: e.status,
                rule: e.rule,
                message: e.message.clone(),
                file: file.display().to_string(),
                session: id.map(str::to_string),
                seq: seq_hint(e),
            })),
        }
    }

    /// The `--json` form: `{"error": {"exit", "message", and for a library
    /// failure "status", "code", "rule", "detail", "file", "session",
    /// "seq"}}` (README, "The command-line tool").
    pub fn to_json(&self) -> String {
        let mut fields = vec![
            ("exit", Value::num(f64::from(self.exit))),
            ("message", Value::str(&self.message)),
        ];
        if let Some(l) = &self.library {
            fields.extend([
                ("status", Value::str(status_name(l.status))),
                ("code", Value::num(f64::from(l.status.code()))),
                ("rule", Value::str(l.rule.as_str())),
                ("detail", Value::str(&l.message)),
                ("file", Value::str(&l.file)),
                (
                    "session",
                    l.session.as_deref().map_or(Value::Null, Value::str),
                ),
                ("seq", l.seq.map_or(Value::Null, |s| Value::num(s as f64))),
            ]);
        }
        Value::obj([("error", Value::obj(fields))]).to_json()
    }
}

/// The exit status of a library failure: damaged, foreign or unreadable
/// data is [`EXIT_CORRUPT`], everything else [`EXIT_FAILED`].
pub fn exit_status(status: Status) -> u8 {
    match status {
        Status::Corrupt
        | Status::SchemaMismatch
        | Status::Io
        | Status::InvalidJson
        | Status::Internal => EXIT_CORRUPT,
        _ => EXIT_FAILED,
    }
}

/// `FILE: session "ID": seq N: RULE [cause CAUSE] (STATUS): message`.
pub fn describe(file: &Path, id: Option<&str>, e: &Error) -> String {
    let mut out = format!("{}: ", file.display());
    if let Some(id) = id {
        out.push_str(&format!("session \"{id}\": "));
    }
    if let Some(seq) = seq_hint(e) {
        out.push_str(&format!("seq {seq}: "));
    }
    out.push_str(e.rule.as_str());
    if let Some(cause) = e.cause {
        out.push_str(&format!(" [cause {cause}]"));
    }
    out.push_str(&format!(" ({}): {}", status_name(e.status), e.message));
    out
}

/// Global flags every command sees, and what the terminal allows.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// `--json`.
    pub json: bool,
    /// `--quiet`.
    pub quiet: bool,
    /// The terminal (a pager, colour, the width to fit; `--no-pager`).
    pub term: term::Term,
}

impl Ctx {
    /// A note on stderr (not with `--quiet`).
    pub fn note(&self, text: &str) {
        if !self.quiet {
            eprintln!("note: {}", output::terminal_safe(text));
        }
    }
}

/// Run the tool on the process arguments.
pub fn main() -> ExitCode {
    ExitCode::from(run(std::env::args_os()))
}

/// Run the tool on `args` (the first one is the program name); returns the
/// exit status. Results go to stdout, errors and notes to stderr.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() && args.iter().any(|a| a == "--json") => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid command line");
            let message = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("{}", CliError::usage(message).to_json());
            return EXIT_USAGE;
        }
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let ctx = Ctx {
        json: cli.json,
        quiet: cli.quiet,
        term: term::Term::detect(cli.no_pager),
    };
    let result = match &cli.command {
        Command::List(a) => read::list(ctx, a),
        Command::Show(a) => read::show(ctx, a),
        Command::Derive(a) => derive::derive(ctx, a),
        Command::Stats(a) => stats::stats(ctx, a),
        Command::Verify(a) => check::verify(ctx, a),
        Command::Repair(a) => write::repair(ctx, a),
        Command::Fork(a) => write::fork(ctx, a),
        Command::Convert(a) => write::convert(ctx, a),
    };
    match result {
        Ok(code) => code,
        Err(e) if ctx.json => {
            eprintln!("{}", e.to_json());
            e.exit
        }
        Err(e) => {
            eprintln!("error: {}", output::terminal_safe(&e.message));
            e.exit
        }
    }
}
