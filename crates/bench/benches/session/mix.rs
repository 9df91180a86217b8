//! Deterministic event generator: the event mix every figure is measured
//! on (turns of steps with chunks, tool calls and results, compactions).

use std::ffi::{CStr, CString};
use std::fmt::Write as _;

use crate::abi::cstr;

/// splitmix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

/// One generated event: what a host passes to `dsh_session_append`.
pub struct Ev {
    pub ty: &'static CStr,
    pub data: CString,
    pub intent: Option<CString>,
}

const WORDS: &[&str] = &[
    "the",
    "session",
    "event",
    "append",
    "surface",
    "derive",
    "tool",
    "result",
    "call",
    "message",
    "assistant",
    "user",
    "turn",
    "step",
    "chunk",
    "value",
    "index",
    "file",
    "path",
    "config",
    "request",
    "header",
    "context",
    "model",
    "provider",
    "fork",
    "seed",
    "repair",
    "store",
    "flush",
    "write",
    "read",
    "open",
    "close",
    "error",
    "status",
    "buffer",
    "length",
    "offset",
    "window",
    "batch",
    "commit",
    "replace",
    "range",
    "node",
    "history",
    "compaction",
    "summary",
    "token",
    "usage",
    "stream",
    "delta",
    "block",
    "text",
    "json",
    "parse",
    "number",
    "string",
    "object",
    "array",
    "key",
    "order",
    "lossless",
    "test",
    "crate",
    "module",
    "function",
    "return",
    "struct",
    "impl",
    "match",
    "let",
    "mut",
    "self",
    "async",
    "await",
    "vector",
    "queue",
    "thread",
    "lock",
    "arc",
    "clone",
    "drop",
    "from",
    "into",
    "iter",
    "map",
    "filter",
    "collect",
    "unwrap",
    "expect",
    "option",
    "some",
    "none",
    "données",
    "résumé",
    "naïve",
    "→",
    "—",
    "✓",
    "日本語",
];

const CODE_LINES: &[&str] = &[
    "    let value = store.open(&config)?;",
    "    if status != DSH_OK {\n        return Err(Error::io(\"write failed\"));\n    }",
    "fn derive(&self) -> Vec<Message> {",
    "    // SAFETY: the pointer is valid for the call",
    "\tassert_eq!(events.len(), 42, \"length mismatch\");",
    "    match kind { \"user\" => 1, \"model\" => 2, _ => 0 }",
    "}",
    "#[derive(Debug, Clone, PartialEq)]",
    "    println!(\"{} events in {:?}\", n, elapsed);",
    "    let path = dir.join(\"session.jsonl.zst\");",
    "error[E0308]: mismatched types --> src/store/writer.rs:214:17",
    "test store::jsonl::tests::reopen_after_crash ... ok",
    "    Finished `release` profile [optimized + debuginfo] target(s) in 41.27s",
    "-rw-r--r-- 1 agent agent  1048576 Aug 10 12:00 session.db",
];

/// A pool of text to cut tool results and chunk texts from.
struct Pool {
    code: String,
    prose: String,
}

impl Pool {
    fn new(rng: &mut Rng) -> Pool {
        let mut code = String::with_capacity(1 << 20);
        while code.len() < 1 << 20 {
            if rng.range(0, 3) == 0 {
                code.push_str(CODE_LINES[rng.range(0, CODE_LINES.len() - 1)]);
            } else {
                let n = rng.range(3, 12);
                code.push_str(&" ".repeat(rng.range(0, 3) * 4));
                for i in 0..n {
                    if i > 0 {
                        code.push(' ');
                    }
                    code.push_str(WORDS[rng.range(0, WORDS.len() - 1)]);
                }
            }
            code.push('\n');
        }
        let mut prose = String::with_capacity(1 << 18);
        while prose.len() < 1 << 18 {
            let n = rng.range(6, 18);
            for i in 0..n {
                if i > 0 {
                    prose.push(' ');
                }
                prose.push_str(WORDS[rng.range(0, WORDS.len() - 1)]);
            }
            prose.push_str(if rng.range(0, 5) == 0 { ".\n\n" } else { ". " });
        }
        Pool { code, prose }
    }

    fn cut<'a>(text: &'a str, rng: &mut Rng, lo: usize, hi: usize) -> &'a str {
        let len = rng.range(lo, hi);
        let mut start = rng.range(0, text.len() - len - 8);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        let mut end = start + len;
        while !text.is_char_boundary(end) {
            end += 1;
        }
        &text[start..end]
    }
}

/// JSON string literal of `s` (JSON.stringify escaping).
fn js(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 16);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn seq_list(seqs: &[u64]) -> String {
    let mut s = String::from("[");
    for (i, q) in seqs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{q}");
    }
    s.push(']');
    s
}

const SYSTEM_PROMPT_REPEAT: usize = 6;

