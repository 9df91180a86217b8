//! Waking the flushes a round lets go on, spread over the threads woken.
//!
//! A round that ends may let dozens of flushes go on (at 64 sessions about
//! 40). Unparking each is a system call; made one after another by the
//! thread that wrote the round they were a serial part of every round
//! (a fifth of the round's CPU at 64 sessions). Instead the round's thread
//! wakes [`FAN`] of them and leaves the rest here, and every flush that
//! wakes passes the wake on to [`FAN`] more before it does anything else:
//! the wakes spread over the cores like a tree.
//!
//! A woken flush that never calls [`Relay::pass_on`] (its handle was left
//! in a list after it stopped waiting) must not strand the others: a
//! flush parks for at most [`PARK`] at a time, and each one that wakes,
//! for whatever reason, passes the wake on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::Thread;
use std::time::Duration;

/// Threads each woken thread wakes.
const FAN: usize = 2;

/// The longest a waiting flush parks before it looks again.
pub(super) const PARK: Duration = Duration::from_millis(20);

/// Threads left to wake.
#[derive(Default)]
pub(super) struct Relay {
    rest: Mutex<Vec<Thread>>,
    /// `rest.len()`, read without the lock.
    len: AtomicUsize,
}

impl Relay {
    /// Wake `threads`: [`FAN`] of them now, the others through them.
    pub fn wake(&self, mut threads: Vec<Thread>) {
        if threads.len() > FAN {
            let rest = threads.split_off(FAN);
            let mut r = self.rest.lock().unwrap_or_else(|p| p.into_inner());
            r.extend(rest);
            self.len.store(r.len(), Ordering::Release);
        }
        threads.iter().for_each(Thread::unpark);
    }

    /// Wake [`FAN`] of the threads left to wake, if any (a thread that has
    /// just woken calls this first).
    pub fn pass_on(&self) {
        if self.len.load(Ordering::Acquire) == 0 {
            return;
        }
        let next = {
            let mut r = self.rest.lock().unwrap_or_else(|p| p.into_inner());
            let keep = r.len().saturating_sub(FAN);
            let next = r.split_off(keep);
            self.len.store(r.len(), Ordering::Release);
            next
        };
        next.iter().for_each(Thread::unpark);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    /// Park `live` threads the way `park` says until `go`, then pass the wake
    /// on, as a waiting flush does; wake them with `stale` handles of ended
    /// threads first in the list. Whether every live thread came out.
    fn wake_all(live: usize, stale: usize, park: fn()) -> bool {
        let relay = Relay::default();
        let (go, ready, done) = (
            AtomicBool::new(false),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let ended: Vec<Thread> = (0..stale)
            .map(|_| {
                let t = std::thread::spawn(|| ());
                let handle = t.thread().clone();
                t.join().unwrap();
                handle
            })
            .collect();
        std::thread::scope(|scope| {
            let threads: Vec<Thread> = (0..live)
                .map(|_| {
                    let (relay, go, ready, done) = (&relay, &go, &ready, &done);
                    let t = scope.spawn(move || {
                        ready.fetch_add(1, Ordering::SeqCst);
                        // As a flush: it parks after it is listed (an unpark
                        // that came first makes the park return at once).
                        loop {
                            park();
                            relay.pass_on();
                            if go.load(Ordering::SeqCst) {
                                break;
                            }
                        }
                        done.fetch_add(1, Ordering::SeqCst);
                    });
                    t.thread().clone()
                })
                .collect();
            while ready.load(Ordering::SeqCst) < live {
                std::thread::yield_now();
            }
            go.store(true, Ordering::SeqCst);
            relay.wake(ended.into_iter().chain(threads.iter().cloned()).collect());
            let start = Instant::now();
            while done.load(Ordering::SeqCst) < live && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let all = done.load(Ordering::SeqCst) == live;
            // Let stranded threads end, so that a failure is reported.
            threads.iter().for_each(Thread::unpark);
            all
        })
    }

    #[test]
    fn every_waiting_thread_is_woken_through_the_others() {
        // Parked with no timeout: only the relay wakes them.
        assert!(wake_all(13, 0, std::thread::park));
    }

    #[test]
    fn woken_handles_that_pass_nothing_on_strand_nobody() {
        // The first two handles are of ended threads: the others come out
        // at their next timeout and pass the wake on.
        assert!(wake_all(7, FAN, || std::thread::park_timeout(PARK)));
    }
}
