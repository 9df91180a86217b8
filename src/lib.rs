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
//! * [`store`]: backends behind one trait, the live-session registry.
//!
//! The C ABI (`include/dsh_session.h`, `libdsh_session.so`) is built on
//! this crate by `dsh-session-ffi`; the `dsh-session` command-line tool by
//! `dsh-session-cli`.
//!
//! ## The main path, typed
//!
//! Open a store, create a session, append a turn, derive the messages for
//! the model, fork, and make it all durable:
//!
//! ```
//! use dsh_session::engine::Intent;
//! use dsh_session::json::{Object, Value};
//! use dsh_session::store::{CreateOptions, ForkOptions, Store, StoreConfig};
//!
//! # fn main() -> dsh_session::Result<()> {
//! let dir = std::env::temp_dir().join(format!("dsh-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let store = Store::open(StoreConfig::sqlite(dir.join("sessions.db")))?;
//! let session = store.create(CreateOptions::with_id("demo"))?;
//!
//! let num = |n: f64| Value::Number(n);
//! let obj = |pairs: Vec<(&str, Value)>| Value::Object(Object::from_iter(pairs));
//! let text = |t: &str| {
//!     Value::Array(vec![obj(vec![("type", Value::str("text")), ("text", Value::str(t))])])
//! };
//! session.append("turn/start", obj(vec![("turn", num(1.0))]), Intent::none())?;
//! session.append(
//!     "user/message",
//!     obj(vec![
//!         ("id", Value::str("u1")),
//!         ("role", Value::str("user")),
//!         ("content", text("What is in README.md?")),
//!         ("source", obj(vec![("kind", Value::str("user"))])),
//!     ]),
//!     Intent::append(),
//! )?;
//! session.append("step/start", obj(vec![("turn", num(1.0)), ("step", num(1.0))]), Intent::none())?;
//! session.append(
//!     "assistant/message",
//!     obj(vec![
//!         ("turn", num(1.0)),
//!         ("step", num(1.0)),
//!         (
//!             "message",
//!             obj(vec![
//!                 ("role", Value::str("assistant")),
//!                 ("content", text("A session engine.")),
//!                 (
//!                     "source",
//!                     obj(vec![
//!                         ("kind", Value::str("model")),
//!                         ("provider", Value::str("deepseek")),
//!                         ("model", Value::str("deepseek-chat")),
//!                     ]),
//!                 ),
//!                 ("id", Value::str("a1")),
//!             ]),
//!         ),
//!     ]),
//!     Intent::append(),
//! )?;
//! session.append("step/end", obj(vec![("turn", num(1.0)), ("step", num(1.0))]), Intent::none())?;
//! let completed = obj(vec![("kind", Value::str("completed"))]);
//! session.append("turn/end", obj(vec![("turn", num(1.0)), ("reason", completed)]), Intent::none())?;
//!
//! // The messages the model sees next: the user's and the assistant's.
//! let messages = session.derive()?;
//! assert_eq!(messages.len(), 2);
//!
//! // A child that shares the whole closed turn (seqs 0..=5).
//! let child = session.fork(ForkOptions::at(5).with_id("demo-fork"))?;
//! assert_eq!(child.derive()?, messages);
//!
//! // The durability barrier: everything appended so far is on disk.
//! session.flush()?;
//! child.close()?;
//! session.close()?;
//! let ids: Vec<String> = store.list()?.into_iter().map(|s| s.id).collect();
//! assert_eq!(ids.len(), 2);
//! # drop(store);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod engine;
pub mod error;
pub mod json;
pub mod rule;
pub mod store;
#[cfg(test)]
mod test_rng;

pub use error::{Error, Result, Status};
pub use rule::Rule;
