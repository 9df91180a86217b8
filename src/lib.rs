//! # dsh-session
//!
//! A native, embeddable implementation of the DeepSeek Harness session
//! engine, shipped as a C-ABI library.
//!
//! Layers (each depends only on the ones above it):
//!
//! * [`json`]: lossless JSON with JavaScript semantics;
//! * [`engine`]: the pure session engine (events, surface, derive, seeds,
//!   fork, repair, request folds);
//! * [`store`]: backends behind one trait, the live-session registry;
//! * [`ffi`]: the `extern "C"` functions of `include/dsh_session.h`.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod cli;
pub mod engine;
pub mod error;
pub mod ffi;
pub mod json;
pub mod store;
#[cfg(test)]
mod test_rng;

pub use error::{Error, Result, Status};
