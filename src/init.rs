//! What the library installs in its passive core when it is loaded: the device back ends of
//! this build, the built-in globals of both registries (classic and tvm-ffi), and the C
//! functions both module loaders write into the libraries they load (context slots/symbols). This is the
//! one place that decides what is registered; neither registry knows the globals it starts
//! with.
//!
//! [`install`] runs from a constructor in `.init_array`, as TVM's C++ runtime registers its
//! device APIs and globals from static initialisers: before `main` for a program linked against
//! the library (shared, static or as a Rust rlib), at `dlopen` for one that opens it. It only
//! fills slots (nothing that can fail, start a thread or panic): a registry is built when first
//! used. A registry that something started before this ran (another library's static
//! initialiser that ran first) gets the built-ins added at once, without replacing what was
//! registered there.

static INSTALLED: std::sync::Once = std::sync::Once::new();

/// Installs the back ends and the built-in globals, once per process.
pub fn install() {
    INSTALLED.call_once(install_now);
}

/// Makes sure [`install`] has run: the faces call it before a registry lookup, for a program
/// whose own static initialisers call into the library before its constructor ran (a static
/// link puts the program's `.init_array` entries before the library's). After the first call
/// it is one load of a flag.
#[inline]
pub fn ensure() {
    if !INSTALLED.is_completed() {
        install();
    }
}

fn install_now() {
    crate::device::install_back_ends();
    crate::registry::install_builtins(classic_builtins);
    // The classic table is complete by construction: installing it cannot fail.
    let _ = crate::classic_api::slots::install();
    #[cfg(feature = "tvm-ffi")]
    {
        crate::tvm_ffi::registry::install_builtins(crate::tvm_ffi::globals::register_all);
        crate::tvm_ffi::module::install_context_symbols(crate::tvm_ffi::exports::module::context_symbols);
    }
}

/// The built-in globals of the classic registry: the classic crate's, the GPU back ends' and the
/// Relax VM's classic face (v0.14-v0.19 exports).
fn classic_builtins(r: &mut crate::registry::Registrar<'_>) {
    crate::globals::register_builtins(r);
    #[cfg(feature = "opencl")]
    crate::device::opencl::register(r);
    #[cfg(feature = "cuda")]
    crate::device::cuda::register(r);
    #[cfg(feature = "relax")]
    crate::relax::classic::register(r);
}

#[used]
#[link_section = ".init_array"]
static INSTALL_AT_LOAD: extern "C" fn() = {
    extern "C" fn run() {
        install();
    }
    run
};
