//! Text output helpers: stdout that tolerates a closed pipe, aligned
//! tables, UTC timestamps, one-line summaries of events and messages.

use std::io::{self, Write};

use dsh_session::json::Value;

/// Buffered stdout. A closed pipe (`dsh-session show … | head`) ends the
/// output quietly instead of failing.
pub struct Out {
    inner: io::BufWriter<io::StdoutLock<'static>>,
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
            inner: io::BufWriter::new(io::stdout().lock()),
            closed: false,
        }
    }

    /// Write `text` (control characters escaped, see [`terminal_safe`])
    /// and a newline.
    pub fn line(&mut self, text: &str) {
        if self.closed {
            return;
        }
        let r = self
            .inner
            .write_all(terminal_safe(text).as_bytes())
            .and_then(|()| self.inner.write_all(b"\n"));
        if r.is_err() {
            self.closed = true;
        }
    }

    /// Flush what is buffered.
    pub fn flush(&mut self) {
        if !self.closed && self.inner.flush().is_err() {
            self.closed = true;
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.flush();
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

/// Rows aligned in columns (two spaces apart; `right[i]` right-aligns
/// column `i`; the last column is not padded).
pub fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) -> Vec<String> {
    let cols = header.len();
    let mut width = vec![0usize; cols];
    // Escaped before the widths are measured, so columns stay aligned.
    let all = std::iter::once(header.iter().map(|h| h.to_string()).collect::<Vec<_>>())
        .chain(rows.iter().map(|r| {
            r.iter()
                .map(|c| terminal_safe(c).into_owned())
                .collect::<Vec<_>>()
        }))
        .collect::<Vec<_>>();
    for row in &all {
        for (i, cell) in row.iter().enumerate().take(cols) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    all.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate().take(cols) {
                let pad = width[i] - cell.chars().count();
                let last = i + 1 == cols;
                if right.get(i).copied().unwrap_or(false) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
                if !last {
                    line.push_str("  ");
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// `2025-01-02T03:04:05.678Z` for epoch milliseconds.
pub fn iso_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// `text` on one line, at most `max` characters (`…` marks a cut).
pub fn clip(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| {
            if c == '\n' || c == '\r' || c == '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
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
    fn tables_align() {
        let t = table(
            &["A", "BB"],
            &[vec!["xyz".into(), "1".into()]],
            &[false, true],
        );
        assert_eq!(t, vec!["A    BB", "xyz   1"]);
        assert_eq!(clip("a\nbcdef", 4), "a b…");
    }
}
