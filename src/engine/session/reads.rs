//! The read calls of a session: derived messages, event ranges and the
//! request folds, each reading evicted events back when the session is
//! windowed.

use std::sync::Arc;

use super::{DeriveDelta, Session};
use crate::engine::chunked::{self, Chunked};
use crate::engine::derive::Message;
use crate::engine::event::Event;
use crate::engine::request::RequestFolds;
use crate::engine::window::View;
use crate::error::{Error, Result};
use crate::json::Value;
use crate::rule::Rule;

/// How many derived messages [`Session::visit_derived`] holds at once.
const DERIVE_PAGE: usize = 512;

impl Session {
    /// Project the surface nodes the derive cache has not seen yet.
    fn update_derive(&mut self) -> Result<()> {
        let from = self.derive.pending(&self.surface);
        let seqs: Vec<u64> = self.surface.nodes().iter_from(from).copied().collect();
        let mut projected = vec![None; seqs.len()];
        let view = View {
            log: &self.log,
            window: self.window.as_ref(),
        };
        view.visit_seqs(&seqs, |i, e| projected[i] = Message::of(e))?;
        self.derive
            .extend(&self.surface, projected.into_iter().flatten());
        Ok(())
    }

    /// `messages` as a JSON array, their text read straight from the log;
    /// `None` when one of their events is evicted.
    fn resident_messages_json(&self, messages: chunked::Iter<'_, Message>) -> Option<String> {
        let mut out =
            String::with_capacity(messages.clone().map(|m| m.len() + 1).sum::<usize>() + 2);
        out.push('[');
        for (i, m) in messages.enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(m.text_in(self.log.text(m.seq as usize)?));
        }
        out.push(']');
        Some(out)
    }

    /// `messages` as a JSON array, their text read from the events they
    /// come from (evicted ones read back, a chunk at a time).
    fn messages_json(&self, messages: chunked::Iter<'_, Message>) -> Result<String> {
        if let Some(out) = self.resident_messages_json(messages.clone()) {
            return Ok(out);
        }
        // Lay the array out first, then fill each message in where the
        // chunk holding its event is read.
        let list: Vec<Message> = messages.copied().collect();
        let mut at = Vec::with_capacity(list.len());
        let mut len = 1;
        for (i, m) in list.iter().enumerate() {
            len += usize::from(i > 0);
            at.push(len);
            len += m.len();
        }
        let mut out = vec![b','; len + 1];
        out[0] = b'[';
        out[len] = b']';
        let seqs: Vec<u64> = list.iter().map(|m| m.seq).collect();
        self.view().visit_seqs(&seqs, |i, e| {
            let m = &list[i];
            out[at[i]..at[i] + m.len()].copy_from_slice(m.text_in(e.text()).as_bytes());
        })?;
        String::from_utf8(out).map_err(|_| {
            Error::new(
                crate::error::Status::Internal,
                Rule::WindowMessageText,
                "a derived message read back is not UTF-8",
            )
        })
    }

    /// The derived message list as a JSON array (cached, O(new nodes)):
    /// the text twin of [`Session::derive`] the C ABI hands out.
    #[doc(hidden)]
    pub fn derive_json(&mut self) -> Result<String> {
        self.update_derive()?;
        self.messages_json(self.derive.messages().iter())
    }

    /// The derived message list (docs/events.md §9): the messages of the
    /// surface nodes in surface order. The list is cached and updated in
    /// O(new events); each call builds the values anew.
    pub fn derive(&mut self) -> Result<Vec<Value>> {
        self.update_derive()?;
        self.messages_values(self.derive.messages().iter())
    }

    /// `messages` as values, each parsed from the text of the event it
    /// comes from (evicted ones read back, a chunk at a time).
    fn messages_values(&self, messages: chunked::Iter<'_, Message>) -> Result<Vec<Value>> {
        let list: Vec<Message> = messages.copied().collect();
        let seqs: Vec<u64> = list.iter().map(|m| m.seq).collect();
        let mut values: Vec<Option<Value>> = vec![None; list.len()];
        self.view().visit_seqs(&seqs, |i, e| {
            values[i] = crate::json::parse(list[i].text_in(e.text())).ok();
        })?;
        values
            .into_iter()
            .zip(&list)
            .map(|(v, m)| {
                v.ok_or_else(|| {
                    Error::new(
                        crate::error::Status::Internal,
                        Rule::DeriveMessageText,
                        format!("the derived message of seq {} was not read", m.seq),
                    )
                })
            })
            .collect()
    }

    /// The messages added since a cursor `(generation, count)` a caller
    /// holds from an earlier call. While no replace happened the surface
    /// only grew at its tail, so the answer is the messages after `count`;
    /// when the generation moved on (or the cursor is not one this session
    /// gave out) the whole list comes back with `reset`. O(new messages).
    pub fn derive_since(&mut self, generation: u64, count: u64) -> Result<DeriveDelta> {
        let (generation, count, reset, from) = self.derive_cursor(generation, count)?;
        Ok(DeriveDelta {
            generation,
            count,
            reset,
            messages: self.messages_values(self.derive.messages().iter_from(from))?,
        })
    }

    /// `(generation, count, reset, first message to give)` of a
    /// `derive_since` from the cursor `(generation, count)`.
    fn derive_cursor(&mut self, generation: u64, count: u64) -> Result<(u64, u64, bool, usize)> {
        self.update_derive()?;
        let len = self.derive.messages().len() as u64;
        let now = self.surface.generation();
        let reset = generation != now || count > len;
        let from = if reset { 0 } else { count as usize };
        Ok((now, len, reset, from))
    }

    /// [`Session::derive_since`] with the messages as one JSON array (the C
    /// ABI's door).
    #[doc(hidden)]
    pub fn derive_since_json(
        &mut self,
        generation: u64,
        count: u64,
    ) -> Result<DeriveDelta<String>> {
        let (generation, count, reset, from) = self.derive_cursor(generation, count)?;
        Ok(DeriveDelta {
            generation,
            count,
            reset,
            messages: self.messages_json(self.derive.messages().iter_from(from))?,
        })
    }

    /// Call `f(seq, text)` with the event seq and the JSON text of every
    /// derived message, in list order, without building the list: the
    /// messages are taken a page at a time, evicted events read back a
    /// chunk at a time, so only one page of message text is held however
    /// long the list (for a caller that prints messages as they come).
    /// `f` returns false to stop early. The same messages, in the same
    /// order, as [`Session::derive_json`].
    pub fn visit_derived(&mut self, mut f: impl FnMut(u64, &str) -> bool) -> Result<()> {
        self.update_derive()?;
        let messages = self.derive.messages();
        let view = self.view();
        let mut all = messages.iter().peekable();
        let mut page: Vec<Message> = Vec::with_capacity(DERIVE_PAGE);
        let mut texts: Vec<Option<String>> = Vec::with_capacity(DERIVE_PAGE);
        while all.peek().is_some() {
            page.clear();
            page.extend(all.by_ref().take(DERIVE_PAGE).copied());
            texts.clear();
            texts.resize(page.len(), None);
            let seqs: Vec<u64> = page.iter().map(|m| m.seq).collect();
            view.visit_seqs(&seqs, |i, e| {
                texts[i] = Some(page[i].text_in(e.text()).to_string());
            })?;
            for (m, text) in page.iter().zip(&texts) {
                let text = text.as_deref().ok_or_else(|| {
                    Error::new(
                        crate::error::Status::Internal,
                        Rule::WindowMessageText,
                        format!(
                            "the event of a derived message (seq {}) was not read",
                            m.seq
                        ),
                    )
                })?;
                if !f(m.seq, text) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The derived messages (positions in the log's events).
    pub fn derived_messages(&mut self) -> Result<&Chunked<Message>> {
        self.update_derive()?;
        Ok(self.derive.messages())
    }

    /// The events `from..to` (evicted ones read back; `to` past the end
    /// stops at the end).
    pub fn events_in(&self, from: usize, to: usize) -> Result<Vec<Arc<Event>>> {
        let to = to.min(self.log.len());
        let mut events = Vec::with_capacity(to.saturating_sub(from));
        self.view()
            .visit_range(from, to, |e| events.push(e.clone()))?;
        Ok(events)
    }

    pub(super) fn folds(&mut self) -> Result<&RequestFolds> {
        let len = self.log.len();
        if len < self.folds.folded() {
            self.folds = RequestFolds::default();
        }
        let view = View {
            log: &self.log,
            window: self.window.as_ref(),
        };
        let folds = &mut self.folds;
        view.visit_range(folds.folded(), len, |e| folds.fold(e))?;
        Ok(&self.folds)
    }

    /// The canonical request header in force, if any.
    pub fn request_header(&mut self) -> Result<Option<&Value>> {
        Ok(self.folds()?.header())
    }

    /// The data of the latest `request/context`, if any.
    pub fn request_context(&mut self) -> Result<Option<&Value>> {
        Ok(self.folds()?.context())
    }
}
