//! Compression ahead of the writer: the large `data` values of a batch
//! (`encodeData`'s zstd frames, the largest part of a batch's work) are
//! compressed by a helper thread from the far end of the batch while the
//! writer inserts rows from the front, compressing whatever the helper has
//! not done yet. (Running the helper just ahead of the writer instead
//! measured no better.) The frames are the same either way (same level,
//! one-shot compression).
//!
//! The helper only works while a flush waits for the writer ([`Hurry`]):
//! then the thread that asked is blocked anyway, while during a burst of
//! appends both cores belong to the appending thread and the writer. It
//! also runs at idle priority (`SCHED_IDLE` on Linux) and yields after each
//! value, so that it never holds a core another thread wants for longer
//! than one compression. The writer never waits for it: at most the one
//! value the helper is working on when the two meet is compressed twice.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;

use super::early::Early;
use super::rows::{self, Data};
use crate::engine::Event;
use crate::error::Result;
use crate::store::writer::Hurry;

/// Fewest large values in a batch worth handing to the helper.
pub const MIN_ITEMS: usize = 4;

/// The large values of one batch, in insertion order.
pub struct Job {
    events: Vec<Arc<Event>>,
    /// The helper's frames (`None`: not shorter than the text).
    frames: Vec<OnceLock<Option<Vec<u8>>>>,
    /// The next item the writer takes: the helper stops below it.
    front: AtomicUsize,
    /// When the helper may work (`None`: always).
    hurry: Option<Arc<Hurry>>,
}

impl Job {
    /// The large values among `events`' data, or `None` when there are too
    /// few to share.
    pub fn of<'a>(
        events: impl Iterator<Item = &'a Arc<Event>>,
        hurry: Option<&Arc<Hurry>>,
    ) -> Option<Arc<Job>> {
        let events: Vec<Arc<Event>> = events.filter(|e| rows::is_large(e)).cloned().collect();
        (events.len() >= MIN_ITEMS).then(|| {
            Arc::new(Job {
                frames: (0..events.len()).map(|_| OnceLock::new()).collect(),
                events,
                front: AtomicUsize::new(0),
                hurry: hurry.cloned(),
            })
        })
    }

    /// The writer's turn for item `i` (items are taken in order): the
    /// helper's frame when it is ready, else compressed here.
    pub fn take<'j>(
        &'j self,
        i: usize,
        zstd: &mut zstd::bulk::Compressor<'static>,
    ) -> Result<Data<'j>> {
        self.front.store(i + 1, Ordering::Release);
        let text = self.events[i].data_text();
        let frame = match self.frames[i].get() {
            Some(done) => done.as_deref().map(std::borrow::Cow::Borrowed),
            None => rows::compress_smaller(text, zstd)?.map(std::borrow::Cow::Owned),
        };
        Ok(match frame {
            Some(frame) => Data::Blob(frame),
            None => Data::Text(text),
        })
    }

    /// The writer is done: the helper stops after its current item.
    pub fn finish(&self) {
        self.front.store(self.events.len(), Ordering::Release);
        if let Some(hurry) = &self.hurry {
            hurry.poke();
        }
    }

    fn finished(&self) -> bool {
        self.front.load(Ordering::Acquire) >= self.events.len()
    }
}

struct Slot {
    job: Option<Arc<Job>>,
    stop: bool,
}

struct Shared {
    slot: Mutex<Slot>,
    ready: Condvar,
}

/// The helper thread (started on first use), and the frames the flushing
/// threads compressed early.
#[derive(Default)]
pub struct Ahead {
    /// Frames the flushing threads made before their round.
    pub early: Arc<Early>,
    shared: Option<Arc<Shared>>,
    thread: Option<JoinHandle<()>>,
}

impl Ahead {
    /// Hand `job` to the helper (replacing a job it has not started).
    pub fn offer(&mut self, job: &Arc<Job>) {
        if self.shared.is_none() {
            let shared = Arc::new(Shared {
                slot: Mutex::new(Slot {
                    job: None,
                    stop: false,
                }),
                ready: Condvar::new(),
            });
            let theirs = shared.clone();
            let Ok(thread) = std::thread::Builder::new()
                .name("dsh-compress".into())
                .spawn(move || run(&theirs))
            else {
                return; // No helper: the writer compresses everything.
            };
            self.shared = Some(shared);
            self.thread = Some(thread);
        }
        let shared = self.shared.as_ref().expect("started above");
        let stale = {
            let mut slot = shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            slot.job.replace(job.clone())
        };
        shared.ready.notify_one();
        drop(stale);
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.slot.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
            shared.ready.notify_one();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Lower the calling thread to idle priority (Linux: `SCHED_IDLE`).
fn idle_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is a valid struct.
        // Failure only leaves the thread at its normal priority.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        }
    }
}

