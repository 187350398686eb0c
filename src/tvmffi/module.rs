//! (Being built.) Registers its `ffi.*` globals into the registry at start-up.

use super::registry::Builder;

/// Adds this subsystem's globals.
pub fn register(_b: &mut Builder) {}
