//! Gathering a round on a backend with one writer (SQLite, PostgreSQL):
//! a flush about to start a round waits, briefly, for the sessions of the
//! round that just ended to flush again, so that they ride in the same
//! round as the sessions that were already waiting.
//!
//! Without it, sessions that flush at every step split into two cohorts:
//! those acknowledged by one round append their next step while the next
//! round, holding the others, is being written, and so they always miss
//! it. Each round then holds half of the sessions, and every session
//! waits two rounds per step. The wait is bounded by the time the last
//! round took (at most [`MAX_GATHER`]), and ends as soon as every session
//! of the last round is flushing again; a lone session never waits (its
//! own flush is the one its last round is waiting for).

use std::time::{Duration, Instant};

use super::{Shared, State};

/// The longest a round waits for the sessions of the previous one.
pub(super) const MAX_GATHER: Duration = Duration::from_micros(500);

/// What the last finished round held, for [`State::gather_until`].
#[derive(Debug, Default)]
pub(super) struct LastRound {
    /// The number the round's sessions carry in [`super::Pending::round`].
    pub id: u64,
    /// Its sessions.
    pub sessions: usize,
    /// When it ended, and how long it took.
    pub ended: Option<Instant>,
    pub took: Duration,
}

impl State {
    /// When a flush about to start a round should stop waiting for the
    /// sessions of the last round; `None` when it should start now.
    pub(super) fn gather_until(&self, shared: &Shared) -> Option<Instant> {
        if shared.overlap {
            return None;
        }
        let last = &self.last_round;
        let ended = last.ended?;
        let deadline = ended + last.took.min(MAX_GATHER);
        if Instant::now() >= deadline {
            return None;
        }
        let back = self
            .sessions
            .values()
            .filter(|p| p.round == last.id && p.flushing > 0 && p.is_writable())
            .count();
        (back < last.sessions).then_some(deadline)
    }
}

impl Shared {
    /// Wait as [`State::gather_until`] says; other flushes meanwhile wait
    /// for the round this one starts (`State::gathering`) and wake it when
    /// they arrive.
    pub(super) fn gather<'a>(
        &self,
        mut st: std::sync::MutexGuard<'a, State>,
    ) -> std::sync::MutexGuard<'a, State> {
        if st.gathering {
            return st;
        }
        st.gathering = true;
        while let Some(deadline) = st.gather_until(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            st = self
                .gathered
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        st.gathering = false;
        st
    }
}
