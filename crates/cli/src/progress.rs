//! Progress on stderr for the commands that can take more than a second:
//! indicatif bars, drawn only when stderr is a terminal (indicatif hides
//! them otherwise) and never with `--quiet`.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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

/// How often a spinner redraws while a single read runs.
const TICK: Duration = Duration::from_millis(120);

fn target(ctx: Ctx) -> Option<ProgressBar> {
    if ctx.quiet {
        return None;
    }
    Some(ProgressBar::with_draw_target(
        Some(0),
        ProgressDrawTarget::stderr(),
    ))
}

fn styled(bar: ProgressBar, template: &str) -> ProgressBar {
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A bar over events whose total grows as sessions are found (`convert`).
pub fn events(ctx: Ctx) -> Progress {
    Progress(target(ctx).map_or_else(ProgressBar::hidden, |b| {
        styled(
            b,
            "{msg:20!} [{bar:24}] {human_pos}/{human_len} events, eta {eta}",
        )
    }))
}

/// A bar over the `n` sessions of a store (`list`, `verify`).
pub fn sessions(ctx: Ctx, n: usize) -> Progress {
    Progress(target(ctx).map_or_else(ProgressBar::hidden, |b| {
        b.set_length(n as u64);
        styled(b, "{msg:20!} [{bar:24}] {pos}/{len} sessions, eta {eta}")
    }))
}

/// A counter of the events read so far from one log (`show`).
pub fn reading(ctx: Ctx, id: &str) -> Progress {
    Progress(target(ctx).map_or_else(ProgressBar::hidden, |b| {
        let b = styled(b, "{spinner} {msg} {human_pos} events read");
        b.set_message(id.to_string());
        b.enable_steady_tick(TICK);
        b
    }))
}

/// A spinner for one step that reports no progress of its own (reading
/// and rebuilding a session for `derive`, `stats`, `repair`, `fork`).
pub fn spinner(ctx: Ctx, what: &str) -> Progress {
    Progress(target(ctx).map_or_else(ProgressBar::hidden, |b| {
        let b = styled(b, "{spinner} {msg} ({elapsed})");
        b.set_message(what.to_string());
        b.enable_steady_tick(TICK);
        b
    }))
}
