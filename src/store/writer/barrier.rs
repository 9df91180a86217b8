//! The flush barrier: a flush returns once every event of its session
//! (or of every session) queued before it is durable, or with the write
//! failure that kept them queued. A flush that may start a round writes it
//! on its own thread (with one writer, after gathering the sessions of the
//! last round); otherwise it wakes the writer and waits, parked, for the
//! round that holds its events, woken through the relay. Without a writer
//! thread (a batch window of 0) the caller writes round by round.

use super::relay;
use super::round::write_round;
use super::Writer;
use crate::error::{Error, Result};
use crate::rule::Rule;

impl Writer {
    /// Return once every event of `id` enqueued before this call is durable,
    /// or with the write failure that prevented it (the events stay queued).
    pub fn flush(&self, id: &str) -> Result<()> {
        self.barrier(Some(id))
    }

    /// [`Writer::flush`] for every session.
    pub fn flush_all(&self) -> Result<()> {
        self.barrier(None)
    }

    /// The sessions a round run by a flush of `only` takes. Where rounds
    /// share one durable write (one transaction), every session's batch,
    /// so the flushes waiting meanwhile are served by it (a group
    /// commit). Where they overlap (a file per session), only the flushed
    /// session's: each flushing thread writes and syncs its own log, as
    /// many at once as there are flushes, and no thread waits for another
    /// session's sync or spawns threads for it.
    fn round_scope<'a>(&self, only: Option<&'a str>) -> Option<&'a str> {
        if self.shared.overlap {
            only
        } else {
            None
        }
    }

    fn barrier(&self, only: Option<&str>) -> Result<()> {
        // A flush of one session is counted while it lasts, so that a
        // round being gathered knows who is coming (see `gather.rs`).
        let Some(id) = only else {
            return self.barrier_counted(None);
        };
        {
            let mut st = self.shared.lock();
            if let Some(p) = st.sessions.get_mut(id) {
                p.flushing += 1;
            }
            if st.gathering {
                self.shared.gathered.notify_all();
            }
        }
        self.precompute(id);
        let r = self.barrier_counted(only);
        if let Some(p) = self.shared.lock().sessions.get_mut(id) {
            p.flushing = p.flushing.saturating_sub(1);
        }
        r
    }

    fn barrier_counted(&self, only: Option<&str>) -> Result<()> {
        if self.thread.is_none() {
            // No background thread: write on the caller's thread.
            // Round by round (each at most ROUND_BYTES), as the writer
            // thread writes.
            loop {
                let mut st = self.shared.lock();
                while st.rounds > 0 {
                    st = self.shared.wait_done(st);
                }
                if !st.writable(only) {
                    return Ok(());
                }
                write_round(&self.shared, st, only)?;
            }
        }
        let mut st = self.shared.lock();
        let targets: Vec<(String, u64, u64)> = st
            .sessions
            .iter()
            .filter(|(k, _)| only.is_none_or(|o| o == k.as_str()))
            .map(|(k, p)| (k.clone(), p.enqueued, p.failures))
            .collect();
        let mut hurry = None;
        loop {
            let mut waiting = false;
            for (id, target, failures) in &targets {
                let Some(p) = st.sessions.get_mut(id) else {
                    continue;
                };
                if p.durable >= *target {
                    continue;
                }
                if p.failures > *failures {
                    let mut err = p.failure.clone().unwrap_or_else(|| {
                        Error::new(crate::Status::Io, Rule::IoWrite, "write failed")
                    });
                    if p.queued() > 0 {
                        let last = p.next_seq + p.queued() as u64 - 1;
                        err.message = format!(
                            "{}; seqs {}..={last} of session \"{id}\" are not written \
                             (they stay queued: the next flush or close writes them)",
                            err.message, p.next_seq
                        );
                    }
                    return Err(err);
                }
                waiting = true;
            }
            if !waiting {
                return Ok(());
            }
            if hurry.is_none() {
                hurry = Some(self.shared.hurry.enter());
            }
            st.paused = false;
            if st.can_start(&self.shared) && st.writable(only) && !st.gathering {
                // The writer may start a round: write here. Waking it and
                // waiting for its answer costs two thread hand-offs, which
                // on a loaded machine are a good part of a flush. What the
                // round takes: `round_scope`. A round is bounded, so a long
                // backlog takes several. With one writer, the round first
                // waits briefly for the sessions of the last one.
                st = self.shared.gather(st);
                if !st.can_start(&self.shared) {
                    // A round runs: its end wakes the flushes that wait.
                    continue;
                }
                let _ = write_round(&self.shared, st, self.round_scope(only));
                st = self.shared.lock();
                continue;
            }
            st.urgent = true;
            self.shared.wake.notify_all();
            st = match only.and_then(|id| st.sessions.get(id)) {
                // Woken by the end of the round that concerns it only
                // (`park` returns at once if that came first).
                Some(p) => {
                    let current = std::thread::current();
                    match p.in_flight {
                        true => st.session(only.unwrap_or_default()).waiters.push(current),
                        false => st.slot_waiters.push(current),
                    }
                    drop(st);
                    std::thread::park_timeout(relay::PARK);
                    self.shared.relay.pass_on();
                    self.shared.lock()
                }
                None => self.shared.wait_done(st),
            };
        }
    }
}
