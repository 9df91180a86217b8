//! Test-only fault injection, shared by the backends. A backend names its
//! fault points (`jsonl::faults`, `sqlite::faults`) and calls its `hit`
//! right before a step whose failure, or a change of the world just before
//! it, cannot be provoked from outside; outside tests that call does
//! nothing. In tests, a hook installed on the calling thread runs there
//! and may fail the step. This module is the hook slot behind those calls.

use std::cell::RefCell;
use std::thread::LocalKey;

/// A hook: called at each fault point `P`; an error stands for the failure
/// of the step that follows.
type Hook<P, E> = Box<dyn FnMut(P) -> Result<(), E>>;

/// One thread's hook for fault points `P` (a backend's `thread_local!`).
pub struct Slot<P: 'static, E: 'static>(RefCell<Option<Hook<P, E>>>);

impl<P, E> Slot<P, E> {
    /// An empty slot.
    pub const fn new() -> Self {
        Slot(RefCell::new(None))
    }
}

/// Run the hook in `slot` on this thread, if any, at `point`.
pub fn hit<P, E>(slot: &'static LocalKey<Slot<P, E>>, point: P) -> Result<(), E> {
    // Taken out while it runs, so a hook may use the backend itself.
    let hook = slot.with(|s| s.0.borrow_mut().take());
    let Some(mut hook) = hook else {
        return Ok(());
    };
    let result = hook(point);
    slot.with(|s| {
        let mut current = s.0.borrow_mut();
        if current.is_none() {
            *current = Some(hook);
        }
    });
    result
}

/// Keeps a hook installed on this thread; dropping it removes the hook.
#[must_use = "the hook is removed when this guard drops"]
pub struct Installed<P: 'static, E: 'static>(&'static LocalKey<Slot<P, E>>);

impl<P, E> Drop for Installed<P, E> {
    fn drop(&mut self) {
        self.0.with(|s| s.0.borrow_mut().take());
    }
}

/// Install `hook` in `slot` on the calling thread (replacing any other)
/// until the returned guard drops.
pub fn install<P, E>(
    slot: &'static LocalKey<Slot<P, E>>,
    hook: impl FnMut(P) -> Result<(), E> + 'static,
) -> Installed<P, E> {
    slot.with(|s| *s.0.borrow_mut() = Some(Box::new(hook)));
    Installed(slot)
}
