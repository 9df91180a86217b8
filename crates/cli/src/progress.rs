//! Progress on stderr for the commands that can take more than a second:
//! indicatif bars with counts and an ETA, drawn only when stderr is a
//! terminal, never with `--quiet`, and not while a command streams its
//! output to the terminal (the output shows the progress there).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use dsh_session::store::{ProgressUnit, ReadProgress};

use super::Ctx;

/// A bar that clears itself when dropped, however the command ends.
pub struct Progress(ProgressBar);

impl std::ops::Deref for Progress {
    type Target = ProgressBar;
    fn deref(&self) -> &ProgressBar {
        &self.0
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// How often a bar redraws on its own while a read runs.
const TICK: Duration = Duration::from_millis(120);

/// A drawn bar, or `None` when nothing is drawn: `--quiet`, stderr no
/// terminal, or (`streams`) the command's output going to the terminal.
fn target(ctx: Ctx, streams: bool) -> Option<ProgressBar> {
    if ctx.quiet || !ctx.term.stderr || (streams && ctx.term.stdout) {
        return None;
    }
    Some(ProgressBar::with_draw_target(
        Some(0),
        ProgressDrawTarget::stderr(),
    ))
}

fn style(bar: &ProgressBar, template: &str) {
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
}

/// A bar over events whose total grows as sessions are found (`convert`).
pub fn events(ctx: Ctx) -> Progress {
    Progress(target(ctx, false).map_or_else(ProgressBar::hidden, |b| {
        style(
            &b,
            "{msg:20!} [{bar:24}] {human_pos}/{human_len} events, eta {eta}",
        );
        b
    }))
}

/// A bar over the `n` sessions of a store (`list`).
pub fn sessions(ctx: Ctx, n: usize) -> Progress {
    Progress(target(ctx, false).map_or_else(ProgressBar::hidden, |b| {
        b.set_length(n as u64);
        style(&b, "{msg:20!} [{bar:24}] {pos}/{len} sessions, eta {eta}");
        b
    }))
}

/// A spinner for one step that reports no progress of its own (`repair`,
/// `fork`, `derive --surface`).
pub fn spinner(ctx: Ctx, what: &str) -> Progress {
    Progress(target(ctx, false).map_or_else(ProgressBar::hidden, |b| {
        style(&b, "{spinner} {msg} ({elapsed})");
        b.set_message(what.to_string());
        b.enable_steady_tick(TICK);
        b
    }))
}

/// The progress of reading one log: events counted, against the log's
/// length (events, or bytes of its file) when the backend told it, so
/// the bar shows an ETA.
pub struct Reading {
    bar: Progress,
    what: String,
    read: Option<ReadProgress>,
    events: u64,
}

impl Reading {
    /// A bar for reading the log of `what` (`show`, `derive`, `stats`,
    /// `verify`); `streams`: the command prints as it reads.
    pub fn new(ctx: Ctx, what: &str, streams: bool) -> Reading {
        let bar = target(ctx, streams).map_or_else(ProgressBar::hidden, |b| {
            b.enable_steady_tick(TICK);
            b
        });
        let mut r = Reading {
            bar: Progress(bar),
            what: what.to_string(),
            read: None,
            events: 0,
        };
        r.start(what, None);
        r
    }

    /// Start over on the log of `what`, whose read `read` follows (`None`:
    /// its length is unknown, so only the events are counted).
    pub fn start(&mut self, what: &str, read: Option<ReadProgress>) {
        self.what = what.to_string();
        self.events = 0;
        self.bar.reset();
        match &read {
            Some(r) if r.unit == ProgressUnit::Events => {
                style(
                    &self.bar,
                    "{msg} [{bar:24}] {human_pos}/{human_len} events, eta {eta}",
                );
                self.bar.set_length(r.total);
            }
            Some(r) => {
                style(
                    &self.bar,
                    "{msg} [{bar:24}] {binary_bytes}/{binary_total_bytes}, eta {eta}",
                );
                self.bar.set_length(r.total);
            }
            None => {
                style(&self.bar, "{spinner} {msg}: {human_pos} events ({elapsed})");
                self.bar.set_length(u64::MAX);
            }
        }
        self.bar.set_message(self.what.clone());
        self.read = read;
    }

    /// The read starts again from the log's beginning (read whole), its
    /// length unknown.
    pub fn restart(&mut self) {
        let what = self.what.clone();
        self.start(&what, None);
    }

    /// `n` more events were read.
    pub fn tick(&mut self, n: u64) {
        self.events += n;
        match &self.read {
            Some(r) => {
                // Events: those counted here (a range read advances no
                // counter of the backend's).
                let done = match r.unit {
                    ProgressUnit::Events => r.done().max(self.events),
                    ProgressUnit::Bytes => r.done(),
                };
                if done > r.total {
                    self.bar.set_length(done);
                }
                self.bar.set_position(done);
                if r.unit == ProgressUnit::Bytes {
                    self.bar
                        .set_message(format!("{}: {} events", self.what, self.events));
                }
            }
            None => self.bar.set_position(self.events),
        }
    }
}
