//! `ffi.Function`: the header, `TVMFFIFunctionCell` (`safe_call`, `cpp_call`), then what the
//! function holds. Rust closures and C callbacks (`TVMFFIFunctionCreate`) are both functions of
//! this layout; calling one goes through its `safe_call`, whoever made it.

use super::any::{Any, TVMFFIAny};
use super::error::{safe_call, FfiError, FfiResult};
use super::object::{make_object, ObjectRef, TVMFFIObject};
use super::ti;
use std::ffi::c_void;

/// `TVMFFISafeCallType`.
pub type SafeCall =
    unsafe extern "C" fn(handle: *mut c_void, args: *const TVMFFIAny, num_args: i32, result: *mut TVMFFIAny) -> i32;

/// `TVMFFIFunctionCell`.
#[repr(C)]
pub struct TVMFFIFunctionCell {
    /// The C entry.
    pub safe_call: SafeCall,
    /// A C++ entry (null for ours: C++ callers then go through `safe_call`).
    pub cpp_call: *mut c_void,
}

/// The body of a Rust function: borrowed argument views in, an owned value out.
pub(crate) type RustFn = dyn Fn(&[TVMFFIAny]) -> FfiResult<Any> + Send + Sync;

#[repr(C)]
struct RustPayload {
    cell: TVMFFIFunctionCell,
    body: Box<RustFn>,
}

#[repr(C)]
struct ExternPayload {
    cell: TVMFFIFunctionCell,
    handle: *mut c_void,
    call: SafeCall,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

impl Drop for ExternPayload {
    fn drop(&mut self) {
        if let Some(d) = self.deleter {
            // SAFETY: the creator handed us `handle` with this deleter; it runs once.
            unsafe { d(self.handle) };
        }
    }
}

/// Views of the arguments of a C call.
///
/// # Safety
/// `args` points to `n` cells (or `n` is 0).
#[inline]
pub(crate) unsafe fn arg_slice<'a>(args: *const TVMFFIAny, n: i32) -> &'a [TVMFFIAny] {
    if n <= 0 || args.is_null() {
        &[]
    } else {
        // SAFETY: by contract.
        unsafe { std::slice::from_raw_parts(args, n as usize) }
    }
}

unsafe extern "C" fn rust_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    safe_call(|| {
        // SAFETY: `handle` is one of our Rust functions (this entry is only installed on them);
        // the caller passes `num_args` valid cells and a result cell.
        unsafe {
            let p = &*(handle as *const u8).add(24).cast::<RustPayload>();
            let out = (p.body)(arg_slice(args, num_args))?;
            if !result.is_null() {
                *result = out.into_raw();
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn extern_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    // SAFETY: `handle` is a function made by TVMFFIFunctionCreate.
    unsafe {
        let p = &*(handle as *const u8).add(24).cast::<ExternPayload>();
        (p.call)(p.handle, args, num_args, result)
    }
}

/// The payload of a library function: a `__tvm_ffi_<name>` symbol and the module whose
/// library holds it.
#[repr(C)]
struct SymbolPayload {
    cell: TVMFFIFunctionCell,
    call: SafeCall,
    _module: ObjectRef,
}

unsafe extern "C" fn symbol_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    // SAFETY: `handle` is a function made by `from_symbol`; the symbol is called as TVM's
    // library module calls it, with a NULL self handle.
    unsafe {
        let p = &*(handle as *const u8).add(24).cast::<SymbolPayload>();
        (p.call)(std::ptr::null_mut(), args, num_args, result)
    }
}

/// A function object calling a library's `TVMFFISafeCallType` symbol (with a NULL self handle,
/// as TVM's library module does); it keeps `module` (and so the library) alive.
pub(crate) fn from_symbol(call: SafeCall, module: ObjectRef) -> ObjectRef {
    make_object(
        ti::FUNCTION,
        SymbolPayload {
            cell: TVMFFIFunctionCell { safe_call: symbol_safe_call, cpp_call: std::ptr::null_mut() },
            call,
            _module: module,
        },
    )
}

/// The library symbol behind a function made by [`from_symbol`] (callers may call it directly
/// while they hold the function).
pub fn symbol_of(func: &ObjectRef) -> Option<SafeCall> {
    if func.type_index() != ti::FUNCTION {
        return None;
    }
    // SAFETY: every function object starts with its cell after the header.
    let cell = unsafe { &*(func.as_ptr() as *const u8).add(24).cast::<TVMFFIFunctionCell>() };
    if cell.safe_call as usize != symbol_safe_call as *const () as usize {
        return None;
    }
    // SAFETY: only `from_symbol` installs this entry, on a SymbolPayload.
    Some(unsafe { func.payload::<SymbolPayload>() }.call)
}

/// A function object around a Rust closure.
pub fn from_fn(f: impl Fn(&[TVMFFIAny]) -> FfiResult<Any> + Send + Sync + 'static) -> ObjectRef {
    make_object(
        ti::FUNCTION,
        RustPayload {
            cell: TVMFFIFunctionCell { safe_call: rust_safe_call, cpp_call: std::ptr::null_mut() },
            body: Box::new(f),
        },
    )
}

/// `TVMFFIFunctionCreate`: a function object around a C callback. Without a handle and a
/// deleter the callback is the object's own `safe_call` (as tvm-ffi's `FromExternC` makes it:
/// its first argument is then the function object, and a call is one jump).
pub fn from_extern_c(
    handle: *mut c_void,
    call: SafeCall,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
) -> ObjectRef {
    if handle.is_null() && deleter.is_none() {
        return make_object(
            ti::FUNCTION,
            ExternPayload {
                cell: TVMFFIFunctionCell { safe_call: call, cpp_call: std::ptr::null_mut() },
                handle,
                call,
                deleter,
            },
        );
    }
    make_object(
        ti::FUNCTION,
        ExternPayload {
            cell: TVMFFIFunctionCell { safe_call: extern_safe_call, cpp_call: std::ptr::null_mut() },
            handle,
            call,
            deleter,
        },
    )
}

/// Calls a function object through its `safe_call`.
///
/// # Safety
/// `func` is a live `ffi.Function` (any maker); `args` are valid views.
#[inline]
pub unsafe fn call_raw(func: *mut TVMFFIObject, args: &[TVMFFIAny]) -> FfiResult<Any> {
    // SAFETY: a function object has its cell after the header.
    let cell = unsafe { &*(func as *const u8).add(24).cast::<TVMFFIFunctionCell>() };
    let mut out = TVMFFIAny::NONE;
    // SAFETY: the callee's contract: views in, an owned value out.
    let rc = unsafe { (cell.safe_call)(func.cast(), args.as_ptr(), args.len() as i32, &mut out) };
    if rc != 0 {
        return Err(FfiError::take_raised(rc));
    }
    // SAFETY: on success the callee wrote an owned value.
    Ok(unsafe { Any::from_raw(out) })
}

/// Calls a function object.
#[inline]
pub fn call(func: &ObjectRef, args: &[TVMFFIAny]) -> FfiResult<Any> {
    if func.type_index() != ti::FUNCTION {
        return Err(FfiError::type_error(format!(
            "expected a function, got {}",
            super::types::type_key(func.type_index())
        )));
    }
    // SAFETY: checked to be a function; the args are views the caller keeps alive.
    unsafe { call_raw(func.as_ptr(), args) }
}

/// Calls a function with owned arguments.
pub fn call_any(func: &ObjectRef, args: &[Any]) -> FfiResult<Any> {
    let views: Vec<TVMFFIAny> = args.iter().map(|a| *a.raw()).collect();
    call(func, &views)
}