fn request_header_data(reason: &str) -> String {
    let system = "You are a careful coding agent working in a repository. Read files before \
        editing them, keep changes minimal, run the tests after every change and report what \
        you did. Never invent file contents. "
        .repeat(SYSTEM_PROMPT_REPEAT);
    let tool = |name: &str, desc: &str| {
        format!(
            r#"{{"name":"{name}","description":"{desc}","parameters":{{"type":"object","properties":{{"path":{{"type":"string","description":"A path relative to the workspace root."}},"offset":{{"type":"integer","minimum":0}},"limit":{{"type":"integer","minimum":1}}}},"required":["path"],"additionalProperties":false}}}}"#
        )
    };
    format!(
        r#"{{"header":{{"config":{{"provider":"deepseek","model":"deepseek-chat","reasoningEffort":"high","maxTokens":8192}},"system":{},"tools":[{},{},{},{}]}},"reason":"{reason}"}}"#,
        js(&system),
        tool(
            "read_file",
            "Read a file of the workspace and return its text."
        ),
        tool(
            "write_file",
            "Write a file of the workspace, replacing its contents."
        ),
        tool("grep", "Search the workspace for a regular expression."),
        tool(
            "run",
            "Run a shell command in the workspace and return its output."
        ),
    )
}

/// The generated stream plus what the mix report needs.
pub struct Stream {
    pub events: Vec<Ev>,
    /// The JSONL line each event is stored as (seq, a fixed time), for the
    /// baselines: slices of one contiguous text, as a log file read into memory.
    pub lines: Vec<&'static str>,
    /// The lines being generated, one after the other with a newline each.
    pub text: String,
    pub spans: Vec<(usize, usize)>,
    /// Index of every `step/end`, for the per-step derive loop.
    pub step_ends: Vec<usize>,
    /// Index of every `turn/end`.
    pub turn_ends: Vec<usize>,
    /// Surface length (derived messages) after each turn (and its compaction).
    pub surface_lens: Vec<usize>,
}

impl Stream {
    /// The number of surface nodes after the last turn that ended before `n`.
    pub fn surface_at(&self, n: usize) -> usize {
        let k = self.turn_ends.partition_point(|&i| i < n);
        if k == 0 {
            0
        } else {
            self.surface_lens[k - 1]
        }
    }
}

const TIME0: u64 = 1_755_650_000_000;
const TOOL_NAMES: [&str; 4] = ["read_file", "write_file", "grep", "run"];

