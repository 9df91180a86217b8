//! Placeholder: the benchmark program is being written (see docs/performance.md).
fn main() {}
