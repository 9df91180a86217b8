//! What an append admits beyond the reference's own rules: the host's
//! declared event types, and strict admission, which refuses at append
//! every event a later load would refuse or rewrite, so that whatever an
//! append accepts, every later open accepts and reconstructs identically.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::event::{is_surface_type, Checked, ASSISTANT_MESSAGE, STEP_START, TURN_END, TURN_START};
use super::vocabulary::{is_known, is_reserved, is_retired};
use super::{seed, upgrade, Event};
use crate::error::{Error, Result};
use crate::rule::Rule;

/// How an append decides what to accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// The reference's checks plus what a later load checks (the default).
    #[default]
    Strict,
    /// The reference's permissive append, byte for byte.
    Reference,
}

impl Admission {
    /// The configuration spelling: `"strict"` or `"reference"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Admission::Strict => "strict",
            Admission::Reference => "reference",
        }
    }

    /// The admission a configuration spelling names.
    pub fn from_name(name: &str) -> Option<Admission> {
        match name {
            "strict" => Some(Admission::Strict),
            "reference" => Some(Admission::Reference),
            _ => None,
        }
    }
}

/// The event types a store understands: the reference's known vocabulary
/// plus the host's declared ones (log-only, never on the surface).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    declared: BTreeSet<Box<str>>,
}

/// The longest declared type name accepted.
pub const MAX_TYPE_NAME: usize = 128;

/// Whether `name` follows the grammar of the core types: two or more
/// segments separated by `/`, each of lowercase ASCII letters and digits
/// joined by single `-` (`myapp/note`, `tool-workflow/run-end`).
pub fn is_type_name(name: &str) -> bool {
    let segment = |s: &str| {
        !s.is_empty()
            && !s.starts_with('-')
            && !s.ends_with('-')
            && !s.contains("--")
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    name.len() <= MAX_TYPE_NAME && name.split('/').count() >= 2 && name.split('/').all(segment)
}

impl Vocabulary {
    /// The known vocabulary plus `declared`: each name must follow the core
    /// types' grammar (`config.event-type`) and must not be a known, surface
    /// or retired type (`config.event-type-reserved`).
    pub fn new<S: AsRef<str>>(declared: impl IntoIterator<Item = S>) -> Result<Vocabulary> {
        let mut v = Vocabulary::default();
        for name in declared {
            let name = name.as_ref();
            if !is_type_name(name) {
                return Err(Error::invalid_argument(
                    Rule::ConfigEventType,
                    format!(
                        "event type {name:?} is not a valid type name: two or more \
                         '/'-separated segments of lowercase letters, digits and single '-', \
                         at most {MAX_TYPE_NAME} bytes"
                    ),
                ));
            }
            if is_reserved(name) {
                return Err(Error::invalid_argument(
                    Rule::ConfigEventTypeReserved,
                    format!("event type {name:?} is a core or retired type and cannot be declared"),
                ));
            }
            v.declared.insert(name.into());
        }
        Ok(v)
    }

    /// Whether `ty` is known to the reference or declared by the host.
    pub fn knows(&self, ty: &str) -> bool {
        is_known(ty) || self.declared.contains(ty)
    }

    /// The declared types, sorted.
    pub fn declared(&self) -> impl Iterator<Item = &str> {
        self.declared.iter().map(|s| &**s)
    }

    /// Whether a load keeps `e` (its type is known or declared, or it is
    /// marked `ignorable`): the `load.unknown-type` rule.
    pub fn admits_type(&self, e: &Event) -> bool {
        e.ignorable || e.ty.as_str().is_some_and(|t| self.knows(t))
    }
}

/// The admission and vocabulary a session appends under.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// How appends are admitted.
    pub admission: Admission,
    /// The types the store understands.
    pub vocabulary: Arc<Vocabulary>,
}

impl Policy {
    /// The reference's admission with the known vocabulary alone.
    pub fn reference() -> Policy {
        Policy {
            admission: Admission::Reference,
            vocabulary: Arc::default(),
        }
    }

    /// Under strict admission, refuse (`DSH_E_REJECTED`) an event that the
    /// reference's append accepted but a later load would refuse or rewrite;
    /// `subject` names it in messages. Costs O(the event).
    pub fn check(&self, e: &Event, subject: &dyn Fn() -> String) -> Result<()> {
        if self.admission == Admission::Reference {
            return Ok(());
        }
        check_loadable(e, &self.vocabulary, subject)
    }
}

