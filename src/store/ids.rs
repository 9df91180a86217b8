//! The session ids a store is using: one live handle per id, and no open,
//! repair or delete of an id while another of them is under way. An id is
//! reserved before anything reads or writes its log and stays reserved
//! until the operation fails or the handle it made is closed, so two
//! threads can never both repair, write or hand out the same session.

use super::Store;
use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// An id reserved in a store's live set; released on drop unless a live
/// handle took it over ([`Reserved::keep`]).
#[must_use]
pub(crate) struct Reserved<'a> {
    store: &'a Store,
    id: String,
    kept: bool,
}

impl Reserved<'_> {
    /// The reserved id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A live handle holds the id from now on; it releases it when closed.
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.store.lock().live.remove(&self.id);
        }
    }
}

impl Store {
    /// Reserve `id` for an operation that reads or writes its log, or
    /// refuse with `rule` (a conflict) when a handle holds it or another
    /// operation is under way on it.
    pub(crate) fn reserve(&self, id: &str, rule: Rule, what: &str) -> Result<Reserved<'_>> {
        if !self.lock().live.insert(id.to_string()) {
            return Err(Error::new(
                Status::Conflict,
                rule,
                format!(
                    "cannot {what} session \"{id}\": it is open, or being opened, in this store"
                ),
            ));
        }
        Ok(Reserved {
            store: self,
            id: id.to_string(),
            kept: false,
        })
    }

    /// Reserve `id` for a new session: refused when it is live (`live_rule`)
    /// or already stored (`persist.exists-stored`).
    pub(crate) fn reserve_new(&self, id: &str, live_rule: Rule) -> Result<Reserved<'_>> {
        let reserved = self.reserve(id, live_rule, "create").map_err(|e| {
            Error::new(e.status, e.rule, format!("session \"{id}\" already exists"))
        })?;
        if self.is_stored(id)? {
            return Err(Error::new(
                Status::Conflict,
                Rule::PersistExistsStored,
                format!("session \"{id}\" already has a persisted log; open it instead"),
            ));
        }
        Ok(reserved)
    }

    /// A fresh id (`session-<n>`, skipping ids live or stored), reserved.
    pub(crate) fn mint_id(&self) -> Result<Reserved<'_>> {
        loop {
            let id = {
                let mut st = self.lock();
                st.next_id += 1;
                format!("session-{}", st.next_id)
            };
            match self.reserve_new(&id, Rule::StoreDuplicateId) {
                Ok(reserved) => return Ok(reserved),
                Err(e) if e.status == Status::Conflict => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether anything is stored under `id`.
    pub(crate) fn is_stored(&self, id: &str) -> Result<bool> {
        Ok(super::writer::lock_backend(&self.backend)
            .revision(id)?
            .is_some())
    }
}
