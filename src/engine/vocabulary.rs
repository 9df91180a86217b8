//! The known event vocabulary (events.md §6) and the `ignorable` rule.

/// `KNOWN_SESSION_EVENT_TYPES` of the reference build: exactly these 48.
pub const KNOWN_EVENT_TYPES: [&str; 48] = [
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

/// True when `ty` is in the default known vocabulary.
pub fn is_known(ty: &str) -> bool {
    KNOWN_EVENT_TYPES.binary_search(&ty).is_ok()
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
}
