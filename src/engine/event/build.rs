//! Building events: from parts, from canonical text (checked or
//! trusted), and from a JSON envelope.

use super::*;
use crate::engine::vocabulary::{event_type, event_type_str};
use crate::rule::Rule;

impl Event {
    /// The event whose text is `parts` written in `order`.
    ///
    /// The text is written into this thread's scratch buffer and then
    /// copied into an allocation of its exact size: shrinking an estimated
    /// one in place would leave a small freed tail behind every event,
    /// which the allocator cannot give back while the log lives.
    fn assemble(parts: Parts<'_>, order: [EnvKey; 7]) -> Event {
        thread_local! {
            static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        /// A scratch buffer beyond this is not kept between events.
        const KEEP: usize = 256 << 10;
        let lossless = parts.sources.as_ref().is_none_or(Member::is_lossless)
            && parts.op.as_ref().is_none_or(Member::is_lossless);
        let (text, at) = SCRATCH.with(|scratch| {
            let mut buf = scratch.borrow_mut();
            buf.clear();
            let at = write_envelope(&mut buf, order, &parts);
            let text = Box::<str>::from(buf.as_str());
            if buf.capacity() > KEEP {
                *buf = String::new();
            }
            (text, at)
        });
        Event {
            ty: event_type(parts.ty),
            seq: parts.seq,
            time: parts.time,
            ignorable: parts.ignorable,
            text,
            at,
            checked: AtomicU8::new(if lossless { 0 } else { Checked::LOSSY }),
            tree: OnceLock::new(),
            sealed: OnceLock::new(),
        }
    }

    /// A new event whose keys serialize in `order` (absent keys are skipped).
    pub fn new(
        ty: JsString,
        seq: u64,
        time: i64,
        data: Value,
        sources: Option<Value>,
        op: Option<Value>,
        order: [EnvKey; 7],
    ) -> Event {
        let e = Event::from_data_value(ty, seq, time, &data, (sources, op), false, order);
        let _ = e.tree.set(Box::new(data));
        e
    }

    /// An event whose `data` is a value tree (written out canonically).
    /// The text cannot carry a value JSON would change (`-0`, an
    /// overflowing number): the event remembers it had one, so the
    /// lossless checks of a later fork still refuse it.
    fn from_data_value(
        ty: JsString,
        seq: u64,
        time: i64,
        data: &Value,
        (sources, op): (Option<Value>, Option<Value>),
        ignorable: bool,
        order: [EnvKey; 7],
    ) -> Event {
        let parts = Parts {
            ty,
            seq,
            time,
            data: Member::Value(data),
            sources: sources.as_ref().map(Member::Value),
            op: op.as_ref().map(Member::Value),
            ignorable,
        };
        let e = Event::assemble(parts, order);
        if !data.is_lossless() {
            e.mark_checked(Checked::LOSSY);
        }
        e
    }

    /// An event in `append` key order whose data and surface metadata the
    /// caller checked lossless (so it is marked so).
    fn checked_lossless(parts: Parts<'_>) -> Event {
        let e = Event::assemble(parts, APPEND_ORDER);
        e.mark_checked(Checked::LOSSLESS);
        e
    }

    /// A new event in `append` key order whose `data` is canonical JSON text
    /// and whose data and surface metadata the caller checked lossless (an
    /// append).
    pub(crate) fn with_canonical_data(
        ty: JsString,
        seq: u64,
        time: i64,
        data: &str,
        (sources, op): (Option<&Value>, Option<&Value>),
        ignorable: bool,
    ) -> Event {
        let parts = Parts {
            ty,
            seq,
            time,
            data: Member::Text(data),
            sources: sources.map(Member::Value),
            op: op.map(Member::Value),
            ignorable,
        };
        Event::checked_lossless(parts)
    }

    /// [`Event::with_canonical_data`] with the surface metadata given as
    /// canonical JSON text too (stored columns read back): nothing is
    /// parsed, every member is copied once.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn with_canonical_texts(
        ty: JsString,
        seq: u64,
        time: i64,
        data: &str,
        (sources, op): (Option<&str>, Option<&str>),
        ignorable: bool,
    ) -> Event {
        let parts = Parts {
            ty,
            seq,
            time,
            data: Member::Text(data),
            sources: sources.map(Member::Text),
            op: op.map(Member::Text),
            ignorable,
        };
        Event::checked_lossless(parts)
    }

