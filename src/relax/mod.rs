//! TVM v0.22-v0.27 (Relax) exports: the parsers the Relax VM stands on.
//!
//! - [`format`]: `__tvm_ffi__library_bin`, the module tree a v0.22+ shared library carries (which
//!   modules, of which kind, importing which);
//! - [`executable`]: the `relax.VMExecutable` module's bytes (function table, constants,
//!   bytecode), checked at load so that an interpreter never meets a bad index;
//! - [`text`]: its `as_text` and `stats` strings, as TVM prints them.
//!
//! Both are pure, safe Rust over byte slices; neither loads a library nor makes tvm-ffi objects.

pub mod executable;
pub mod format;
pub mod text;

#[cfg(test)]
mod tests;
