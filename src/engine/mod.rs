//! The pure session engine: no I/O, no FFI types. Everything here is a
//! function of its inputs (the caller supplies the clock).

pub mod admission;
pub mod chunked;
pub mod cwd;
pub mod derive;
pub mod event;
mod input;
mod intent;
pub mod log;
pub mod repair;
pub mod request;
pub mod seed;
pub mod session;
pub mod surface;
pub mod upgrade;
pub mod vocabulary;
pub mod window;

pub use admission::{Admission, Policy, Vocabulary};
pub use event::Event;
pub use intent::{Intent, NewEvent, SurfaceOp};
pub use session::{Seed, Session};
pub use surface::{Markers, Surface};
