//! The line scanner of a JSONL log (`SessionLogScanner`, docs/formats.md
//! §3.5): complete lines become storage records, the valid contiguous
//! prefix is kept, and damage is tolerated only after the last `turn/end`.

use crate::engine::event::{plain_int, safe_int, TURN_END};
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::{self, canon, Value};
use crate::rule::Rule;
use crate::store::backend::Stored;
use crate::store::chunk_rows::{decode_jsonl_record, expand_canonical, is_tag, JSONL_BOUNDS};

/// Scanner state over the records after the header line.
#[derive(Debug)]
pub struct Scanner {
    /// Events of the valid contiguous prefix.
    pub events: Vec<Stored>,
    /// Bytes fed so far, up to the end of the last accepted line.
    pub committed: usize,
    /// Bytes fed so far, up to the end of the last complete line.
    pub consumed: usize,
    /// The first problem seen, raised if a later line holds a `turn/end`.
    pub issue: Option<Error>,
    /// 1-based line number of the next line (the header is line 1).
    line: usize,
    /// An incomplete line waiting for its end.
    pending: Vec<u8>,
    /// The seq of the first event (0 unless scanning from a resync point).
    base: u64,
}

fn has_turn_end(events: &[Stored]) -> bool {
    events.iter().any(|e| e.is_type(TURN_END))
}

/// A plain event record kept as its canonical text, when the line is one
/// (no tree is built); `None` sends the line through the value decoder.
/// An ignorable event may be named like a storage tag (see
/// [`decode_jsonl_record`]).
fn canonical_event(line: &[u8]) -> Option<Stored> {
    // One pass: UTF-8, canonical form and the envelope members.
    let event = Event::from_canonical_bytes(line)?;
    let ty = event.ty.as_str()?;
    (event.ignorable || !is_tag(ty)).then_some(Stored::Event(event))
}

/// A packed row record kept as canonical text, expanded without a tree
/// when [`expand_canonical`] takes it; `None` sends the line through the
/// value decoder.
fn canonical_packed(line: &[u8]) -> Option<Vec<Stored>> {
    let text = line.strip_prefix(b"{\"type\":\"")?;
    let tag = &text[..memchr(b'"', text)?];
    if !is_tag(std::str::from_utf8(tag).ok()?) {
        return None;
    }
    let record = canon::canonical_str(line)?;
    let mut seq0 = None;
    let mut time0 = None;
    let mut data = None;
    for (k, (key, value)) in canon::members(record)?.enumerate() {
        match (k, key) {
            (0, "type") => {}
            (1, "seq0") => seq0 = plain_int(value),
            (2, "time0") => time0 = safe_int(value),
            (3, "data") => data = Some(value),
            _ => return None,
        }
    }
    let tag = std::str::from_utf8(tag).ok()?;
    expand_canonical(tag, seq0?, time0?, data?, JSONL_BOUNDS)
}

impl Scanner {
    /// A scanner whose first line will be line 2 (after the header).
    pub fn new() -> Scanner {
        Scanner::starting_at(0)
    }

    /// A scanner whose first event has seq `base` (reading from a resync
    /// point inside a log; line numbers then count from there).
    pub fn starting_at(base: u64) -> Scanner {
        Scanner {
            events: Vec::new(),
            committed: 0,
            consumed: 0,
            issue: None,
            line: 2,
            pending: Vec::new(),
            base,
        }
    }

    /// The index of the next event to be scanned.
    pub fn next_index(&self) -> u64 {
        self.base + self.events.len() as u64
    }

    /// Hand out the events scanned so far whose index is below `index`,
    /// keeping the later ones (a range read hands out its range and keeps
    /// what it decoded past it for the next read).
    pub fn take_before(&mut self, index: u64) -> Vec<Stored> {
        let n = (index.saturating_sub(self.base) as usize).min(self.events.len());
        let rest = self.events.split_off(n);
        self.base += n as u64;
        std::mem::replace(&mut self.events, rest)
    }

    /// Hand out the events scanned so far; later events continue their
    /// seqs (a streaming read passes the log on in batches).
    pub fn take_events(&mut self) -> Vec<Stored> {
        self.take_before(u64::MAX)
    }

    /// Scan every complete line of `buf`, continuing a line left
    /// incomplete by the previous call. An incomplete last line is kept
    /// pending (and ignored if nothing completes it). Positions count from
    /// the first byte ever fed.
    pub fn feed(&mut self, buf: &[u8]) -> Result<()> {
        let mut start = 0;
        if !self.pending.is_empty() {
            let Some(nl) = memchr(b'\n', buf) else {
                self.pending.extend_from_slice(buf);
                return Ok(());
            };
            let mut line = std::mem::take(&mut self.pending);
            line.extend_from_slice(&buf[..nl]);
            self.consumed += line.len() + 1;
            self.line_at(&line, self.consumed)?;
            start = nl + 1;
        }
        while let Some(nl) = memchr(b'\n', &buf[start..]) {
            let end = start + nl + 1;
            self.consumed += end - start;
            self.line_at(&buf[start..end - 1], self.consumed)?;
            start = end;
        }
        self.pending.extend_from_slice(&buf[start..]);
        Ok(())
    }

