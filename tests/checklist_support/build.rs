//! JSON builders for messages, events and logs.

use super::{json, J, T0};

/// A human `user/message` (the data itself).
pub fn user(id: &str, text: &str) -> J {
    json!({"id": id, "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}})
}

/// An injected-context `user/message` (plugin source).
pub fn context(id: &str, text: &str) -> J {
    json!({"id": id, "role": "user", "content": [{"type": "text", "text": text}],
           "source": {"kind": "plugin", "plugin": "memory", "form": "notice", "summary": "recall"}})
}

/// `assistant/message` data with explicit content blocks.
pub fn asst_blocks(turn: u64, step: u64, id: &str, content: J) -> J {
    json!({"turn": turn, "step": step,
           "message": {"id": id, "role": "assistant", "content": content,
                       "source": {"kind": "model", "provider": "deepseek", "model": "chat"}}})
}

/// `assistant/message` data with one text block.
pub fn asst(turn: u64, step: u64, id: &str, text: &str) -> J {
    asst_blocks(turn, step, id, json!([{"type": "text", "text": text}]))
}

/// A tool-call content block.
pub fn call_block(id: &str) -> J {
    json!({"type": "tool-call", "id": id, "name": "read", "arguments": "{}"})
}

/// `tool/call` data.
pub fn tool_call(turn: u64, step: u64, call_id: &str) -> J {
    json!({"turn": turn, "step": step, "callId": call_id, "name": "read", "arguments": "{}"})
}

/// `tool/result` data.
pub fn tool_result(turn: u64, step: u64, call_id: &str, text: &str) -> J {
    json!({"turn": turn, "step": step,
           "message": {"id": format!("result-{call_id}"), "role": "user",
                       "content": [{"type": "tool-result", "toolCallId": call_id,
                                    "content": [{"type": "text", "text": text}]}],
                       "source": {"kind": "tool", "callId": call_id}}})
}

/// `{"surfaceOp":"append"}`.
pub fn op_append() -> J {
    json!({"surfaceOp": "append"})
}

/// `{"surfaceOp":"append","sourceEventSeqs":[...]}`.
pub fn op_append_from(sources: &[u64]) -> J {
    json!({"surfaceOp": "append", "sourceEventSeqs": sources})
}

/// A replace intent citing `sources`.
pub fn op_replace(start: u64, end: u64, sources: &[u64]) -> J {
    json!({"surfaceOp": {"op": "replace", "start": start, "end": end}, "sourceEventSeqs": sources})
}

/// A complete event for seeds and pure folds; `intent` keys are merged in.
pub fn ev(seq: u64, ty: &str, data: J, intent: Option<J>) -> J {
    let mut e = json!({"type": ty, "seq": seq, "time": T0 + seq as i64, "data": data});
    if let Some(J::Object(i)) = intent {
        for (k, v) in i {
            e[k] = v;
        }
    }
    e
}

/// Builds a log of complete events.
#[derive(Default, Clone)]
pub struct Log {
    pub events: Vec<J>,
}

impl Log {
    pub fn new() -> Log {
        Log::default()
    }

    /// Push a log-only event; return its seq.
    pub fn push(&mut self, ty: &str, data: J) -> u64 {
        let seq = self.events.len() as u64;
        self.events.push(ev(seq, ty, data, None));
        seq
    }

    /// Push an event with surface intent; return its seq.
    pub fn surf(&mut self, ty: &str, data: J, intent: J) -> u64 {
        let seq = self.events.len() as u64;
        self.events.push(ev(seq, ty, data, Some(intent)));
        seq
    }

    /// The log as a JSON array.
    pub fn json(&self) -> J {
        J::Array(self.events.clone())
    }

    /// The log plus one more event (not kept).
    pub fn with(&self, ty: &str, data: J, intent: Option<J>) -> J {
        let mut events = self.events.clone();
        events.push(ev(events.len() as u64, ty, data, intent));
        J::Array(events)
    }
}

/// A complete closed turn: turn/start, user, step, assistant (with a tool
/// call), tool/call, tool/result, step/end, turn/end. Returns the seqs of the
/// user message, assistant message and tool result.
pub fn closed_turn(log: &mut Log, turn: u64) -> (u64, u64, u64) {
    let call_id = format!("c{turn}");
    log.push("turn/start", json!({"turn": turn}));
    let u = log.surf(
        "user/message",
        user(&format!("u{turn}"), "hello"),
        op_append(),
    );
    log.push("step/start", json!({"turn": turn, "step": 1}));
    let a = log.surf(
        "assistant/message",
        asst_blocks(turn, 1, &format!("a{turn}"), json!([call_block(&call_id)])),
        op_append_from(&[]),
    );
    let c = log.push("tool/call", tool_call(turn, 1, &call_id));
    let r = log.surf(
        "tool/result",
        tool_result(turn, 1, &call_id, "ok"),
        op_append_from(&[c]),
    );
    log.push("step/end", json!({"turn": turn, "step": 1}));
    log.push(
        "turn/end",
        json!({"turn": turn, "reason": {"kind": "completed"}}),
    );
    (u, a, r)
}
