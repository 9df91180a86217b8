//! The surface (docs/events.md §6): admission of one candidate (`plan`), applying a
//! plan, and the pure full fold with its replacement records.

use std::collections::HashSet;

use std::borrow::Cow;

use super::chunked::Chunked;
use super::event::{is_surface_type, Event, ASSISTANT_MESSAGE, TOOL_RESULT};
use crate::error::{Error, Result};
use crate::json::{JsString, Object, Value};
use crate::rule::Rule;

/// What admission needs to know about one candidate event.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The type, or `None` when the (pure-fold) input had no string type.
    pub ty: Option<&'a JsString>,
    /// The seq, or `None` when it is not a non-negative safe integer.
    pub seq: Option<u64>,
    /// `data` (absent only in malformed pure-fold input).
    pub data: CandidateData<'a>,
    /// `surfaceOp` when the key is present.
    pub op: Option<&'a Value>,
    /// `sourceEventSeqs` when the key is present.
    pub sources: Option<&'a Value>,
}

/// Where a candidate's `data` comes from: only the tool/result rewrite
/// rule looks at it, so a committed event's tree is parsed only then.
#[derive(Debug, Clone, Copy)]
pub enum CandidateData<'a> {
    /// No `data` (malformed pure-fold input).
    Absent,
    /// A value tree.
    Value(&'a Value),
    /// The data of an event (its canonical text).
    Event(&'a Event),
}

impl CandidateData<'_> {
    /// The data as a tree (parsed now for an event without a cached one).
    pub fn tree(&self) -> Option<Cow<'_, Value>> {
        match *self {
            CandidateData::Absent => None,
            CandidateData::Value(v) => Some(Cow::Borrowed(v)),
            CandidateData::Event(e) => Some(Cow::Owned(e.parse_data())),
        }
    }
}

/// Read access to the events already in a log, for the tool/result rewrite rule.
pub trait EventLookup {
    /// `(type, data)` of the event with this seq, if it is in the log (or window).
    fn type_and_data(&self, seq: u64) -> Option<(&JsString, CandidateData<'_>)>;
}

/// The outcome of admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// A log-only event: the surface does not change.
    Noop,
    /// Push the event's seq at the end of the surface.
    Append,
    /// Replace `nodes[start_idx..=end_idx]` by the event's seq.
    Replace {
        /// Declared start seq.
        start: u64,
        /// Declared end seq.
        end: u64,
        /// Position of `start` in the nodes.
        start_idx: usize,
        /// Position of `end` in the nodes.
        end_idx: usize,
    },
}

/// The live surface: ordered node seqs and the replace generation. The
/// nodes are chunked, so a fork shares them with its parent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Surface {
    nodes: Chunked<u64>,
    generation: u64,
}

/// A replacement record of the pure fold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// The replacing event.
    pub seq: u64,
    /// Declared start.
    pub start: u64,
    /// Declared end.
    pub end: u64,
    /// The nodes actually removed, in surface order.
    pub shadowed: Vec<u64>,
}

/// How strictly surface markers are required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Markers {
    /// The reference rule: a message event without `surfaceOp` is refused.
    #[default]
    Required,
    /// Opt-in legacy mode: a message event without `surfaceOp` counts as an append.
    LegacyAppend,
}

impl Surface {
    /// An empty surface.
    pub fn new() -> Surface {
        Surface::default()
    }

    /// The node seqs in model-visible order.
    pub fn nodes(&self) -> &Chunked<u64> {
        &self.nodes
    }

