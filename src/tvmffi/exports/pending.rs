//! Exports of `c_api.h` / `c_env_api.h` whose subsystems (tensors, big integers, the
//! environment) are not built yet: each raises a clear `RuntimeError` naming itself, so that a
//! client linking them loads and learns at the call what is missing.

use crate::tvmffi::error::FfiError;
use std::ffi::{c_int, c_void};

macro_rules! pending {
    ($($name:ident($($arg:ident: $t:ty),*);)*) => {$(
        /// Not implemented yet: raises a `RuntimeError`.
        ///
        /// # Safety
        /// None: the arguments are not read.
        #[no_mangle]
        pub unsafe extern "C" fn $name($(#[allow(unused_variables, reason = "not read yet")] $arg: $t),*) -> c_int {
            FfiError::runtime(concat!(stringify!($name), " is not implemented by this library yet")).raise()
        }
    )*};
}

pending! {
    TVMFFIEnvModLookupFromImports(ctx: *mut c_void, name: *const c_void, out: *mut c_void);
    TVMFFIEnvModRegisterContextSymbol(name: *const c_void, symbol: *mut c_void);
    TVMFFIEnvModRegisterSystemLibSymbol(name: *const c_void, symbol: *mut c_void);
}
