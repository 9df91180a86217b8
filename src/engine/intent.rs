//! The typed input of an append: where the event goes on the surface
//! ([`Intent`], [`SurfaceOp`]) and one item of a batch ([`NewEvent`]).
//!
//! An intent is turned into the same `{surfaceOp?, sourceEventSeqs?,
//! ignorable?}` object the JSON text of the C ABI gives, and checked by the
//! same code, so the typed door and the text door admit exactly the same
//! events and report the same rules.

use crate::json::Value;

/// Where an appended message event goes on the surface (docs/events.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    /// `"append"`: after the last surface node.
    Append,
    /// `{"op":"replace","start":S,"end":E}`: the surface nodes from seq
    /// `start` to seq `end` (inclusive) give way to this event.
    Replace {
        /// Seq of the first node replaced.
        start: u64,
        /// Seq of the last node replaced.
        end: u64,
    },
}

impl SurfaceOp {
    /// The `surfaceOp` value.
    pub fn to_value(self) -> Value {
        match self {
            SurfaceOp::Append => Value::str("append"),
            SurfaceOp::Replace { start, end } => Value::obj([
                ("op", Value::str("replace")),
                ("start", Value::num(start as f64)),
                ("end", Value::num(end as f64)),
            ]),
        }
    }
}

/// The surface intent of one append. The default is no intent, what a
/// log-only event carries; message events need a [`SurfaceOp`].
///
/// ```
/// use dsh_session::engine::{Intent, SurfaceOp};
/// let i = Intent::append().with_sources([3, 4]);
/// assert_eq!(i.surface_op, Some(SurfaceOp::Append));
/// assert_eq!(i.source_event_seqs, Some(vec![3, 4]));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intent {
    /// `surfaceOp`.
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`: the events this one was made from.
    pub source_event_seqs: Option<Vec<u64>>,
    /// `ignorable: true`: a host type a reader that does not know it may
    /// skip (strict admission; only on types outside the core vocabulary).
    pub ignorable: bool,
}

impl Intent {
    /// No intent (a log-only event).
    pub fn none() -> Intent {
        Intent::default()
    }

    /// `surfaceOp: "append"`.
    pub fn append() -> Intent {
        Intent {
            surface_op: Some(SurfaceOp::Append),
            ..Intent::default()
        }
    }

    /// `surfaceOp: {"op":"replace","start":start,"end":end}`.
    pub fn replace(start: u64, end: u64) -> Intent {
        Intent {
            surface_op: Some(SurfaceOp::Replace { start, end }),
            ..Intent::default()
        }
    }

    /// This intent with `sourceEventSeqs` set.
    pub fn with_sources(mut self, seqs: impl IntoIterator<Item = u64>) -> Intent {
        self.source_event_seqs = Some(seqs.into_iter().collect());
        self
    }

    /// This intent marked `ignorable`.
    pub fn ignorable(mut self) -> Intent {
        self.ignorable = true;
        self
    }

    /// The intent object as the JSON text form gives it (`None` for no
    /// intent).
    pub fn to_value(&self) -> Option<Value> {
        let mut members = Vec::new();
        if let Some(op) = self.surface_op {
            members.push(("surfaceOp", op.to_value()));
        }
        if let Some(seqs) = &self.source_event_seqs {
            let seqs = seqs.iter().map(|&s| Value::num(s as f64)).collect();
            members.push(("sourceEventSeqs", Value::Array(seqs)));
        }
        if self.ignorable {
            members.push(("ignorable", Value::Bool(true)));
        }
        (!members.is_empty()).then(|| Value::obj(members))
    }
}

/// One event of an all-or-nothing batch append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The event type.
    pub ty: String,
    /// The event's `data`.
    pub data: Value,
    /// Its surface intent.
    pub intent: Intent,
}

impl NewEvent {
    /// An event of type `ty` with `data` and `intent`.
    pub fn new(ty: impl Into<String>, data: Value, intent: Intent) -> NewEvent {
        NewEvent {
            ty: ty.into(),
            data,
            intent,
        }
    }
}