    /// The number of accepted replacements.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Admission of `c` as the event with seq `expected` (docs/events.md §6.1).
    /// Nothing is changed. A refusal names `expected` as its seq.
    pub fn plan(
        &self,
        c: &Candidate<'_>,
        expected: u64,
        markers: Markers,
        log: &dyn EventLookup,
    ) -> Result<Plan> {
        let planned = || -> Result<Plan> {
            if c.seq != Some(expected) {
                return Err(Error::rejected(
                    Rule::SeqGap,
                    format!(
                        "session event seq {} is not contiguous; expected {expected}",
                        c.seq
                            .map_or_else(|| "(invalid)".to_string(), |s| s.to_string())
                    ),
                ));
            }
            let seq = expected;
            // Only an error message names the type.
            let type_name = || {
                c.ty.map_or_else(|| "(none)".to_string(), |t| t.to_string_lossy())
            };
            let eligible = c.ty.is_some_and(is_surface_type);
            if !eligible {
                if c.op.is_some() {
                    return Err(Error::rejected(
                        Rule::SurfaceOpOnNonSurface,
                        format!(
                            "event \"{}\" is not surface-eligible and may not carry surfaceOp",
                            type_name()
                        ),
                    ));
                }
                if c.sources.is_some() {
                    return Err(Error::rejected(
                        Rule::SurfaceSourcesOnNonSurface,
                        format!(
                            "event \"{}\" is not surface-eligible and may not carry sourceEventSeqs",
                            type_name()
                        ),
                    ));
                }
                return Ok(Plan::Noop);
            }
            let op = match c.op {
                None if markers == Markers::LegacyAppend => None,
                None => {
                    return Err(Error::rejected(
                        Rule::SurfaceOpMissing,
                        format!(
                            "event \"{}\" is surface-eligible and needs a surfaceOp",
                            type_name()
                        ),
                    ))
                }
                Some(Value::String(s)) if s == "append" => None,
                Some(Value::Object(o)) => Some(replace_shape(o).ok_or_else(|| {
                    Error::rejected(
                        Rule::SurfaceReplaceShape,
                        format!("event \"{}\" has an invalid replace surfaceOp", type_name()),
                    )
                })?),
                Some(_) => {
                    return Err(Error::rejected(
                        Rule::SurfaceOpInvalid,
                        format!("event \"{}\" has an invalid surfaceOp", type_name()),
                    ))
                }
            };
            let Some((start, end)) = op else {
                check_provenance(c, seq, &[])?;
                return Ok(Plan::Append);
            };
            let start_idx = self
                .position(start)
                .ok_or_else(|| endpoint_missing("start", start))?;
            let end_idx = self
                .position(end)
                .ok_or_else(|| endpoint_missing("end", end))?;
            if start_idx > end_idx {
                return Err(Error::rejected(
                    Rule::SurfaceReplaceInverted,
                    format!(
                        "surface replace: start {start} (index {start_idx}) comes after end {end} (index {end_idx})"
                    ),
                ));
            }
            let shadowed: Vec<u64> = self.nodes.range(start_idx..=end_idx).copied().collect();
            check_provenance(c, seq, &shadowed)?;
            if c.ty.is_some_and(|t| t == TOOL_RESULT) {
                check_tool_result_rewrite(c, &shadowed, log)?;
            }
            Ok(Plan::Replace {
                start,
                end,
                start_idx,
                end_idx,
            })
        };
        planned().map_err(|e| match e.seq {
            Some(_) => e,
            None => e.at_seq(expected),
        })
    }

    /// Apply an accepted plan for the event `seq`.
    pub fn apply(&mut self, seq: u64, plan: &Plan) {
        match *plan {
            Plan::Noop => {}
            Plan::Append => self.nodes.push(seq),
            Plan::Replace {
                start_idx, end_idx, ..
            } => {
                let tail: Vec<u64> = self.nodes.iter_from(end_idx + 1).copied().collect();
                self.nodes.truncate(start_idx);
                self.nodes.push(seq);
                self.nodes.extend(tail);
                self.generation += 1;
            }
        }
    }

    /// Apply and return the replacement record (for the pure fold).
    pub fn apply_recording(&mut self, seq: u64, plan: &Plan) -> Option<Replacement> {
        let record = match *plan {
            Plan::Replace {
                start,
                end,
                start_idx,
                end_idx,
            } => Some(Replacement {
                seq,
                start,
                end,
                shadowed: self.nodes.range(start_idx..=end_idx).copied().collect(),
            }),
            _ => None,
        };
        self.apply(seq, plan);
        record
    }

    fn position(&self, seq: u64) -> Option<usize> {
        // Compactions usually rewrite the older part while the tail grows,
        // and every node is unique, so a reverse scan finds recent nodes fast.
        self.nodes.iter().rposition(|&n| n == seq)
    }
}

fn endpoint_missing(which: &str, seq: u64) -> Error {
    Error::rejected(
        Rule::SurfaceReplaceEndpointMissing,
        format!("surface replace: {which} seq {seq} is not on the surface"),
    )
}

/// `Some((start, end))` when `o` is exactly `{op:"replace", start, end}` with
/// non-negative safe integer endpoints.
fn replace_shape(o: &Object) -> Option<(u64, u64)> {
    if o.len() != 3 || o.get("op")?.as_str()? != "replace" {
        return None;
    }
    Some((o.get("start")?.as_safe_u64()?, o.get("end")?.as_safe_u64()?))
}

