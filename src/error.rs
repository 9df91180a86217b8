//! One error type for the whole library: a C status, a stable rule id, a
//! message with the values that matter, and (for batches and seeds) an index.

use std::fmt;

/// The C status codes of `c-api.md`. Numbers are part of the ABI and are
/// never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Status {
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
    /// The C constant's name, e.g. `"DSH_E_REJECTED"`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "DSH_OK",
            Status::InvalidJson => "DSH_E_INVALID_JSON",
            Status::Rejected => "DSH_E_REJECTED",
            Status::Corrupt => "DSH_E_CORRUPT",
            Status::SchemaMismatch => "DSH_E_SCHEMA_MISMATCH",
            Status::Io => "DSH_E_IO",
            Status::NotFound => "DSH_E_NOT_FOUND",
            Status::Conflict => "DSH_E_CONFLICT",
            Status::InvalidArgument => "DSH_E_INVALID_ARGUMENT",
            Status::Closed => "DSH_E_CLOSED",
            Status::Internal => "DSH_E_INTERNAL",
        }
    }

    /// The numeric code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The status whose code is `code`, if any.
    pub fn from_code(code: i32) -> Option<Status> {
        Some(match code {
            0 => Status::Ok,
            1 => Status::InvalidJson,
            2 => Status::Rejected,
            3 => Status::Corrupt,
            4 => Status::SchemaMismatch,
            5 => Status::Io,
            6 => Status::NotFound,
            7 => Status::Conflict,
            8 => Status::InvalidArgument,
            9 => Status::Closed,
            99 => Status::Internal,
            _ => return None,
        })
    }
}

/// A failure with its stable rule id (`errors.md`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Error {
    /// The C status this failure maps to.
    pub status: Status,
    /// The stable rule id, e.g. `"surface.replace-uncovered"`.
    pub rule: &'static str,
    /// A human message carrying the values that matter.
    pub message: String,
    /// The batch or seed index the failure belongs to.
    pub index: Option<usize>,
    /// The reference's structured code where it had one (fork errors).
    pub code: Option<&'static str>,
    /// The inner rule of a wrapping error (`load.validation`).
    pub cause: Option<&'static str>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.rule,
            self.status.name(),
            self.message
        )
    }
}

impl Error {
    /// A new error.
    pub fn new(status: Status, rule: &'static str, message: impl Into<String>) -> Error {
        Error {
            status,
            rule,
            message: message.into(),
            index: None,
            code: None,
            cause: None,
        }
    }

    /// `DSH_E_REJECTED` with `rule`.
    pub fn rejected(rule: &'static str, message: impl Into<String>) -> Error {
        Error::new(Status::Rejected, rule, message)
    }

    /// `DSH_E_INVALID_ARGUMENT` with `rule`.
    pub fn invalid_argument(rule: &'static str, message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, rule, message)
    }

    /// `DSH_E_INVALID_JSON` with `rule`.
    pub fn invalid_json(rule: &'static str, message: impl Into<String>) -> Error {
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
    pub fn wrapped(self, status: Status, rule: &'static str, prefix: &str) -> Error {
        Error {
            status,
            rule,
            message: format!("{prefix}{}", self.message),
            index: self.index,
            code: self.code,
            cause: Some(self.rule),
        }
    }

    /// The same error with `prefix` in front of its message.
    pub fn prefixed(mut self, prefix: &str) -> Error {
        self.message = format!("{prefix}{}", self.message);
        self
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
