//! Work a flush does for its own queued events before it waits for its
//! round, where rounds run one at a time
//! ([`Precompute`](crate::store::backend::Precompute)): whatever the
//! flushes of many sessions do in parallel beforehand is taken off the
//! serial round they all wait for.

use super::Writer;

/// Most queued events of a session a flush hands over: a step's worth,
/// never a backlog (the round's own, bounded, work).
const MAX_EVENTS: usize = 64;

impl Writer {
    /// Before a flush of `id` waits for its round: the backend's
    /// `Precompute` work on a step's worth of its queued events, on the
    /// flushing thread, outside every lock.
    pub(super) fn precompute(&self, id: &str) {
        let Some(pre) = &self.shared.precompute else {
            return;
        };
        let events = {
            let st = self.shared.lock();
            let Some(p) = st.sessions.get(id) else {
                return;
            };
            p.queued_where(MAX_EVENTS, |len| pre.wants(len))
        };
        if !events.is_empty() {
            pre.run(&events);
        }
    }
}