/// docs/events.md §6.2.
fn check_provenance(c: &Candidate<'_>, seq: u64, shadowed: &[u64]) -> Result<()> {
    // Only an error message names the type.
    let type_name = || c.ty.map_or_else(String::new, |t| t.to_string_lossy());
    let mut cited: Vec<u64> = Vec::new();
    if let Some(raw) = c.sources {
        let arr = raw.as_array().ok_or_else(|| {
            Error::rejected(
                Rule::SurfaceSourcesNotArray,
                format!("sourceEventSeqs on event at seq {seq} must be an array"),
            )
        })?;
        if arr.is_empty() && c.ty.is_none_or(|t| t != ASSISTANT_MESSAGE) {
            return Err(Error::rejected(
                Rule::SurfaceSourcesEmpty,
                format!("sourceEventSeqs on event \"{}\" at seq {seq} may be empty only on assistant/message", type_name()),
            ));
        }
        cited.reserve(arr.len());
        for v in arr {
            match v.as_safe_u64() {
                Some(s) => cited.push(s),
                None => {
                    return Err(Error::rejected(
                        Rule::SurfaceSourceNotSeq,
                        format!(
                            "event \"{}\" sourceEventSeqs must hold non-negative safe integers",
                            type_name()
                        ),
                    ))
                }
            }
        }
        let set: HashSet<u64> = cited.iter().copied().collect();
        if set.len() < cited.len() {
            return Err(Error::rejected(
                Rule::SurfaceSourceDuplicate,
                format!("sourceEventSeqs on event at seq {seq} contains duplicates"),
            ));
        }
        if let Some(bad) = cited.iter().find(|&&s| s >= seq) {
            return Err(Error::rejected(
                Rule::SurfaceSourceNotEarlier,
                format!("sourceEventSeqs must cite earlier events: {bad} >= current seq {seq}"),
            ));
        }
        if !shadowed.is_empty() {
            let missing: Vec<String> = shadowed
                .iter()
                .filter(|s| !set.contains(s))
                .map(u64::to_string)
                .collect();
            return uncovered(seq, &missing);
        }
        return Ok(());
    }
    let missing: Vec<String> = shadowed.iter().map(u64::to_string).collect();
    uncovered(seq, &missing)
}

fn uncovered(seq: u64, missing: &[String]) -> Result<()> {
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::rejected(
        Rule::SurfaceReplaceUncovered,
        format!(
            "surface replace at seq {seq}: sourceEventSeqs must include every shadowed node; missing {}",
            missing.join(", ")
        ),
    ))
}

/// docs/events.md §7.
fn check_tool_result_rewrite(
    c: &Candidate<'_>,
    shadowed: &[u64],
    log: &dyn EventLookup,
) -> Result<()> {
    if shadowed.len() != 1 {
        return Err(Error::rejected(
            Rule::SurfaceToolResultRewriteArity,
            format!(
                "a tool/result replacement must rewrite exactly one current node, not {}",
                shadowed.len()
            ),
        ));
    }
    let target = shadowed[0];
    let (ty, target_data) = log
        .type_and_data(target)
        .ok_or_else(|| rewrite_target(target))?;
    if ty != TOOL_RESULT {
        return Err(rewrite_target(target));
    }
    let fail = || {
        Error::rejected(
            Rule::SurfaceToolResultRewrite,
            format!(
                "a tool/result replacement of seq {target} may change only the tool-result content"
            ),
        )
    };
    let (mine, theirs) = (c.data.tree(), target_data.tree());
    let mine = RewriteView::of(mine.as_deref()).ok_or_else(fail)?;
    let theirs = RewriteView::of(theirs.as_deref()).ok_or_else(fail)?;
    if mine == theirs {
        Ok(())
    } else {
        Err(fail())
    }
}

fn rewrite_target(seq: u64) -> Error {
    Error::rejected(
        Rule::SurfaceToolResultRewriteTarget,
        format!(
            "a tool/result replacement must target a current tool/result; seq {seq} is not one"
        ),
    )
}

/// The comparison copy of docs/events.md §7, held by reference: `data` without
/// `message`, `message` without `content`, and the first content block with
/// its inner `content` blanked. `None` where the reference hits a TypeError.
struct RewriteView<'a> {
    data: &'a Object,
    message: &'a Object,
    block: Object,
}

