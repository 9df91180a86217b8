//! Races and failures injected at the fault points of the JSONL backend
//! ([`faults::Point`]).

use std::io;

use super::faults::{self, Installed, Point};

/// The injected failure of a step, named by `what`.
fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

/// Fail the step after `point` once, with an error `error` makes.
pub(super) fn fail_once(point: Point, error: impl Fn() -> io::Error + 'static) -> Installed {
    let mut armed = true;
    faults::install(move |p, _| {
        if p == point && std::mem::take(&mut armed) {
            return Err(error());
        }
        Ok(())
    })
}

/// Fail the fsync of the next append once (its rollback works).
pub(super) fn fail_next_sync() -> Installed {
    fail_once(Point::AppendSync, || injected("fsync"))
}
