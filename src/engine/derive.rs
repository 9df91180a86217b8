//! Message projection (derive.md §2) and the derive cache (§3).

use std::sync::Arc;

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
/// it comes from (shared, not copied).
#[derive(Debug, Clone)]
pub struct Message {
    event: Arc<Event>,
    start: u32,
    end: u32,
}

impl Message {
    /// The message as JSON text.
    pub fn as_str(&self) -> &str {
        &self.event.text()[self.start as usize..self.end as usize]
    }
}

impl std::ops::Deref for Message {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
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

/// The derived messages of a complete log given as JSON (derive.md §3.1):
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
/// only new nodes are projected; a replace rebuilds from scratch.
#[derive(Debug, Default, Clone)]
pub struct DeriveCache {
    messages: Chunked<Message>,
    nodes_projected: usize,
    generation: u64,
}

impl DeriveCache {
    /// Bring the cache up to date with `surface`; `event` looks up a node.
    pub fn update<'a>(&mut self, surface: &Surface, event: impl Fn(u64) -> &'a Arc<Event>) {
        if surface.generation() != self.generation || surface.nodes().len() < self.nodes_projected {
            self.messages.clear();
            self.nodes_projected = 0;
            self.generation = surface.generation();
        }
        for &seq in surface.nodes().iter_from(self.nodes_projected) {
            let e = event(seq);
            if let Some(m) = event_message_text(&e.ty, e.data_text()) {
                let base = e.text().as_ptr() as usize;
                let start = m.as_ptr() as usize - base;
                self.messages.push(Message {
                    event: e.clone(),
                    start: start as u32,
                    end: (start + m.len()) as u32,
                });
            }
        }
        self.nodes_projected = surface.nodes().len();
    }

    /// The cached messages, each as JSON text.
    pub fn messages(&self) -> &Chunked<Message> {
        &self.messages
    }

    /// The cached messages as a JSON array.
    pub fn to_json(&self) -> String {
        let len: usize = self.messages.iter().map(|m| m.len() + 1).sum();
        let mut out = String::with_capacity(len + 2);
        out.push('[');
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(m);
        }
        out.push(']');
        out
    }
}