    /// True when no incomplete line is pending.
    pub fn at_line_start(&self) -> bool {
        self.pending.is_empty()
    }

    /// [`Scanner::feed`] of `buf` whose complete lines starting at byte
    /// `from` (just after a `\n`) were decoded already, in order, as `done`
    /// (see [`decode_line`]); the lines before `from` and after the last
    /// decoded one are scanned here.
    pub fn feed_decoded(&mut self, buf: &[u8], from: usize, done: Vec<Line>) -> Result<()> {
        if done.is_empty() {
            return self.feed(buf);
        }
        self.feed(&buf[..from])?;
        debug_assert!(self.pending.is_empty(), "`from` follows a line end");
        let mut start = from;
        for decoded in done {
            let nl = memchr(b'\n', &buf[start..]).expect("a decoded line ends in this buffer");
            let end = start + nl + 1;
            self.consumed += end - start;
            let result = self.accept(decoded, self.consumed);
            self.line += 1;
            result?;
            start = end;
        }
        self.feed(&buf[start..])
    }

    fn line_at(&mut self, line: &[u8], end: usize) -> Result<()> {
        let result = self.accept(decode_line(line), end);
        self.line += 1;
        result
    }

    /// Take the decoded line ending at byte `end` into the valid prefix,
    /// or note (or raise) the damage it is.
    fn accept(&mut self, decoded: Line, end: usize) -> Result<()> {
        let Some(events) = decoded else {
            if self.issue.is_none() {
                self.issue = Some(Error::new(
                    Status::Corrupt,
                    Rule::LoadCorruptUnparsable,
                    format!(
                        "corrupt session log: unparsable committed event at line {}",
                        self.line
                    ),
                ));
            }
            return Ok(());
        };
        if let Some(issue) = &self.issue {
            return match has_turn_end(&events) {
                true => Err(issue.clone()),
                false => Ok(()),
            };
        }
        let next = self.base + self.events.len() as u64;
        let gap = events
            .iter()
            .enumerate()
            .find(|(k, e)| e.seq() != Some(next + *k as u64));
        if let Some((k, e)) = gap {
            let got = e
                .to_value()
                .as_object()
                .and_then(|o| o.get("seq"))
                .map_or_else(|| "undefined".to_string(), Value::to_json);
            let issue = Error::new(
                Status::Corrupt,
                Rule::LoadCorruptSeqGap,
                format!(
                    "corrupt session log: seq gap in committed region at line {} (expected {}, got {got})",
                    self.line,
                    next + k as u64
                ),
            )
            .at_seq(next + k as u64);
            if has_turn_end(&events) {
                return Err(issue);
            }
            self.issue = Some(issue);
            return Ok(());
        }
        self.events.extend(events);
        self.committed = end;
        Ok(())
    }
}

/// What one complete line decodes to: its events (one, or a packed row's
/// members), or `None` when it is no record at all.
pub type Line = Option<Vec<Stored>>;

/// Decode one complete line (without its `\n`). Pure: lines can be decoded
/// on any thread and taken in order by [`Scanner::feed_decoded`].
pub(crate) fn decode_line(line: &[u8]) -> Line {
    match canonical_packed(line) {
        Some(events) => Some(events),
        None => canonical_event(line).map(|e| vec![e]).or_else(|| {
            json::parse(&String::from_utf8_lossy(line))
                .ok()
                .and_then(|record| decode_jsonl_record(record).ok())
        }),
    }
}

/// Position of the first `needle` byte in `hay` (SIMD search).
pub fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_packed_rows_expand_as_the_value_path_does() {
        let taken = [
            r#"{"type":"text-chunks","seq0":3,"time0":-5,"data":{"turn":1,"step":2.5,"index":0,"dt":[3,-3],"texts":["a\n\"q\"","b","c"]}}"#,
            r#"{"type":"reasoning-chunks","seq0":0,"time0":7,"data":{"dt":[],"texts":["x"],"turn":1,"step":1,"index":9}}"#,
            r#"{"type":"tool-call-chunks","seq0":10,"time0":30,"data":{"turn":1,"step":1,"index":1,"dt":[-5,15],"id":"c1","name":"bash","args":["{","}",""]}}"#,
            r#"{"type":"tool-call-chunks","seq0":10,"time0":30,"data":{"turn":1,"step":1,"index":1,"dt":[0],"id":"c1","args":["{","}"]}}"#,
        ];
        for line in taken {
            let fast = canonical_packed(line.as_bytes()).expect(line);
            let slow = decode_jsonl_record(json::parse(line).unwrap()).unwrap();
            assert_eq!(fast.len(), slow.len());
            for (f, s) in fast.iter().zip(&slow) {
                let (Stored::Canonical(f), Stored::Canonical(s)) = (f, s) else {
                    panic!("canonical texts expected");
                };
                assert_eq!(f, s);
            }
        }
        // Anything the value path refuses or rewrites is left to it.
        let left = [
            r#"{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[3],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":"1","step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[1]}}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"],"x":1}}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":1,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[],"id":1,"args":["a"]}}"#,
            r#"{"seq0":3,"type":"text-chunks","time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]},"x":0}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":5.5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks", "seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
        ];
        for line in left {
            assert!(canonical_packed(line.as_bytes()).is_none(), "{line}");
        }
    }
}
