//! `PackedFunc`: a type-erased callable of the PackedFunc convention.
//!
//! A function handle given to C is a `Box<PackedFunc>` (one independent box per handle, sharing
//! the callable); `TVMFuncFree` drops the box. C callbacks made with `TVMFuncCreateFromCFunc`
//! become [`PackedFunc`]s whose captured state runs the C finalizer once, when the last copy goes.

use crate::error::Result;
use crate::value::{Args, ArgsBuf, Value};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// The body of a function: reads borrowed arguments, writes the return value.
pub(crate) type FuncBody = dyn Fn(&Args<'_>, &mut Value) -> Result<()> + Send + Sync;

/// A callable of the PackedFunc convention; cloning shares it.
#[derive(Clone)]
pub struct PackedFunc(Arc<FuncBody>);

impl std::fmt::Debug for PackedFunc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedFunc({:p})", Arc::as_ptr(&self.0).cast::<u8>())
    }
}

impl PackedFunc {
    /// Wraps a closure that writes its result into the return slot.
    pub fn new(f: impl Fn(&Args<'_>, &mut Value) -> Result<()> + Send + Sync + 'static) -> Self {
        PackedFunc(Arc::new(f))
    }

    /// Wraps a closure that returns its result.
    pub fn from_fn(f: impl Fn(&Args<'_>) -> Result<Value> + Send + Sync + 'static) -> Self {
        PackedFunc::new(move |args, ret| {
            *ret = f(args)?;
            Ok(())
        })
    }

    /// Calls with borrowed arguments.
    #[inline]
    pub fn call_args(&self, args: &Args<'_>, ret: &mut Value) -> Result<()> {
        (self.0)(args, ret)
    }

    /// Calls with Rust values.
    pub fn call(&self, args: &[Value]) -> Result<Value> {
        let buf = ArgsBuf::new(args);
        let mut ret = Value::Null;
        self.call_args(&buf.args(), &mut ret)?;
        Ok(ret)
    }

    /// Whether two functions share their callable.
    pub fn ptr_eq(&self, other: &PackedFunc) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A new owned handle for C (`TVMFuncFree` releases it).
    pub fn into_handle(self) -> *mut c_void {
        Box::into_raw(Box::new(self)).cast()
    }

    /// The address of this function as a borrowed handle (valid while `self` lives).
    pub fn as_handle(&self) -> *mut c_void {
        (self as *const PackedFunc).cast_mut().cast()
    }

    /// A copy of the function behind a handle.
    ///
    /// # Safety
    /// `h` is NULL or a live function handle.
    pub(crate) unsafe fn from_handle(h: *mut c_void) -> Option<PackedFunc> {
        // SAFETY: per contract.
        unsafe { h.cast::<PackedFunc>().as_ref() }.cloned()
    }

    /// Releases a handle made by [`PackedFunc::into_handle`].
    ///
    /// # Safety
    /// `h` is NULL or an owned handle not used afterwards.
    pub unsafe fn free_handle(h: *mut c_void) {
        if !h.is_null() {
            // SAFETY: per contract, `h` came from `Box::into_raw`.
            drop(unsafe { Box::from_raw(h.cast::<PackedFunc>()) });
        }
    }
}

/// The C callback signature `TVMPackedCFunc`.
pub(crate) type CFunc = unsafe extern "C" fn(
    args: *mut crate::abi::TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut c_void,
    res: *mut c_void,
) -> c_int;

/// The finalizer signature `TVMPackedCFuncFinalizer`.
pub(crate) type CFuncFinalizer = unsafe extern "C" fn(resource_handle: *mut c_void);

/// A C callback's resource, finalized exactly once when the last copy goes.
struct CResource {
    func: CFunc,
    resource: *mut c_void,
    fin: Option<CFuncFinalizer>,
}

// SAFETY: TVM's contract lets C callbacks be called from any thread; the resource is the
// callback's business.
unsafe impl Send for CResource {}
// SAFETY: as above.
unsafe impl Sync for CResource {}

impl CResource {
    #[inline]
    fn call(&self, args: &Args<'_>, ret: &mut Value) -> Result<()> {
        let n = args.len() as c_int;
        let values = args.values().as_ptr().cast_mut();
        let codes = args.codes().as_ptr().cast_mut();
        let ret_ptr = (ret as *mut Value).cast::<c_void>();
        // SAFETY: the arrays are the caller's (borrowed for the call); `ret_ptr` is a live
        // `Value` that `TVMCFuncSetReturn` writes through.
        let rc = unsafe { (self.func)(values, codes, n, ret_ptr, self.resource) };
        match rc {
            0 => Ok(()),
            _ => Err(crate::error::foreign_error(rc)),
        }
    }
}

impl Drop for CResource {
    fn drop(&mut self) {
        if let Some(fin) = self.fin {
            // SAFETY: the finalizer given with the callback, called exactly once (Drop runs once).
            unsafe { fin(self.resource) };
        }
    }
}

impl PackedFunc {
    /// Wraps a C callback (`TVMFuncCreateFromCFunc`). The callback receives the caller's
    /// argument arrays unchanged and a pointer to the return slot.
    pub fn from_c(func: CFunc, resource: *mut c_void, fin: Option<CFuncFinalizer>) -> PackedFunc {
        let r = CResource { func, resource, fin };
        PackedFunc::new(move |args, ret| r.call(args, ret))
    }
}
