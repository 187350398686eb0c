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
        crate::tvm_ffi::registry::install_builtins(tvm_ffi_builtins);
        crate::tvm_ffi::module::install_context_symbols(crate::tvm_ffi_api::module::context_symbols);
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

/// The built-in globals of the tvm-ffi registry: the tvm-ffi crate's, the GPU back ends'
/// `device_api.*` markers and the Relax VM's.
#[cfg(feature = "tvm-ffi")]
fn tvm_ffi_builtins(b: &mut crate::tvm_ffi::registry::Builder) {
    crate::tvm_ffi::globals::register_all(b);
    #[cfg(any(feature = "cuda", feature = "opencl"))]
    let marker = |b: &mut crate::tvm_ffi::registry::Builder, name: &str, device_type: i32| {
        // A token for the device type, never dereferenced.
        let token = device_type as usize;
        b.add(name, move |_| Ok(crate::tvm_ffi::Any::opaque_ptr(token as *mut std::ffi::c_void)));
    };
    #[cfg(feature = "cuda")]
    {
        marker(b, "device_api.cuda", crate::device::CUDA);
        marker(b, "device_api.cuda_host", crate::device::CUDA_HOST);
    }
    #[cfg(feature = "opencl")]
    marker(b, "device_api.opencl", crate::device::OPENCL);
    #[cfg(feature = "relax")]
    crate::relax::register(b);
}

#[used]
#[link_section = ".init_array"]
static INSTALL_AT_LOAD: extern "C" fn() = {
    extern "C" fn run() {
        install();
    }
    run
};

#[cfg(all(test, feature = "tvm-ffi"))]
mod tests {
    use crate::tvm_ffi::{function, registry, Any};

    #[test]
    fn the_back_ends_of_this_build_are_enabled_on_the_tvm_ffi_side() {
        let call = |name: &str, args: &[Any]| function::call_any(&registry::get(name).unwrap(), args);
        let enabled = |t: &str| call("runtime.RuntimeEnabled", &[Any::string(t)]).unwrap().as_bool();
        assert_eq!(enabled("cuda"), Some(cfg!(feature = "cuda")));
        assert_eq!(enabled("nvptx"), Some(cfg!(feature = "cuda")));
        assert_eq!(enabled("opencl"), Some(cfg!(feature = "opencl")));
        assert_eq!(enabled("cpu"), Some(true));
        #[cfg(feature = "cuda")]
        {
            let token = call("device_api.cuda_host", &[]).unwrap();
            assert_eq!(
                (token.type_index(), token.raw().bits()),
                (crate::tvm_ffi::ti::OPAQUE_PTR, crate::device::CUDA_HOST as u64)
            );
        }
    }
}
