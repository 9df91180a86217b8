//! The known event vocabulary (docs/events.md §12) and the `ignorable` rule.

use crate::json::JsString;

/// Defines [`KNOWN_EVENT_TYPES`] and [`known`] from one list.
macro_rules! vocabulary {
    ($($ty:literal),* $(,)?) => {
        /// `KNOWN_SESSION_EVENT_TYPES` of the reference build: exactly these 48.
        pub const KNOWN_EVENT_TYPES: [&str; 48] = [$($ty),*];

        /// The known type equal to `ty`, as the static text every event of
        /// that type shares (a `match`: a length switch, then one compare).
        fn known(ty: &str) -> Option<&'static str> {
            match ty {
                $($ty => Some($ty),)*
                _ => None,
            }
        }
    };
}

vocabulary![
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

/// Retired types (docs/events.md §12.2): refused (`request/header-delta`,
/// `mode/set`) or rewritten (`steering/message`) by a load.
pub const RETIRED_EVENT_TYPES: [&str; 3] = ["mode/set", "request/header-delta", "steering/message"];

/// True when `ty` is a retired type.
pub fn is_retired(ty: &str) -> bool {
    RETIRED_EVENT_TYPES.contains(&ty)
}

/// True when `ty` is a core or a retired type: one a host can neither
/// declare nor mark ignorable.
pub fn is_reserved(ty: &str) -> bool {
    is_known(ty) || is_retired(ty)
}

/// True when `ty` is in the default known vocabulary.
pub fn is_known(ty: &str) -> bool {
    known(ty).is_some()
}

/// An event's `type`: a known type shares one static text instead of an
/// allocation per event (most of a log's events have one).
pub fn event_type(ty: JsString) -> JsString {
    if ty.is_static() {
        return ty;
    }
    match ty.as_str().and_then(known) {
        Some(k) => JsString::from_static(k),
        None => ty,
    }
}

/// [`event_type`] of text.
pub fn event_type_str(ty: &str) -> JsString {
    known(ty).map_or_else(|| JsString::from_str(ty), JsString::from_static)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_types_are_sorted_and_unique_so_lookup_works() {
        assert!(KNOWN_EVENT_TYPES.windows(2).all(|w| w[0] < w[1]));
        assert!(is_known("tool/result"));
        assert!(!is_known("plugin/data"));
    }

    #[test]
    fn known_event_types_share_a_static_text_and_compare_as_bytes() {
        let shared = event_type(JsString::from_str("tool/result"));
        assert!(shared.is_static());
        assert_eq!(shared, JsString::from_str("tool/result"));
        assert!(event_type_str("turn/end").is_static());
        let own = event_type(JsString::from_str("plugin/x"));
        assert!(!own.is_static());
        assert_eq!(own, "plugin/x");
        assert!(!event_type_str("plugin/x").is_static());
        // Equal strings hash and order alike however they are held.
        use std::hash::BuildHasher;
        let a = JsString::from_static("user/message");
        let b = JsString::from_str("user/message");
        let state = std::collections::hash_map::RandomState::new();
        assert_eq!(state.hash_one(&a), state.hash_one(&b));
        assert_eq!(a.cmp(&b), std::cmp::Ordering::Equal);
        assert!(JsString::from_static("a") < JsString::from_str("b"));
    }
}
