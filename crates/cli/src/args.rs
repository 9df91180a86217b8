//! The command line of `dsh-session` (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit statuses, shown in `--help`.
pub const EXIT_CODES: &str = "\
Exit status:
  0   success; verify: every checked session is clean
  1   verify: only repairable findings (a torn tail or an interrupted turn,
      which `repair` or the library's open fixes)
  2   the store is corrupt, refused or unreadable (damaged data, another
      format or schema version, an unknown event type, an I/O failure);
      verify: at least one such finding
  3   the command could not be carried out: unknown session, store locked
      by another process, destination already holds the session, a fork
      boundary inside an open turn
  64  invalid command line

STORE is a path: an existing file is a SQLite store, an existing directory a
JSONL store (zstd or raw, detected from the logs inside). A path that does not
exist yet (convert's DST) is SQLite when it ends in .sqlite, .sqlite3 or .db,
else a JSONL directory (zstd unless --compression none).

STORE may also be a PostgreSQL connection URL (postgresql://USER@HOST:PORT/DB
or postgres://...): the store is one schema of that database, `dsh` unless
--schema NAME (convert: --from-schema, --to-schema) names another. Reading
commands never create the schema; convert's DST creates it when missing.
Messages name the server as postgresql://HOST:PORT/DB (schema NAME), never
with the URL's password or parameters.";

/// Inspect, check, repair and convert dsh-session stores (SQLite files,
/// JSONL directories and PostgreSQL schemas) without editing a log by hand.
#[derive(Debug, Parser)]
#[command(name = "dsh-session", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// Print JSON for scripts instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress bar and no notes on stderr.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Never page: on a terminal, output longer than a screen goes
    /// through `$DSH_PAGER`, `$PAGER` or `less` otherwise.
    #[arg(long, global = true)]
    pub no_pager: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sessions with created time, length, revision and open turn.
    List(ListArgs),
    /// The stored events of a session, as a table (--json: one event per line).
    Show(ShowArgs),
    /// The derived message list (what an agent sends to its model).
    Derive(DeriveArgs),
    /// Check every rule of the spec on the stored data; never writes.
    #[command(after_help = EXIT_CODES)]
    Verify(VerifyArgs),
    /// Apply what opening the session repairs: cut a torn tail, close an
    /// interrupted turn.
    Repair(RepairArgs),
    /// Copy every session to another store: JSONL ⇄ SQLite ⇄ PostgreSQL,
    /// raw ⇄ zstd.
    Convert(ConvertArgs),
    /// Fork a session at a closed boundary into a new session of the store.
    Fork(ForkArgs),
    /// Counts per type, bytes, token usage and compaction savings.
    Stats(StatsArgs),
}

/// Which backend a path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// One SQLite database file.
    Sqlite,
    /// A directory of JSONL logs.
    Jsonl,
    /// One schema of a PostgreSQL database (STORE is a `postgresql://`
    /// URL).
    Postgres,
}

/// How a JSONL store encodes its logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionKind {
    /// `session.jsonl.zstd`: checksummed Zstandard frames.
    Zstd,
    /// `session.jsonl`: plain text.
    None,
}

/// A store path and the flags that force how it is read.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The store: a SQLite file, a JSONL directory or a PostgreSQL URL
    /// (`postgresql://USER@HOST:PORT/DB`).
    #[arg(value_name = "STORE")]
    pub store: PathBuf,
    /// Read STORE as this backend instead of detecting it (postgres: STORE
    /// must be a `postgresql://` URL, which is detected anyway).
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Read a JSONL STORE with this encoding instead of detecting it.
    #[arg(long, value_enum)]
    pub compression: Option<CompressionKind>,
    /// The schema that holds the store, when STORE is a PostgreSQL URL
    /// [default: dsh].
    #[arg(long, value_name = "NAME")]
    pub schema: Option<String>,
    /// Host event types the sessions use (the store's "eventTypes"),
    /// comma-separated: `--event-types myapp/note,myapp/tick`.
    #[arg(long, value_name = "TYPES", value_delimiter = ',')]
    pub event_types: Vec<String>,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The session id.
    pub id: String,
    /// First seq shown.
    #[arg(long, value_name = "SEQ")]
    pub from: Option<u64>,
    /// The seq after the last one shown: `--from A --to B` shows
    /// `A <= seq < B`, as `dsh_session_events(from_seq, to_seq)` does.
    #[arg(long, value_name = "SEQ")]
    pub to: Option<u64>,
    /// Only events of this type; a trailing `*` matches a prefix
    /// (`assistant/*`). Repeat for several types.
    #[arg(long = "type", value_name = "T")]
    pub types: Vec<String>,
}

/// `derive`.
#[derive(Debug, Args)]
pub struct DeriveArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The session id.
    pub id: String,
    /// Print the surface nodes and the replacements with their provenance
    /// instead of the messages.
    #[arg(long)]
    pub surface: bool,
}

/// `verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Check only this session.
    pub id: Option<String>,
}

/// `repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The session id.
    pub id: String,
    /// Show what would be repaired; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also cut damage an open refuses (a zstd frame that fails its
    /// checksum, bytes no crash leaves), keeping the log before it and a
    /// copy of what is cut beside it. What the damage held is lost to the log.
    #[arg(long)]
    pub salvage: bool,
}

/// `convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The source store (a path or a PostgreSQL URL).
    #[arg(value_name = "SRC")]
    pub src: PathBuf,
    /// The destination store (a path or a PostgreSQL URL; created when
    /// missing).
    #[arg(value_name = "DST")]
    pub dst: PathBuf,
    /// Read SRC as this backend instead of detecting it.
    #[arg(long, value_enum)]
    pub from_backend: Option<BackendKind>,
    /// Read a JSONL SRC with this encoding instead of detecting it.
    #[arg(long, value_enum)]
    pub from_compression: Option<CompressionKind>,
    /// Write DST as this backend instead of deciding from the path.
    #[arg(long, value_enum)]
    pub to_backend: Option<BackendKind>,
    /// Write a JSONL DST with this encoding (default: zstd for a new
    /// directory, the existing logs' encoding otherwise).
    #[arg(long, value_enum)]
    pub to_compression: Option<CompressionKind>,
    /// The schema of a PostgreSQL SRC [default: dsh].
    #[arg(long, value_name = "NAME")]
    pub from_schema: Option<String>,
    /// The schema of a PostgreSQL DST, created when missing [default: dsh].
    #[arg(long, value_name = "NAME")]
    pub to_schema: Option<String>,
    /// Allow a DST that already holds a store (its sessions are kept; a
    /// session id present in both is still refused, nothing is overwritten).
    #[arg(long)]
    pub into_existing: bool,
    /// Copy only this session (repeat for several).
    #[arg(long = "session", value_name = "ID")]
    pub sessions: Vec<String>,
}

/// `fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The source session id.
    pub id: String,
    /// The boundary: the last seq the child inherits (it must not be
    /// inside an open turn).
    #[arg(long, value_name = "SEQ")]
    pub at: u64,
    /// The child's id (default: the store mints `session-N`).
    #[arg(long = "as", value_name = "NEWID")]
    pub child: Option<String>,
}

/// `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The session id.
    pub id: String,
}
