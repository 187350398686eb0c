//! The runtime's own global functions (globals.md Part A), registered into the registry the
//! same way a user's functions are, once, on first use of the registry.

mod containers;
mod device;
pub(crate) mod misc;

use crate::registry::Registrar;

/// Registers every built-in global.
pub fn register_builtins(r: &mut Registrar<'_>) {
    containers::register(r);
    device::register(r);
    misc::register(r);
    crate::module::globals::register(r);
    crate::module::memory::register(r);
    crate::device::opencl::register(r);
    crate::device::cuda::register(r);
    crate::contrib::register(r);
    crate::executor::register(r);
    crate::vm::register(r);
    crate::aot::register(r);
    crate::compat::register(r);
    crate::rpc::register(r);
}