/// The load path's refusals and rewrites of one event, as append-time
/// refusals: retired vocabulary, an unknown type, a message event without
/// a surface marker or breaking the `msg.*` rules, a `request/header`
/// breaking the seed header rules, a turn event in a legacy shape.
pub fn check_loadable(e: &Event, vocab: &Vocabulary, subject: &dyn Fn() -> String) -> Result<()> {
    let ty = e.ty.as_str().unwrap_or("");
    if is_retired(ty) {
        return Err(Error::rejected(
            Rule::AdmitRetiredType,
            format!(
                "{} uses the retired event type \"{ty}\", which a later load refuses or rewrites",
                subject()
            ),
        ));
    }
    if !vocab.admits_type(e) {
        return Err(Error::rejected(
            Rule::AdmitUnknownType,
            format!(
                "{} has event type {:?}, which is neither known nor declared in the store's \
                 \"eventTypes\" and is not marked ignorable; a later load would refuse it",
                subject(),
                e.ty.to_string_lossy()
            ),
        ));
    }
    if is_surface_type(&e.ty) {
        if e.op_text().is_none() {
            return Err(Error::rejected(
                Rule::AdmitSurfaceOpMissing,
                format!(
                    "{} has no surfaceOp; a later load requires one on message events",
                    subject()
                ),
            ));
        }
        seed::check_event_message(e, subject)?;
        if e.ty == ASSISTANT_MESSAGE && !tool_calls_named(e) {
            return Err(Error::rejected(
                Rule::AdmitToolCallId,
                format!(
                    "{} has a tool-call block whose id is not a non-empty string; crash repair \
                     could not name its result, and a log it repaired would not open",
                    subject()
                ),
            ));
        }
    }
    seed::check_event_header(e, subject)?;
    if e.ty == STEP_START && !numbers_its(e, "step") {
        return Err(Error::rejected(
            Rule::AdmitStepShape,
            format!(
                "{} has no step number crash repair could close the step by (step/start: \
                 data whose step is a safe integer >= 1)",
                subject()
            ),
        ));
    }
    let turn = e.ty == TURN_START || e.ty == TURN_END;
    if turn && (!upgrade::is_current_turn(e) || !numbers_its(e, "turn")) {
        return Err(Error::rejected(
            Rule::AdmitTurnShape,
            format!(
                "{} has data a later load would rewrite or refuse, or that leaves its turn \
                 without a number to close it by (turn/start: {{turn}} with turn >= 1 and no \
                 \"trigger\"; turn/end: exactly {{turn, reason}} with turn >= 1 and a current \
                 reason)",
                subject()
            ),
        ));
    }
    // The shape checks a fork's seed admission runs passed: a fork of this
    // event does not run them again.
    e.mark_checked(Checked::SHAPE);
    Ok(())
}

/// Whether an event's data is an object whose member `key` (`turn`,
/// `step`) is a safe integer of at least 1: crash repair closes an open
/// turn or step by its number, and a turn it cannot close makes every
/// later fork at the end refuse.
fn numbers_its(e: &Event, key: &str) -> bool {
    // An event's text is canonical JSON: a plain key is spelled as it is,
    // and a safe integer is written as plain digits.
    let n = crate::json::canon::member(e.data_text(), key).and_then(super::event::plain_int);
    n.is_some_and(|n| n >= 1)
}

/// Whether every `tool-call` block of an assistant message's content has
/// an id that is a non-empty string: crash repair names the synthetic
/// result of a pending call by it, and a load refuses a result whose call
/// id is anything else.
fn tool_calls_named(e: &Event) -> bool {
    use crate::json::canon::{elements, is_nonempty_string, member};
    let content = member(e.data_text(), "message").and_then(|m| member(m, "content"));
    let Some(blocks) = content.and_then(elements) else {
        return true;
    };
    blocks
        .filter(|b| member(b, "type") == Some("\"tool-call\""))
        .all(|b| member(b, "id").is_some_and(is_nonempty_string))
}

/// An append intent's `ignorable: true` is for types readers may not know:
/// refused on a known or retired type (`append.ignorable-known`).
pub fn check_ignorable(ty: &str) -> Result<()> {
    if is_reserved(ty) {
        return Err(Error::rejected(
            Rule::AppendIgnorableKnown,
            format!(
                "\"ignorable\" marks an event type readers may not know; \"{ty}\" is a core \
                 or retired type"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_follow_the_core_grammar() {
        for ok in ["myapp/note", "a/b/c", "tool-workflow/run-end", "x1/y-2"] {
            assert!(is_type_name(ok), "{ok}");
        }
        let long = format!("a/{}", "b".repeat(MAX_TYPE_NAME));
        for bad in [
            "",
            "note",
            "MyApp/note",
            "a//b",
            "/a",
            "a/",
            "a/-b",
            "a/b-",
            "a/b--c",
            "a/b c",
            "a/b_c",
            "a/é",
            &long,
        ] {
            assert!(!is_type_name(bad), "{bad}");
        }
        for core in crate::engine::vocabulary::KNOWN_EVENT_TYPES {
            assert!(is_type_name(core), "{core}");
        }
    }

    #[test]
    fn declaring_a_core_or_retired_type_is_refused() {
        for name in ["user/message", "turn/start", "mode/set", "steering/message"] {
            let e = Vocabulary::new([name]).unwrap_err();
            assert_eq!(e.rule, Rule::ConfigEventTypeReserved, "{name}");
        }
        assert_eq!(
            Vocabulary::new(["Bad"]).unwrap_err().rule,
            Rule::ConfigEventType
        );
        let v = Vocabulary::new(["myapp/note"]).unwrap();
        assert!(v.knows("myapp/note") && v.knows("turn/start") && !v.knows("myapp/other"));
    }
}
