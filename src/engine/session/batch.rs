//! `append_batch` (docs/c-api.md): the all-or-nothing append of typed
//! events or of `[{"type","data","intent"?}, ...]` text, each item
//! checked against the state after the ones before it.
//!
//! Batch text that is canonical JSON (what hosts build) is read in place:
//! each item's `data` and `intent` are slices of it, appended as a single
//! `append` of canonical text is, without a value tree. Anything else, and
//! any item the fast path does not take, goes through the value path with
//! the same checks and errors.

use std::sync::Arc;

use super::{Data, DataText, IntentArg, NewEvent, Session};
use crate::engine::event::Event;
use crate::engine::input::parse_input;
use crate::error::{Error, Result};
use crate::json::{self, canon, Value};
use crate::rule::Rule;

/// One batch item: canonical text, a parsed value, or a typed event.
enum Item<'a> {
    Text(&'a str),
    Value(Value),
    Typed(NewEvent),
}

fn not_an_array() -> Error {
    Error::invalid_argument(Rule::ArgBatch, "batch must be a JSON array")
}

impl Session {
    /// All-or-nothing append of `events`; each one is checked against the
    /// state after the ones before it. On the first refusal nothing is
    /// committed and the error carries the item's index.
    pub fn append_batch(&mut self, events: Vec<NewEvent>, now: i64) -> Result<Vec<Arc<Event>>> {
        let items = events.into_iter().map(Item::Typed).collect();
        self.append_items(items, now)
    }

    /// [`Session::append_batch`] of `[{"type","data","intent"?}, ...]` JSON
    /// text, possibly checked canonical already (see [`DataText`]): the C
    /// ABI's door.
    #[doc(hidden)]
    pub fn append_batch_text<'a>(
        &mut self,
        batch: impl Into<DataText<'a>>,
        now: i64,
    ) -> Result<Vec<Arc<Event>>> {
        let batch = batch.into();
        let items: Vec<Item<'_>> = if let Some(text) = batch.canonical_text() {
            canon::elements(text)
                .ok_or_else(not_an_array)?
                .map(Item::Text)
                .collect()
        } else {
            parse_input(batch.as_str(), "batch")?
                .into_array()
                .map_err(|_| not_an_array())?
                .into_iter()
                .map(Item::Value)
                .collect()
        };
        self.append_items(items, now)
    }

    fn append_items(&mut self, items: Vec<Item<'_>>, now: i64) -> Result<Vec<Arc<Event>>> {
        let mark = self.log.len();
        let saved = self.surface.clone();
        let saved_folds = self.folds.clone();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            match self.batch_item(item, now) {
                Ok(e) => out.push(e),
                Err(err) => {
                    self.log.truncate(mark);
                    self.surface = saved;
                    self.folds = saved_folds;
                    self.forget_admitted(mark);
                    return Err(err.at_index(i));
                }
            }
        }
        Ok(out)
    }

    fn batch_item(&mut self, item: Item<'_>, now: i64) -> Result<Arc<Event>> {
        let item = match item {
            Item::Text(text) => match canonical_item(text) {
                Some((ty, data, intent)) => {
                    let intent = intent.map_or(IntentArg::None, IntentArg::Text);
                    let (event, plan) = self.prepare(ty, Data::Canonical(data), intent, now)?;
                    return Ok(self.commit(event, &plan));
                }
                // Canonical text always parses.
                None => json::parse(text).map_err(|e| {
                    Error::invalid_json(Rule::JsonParse, format!("batch is not valid JSON: {e}"))
                })?,
            },
            Item::Value(v) => v,
            Item::Typed(e) => return self.append(&e.ty, e.data, &e.intent, now),
        };
        let Ok(mut o) = item.into_object() else {
            return Err(Error::invalid_argument(
                Rule::ArgBatchItem,
                "batch item must be an object",
            ));
        };
        let ty = o
            .remove("type")
            .and_then(|t| t.as_str().map(str::to_string));
        let Some(ty) = ty else {
            return Err(Error::invalid_argument(
                Rule::ArgBatchItem,
                "batch item needs a \"type\" string",
            ));
        };
        let Some(data) = o.remove("data") else {
            return Err(Error::invalid_argument(
                Rule::ArgBatchItem,
                "batch item needs \"data\"",
            ));
        };
        let intent = o.remove("intent");
        self.append_value(&ty, data, intent, now)
    }
}

/// `(type, data, intent)` of a canonical item: an object whose `type` is a
/// string without escapes and that has `data`. `None` leaves the item to
/// the value path (which reports what is wrong with it).
fn canonical_item(item: &str) -> Option<(&str, &str, Option<&str>)> {
    let (mut ty, mut data, mut intent) = (None, None, None);
    for (key, value) in canon::members(item)? {
        match key {
            "type" => ty = Some(value),
            "data" => data = Some(value),
            "intent" => intent = Some(value),
            _ => {}
        }
    }
    let ty = ty?.strip_prefix('"')?.strip_suffix('"')?;
    if ty.contains('\\') {
        return None;
    }
    Some((ty, data?, intent))
}