fn run(shared: &Shared) {
    idle_priority();
    let Ok(mut zstd) = rows::compressor() else {
        return;
    };
    loop {
        let job = {
            let mut slot = shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if slot.stop {
                    return;
                }
                if let Some(job) = slot.job.take() {
                    break job;
                }
                slot = shared.ready.wait(slot).unwrap_or_else(|p| p.into_inner());
            }
        };
        for i in (0..job.events.len()).rev() {
            if let Some(hurry) = &job.hurry {
                hurry.wait_for(|| job.finished());
            }
            // Values the writer has reached are its own.
            if i < job.front.load(Ordering::Acquire) {
                break;
            }
            match rows::compress_smaller(job.events[i].data_text(), &mut zstd) {
                Ok(frame) => {
                    let _ = job.frames[i].set(frame);
                }
                // The writer compresses it and reports the failure.
                Err(_) => break,
            }
            // Even an idle-priority thread gets a whole time slice now and
            // then on a busy core: hand the core back after every item, so
            // that a thread sharing it waits at most for one compression.
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Large data values: repetitive prose and noise.
    fn events(n: u64) -> Vec<Arc<Event>> {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|seq| {
                let text: String = if seq % 3 == 0 {
                    (0..6000)
                        .map(|_| {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            char::from(b'!' + (seed % 90) as u8)
                        })
                        .filter(|c| *c != '"' && *c != '\\')
                        .collect()
                } else {
                    "the writer compresses what the helper has not ".repeat(120 + seq as usize)
                };
                let json = format!(
                    r#"{{"type":"tool/result","seq":{seq},"time":{seq},"data":{{"text":"{text}"}}}}"#
                );
                Arc::new(
                    Event::from_envelope(crate::json::parse(&json).unwrap(), "test").unwrap(),
                )
            })
            .collect()
    }

    fn same(a: &Data<'_>, b: &Data<'_>) -> bool {
        match (a, b) {
            (Data::Text(a), Data::Text(b)) => a == b,
            (Data::Blob(a), Data::Blob(b)) => a == b,
            _ => false,
        }
    }

    fn done(job: &Job) -> usize {
        job.frames.iter().filter(|f| f.get().is_some()).count()
    }

    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_helpers_frames_are_the_writers_frames() {
        let events = events(24);
        let mut zstd = rows::compressor().unwrap();
        let mut ahead = Ahead::default();
        // Ahead of the writer, then racing it.
        for settle in [true, false] {
            let job = Job::of(events.iter(), None).unwrap();
            ahead.offer(&job);
            if settle {
                wait_until("the helper compresses everything", || done(&job) == 24);
            }
            for (i, e) in events.iter().enumerate() {
                let expected = rows::encode_data(e.data_text(), &mut zstd).unwrap();
                assert!(
                    same(&job.take(i, &mut zstd).unwrap(), &expected),
                    "item {i}"
                );
            }
            job.finish();
        }
        assert!(Job::of(events[..MIN_ITEMS - 1].iter(), None).is_none());
    }

    #[test]
    fn the_helper_works_only_while_a_flush_waits() {
        let events = events(12);
        let hurry = Arc::new(Hurry::default());
        let mut ahead = Ahead::default();
        let job = Job::of(events.iter(), Some(&hurry)).unwrap();
        ahead.offer(&job);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            done(&job),
            0,
            "no flush waits: the helper leaves the core alone"
        );
        let waiting = hurry.enter();
        wait_until("a waiting flush lets the helper work", || done(&job) == 12);
        drop(waiting);
        job.finish();
        // A job finished without a flush releases the helper too.
        let job = Job::of(events.iter(), Some(&hurry)).unwrap();
        ahead.offer(&job);
        job.finish();
        drop(ahead);
        assert_eq!(done(&job), 0);
    }
}
