//! The input side of `append` (docs/errors.md §3.1 steps 1–3): parsing the JSON
//! text given at the ABI, the lossless and retired-vocabulary checks of
//! `data`, and the intent's surface metadata.

use super::event::{has_fallback_reason, REQUEST_HEADER, REQUEST_HEADER_DELTA};
use crate::error::{Error, Result};
use crate::json::{self, Value};
use crate::rule::Rule;

/// The `data` of one append: text already known to be canonical JSON, or a
/// value tree (with whether it is certainly lossless).
pub(super) enum Data<'a> {
    /// Canonical JSON text (checked).
    Canonical(&'a str),
    /// A tree and whether it is certainly lossless.
    Value(Value, bool),
}

impl<'a> Data<'a> {
    /// `data` given as JSON text: canonical text is used as is (one
    /// validating pass), anything else is parsed (`json.parse` on failure).
    pub(super) fn from_text(text: DataText<'a>) -> Result<Data<'a>> {
        if let Some(canonical) = text.canonical_text() {
            return Ok(Data::Canonical(canonical));
        }
        let (v, lossless) = parse_checked_input(text.as_str(), "data")?;
        Ok(Data::Value(v, lossless))
    }

    /// Whether `data.reason` is the string `"fallback"`.
    fn reason_is_fallback(&self) -> bool {
        match self {
            Data::Canonical(t) => has_fallback_reason(t),
            Data::Value(v, _) => {
                v.as_object()
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str)
                    == Some("fallback")
            }
        }
    }
}

/// JSON text of one append's `data` (or of a batch) as the caller hands it
/// over: checked to be canonical JSON already (by [`DataText::canonical`],
/// which also proves it UTF-8, in one pass over bytes), or text still to
/// be checked.
#[derive(Debug, Clone, Copy)]
pub struct DataText<'a> {
    text: &'a str,
    canonical: bool,
}

impl<'a> DataText<'a> {
    /// `bytes` when they are canonical JSON (and so valid UTF-8).
    pub fn canonical(bytes: &'a [u8]) -> Option<DataText<'a>> {
        json::canon::canonical_str(bytes).map(|text| DataText {
            text,
            canonical: true,
        })
    }

    /// The text.
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    /// The text when it is canonical JSON: known already, or checked now.
    pub(super) fn canonical_text(&self) -> Option<&'a str> {
        (self.canonical || json::canon::is_canonical(self.text)).then_some(self.text)
    }
}

impl<'a> From<&'a String> for DataText<'a> {
    /// Text not checked yet.
    fn from(text: &'a String) -> DataText<'a> {
        DataText::from(text.as_str())
    }
}

impl<'a> From<&'a str> for DataText<'a> {
    /// Text not checked yet.
    fn from(text: &'a str) -> DataText<'a> {
        DataText {
            text,
            canonical: false,
        }
    }
}

/// Where the surface intent of one append comes from.
pub(super) enum IntentArg<'a> {
    /// No intent.
    None,
    /// Intent JSON text.
    Text(&'a str),
    /// An intent value (a batch item's).
    Value(Option<Value>),
}

/// Parse JSON text given at the ABI (`json.parse` on failure): the text
/// edge of the C ABI, which reads its options and batches with it.
#[doc(hidden)]
pub fn parse_input(text: &str, what: &str) -> Result<Value> {
    Ok(parse_checked_input(text, what)?.0)
}

/// [`parse_input`], also saying whether the value is certainly lossless
/// (no negative-zero or infinite literal was seen while parsing).
pub(super) fn parse_checked_input(text: &str, what: &str) -> Result<(Value, bool)> {
    json::parse_checked(text)
        .map_err(|e| Error::invalid_json(Rule::JsonParse, format!("{what} is not valid JSON: {e}")))
}

/// Steps 1–3 of `append` (docs/errors.md §3.1): lossless data, retired header
/// vocabulary, then the intent's surface metadata. Returns
/// `(sourceEventSeqs, surfaceOp, ignorable)`, the last being the intent's
/// `ignorable` member as given (the admission decides what it means).
pub(super) fn check_input(
    ty: &str,
    data: &Data<'_>,
    intent: IntentArg<'_>,
) -> Result<(Option<Value>, Option<Value>, Option<Value>)> {
    if let Data::Value(v, false) = data {
        if !v.is_lossless() {
            return Err(Error::invalid_json(
                Rule::JsonNotLossless,
                format!("event \"{ty}\" carries data that is not JSON-serializable"),
            ));
        }
    }
    if ty == REQUEST_HEADER_DELTA {
        return Err(Error::rejected(
            Rule::HeaderLegacy,
            "append uses the unsupported legacy request/header-delta format",
        ));
    }
    if ty == REQUEST_HEADER && data.reason_is_fallback() {
        return Err(Error::rejected(
            Rule::HeaderLegacyFallback,
            "append uses the unsupported legacy request/header reason \"fallback\"",
        ));
    }
    // The intent is parsed only after the data checks passed.
    let (intent, intent_lossless) = match intent {
        IntentArg::None => (None, true),
        IntentArg::Text(t) => {
            let (v, lossless) = parse_checked_input(t, "intent")?;
            (Some(v), lossless)
        }
        IntentArg::Value(v) => (v, false),
    };
    let (sources, op, ignorable) = match intent.filter(|i| !i.is_null()).map(Value::into_object) {
        None => (None, None, None),
        Some(Ok(mut o)) => (
            o.remove("sourceEventSeqs"),
            o.remove("surfaceOp"),
            o.remove("ignorable"),
        ),
        Some(Err(_)) => {
            return Err(Error::invalid_argument(
                Rule::ArgIntent,
                "intent must be a JSON object or null",
            ))
        }
    };
    if !intent_lossless
        && (!sources.as_ref().is_none_or(Value::is_lossless)
            || !op.as_ref().is_none_or(Value::is_lossless))
    {
        return Err(Error::invalid_json(
            Rule::JsonSurfaceMetadataNotLossless,
            format!("event \"{ty}\" carries surface metadata that is not JSON-serializable"),
        ));
    }
    Ok((sources, op, ignorable))
}

/// The input checks of `append` that come before the re-entrancy check
/// (docs/errors.md §3.1 steps 1–3), for a caller that must refuse the append
/// anyway: it reports the earlier error when there is one.
pub(crate) fn check_append_input(ty: &str, data: &str, intent: Option<&str>) -> Result<()> {
    check_input(
        ty,
        &Data::from_text(data.into())?,
        intent.map_or(IntentArg::None, IntentArg::Text),
    )
    .map(|_| ())
}

/// [`check_append_input`] of a typed append.
pub(crate) fn check_append_value(ty: &str, data: &Value, intent: &super::Intent) -> Result<()> {
    check_input(
        ty,
        &Data::Value(data.clone(), false),
        IntentArg::Value(intent.to_value()),
    )
    .map(|_| ())
}

/// The intent's `ignorable` member under strict admission: a boolean, and
/// `true` only on a type outside the core vocabulary.
pub(super) fn ignorable_marker(ty: &str, ignorable: Option<Value>) -> Result<bool> {
    match ignorable {
        None | Some(Value::Bool(false)) => Ok(false),
        Some(Value::Bool(true)) => {
            super::admission::check_ignorable(ty)?;
            Ok(true)
        }
        Some(_) => Err(Error::invalid_argument(
            Rule::ArgIgnorable,
            "the intent's \"ignorable\" must be a boolean",
        )),
    }
}