    /// An event from stored text, without building a tree: `Ok` only when
    /// `text` is canonical JSON of a well-formed envelope with a plain
    /// (escape-free) type. Anything else comes back as `Err(text)` for the
    /// caller's value path, which reports the precise error.
    #[cfg(test)]
    pub(crate) fn from_canonical_text(text: Box<str>) -> std::result::Result<Event, Box<str>> {
        // One pass: the check also finds the envelope members.
        let index = canon::canonical_members(&text)
            .and_then(|members| Event::index(&text, members.into_iter()));
        match index {
            Some(index) => Ok(Event::indexed(text, index)),
            None => Err(text),
        }
    }

    /// An event from stored bytes not yet known to be UTF-8
    /// (a stored line): one pass checks UTF-8 and canonical form and finds
    /// the envelope members; the bytes are copied into the event only when
    /// they pass. `None` sends them to the caller's value path.
    #[cfg_attr(not(feature = "jsonl"), allow(dead_code))]
    pub(crate) fn from_canonical_bytes(bytes: &[u8]) -> Option<Event> {
        let (text, spans) = canon::canonical_object(bytes)?;
        let members = spans
            .iter()
            .map(|&((ks, ke), (vs, ve))| (&text[ks..ke], &text[vs..ve]));
        // The member ranges are offsets into `text`, which the copy keeps.
        let index = Event::index(text, members)?;
        Some(Event::indexed(text.into(), index))
    }

    /// An event from stored text the caller knows to be what
    /// `JSON.stringify` writes for a lossless value (text this library
    /// wrote, or checked with [`canon::is_canonical`]): the check is not
    /// repeated, only the envelope is read.
    pub(crate) fn from_trusted_text(text: Box<str>) -> std::result::Result<Event, Box<str>> {
        let index = canon::members(&text).and_then(|members| Event::index(&text, members));
        match index {
            Some(index) => Ok(Event::indexed(text, index)),
            None => Err(text),
        }
    }

    fn indexed(text: Box<str>, (ty, seq, time, at, ignorable): Index) -> Event {
        Event {
            ty: event_type(ty),
            seq,
            time,
            ignorable,
            at,
            text,
            // Canonical text is lossless JSON.
            checked: AtomicU8::new(Checked::LOSSLESS),
            tree: OnceLock::new(),
            sealed: OnceLock::new(),
        }
    }

    /// The envelope of canonical event text from its top-level members.
    fn index<'a>(text: &str, members: impl Iterator<Item = (&'a str, &'a str)>) -> Option<Index> {
        let base = text.as_ptr() as usize;
        let at = |v: &str| {
            let start = v.as_ptr() as usize - base;
            span(start, start + v.len())
        };
        let (mut ty, mut seq, mut time, mut data) = (None, None, None, None);
        let (mut spans, mut ignorable) = (Spans::default(), false);
        for (key, value) in members {
            match key {
                "type" => {
                    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
                    if inner.contains('\\') {
                        return None;
                    }
                    ty = Some(event_type_str(inner));
                }
                "seq" => seq = Some(plain_int(value)?),
                "time" => time = Some(plain_int(value)? as i64),
                "data" => data = Some(at(value)),
                "sourceEventSeqs" => spans.sources = at(value),
                "surfaceOp" => spans.op = at(value),
                "ignorable" if value == "true" => ignorable = true,
                _ => return None,
            }
        }
        spans.data = data?;
        Some((ty?, seq?, time?, spans, ignorable))
    }

    /// Build an event from a JSON object, checking the envelope rules
    /// (`seed.envelope-key`, `seed.envelope-invalid`) in the reference's
    /// order. `what` names the event in messages ("seed event at index 3").
    /// The `header.legacy` check that precedes these is the caller's.
    pub fn from_envelope(value: Value, what: &str) -> Result<Event> {
        let Ok(obj) = value.into_object() else {
            return Err(invalid_envelope(what));
        };
        let mut order = [EnvKey::Ignorable; 7];
        let mut n = 0;
        for key in obj.keys() {
            match EnvKey::from_name(key) {
                Some(k) => {
                    order[n] = k;
                    n += 1;
                }
                None => {
                    return Err(Error::rejected(
                        Rule::SeedEnvelopeKey,
                        format!(
                            "{what} has an invalid envelope: unknown key \"{}\"",
                            key.to_string_lossy()
                        ),
                    ))
                }
            }
        }
        // Keys not present are never written, so the tail of `order` only
        // needs to hold each missing key once.
        for k in APPEND_ORDER {
            if !order[..n].contains(&k) {
                order[n] = k;
                n += 1;
            }
        }
        let mut obj = obj;
        let ty = obj
            .remove("type")
            .and_then(|t| t.into_js_string().ok())
            .ok_or_else(|| invalid_envelope(what))?;
        let seq = obj
            .get("seq")
            .and_then(Value::as_safe_u64)
            .ok_or_else(|| invalid_envelope(what))?;
        let time = obj
            .get("time")
            .and_then(Value::as_safe_i64)
            .ok_or_else(|| invalid_envelope(what))?;
        let data = obj.remove("data").ok_or_else(|| invalid_envelope(what))?;
        let ignorable = match obj.get("ignorable") {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err(invalid_envelope(what)),
        };
        let sources = obj.remove("sourceEventSeqs");
        let op = obj.remove("surfaceOp");
        Ok(Event::from_data_value(
            ty,
            seq,
            time,
            &data,
            (sources, op),
            ignorable,
            order,
        ))
    }
}

