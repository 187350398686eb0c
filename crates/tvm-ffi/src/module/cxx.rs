//! The bridge to the C++ API layer (`cxx/tvm_ffi_api.cc`, compiled against apache-tvm-ffi
//! 0.1.15's headers into `libtvm_ffi.so` by `scripts/libtvm-ffi.sh`). C++'s `ModuleObj` is
//! polymorphic: C++ code calls virtual methods through a vtable pointer kept right before the
//! object header, and code of ours meets modules made in C++ (their own vtables, their own
//! `imports_`). The C++ layer hands this runtime one table, through the C ABI's
//! `TVMFFIEnvRegisterCAPI("tvm_rt.cxx_bridge", &table)` while its library loads:
//! - the vtable pointer of its `RustModule` class, whose virtual methods call the `ffi.Module*`
//!   globals: every module made here carries it before its header ([`module_prefix`]);
//! - `module_call`, which runs a method of a module made in C++ (by name, packed arguments).
//!
//! and this runtime fills in `visit_context_symbols` (for `Module::VisitContextSymbols`). Where
//! no C++ layer is linked in (the cargo-built `libtvm_runtime.so`), modules carry a null word
//! and a module made in C++ gets a clear error.

use crate::any::{Any, TVMFFIAny};
use crate::object::{ObjectRef, TVMFFIObject};
use crate::{FfiError, FfiResult};
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The name the C++ layer registers its table under.
pub(crate) const BRIDGE_NAME: &str = "tvm_rt.cxx_bridge";
/// The table's layout version.
const VERSION: u32 = 1;

/// `module_call(module, method, args, num_args, result)`: 0, or -1 with the error raised.
type ModuleCall = unsafe extern "C" fn(*mut TVMFFIObject, *const c_char, *const TVMFFIAny, i32, *mut TVMFFIAny) -> i32;
/// `visit(ctx, name, symbol)`: non-zero stops the visit.
type Visit = unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_void) -> i32;
/// `visit_context_symbols(ctx, visit)`.
type VisitContextSymbols = unsafe extern "C" fn(*mut c_void, Visit) -> i32;

/// The table (`struct Bridge` of `cxx/tvm_ffi_api.cc`).
#[repr(C)]
pub(crate) struct Bridge {
    version: u32,
    /// Filled by C++: the vtable pointer of modules made here.
    rust_module_vptr: *const c_void,
    /// Filled by C++: runs a method of a module made in C++.
    module_call: Option<ModuleCall>,
    /// Filled here.
    visit_context_symbols: Option<VisitContextSymbols>,
}

static BRIDGE: AtomicPtr<Bridge> = AtomicPtr::new(std::ptr::null_mut());

/// `TVMFFIEnvRegisterCAPI("tvm_rt.cxx_bridge", table)`.
pub(crate) fn install(table: *mut c_void) -> FfiResult<()> {
    let t = table.cast::<Bridge>();
    if t.is_null() {
        return Err(FfiError::value("tvm_rt.cxx_bridge: the table is NULL"));
    }
    // SAFETY: the C++ layer registers a static `Bridge` that lives as long as its library
    // (which is this library); the version says the layout.
    unsafe {
        if (*t).version != VERSION {
            return Err(FfiError::value(format!("tvm_rt.cxx_bridge: version {} (expected {VERSION})", (*t).version)));
        }
        (*t).visit_context_symbols = Some(visit_context_symbols);
    }
    BRIDGE.store(t, Ordering::Release);
    Ok(())
}

fn bridge() -> Option<&'static Bridge> {
    // SAFETY: a registered table lives as long as the library (see install).
    unsafe { BRIDGE.load(Ordering::Acquire).as_ref() }
}

/// The word a module made here carries before its header: the C++ layer's vtable pointer, or
/// null without one.
pub(crate) fn module_prefix() -> *const c_void {
    bridge().map_or(std::ptr::null(), |b| b.rust_module_vptr)
}

/// Runs `method` of a module made in C++ with `args`.
pub(crate) fn call(m: &ObjectRef, method: &str, args: &[Any]) -> FfiResult<Any> {
    let call = bridge().and_then(|b| b.module_call).ok_or_else(|| {
        FfiError::runtime(
            "this ffi.Module was made by C++ code; calling its methods needs the C++ API, which this \
             library was built without (use the libtvm_ffi.so that scripts/libtvm-ffi.sh makes)",
        )
    })?;
    let method = CString::new(method).map_err(|_| FfiError::value("module method name holds a NUL"))?;
    let raw: Vec<TVMFFIAny> = args.iter().map(|a| *a.raw()).collect();
    let mut out = TVMFFIAny::NONE;
    // SAFETY: `m` is a live module; the arguments are borrowed views of `args`, alive for the
    // call; the callee writes an owned value into `out` on success.
    let rc = unsafe { call(m.as_ptr(), method.as_ptr(), raw.as_ptr(), raw.len() as i32, &mut out) };
    if rc != 0 {
        return Err(FfiError::take_raised(rc));
    }
    // SAFETY: on success `out` holds an owned value.
    Ok(unsafe { Any::from_raw(out) })
}

unsafe extern "C" fn visit_context_symbols(ctx: *mut c_void, visit: Visit) -> i32 {
    // A copy: the visitor may register symbols of its own.
    let list = super::context_symbol_list();
    for (name, symbol) in list {
        let Ok(name) = CString::new(name) else { continue };
        // SAFETY: the C++ layer's visitor, with its own context; the name lives for the call.
        if unsafe { visit(ctx, name.as_ptr(), symbol as *mut c_void) } != 0 {
            break;
        }
    }
    0
}
