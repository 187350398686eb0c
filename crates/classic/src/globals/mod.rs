//! The classic runtime's own global functions, registered into the registry the same way a
//! user's functions are: the library's face (`tvm_runtime::init`) installs
//! [`register_builtins`] in the registry, with the globals of the crates above this one, when
//! the library loads; the registry runs it when it starts.

mod containers;
mod device;
pub(crate) mod library;

use crate::registry::Registrar;

/// Registers every built-in global of this crate.
pub fn register_builtins(r: &mut Registrar<'_>) {
    containers::register(r);
    device::register(r);
    library::register(r);
    crate::module::loaders::register(r);
    crate::module::memory::register(r);
    #[cfg(feature = "contrib")]
    crate::contrib::register(r);
    crate::executor::register(r);
    #[cfg(feature = "vm")]
    crate::vm::register(r);
    #[cfg(feature = "aot")]
    crate::aot::register(r);
    crate::compat::register(r);
    #[cfg(feature = "rpc")]
    crate::rpc::register(r);
    #[cfg(feature = "byoc")]
    crate::byoc::register(r);
    crate::cpp::register(r);
}
