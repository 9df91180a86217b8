//! Message projection (docs/events.md §9.1) and the derive cache (§9.2).

use super::chunked::Chunked;
use super::event::{Event, ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE};
use super::surface::{self, Markers, Surface};
use crate::error::Result;
use crate::json::{canon, JsString, Value};

/// `deriveEventMessage`: the message one surface event contributes, if any.
pub fn event_message<'a>(ty: &JsString, data: &'a Value) -> Option<&'a Value> {
    let message = if ty == USER_MESSAGE {
        data
    } else if ty == ASSISTANT_MESSAGE {
        let message = data.as_object()?.get("message")?;
        let empty = message
            .as_object()
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty);
        if empty {
            return None;
        }
        message
    } else if ty == TOOL_RESULT {
        data.as_object()?.get("message")?
    } else {
        return None;
    };
    (!message.is_null()).then_some(message)
}

/// [`event_message`] on canonical JSON text: the text of the message the
/// event with type `ty` and data text `data` contributes, if any.
pub fn event_message_text<'a>(ty: &JsString, data: &'a str) -> Option<&'a str> {
    let message = if ty == USER_MESSAGE {
        data
    } else if ty == ASSISTANT_MESSAGE {
        let message = canon::member(data, "message")?;
        if canon::member(message, "content") == Some("[]") {
            return None;
        }
        message
    } else if ty == TOOL_RESULT {
        canon::member(data, "message")?
    } else {
        return None;
    };
    (message != "null").then_some(message)
}

/// One derived message: a byte range of the canonical text of the event
/// `seq` (a position, not a copy; the session's log holds the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// The event the message comes from.
    pub seq: u64,
    start: u32,
    end: u32,
}

impl Message {
    /// The message projected from `e`, if it has one.
    pub fn of(e: &Event) -> Option<Message> {
        let m = event_message_text(&e.ty, e.data_text())?;
        let start = m.as_ptr() as usize - e.text().as_ptr() as usize;
        Some(Message {
            seq: e.seq,
            start: start as u32,
            end: (start + m.len()) as u32,
        })
    }

    /// The message's text inside `text`, the canonical text of the event
    /// it was projected from.
    pub fn text_in<'a>(&self, text: &'a str) -> &'a str {
        &text[self.start as usize..self.end as usize]
    }

    /// The length of the message's JSON text in bytes.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// True for an empty text (never the case for a projected message).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// [`event_message`] of an event given as a JSON object (any shape: a
/// value without a string `type` or without `data` projects to nothing).
pub fn value_message(event: &Value) -> Option<&Value> {
    let c = surface::candidate_of(event);
    match c.data {
        surface::CandidateData::Value(data) => event_message(c.ty?, data),
        _ => None,
    }
}

/// The derived messages of a complete log given as JSON (docs/events.md §9.3):
/// its pure surface fold, projected. Fails like the fold.
pub fn derive_log(log: &[Value]) -> Result<Vec<&Value>> {
    let fold = surface::fold(log, Markers::Required)?;
    Ok(fold
        .surface
        .nodes()
        .iter()
        .filter_map(|&seq| value_message(&log[seq as usize]))
        .collect())
}

/// The projected messages of the surface, kept incrementally: while the
/// replace generation is unchanged the surface only grows at its tail, so
/// only new nodes are projected; a replace rebuilds from scratch. The
/// caller projects ([`DeriveCache::pending`], then [`DeriveCache::extend`])
/// because only it knows where evicted events are read from.
#[derive(Debug, Default, Clone)]
pub struct DeriveCache {
    messages: Chunked<Message>,
    nodes_projected: usize,
    generation: u64,
}

impl DeriveCache {
    /// The position in `surface`'s nodes from which projection is due
    /// (forgetting everything first when a replace happened since).
    pub fn pending(&mut self, surface: &Surface) -> usize {
        if surface.generation() != self.generation || surface.nodes().len() < self.nodes_projected {
            self.messages.clear();
            self.nodes_projected = 0;
            self.generation = surface.generation();
        }
        self.nodes_projected
    }

    /// Record the messages projected from every pending node of `surface`.
    pub fn extend(&mut self, surface: &Surface, messages: impl IntoIterator<Item = Message>) {
        self.messages.extend(messages);
        self.nodes_projected = surface.nodes().len();
    }

    /// The cached messages.
    pub fn messages(&self) -> &Chunked<Message> {
        &self.messages
    }
}
