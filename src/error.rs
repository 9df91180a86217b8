//! One error type for the whole library: a C status, a stable rule id, a
//! message with the values that matter, and (for batches and seeds) an index.

use std::fmt;
use std::sync::Arc;

pub use crate::rule::Rule;

/// Declares [`Status`] and [`Status::ALL`] from one list.
macro_rules! statuses {
    ($($(#[$doc:meta])* $name:ident = $code:literal,)*) => {
        /// The status of a call (`docs/errors.md`): what kind of failure,
        /// as a number that is part of the ABI and never reused. The C
        /// names (`DSH_E_*`) live in the FFI crate.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum Status {
            $($(#[$doc])* $name = $code,)*
        }

        impl Status {
            /// Every status, in code order.
            pub const ALL: &'static [Status] = &[$(Status::$name),*];
        }
    };
}

statuses! {
    /// Success.
    Ok = 0,
    /// The input is not JSON, or not lossless JSON (`json.*`).
    InvalidJson = 1,
    /// Well-formed input that breaks a session rule; nothing changed.
    Rejected = 2,
    /// Stored data is damaged.
    Corrupt = 3,
    /// Stored data is intact but of another format or schema version.
    SchemaMismatch = 4,
    /// Operating-system or SQLite I/O failure.
    Io = 5,
    /// Unknown session id.
    NotFound = 6,
    /// Valid alone but clashes with current state.
    Conflict = 7,
    /// NULL pointer, non-UTF-8 text, bad configuration, bad boundary.
    InvalidArgument = 8,
    /// The handle was closed, or poisoned by an earlier internal failure.
    Closed = 9,
    /// A bug: a panic caught at the boundary.
    Internal = 99,
}

impl Status {
    /// The numeric code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The status whose code is `code`, if any.
    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.iter().copied().find(|s| s.code() == code)
    }
}

/// A failure with its stable rule id (`docs/errors.md`).
#[derive(Debug, Clone)]
pub struct Error {
    /// The C status this failure maps to.
    pub status: Status,
    /// The stable rule id, e.g. [`Rule::SurfaceReplaceUncovered`].
    pub rule: Rule,
    /// A human message carrying the values that matter.
    pub message: String,
    /// The batch or seed index the failure belongs to.
    pub index: Option<usize>,
    /// The seq of the stored or appended event the failure is about.
    pub seq: Option<u64>,
    /// The reference's structured code where it had one (fork errors).
    pub code: Option<&'static str>,
    /// The inner rule of a wrapping error (`load.validation`).
    pub cause: Option<Rule>,
    /// The lower-level failure behind this one (an operating-system or
    /// SQLite error), for [`std::error::Error::source`].
    pub source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let source: &(dyn std::error::Error + Send + Sync) = self.source.as_deref()?;
        Some(source)
    }
}

/// Errors are equal when they say the same: status, rule, message, index,
/// seq, code and cause (the lower-level source is not compared).
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.status == other.status
            && self.rule == other.rule
            && self.message == other.message
            && self.index == other.index
            && self.seq == other.seq
            && self.code == other.code
            && self.cause == other.cause
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?}): {}", self.rule, self.status, self.message)
    }
}

impl Error {
    /// A new error.
    pub fn new(status: Status, rule: Rule, message: impl Into<String>) -> Error {
        Error {
            status,
            rule,
            message: message.into(),
            index: None,
            seq: None,
            code: None,
            cause: None,
            source: None,
        }
    }

    /// `DSH_E_REJECTED` with `rule`.
    pub fn rejected(rule: Rule, message: impl Into<String>) -> Error {
        Error::new(Status::Rejected, rule, message)
    }

    /// `DSH_E_INVALID_ARGUMENT` with `rule`.
    pub fn invalid_argument(rule: Rule, message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, rule, message)
    }

    /// `DSH_E_INVALID_JSON` with `rule`.
    pub fn invalid_json(rule: Rule, message: impl Into<String>) -> Error {
        Error::new(Status::InvalidJson, rule, message)
    }

    /// The same error tagged with a batch or seed index.
    pub fn at_index(mut self, index: usize) -> Error {
        self.index = Some(index);
        self
    }

    /// The same error with the reference's structured code.
    pub fn with_code(mut self, code: &'static str) -> Error {
        self.code = Some(code);
        self
    }

    /// This error wrapped as `rule` (status `status`), keeping its rule as the cause.
    pub fn wrapped(self, status: Status, rule: Rule, prefix: &str) -> Error {
        Error {
            status,
            rule,
            message: format!("{prefix}{}", self.message),
            index: self.index,
            seq: self.seq,
            code: self.code,
            cause: Some(self.rule),
            source: self.source,
        }
    }

    /// The same error about the event `seq`.
    pub fn at_seq(mut self, seq: u64) -> Error {
        self.seq = Some(seq);
        self
    }

    /// The same error caused by `source`.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.source = Some(Arc::new(source));
        self
    }

    /// The same error with `prefix` in front of its message.
    pub fn prefixed(mut self, prefix: &str) -> Error {
        self.message = format!("{prefix}{}", self.message);
        self
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_error_keeps_its_seq_and_source_and_compares_without_the_source() {
        let os = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let e = Error::new(Status::Io, Rule::IoWrite, "disk full")
            .at_seq(7)
            .with_source(os);
        assert_eq!(e.seq, Some(7));
        let source = e.source().expect("a source");
        assert_eq!(
            source
                .downcast_ref::<std::io::Error>()
                .and_then(|e| e.raw_os_error()),
            Some(libc::ENOSPC)
        );
        let plain = Error::new(Status::Io, Rule::IoWrite, "disk full").at_seq(7);
        assert_eq!(e, plain);
        let wrapped = e.wrapped(Status::Corrupt, Rule::LoadValidation, "while loading: ");
        assert_eq!(
            (wrapped.rule, wrapped.cause),
            (Rule::LoadValidation, Some(Rule::IoWrite))
        );
        assert_eq!(wrapped.seq, Some(7));
        assert!(wrapped.source().is_some());
        assert_eq!(
            wrapped.to_string(),
            "load.validation (Corrupt): while loading: disk full"
        );
    }
}
