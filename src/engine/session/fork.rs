//! Forks (docs/lifecycle.md §5): the boundary checks and the child that shares
//! its parent's prefix.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::rule::Rule;

impl Session {
    /// The length of the inherited prefix of a fork at `boundary`
    /// (docs/lifecycle.md §5 steps 2–4): `None` means the last event.
    pub fn fork_len(&self, boundary: Option<&Value>) -> Result<usize> {
        let id = &self.id;
        let b = match boundary {
            None if self.log.is_empty() => return Ok(0),
            None => self.log.len() as u64 - 1,
            Some(v) => v.as_safe_u64().ok_or_else(|| {
                Error::invalid_argument(
                    Rule::ForkBoundaryInvalid,
                    format!(
                        "fork boundary for session \"{id}\" must be a non-negative safe integer, got {}",
                        v.to_json()
                    ),
                )
                .with_code("INVALID_BOUNDARY")
            })?,
        };
        if b >= self.log.len() as u64 {
            let last = self
                .log
                .len()
                .checked_sub(1)
                .map_or("none".to_string(), |l| l.to_string());
            return Err(Error::invalid_argument(
                Rule::ForkOutOfRange,
                format!("fork boundary {b} does not exist in session \"{id}\" (last seq: {last})"),
            )
            .with_code("INVALID_BOUNDARY"));
        }
        let len = b as usize + 1;
        if self.view().event(b as usize)?.seq != b {
            return Err(Error::invalid_argument(
                Rule::ForkBoundaryMismatch,
                format!("fork boundary {b} is not a contiguous seq in session \"{id}\""),
            )
            .with_code("INVALID_BOUNDARY"));
        }
        if let Some(e) = self
            .view()
            .rfind(len, |t| t == TURN_START || t == TURN_END)?
        {
            if e.ty == TURN_START {
                let turn = e
                    .data()
                    .as_object()
                    .and_then(|d| d.get("turn"))
                    .map_or("?".into(), Value::to_json);
                return Err(Error::rejected(
                    Rule::ForkOpenTurn,
                    format!("fork boundary {b} in session \"{id}\" ends inside open turn {turn}"),
                )
                .with_code("OPEN_TURN"));
            }
        }
        Ok(len)
    }

    /// The child of a fork that inherits the first `len` events (from
    /// [`Session::fork_len`]), seeded in snapshot mode (docs/lifecycle.md §5).
    /// The child shares the inherited events with this session; only the
    /// events not yet known to pass the seed admission are checked, and at
    /// the last event the surface and derived messages are shared too.
    ///
    /// A fork of a windowed session is fully resident: its prefix is read
    /// back from the parent's storage.
    pub fn fork(&self, len: usize, child_id: &str, now: i64) -> Result<Session> {
        let log = match self.window {
            None => self.log.prefix(len),
            Some(_) => self.view().resident_prefix(len)?,
        };
        let from = self.admitted.load(Ordering::Relaxed).min(len);
        for (i, e) in log.range(from..len).enumerate().map(|(k, e)| (from + k, e)) {
            seed::admit_event(&e, i, SeedMode::Snapshot)?;
        }
        self.admitted.fetch_max(len, Ordering::Relaxed);
        let header = self.fork_header(child_id, len, now);
        let mut child = Session::bare(child_id, header, self.markers, self.policy.clone());
        child.log = log;
        if len == self.log.len() {
            child.surface = self.surface.clone();
            child.derive = self.derive.clone();
            if self.folds.folded() == len {
                child.folds = self.folds.clone();
            }
        } else {
            child.surface = refold(&child.log, self.markers)?;
        }
        seed::validate_header(&child.header, child_id)?;
        child.admitted = AtomicUsize::new(len);
        child.seal(now)?;
        Ok(child)
    }

    /// The header of a fork child (docs/lifecycle.md §5 step 5).
    fn fork_header(&self, child_id: &str, seed_length: usize, now: i64) -> Value {
        let mut h = Object::new();
        h.insert_str("version", Value::Number(seed::FORMAT_VERSION as f64));
        h.insert_str("id", Value::str(child_id));
        h.insert_str("createdAt", Value::Number(now as f64));
        if let Some(cwd) = self.header.as_object().and_then(|o| o.get("cwd")) {
            h.insert_str("cwd", cwd.clone());
        }
        h.insert_str("parentSession", Value::str(&self.id));
        h.insert_str("seedLength", Value::Number(seed_length as f64));
        Value::Object(h)
    }
}
