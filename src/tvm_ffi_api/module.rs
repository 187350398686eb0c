//! The module exports of `c_env_api.h`.

use crate::tvm_ffi::error::safe_call;
use crate::tvm_ffi::{module, FfiError};
use std::ffi::{c_char, c_int, c_void, CStr};

/// A C string argument as UTF-8.
///
/// # Safety
/// `p` is null or NUL-terminated.
unsafe fn cstr<'a>(p: *const c_char, what: &str) -> crate::tvm_ffi::FfiResult<&'a str> {
    if p.is_null() {
        return Err(FfiError::value(format!("{what} is NULL")));
    }
    // SAFETY: by contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| FfiError::value(format!("{what} is not UTF-8")))
}

/// `TVMFFIEnvModLookupFromImports`: a function (borrowed, kept by the module) from the module's
/// imports or the global registry.
///
/// # Safety
/// `library_ctx` is null or the handle this library wrote into `__tvm_ffi__library_ctx`;
/// `func_name` is null or NUL-terminated; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModLookupFromImports(
    library_ctx: *mut c_void,
    func_name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let slot =
            unsafe { out.as_mut() }.ok_or_else(|| FfiError::value("TVMFFIEnvModLookupFromImports: out is NULL"))?;
        // SAFETY: by contract.
        let name = unsafe { cstr(func_name, "TVMFFIEnvModLookupFromImports: func_name") }?;
        // SAFETY: by contract.
        *slot = unsafe { module::lookup_from_imports(library_ctx.cast(), name) }?.cast();
        Ok(())
    })
}

/// `TVMFFIEnvModRegisterContextSymbol`: written into variable `name` of each library loaded
/// later.
///
/// # Safety
/// `name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterContextSymbol(name: *const c_char, symbol: *mut c_void) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let n = unsafe { cstr(name, "TVMFFIEnvModRegisterContextSymbol: name") }?;
        module::register_context_symbol(n, symbol);
        Ok(())
    })
}

/// `TVMFFIEnvModRegisterSystemLibSymbol`: a symbol of the system library (called from static
/// initializers, before anything else).
///
/// # Safety
/// `name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterSystemLibSymbol(name: *const c_char, symbol: *mut c_void) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let n = unsafe { cstr(name, "TVMFFIEnvModRegisterSystemLibSymbol: name") }?;
        crate::module::system_lib::register_symbol(n, symbol);
        Ok(())
    })
}

/// The context symbols TVM's runtime registers at start-up (`module.cc`): the C functions that
/// compiled kernels call through `__<name>` pointer variables, which the module loader fills
/// in every library it loads (installed by `crate::init`).
pub fn context_symbols() -> Vec<(&'static str, usize)> {
    use super::core::{TVMFFIErrorSetRaisedFromCStr, TVMFFIFunctionCall, TVMFFIHandleInitOnce};
    use crate::classic_api::backend::{
        TVMBackendAllocWorkspace, TVMBackendFreeWorkspace, TVMBackendParallelBarrier, TVMBackendParallelLaunch,
    };
    // TVM v0.25's kernels look functions up through `__TVMBackendGetFuncFromEnv` (its
    // runtime registered TVMFFIEnvModLookupFromImports under that name; v0.26+ use
    // `__TVMFFIEnvModLookupFromImports`): a library of either release finds its slot filled.
    vec![
        ("__TVMFFIFunctionCall", TVMFFIFunctionCall as *const () as usize),
        ("__TVMFFIErrorSetRaisedFromCStr", TVMFFIErrorSetRaisedFromCStr as *const () as usize),
        ("__TVMFFIEnvModLookupFromImports", TVMFFIEnvModLookupFromImports as *const () as usize),
        ("__TVMFFIHandleInitOnce", TVMFFIHandleInitOnce as *const () as usize),
        ("__TVMBackendAllocWorkspace", TVMBackendAllocWorkspace as *const () as usize),
        ("__TVMBackendFreeWorkspace", TVMBackendFreeWorkspace as *const () as usize),
        ("__TVMBackendParallelLaunch", TVMBackendParallelLaunch as *const () as usize),
        ("__TVMBackendParallelBarrier", TVMBackendParallelBarrier as *const () as usize),
        ("__TVMBackendGetFuncFromEnv", TVMFFIEnvModLookupFromImports as *const () as usize),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn context_symbols_start_with_the_faces_and_take_registrations() {
        use super::super::core::TVMFFIFunctionCall;
        use crate::tvm_ffi::module::{context_symbol_list, install_context_symbols, register_context_symbol};
        use std::ffi::c_void;
        // Installed when the test binary loaded (crate::init); installing again changes nothing.
        install_context_symbols(|| vec![("__TVMFFIFunctionCall", 1)]);
        let list = context_symbol_list();
        let call = list.iter().find(|(n, _)| n == "__TVMFFIFunctionCall").map(|e| e.1);
        assert_eq!(call, Some(TVMFFIFunctionCall as *const () as usize));
        assert_eq!(list.iter().filter(|(n, _)| n.starts_with("__TVMBackend")).count(), 5);
        register_context_symbol("__mtest_symbol", 42 as *mut c_void);
        assert!(context_symbol_list().contains(&("__mtest_symbol".to_owned(), 42)));
    }
}