/// Generate `n` events (then finish the turn in progress).
pub fn generate(n: usize) -> Stream {
    let mut rng = Rng(0x5eed_d5a1_2024);
    let pool = Pool::new(&mut rng);
    let mut s = Stream {
        events: Vec::with_capacity(n + 64),
        lines: Vec::new(),
        text: String::with_capacity(n * 1400),
        spans: Vec::with_capacity(n + 64),
        step_ends: Vec::new(),
        turn_ends: Vec::new(),
        surface_lens: Vec::new(),
    };
    // The live surface: (seq, turn) in surface order, to cite replaces correctly.
    let mut surface: Vec<(u64, u64)> = Vec::new();
    let push = |s: &mut Stream, ty: &'static CStr, data: String, intent: Option<String>| {
        let seq = s.events.len() as u64;
        let line = &mut s.text;
        let start = line.len();
        let _ = write!(
            line,
            r#"{{"type":"{}","seq":{seq},"time":{},"data":{data}"#,
            ty.to_str().unwrap(),
            TIME0 + seq * 37
        );
        if let Some(i) = &intent {
            // The intent's keys are the envelope's: splice them in.
            line.push(',');
            line.push_str(&i[1..i.len() - 1]);
        }
        line.push('}');
        s.spans.push((start, line.len()));
        line.push('\n');
        s.events.push(Ev {
            ty,
            data: cstr(&data),
            intent: intent.map(|i| cstr(&i)),
        });
        seq
    };
    let mut turn: u64 = 0;
    let mut compactions = 0u64;
    while s.events.len() < n {
        turn += 1;
        push(&mut s, c"turn/start", format!(r#"{{"turn":{turn}}}"#), None);
        let ask = Pool::cut(&pool.prose, &mut rng, 150, 900);
        let seq = push(
            &mut s,
            c"user/message",
            format!(
                r#"{{"id":"u-{turn}","role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"user"}}}}"#,
                js(ask)
            ),
            Some(r#"{"surfaceOp":"append"}"#.into()),
        );
        surface.push((seq, turn));
        let steps = rng.range(2, 4) as u64;
        for step in 1..=steps {
            push(
                &mut s,
                c"step/start",
                format!(r#"{{"turn":{turn},"step":{step}}}"#),
                None,
            );
            if step == 1 {
                let reason = if turn == 1 { "initial" } else { "resume" };
                push(&mut s, c"request/header", request_header_data(reason), None);
            }
            let chunks = rng.range(6, 10);
            let mut text = String::new();
            let mut chunk_seqs = Vec::with_capacity(chunks);
            for _ in 0..chunks {
                let piece = Pool::cut(&pool.prose, &mut rng, 60, 240);
                text.push_str(piece);
                chunk_seqs.push(push(
                    &mut s,
                    c"assistant/chunk",
                    format!(
                        r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":{}}}}}"#,
                        js(piece)
                    ),
                    None,
                ));
            }
            let call_id = format!("call-{turn}-{step}");
            let tool = TOOL_NAMES[rng.range(0, 3)];
            let args = format!(
                r#"{{"path":"src/store/{}.rs","offset":{},"limit":400}}"#,
                WORDS[rng.range(0, 60)],
                rng.range(0, 2000)
            );
            let seq = push(
                &mut s,
                c"assistant/message",
                format!(
                    r#"{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":[{{"type":"text","text":{}}},{{"type":"tool-call","id":"{call_id}","name":"{tool}","arguments":{}}}],"source":{{"kind":"model","provider":"deepseek","model":"deepseek-chat"}},"id":"a-{turn}-{step}"}},"usage":{{"inputTokens":{},"outputTokens":{},"cacheReadTokens":{}}}}}"#,
                    js(&text),
                    js(&args),
                    rng.range(200, 4000),
                    rng.range(50, 900),
                    rng.range(10_000, 120_000)
                ),
                Some(format!(
                    r#"{{"surfaceOp":"append","sourceEventSeqs":{}}}"#,
                    seq_list(&chunk_seqs)
                )),
            );
            surface.push((seq, turn));
            let call_seq = push(
                &mut s,
                c"tool/call",
                format!(
                    r#"{{"turn":{turn},"step":{step},"callId":"{call_id}","name":"{tool}","arguments":{}}}"#,
                    js(&args)
                ),
                None,
            );
            let output = Pool::cut(&pool.code, &mut rng, 8 * 1024, 16 * 1024);
            let seq = push(
                &mut s,
                c"tool/result",
                format!(
                    r#"{{"turn":{turn},"step":{step},"message":{{"source":{{"kind":"tool","callId":"{call_id}"}},"content":[{{"type":"tool-result","toolCallId":"{call_id}","content":[{{"type":"text","text":{}}}]}}],"role":"user","id":"r-{turn}-{step}"}},"meta":{{"bytes":{},"truncated":false}}}}"#,
                    js(output),
                    output.len()
                ),
                Some(format!(
                    r#"{{"surfaceOp":"append","sourceEventSeqs":[{call_seq}]}}"#
                )),
            );
            surface.push((seq, turn));
            let i = push(
                &mut s,
                c"step/end",
                format!(r#"{{"turn":{turn},"step":{step}}}"#),
                None,
            );
            s.step_ends.push(i as usize);
        }
        let i = push(
            &mut s,
            c"turn/end",
            format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            None,
        );
        s.turn_ends.push(i as usize);
        if turn % 50 == 0 {
            // Compaction: one summary replaces the surface nodes of the older
            // half of the last 50 turns (turns turn-49 ..= turn-25), so the
            // surface keeps growing at about half the rate of the log.
            compactions += 1;
            let first = surface.iter().position(|&(_, t)| t >= turn - 49 && t != 0);
            let last = surface
                .iter()
                .rposition(|&(_, t)| t <= turn - 25 && t >= turn - 49);
            if let (Some(a), Some(b)) = (first, last) {
                push(&mut s, c"compaction/start", r#"{"turn":null}"#.into(), None);
                let shadowed: Vec<u64> = surface[a..=b].iter().map(|&(q, _)| q).collect();
                let summary = Pool::cut(&pool.prose, &mut rng, 1500, 1500);
                let seq = push(
                    &mut s,
                    c"user/message",
                    format!(
                        r#"{{"id":"c-{compactions}","role":"user","content":[{{"type":"text","text":{}}}],"source":{{"kind":"compaction"}}}}"#,
                        js(summary)
                    ),
                    Some(format!(
                        r#"{{"surfaceOp":{{"op":"replace","start":{},"end":{}}},"sourceEventSeqs":{}}}"#,
                        shadowed[0],
                        shadowed[shadowed.len() - 1],
                        seq_list(&shadowed)
                    )),
                );
                // Turn 0 marks summaries: they are never compacted again.
                surface.splice(a..=b, [(seq, 0)]);
                push(&mut s, c"compaction/end", r#"{"turn":null}"#.into(), None);
            }
        }
        s.surface_lens.push(surface.len());
    }
    // The lines live as long as the program: leak the text, keep slices.
    let text: &'static str = Box::leak(std::mem::take(&mut s.text).into_boxed_str());
    s.lines = s.spans.iter().map(|&(a, b)| &text[a..b]).collect();
    s
}

/// The first `n` lines' bytes as stored in JSONL (one newline each).
pub fn json_bytes(lines: &[&str], n: usize) -> u64 {
    lines[..n].iter().map(|l| l.len() as u64 + 1).sum()
}