/// What an event's text is written from.
struct Parts<'a> {
    ty: JsString,
    seq: u64,
    time: i64,
    /// A value or canonical text.
    data: Member<'a>,
    sources: Option<Member<'a>>,
    op: Option<Member<'a>>,
    ignorable: bool,
}

/// One envelope member while an event's text is written.
enum Member<'a> {
    Str(&'a JsString),
    Int(i64),
    Value(&'a Value),
    Text(&'a str),
    True,
}

impl Member<'_> {
    fn reborrow(&self) -> Member<'_> {
        match *self {
            Member::Str(s) => Member::Str(s),
            Member::Int(n) => Member::Int(n),
            Member::Value(v) => Member::Value(v),
            Member::Text(t) => Member::Text(t),
            Member::True => Member::True,
        }
    }

    /// Whether the member is certainly lossless JSON (canonical text is).
    fn is_lossless(&self) -> bool {
        match self {
            Member::Value(v) => v.is_lossless(),
            _ => true,
        }
    }
}

/// Write the envelope of `parts` in `order` (absent keys skipped); returns
/// the byte ranges of the members the event indexes.
fn write_envelope(out: &mut String, order: [EnvKey; 7], parts: &Parts<'_>) -> Spans {
    out.push('{');
    let mut first = true;
    let mut at = Spans::default();
    for key in order {
        let value = match key {
            EnvKey::Type => Some(Member::Str(&parts.ty)),
            EnvKey::Seq => Some(Member::Int(parts.seq as i64)),
            EnvKey::Time => Some(Member::Int(parts.time)),
            EnvKey::Data => Some(parts.data.reborrow()),
            EnvKey::Sources => parts.sources.as_ref().map(Member::reborrow),
            EnvKey::Op => parts.op.as_ref().map(Member::reborrow),
            EnvKey::Ignorable => parts.ignorable.then_some(Member::True),
        };
        let Some(value) = value else { continue };
        if !first {
            out.push(',');
        }
        first = false;
        out.push('"');
        out.push_str(key.name());
        out.push_str("\":");
        let start = out.len();
        match value {
            Member::Str(s) => s.write_json(out),
            Member::Int(n) => {
                use std::fmt::Write;
                let _ = write!(out, "{n}");
            }
            Member::Value(v) => v.write_json(out),
            Member::Text(t) => out.push_str(t),
            Member::True => out.push_str("true"),
        }
        let range = span(start, out.len());
        match key {
            EnvKey::Data => at.data = range,
            EnvKey::Sources => at.sources = range,
            EnvKey::Op => at.op = range,
            _ => {}
        }
    }
    out.push('}');
    at
}

fn span(start: usize, end: usize) -> (u32, u32) {
    // An event over 4 GiB cannot be held; the ABI refuses such input long before.
    (
        u32::try_from(start).expect("event under 4 GiB"),
        u32::try_from(end).expect("event under 4 GiB"),
    )
}

fn invalid_envelope(what: &str) -> Error {
    Error::rejected(
        Rule::SeedEnvelopeInvalid,
        format!("{what} has an invalid envelope"),
    )
}
