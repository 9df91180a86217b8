//! Lossless JSON: the value model of the reference (JavaScript `JSON.parse` /
//! `JSON.stringify`) reproduced exactly.
//!
//! * Numbers are IEEE-754 doubles (`f64`), parsed to the nearest double.
//! * Strings are sequences of UTF-16 code units stored as WTF-8, so unpaired
//!   surrogates (`"\ud800"`) survive a round trip.
//! * Objects keep JavaScript property order: canonical array-index keys first in
//!   ascending numeric order, then every other key in first-insertion order;
//!   a duplicate key keeps its first position and takes the last value.
//! * Every algorithm (parse, write, drop, clone, equality, the lossless walk) is
//!   iterative, so nesting depth is limited only by memory.

pub mod canon;
mod object;
mod parse;
mod string;
#[cfg(test)]
mod tests;
mod value;
mod write;

pub use object::is_array_index;
pub use parse::{parse, parse_bytes, parse_checked, ParseError};
pub use value::{JsString, Object, Value};