impl<'a> RewriteView<'a> {
    fn of(data: Option<&'a Value>) -> Option<RewriteView<'a>> {
        // `data.message.content[0]` with JavaScript property access: data and
        // message must be objects (other values have no such property), and
        // content must be neither null nor undefined.
        let data = data?.as_object()?;
        let message = data.get("message")?.as_object()?;
        let content = message.get("content")?;
        let first: Option<Value> = match content {
            Value::Null => return None,
            Value::Array(a) => a.first().cloned_shallow(),
            Value::Object(o) => o.get("0").cloned_shallow(),
            Value::String(s) => s.first_code_unit().map(Value::String),
            Value::Number(_) | Value::Bool(_) => None,
        };
        // `{...first, content: null}`: spreading copies own enumerable keys.
        let mut block = Object::new();
        match &first {
            Some(Value::Object(o)) => {
                for (k, v) in o.iter() {
                    if k != "content" {
                        block.insert(k.clone(), v.clone());
                    } else {
                        block.insert(k.clone(), Value::Null);
                    }
                }
            }
            Some(Value::Array(a)) => {
                for (i, v) in a.iter().enumerate() {
                    block.insert_str(&i.to_string(), v.clone());
                }
            }
            Some(Value::String(s)) => {
                for (i, unit) in s.code_units().enumerate() {
                    block.insert_str(&i.to_string(), Value::String(unit));
                }
            }
            _ => {}
        }
        block.insert_str("content", Value::Null);
        Some(RewriteView {
            data,
            message,
            block,
        })
    }
}

impl PartialEq for RewriteView<'_> {
    fn eq(&self, other: &Self) -> bool {
        eq_except(self.data, other.data, "message")
            && eq_except(self.message, other.message, "content")
            && self.block == other.block
    }
}

/// Same key set and equal values, ignoring `skip` (which both must have).
fn eq_except(a: &Object, b: &Object, skip: &str) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| k == skip || b.get_js(k).is_some_and(|w| w == v))
}

/// Shallow-cloning helper: the block is small apart from its inner
/// `content`, which the view drops, so clone everything but that.
trait ClonedShallow {
    fn cloned_shallow(self) -> Option<Value>;
}

impl ClonedShallow for Option<&Value> {
    fn cloned_shallow(self) -> Option<Value> {
        match self? {
            Value::Object(o) => {
                let mut copy = Object::new();
                for (k, v) in o.iter() {
                    let v = if k == "content" {
                        Value::Null
                    } else {
                        v.clone()
                    };
                    copy.insert(k.clone(), v);
                }
                Some(Value::Object(copy))
            }
            v => Some(v.clone()),
        }
    }
}

/// The result of the pure full fold.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    /// The final surface.
    pub surface: Surface,
    /// Every accepted replacement, in event order.
    pub replacements: Vec<Replacement>,
}

/// An explicit log given as JSON values (the pure fold's input).
pub struct ValueLog<'a>(pub &'a [Value]);

impl EventLookup for ValueLog<'_> {
    fn type_and_data(&self, seq: u64) -> Option<(&JsString, CandidateData<'_>)> {
        let obj = self.0.get(usize::try_from(seq).ok()?)?.as_object()?;
        Some((
            obj.get("type")?.as_js_str()?,
            CandidateData::Value(obj.get("data")?),
        ))
    }
}

/// The candidate view of one JSON event object.
pub fn candidate_of(v: &Value) -> Candidate<'_> {
    let obj = v.as_object();
    let get = |k: &str| obj.and_then(|o| o.get(k));
    Candidate {
        ty: get("type").and_then(Value::as_js_str),
        seq: get("seq").and_then(Value::as_safe_u64),
        data: get("data").map_or(CandidateData::Absent, CandidateData::Value),
        op: get("surfaceOp"),
        sources: get("sourceEventSeqs"),
    }
}

/// `foldSurface(events)` (docs/events.md §6.4): replay a complete log from seq 0.
/// The error carries the index of the failing event.
pub fn fold(events: &[Value], markers: Markers) -> Result<Fold> {
    let mut f = Fold::default();
    let log = ValueLog(events);
    for (i, v) in events.iter().enumerate() {
        let c = candidate_of(v);
        let plan = f
            .surface
            .plan(&c, i as u64, markers, &log)
            .map_err(|e| e.at_index(i))?;
        if let Some(r) = f.surface.apply_recording(i as u64, &plan) {
            f.replacements.push(r);
        }
    }
    Ok(f)
}
