//! Text output helpers: stdout (or the pager) that tolerates a closed
//! pipe, UTC timestamps, one-line summaries of events and messages.

use std::io::{self, Write};

use dsh_session::json::Value;

use super::term::Pager;
use super::Ctx;

/// Where output goes once the first byte is written.
enum Sink {
    /// Stdout, buffered.
    Stdout(io::BufWriter<io::StdoutLock<'static>>),
    /// The pager's input, buffered.
    Pager(io::BufWriter<std::process::ChildStdin>, Pager),
}

/// Buffered stdout, or a pager reading it when stdout is a terminal and
/// the command pages. A closed pipe (`dsh-session show … | head`, or a
/// pager quit early) ends the output quietly instead of failing:
/// [`Out::is_closed`] tells the command to stop producing.
pub struct Out {
    sink: Option<Sink>,
    page: bool,
    closed: bool,
}

impl Default for Out {
    fn default() -> Self {
        Out::new()
    }
}

impl Out {
    /// Stdout, buffered.
    pub fn new() -> Out {
        Out {
            sink: None,
            page: false,
            closed: false,
        }
    }

    /// Stdout, through the pager when `ctx` allows one (stdout is a
    /// terminal, no `--no-pager`); the pager starts with the first write.
    pub fn paged(ctx: Ctx) -> Out {
        Out {
            sink: None,
            page: ctx.term.pager,
            closed: false,
        }
    }

    fn sink(&mut self) -> &mut dyn Write {
        let page = self.page;
        let sink = self
            .sink
            .get_or_insert_with(|| match page.then(Pager::start).flatten() {
                Some((pager, input)) => Sink::Pager(io::BufWriter::new(input), pager),
                None => Sink::Stdout(io::BufWriter::new(io::stdout().lock())),
            });
        match sink {
            Sink::Stdout(w) => w,
            Sink::Pager(w, _) => w,
        }
    }

    /// True once the reader went away: nothing more is written.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Write `text` as it is (JSON, or text already made terminal-safe).
    pub fn raw(&mut self, text: &str) {
        if self.closed {
            return;
        }
        if self.sink().write_all(text.as_bytes()).is_err() {
            self.closed = true;
        }
    }

    /// Write `text` (control characters escaped, see [`terminal_safe`])
    /// and a newline.
    pub fn line(&mut self, text: &str) {
        self.raw(&terminal_safe(text));
        self.raw("\n");
    }

    /// Flush what is buffered.
    pub fn flush(&mut self) {
        if self.closed {
            return;
        }
        let r = match &mut self.sink {
            Some(Sink::Stdout(w)) => w.flush(),
            Some(Sink::Pager(w, _)) => w.flush(),
            None => Ok(()),
        };
        if r.is_err() {
            self.closed = true;
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.flush();
        if let Some(Sink::Pager(w, pager)) = self.sink.take() {
            // The pager sees the end of its input, and the command ends
            // when the reader quits it.
            drop(w);
            let _ = pager.wait();
        }
    }
}

/// `text` with every control character (C0, DEL, C1) written as a JSON
/// escape (`\n`, `\u001b`, `\u009b`), so stored data printed by the CLI
/// cannot move the cursor, retitle or clear a terminal, or forge lines.
/// JSON text, which escapes them already, passes unchanged.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control();
    if !text.contains(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if bad(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `2025-01-02T03:04:05.678Z` for epoch milliseconds.
pub fn iso_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

/// `text` on one line, at most `max` display columns (a wide character
/// takes two; `…` marks a cut).
pub fn clip(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect();
    console::truncate_str(&one_line, max, "…").into_owned()
}

/// The value of `key` in object `v`.
pub fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.get(key)
}

/// A JSON value as short text: strings unquoted, others as JSON.
pub fn plain(v: &Value) -> String {
    match v.as_js_str() {
        Some(s) => s.to_string_lossy(),
        None => v.to_json(),
    }
}

/// One line for a message (`{id, role, content:[…]}`): its blocks as text.
pub fn message_text(message: &Value) -> String {
    let Some(blocks) = get(message, "content").and_then(Value::as_array) else {
        return get(message, "content")
            .map(Value::to_json)
            .unwrap_or_default();
    };
    let parts: Vec<String> = blocks.iter().map(block_text).collect();
    parts.join(" | ")
}

fn block_text(block: &Value) -> String {
    let field = |k: &str| get(block, k).map(plain).unwrap_or_default();
    match get(block, "type").and_then(Value::as_str) {
        Some("text") | Some("reasoning") => field("text"),
        Some("tool-call") => format!(
            "[tool-call {} {}({})]",
            field("id"),
            field("name"),
            field("arguments")
        ),
        Some("tool-result") => {
            let inner =
                get(block, "content").map(|c| message_text(&Value::obj([("content", c.clone())])));
            let error = if get(block, "isError").and_then(Value::as_bool) == Some(true) {
                " error"
            } else {
                ""
            };
            format!(
                "[tool-result {}{error}] {}",
                field("toolCallId"),
                inner.unwrap_or_default()
            )
        }
        _ => block.to_json(),
    }
}

/// The surface marker of an event as short text: `append`, `replace 3..9`.
pub fn surface_text(event: &Value) -> String {
    let op = match get(event, "surfaceOp") {
        None => String::new(),
        Some(op) if op.as_str() == Some("append") => "append".to_string(),
        Some(op) if get(op, "op").and_then(Value::as_str) == Some("replace") => format!(
            "replace {}..{}",
            get(op, "start").map(plain).unwrap_or_default(),
            get(op, "end").map(plain).unwrap_or_default()
        ),
        Some(op) => op.to_json(),
    };
    match get(event, "sourceEventSeqs") {
        Some(s) if op.is_empty() => format!("sources {}", s.to_json()),
        Some(s) => format!("{op} {}", s.to_json()),
        None => op,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(iso_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso_ms(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn clips_count_display_columns() {
        assert_eq!(clip("a\nbcdef", 4), "a b…");
        assert_eq!(clip("abc", 3), "abc");
        // A wide character takes two columns.
        assert_eq!(clip("日本語テキスト", 7), "日本語…");
        assert_eq!(console::measure_text_width(&clip("日本語テキスト", 7)), 7);
    }
}
