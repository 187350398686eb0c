//! tvm-ffi's containers, with the layouts its C++ headers read and write inline.

pub mod array;

use super::registry::Builder;

/// Adds the container globals.
pub fn register(_b: &mut Builder) {}
