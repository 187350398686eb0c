//! Objects, functions, errors, strings: the core of `c_api.h`.

use super::arg_str;
use crate::tvm_ffi::any::{Any, TVMFFIAny};
use crate::tvm_ffi::error::{make_error_bytes, safe_call, set_raised, take_raised};
use crate::tvm_ffi::object::{dec_ref, inc_ref, make_object, ObjectRef, TVMFFIObject};
use crate::tvm_ffi::{function, registry, string, ti, FfiError, TVMFFIByteArray};
use std::ffi::{c_char, c_int, c_void, CStr};

/// `TVMFFIVersion`.
#[repr(C)]
pub struct TVMFFIVersion {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

/// The tvm-ffi version this library implements (what apache-tvm-ffi 0.1.15.post2 reports).
///
/// # Safety
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetVersion(out: *mut TVMFFIVersion) {
    // SAFETY: the caller passes a writable TVMFFIVersion (null is ignored).
    if let Some(o) = unsafe { out.as_mut() } {
        *o = TVMFFIVersion { major: 0, minor: 1, patch: 16 };
    }
}

/// Adds a strong reference.
///
/// # Safety
/// `obj` is a live object or null.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectIncRef(obj: *mut c_void) -> c_int {
    if !obj.is_null() {
        // SAFETY: a live object by contract.
        unsafe { inc_ref(obj.cast()) };
    }
    0
}

/// Drops a strong reference.
///
/// # Safety
/// `obj` is a live object the caller holds a reference to, or null.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectDecRef(obj: *mut c_void) -> c_int {
    if obj.is_null() {
        return 0;
    }
    safe_call(|| {
        // SAFETY: the caller gives up its reference.
        unsafe { dec_ref(obj.cast()) };
        Ok(())
    })
}

#[repr(C)]
struct OpaquePayload {
    handle: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

impl Drop for OpaquePayload {
    fn drop(&mut self) {
        if let Some(d) = self.deleter {
            // SAFETY: the creator's deleter for its handle, run once.
            unsafe { d(self.handle) };
        }
    }
}

/// Wraps a foreign handle (a Python object) in an `ffi.OpaquePyObject`.
///
/// # Safety
/// `out` is writable; `deleter` (if any) accepts `handle`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectCreateOpaque(
    handle: *mut c_void,
    type_index: i32,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        if type_index != ti::OPAQUE_PY_OBJECT {
            return Err(FfiError::runtime("Only kTVMFFIOpaquePyObject is supported for now"));
        }
        if out.is_null() {
            return Err(FfiError::value("TVMFFIObjectCreateOpaque: out is NULL"));
        }
        let o = make_object(ti::OPAQUE_PY_OBJECT, OpaquePayload { handle, deleter });
        // SAFETY: checked non-null.
        unsafe { *out = o.into_raw().cast() };
        Ok(())
    })
}

/// `TVMFFITypeKeyToIndex`.
///
/// # Safety
/// `key` is a valid byte array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeKeyToIndex(key: *const TVMFFIByteArray, out: *mut i32) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let k = unsafe { arg_str(key, "type key") }?;
        let i =
            crate::tvm_ffi::types::key_to_index(k).ok_or_else(|| FfiError::key(format!("Cannot find type `{k}`")))?;
        // SAFETY: by contract.
        unsafe { *out.as_mut().ok_or_else(|| FfiError::value("out is NULL"))? = i };
        Ok(())
    })
}

/// `TVMFFIFunctionCreate`.
///
/// # Safety
/// `safe_call` follows `TVMFFISafeCallType`; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCreate(
    handle: *mut c_void,
    call: Option<
        unsafe extern "C" fn(handle: *mut c_void, args: *const TVMFFIAny, num_args: i32, result: *mut TVMFFIAny) -> i32,
    >,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        let call = call.ok_or_else(|| FfiError::value("TVMFFIFunctionCreate: safe_call is NULL"))?;
        if out.is_null() {
            return Err(FfiError::value("TVMFFIFunctionCreate: out is NULL"));
        }
        let f = function::from_extern_c(handle, call, deleter);
        // SAFETY: checked non-null.
        unsafe { *out = f.into_raw().cast() };
        Ok(())
    })
}

/// `TVMFFIFunctionGetGlobal`: `*out` is NULL when there is no such global.
///
/// # Safety
/// `name` is a valid byte array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionGetGlobal(name: *const TVMFFIByteArray, out: *mut *mut c_void) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let n = unsafe { arg_str(name, "function name") }?;
        crate::init::ensure();
        let f = registry::get(n);
        // SAFETY: by contract.
        unsafe {
            *out.as_mut().ok_or_else(|| FfiError::value("out is NULL"))? =
                f.map_or(std::ptr::null_mut(), |f| f.into_raw().cast())
        };
        Ok(())
    })
}

/// `TVMFFIFunctionSetGlobal`.
///
/// # Safety
/// `name` is a valid byte array; `f` a live function.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobal(
    name: *const TVMFFIByteArray,
    f: *mut c_void,
    allow_override: c_int,
) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let n = unsafe { arg_str(name, "function name") }?;
        // SAFETY: a live object (borrowed: we take our own reference).
        let f = unsafe { ObjectRef::from_borrowed(f.cast()) }.ok_or_else(|| FfiError::value("function is NULL"))?;
        crate::init::ensure();
        registry::set(n, f, allow_override != 0, None)
    })
}

/// `TVMFFIFunctionSetGlobalFromMethodInfo`.
///
/// # Safety
/// `info` is a valid method info.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobalFromMethodInfo(
    info: *const crate::tvm_ffi::types::TVMFFIMethodInfo,
    allow_override: c_int,
) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let info = unsafe { info.as_ref() }.ok_or_else(|| FfiError::value("method info is NULL"))?;
        // SAFETY: a valid info.
        let n = unsafe { arg_str(&info.name, "function name") }?;
        // SAFETY: as above.
        let md = String::from_utf8_lossy(unsafe { info.metadata.as_slice() }).into_owned();
        // SAFETY: the method cell is a valid view.
        let f = unsafe { Any::from_view(&info.method) }?
            .into_object()
            .map_err(|_| FfiError::type_error(format!("global `{n}`: the method is not a function")))?;
        crate::init::ensure();
        registry::set(n, f, allow_override != 0, (!md.is_empty()).then_some(md))
    })
}

/// `TVMFFIAnyViewToOwnedAny`.
///
/// # Safety
/// `view` is a valid view; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIAnyViewToOwnedAny(view: *const TVMFFIAny, out: *mut TVMFFIAny) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let v = unsafe { view.as_ref() }.ok_or_else(|| FfiError::value("view is NULL"))?;
        // SAFETY: by contract.
        let a = unsafe { Any::from_view(v) }?;
        // SAFETY: by contract.
        unsafe { *out.as_mut().ok_or_else(|| FfiError::value("out is NULL"))? = a.into_raw() };
        Ok(())
    })
}

/// `TVMFFIFunctionCall`: calls `func`'s `safe_call`.
///
/// # Safety
/// `func` is a live function; `args` has `num_args` views; `result` is writable and None.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCall(
    func: *mut c_void,
    args: *mut TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    if func.is_null() {
        // A tail call (same signature): the hot path keeps no stack frame.
        // SAFETY: it reads none of its arguments.
        return unsafe { null_function(func, args, num_args, result) };
    }
    // SAFETY: a function object has its cell right after the header.
    let cell = unsafe { &*(func as *const u8).add(24).cast::<function::TVMFFIFunctionCell>() };
    // SAFETY: the caller's contract is the callee's.
    unsafe { (cell.safe_call)(func, args, num_args, result) }
}

/// The error path of [`TVMFFIFunctionCall`] with its signature, so that it is reached by a jump.
///
/// # Safety
/// None: it reads none of its arguments.
#[cold]
#[inline(never)]
unsafe extern "C" fn null_function(_f: *mut c_void, _a: *mut TVMFFIAny, _n: i32, _r: *mut TVMFFIAny) -> c_int {
    FfiError::value("TVMFFIFunctionCall: function handle is NULL").raise()
}

/// Moves this thread's raised error to `*out` (NULL when none).
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorMoveFromRaised(out: *mut *mut c_void) {
    let e = take_raised();
    // SAFETY: by contract.
    if let Some(o) = unsafe { out.as_mut() } {
        *o = e.map_or(std::ptr::null_mut(), |e| e.into_raw().cast());
    }
}

/// Raises `error` on this thread (a new reference is taken).
///
/// # Safety
/// `error` is a live `ffi.Error` or null (clears).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaised(error: *mut c_void) {
    // SAFETY: by contract.
    set_raised(unsafe { ObjectRef::from_borrowed(error.cast()) });
}

/// Raises a new error of `kind` with `message`.
///
/// # Safety
/// Both are NUL-terminated strings (null reads as empty).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: by contract.
        let (k, m) = unsafe { (cstr(kind), cstr(message)) };
        set_raised(Some(make_error_bytes(k, m, b"", None, None)));
    });
}

/// Raises a new error whose message is the concatenation of `parts`.
///
/// # Safety
/// `kind` and each of `num_parts` parts are NUL-terminated strings (null parts are skipped).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    parts: *const *const c_char,
    num_parts: i32,
) {
    let _ = std::panic::catch_unwind(|| {
        let mut msg = Vec::new();
        for i in 0..num_parts.max(0) as usize {
            if parts.is_null() {
                break;
            }
            // SAFETY: by contract.
            msg.extend_from_slice(unsafe { cstr(*parts.add(i)) });
        }
        // SAFETY: by contract.
        set_raised(Some(make_error_bytes(unsafe { cstr(kind) }, &msg, b"", None, None)));
    });
}

/// # Safety
/// `p` is null or NUL-terminated.
unsafe fn cstr<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        b""
    } else {
        // SAFETY: by contract.
        unsafe { CStr::from_ptr(p) }.to_bytes()
    }
}

/// # Safety
/// `p` is null or a valid byte array.
unsafe fn bytes<'a>(p: *const TVMFFIByteArray) -> &'a [u8] {
    // SAFETY: by contract.
    unsafe { p.as_ref().map_or(&[][..], |b| b.as_slice()) }
}

/// `TVMFFIErrorCreate`.
///
/// # Safety
/// The arrays are valid or null; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreate(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        TVMFFIErrorCreateWithCauseAndExtraContext(
            kind,
            message,
            backtrace,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            out,
        )
    }
}

/// `TVMFFIErrorCreateWithCauseAndExtraContext`.
///
/// # Safety
/// The arrays are valid or null; `cause` and `extra` live objects or null; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreateWithCauseAndExtraContext(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    cause: *mut c_void,
    extra: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        if out.is_null() {
            return Err(FfiError::value("TVMFFIErrorCreate: out is NULL"));
        }
        // SAFETY: by contract.
        let e = unsafe {
            make_error_bytes(
                bytes(kind),
                bytes(message),
                bytes(backtrace),
                ObjectRef::from_borrowed(cause.cast()),
                ObjectRef::from_borrowed(extra.cast()),
            )
        };
        // SAFETY: checked non-null.
        unsafe { *out = e.into_raw().cast() };
        Ok(())
    })
}

/// `TVMFFIStringFromByteArray`: a small string or an `ffi.String`.
///
/// # Safety
/// `input` valid; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIStringFromByteArray(input: *const TVMFFIByteArray, out: *mut TVMFFIAny) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let b = unsafe { input.as_ref() }.ok_or_else(|| FfiError::value("input is NULL"))?;
        // SAFETY: by contract.
        let a = string::any_from_bytes(unsafe { b.as_slice() }, false);
        // SAFETY: by contract.
        unsafe { *out.as_mut().ok_or_else(|| FfiError::value("out is NULL"))? = a.into_raw() };
        Ok(())
    })
}

/// `TVMFFIBytesFromByteArray`: small bytes or an `ffi.Bytes`.
///
/// # Safety
/// `input` valid; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBytesFromByteArray(input: *const TVMFFIByteArray, out: *mut TVMFFIAny) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let b = unsafe { input.as_ref() }.ok_or_else(|| FfiError::value("input is NULL"))?;
        // SAFETY: by contract.
        let a = string::any_from_bytes(unsafe { b.as_slice() }, true);
        // SAFETY: by contract.
        unsafe { *out.as_mut().ok_or_else(|| FfiError::value("out is NULL"))? = a.into_raw() };
        Ok(())
    })
}

thread_local! {
    static BACKTRACE: std::cell::RefCell<(Vec<u8>, TVMFFIByteArray)> =
        const { std::cell::RefCell::new((Vec::new(), TVMFFIByteArray::EMPTY)) };
}

/// `TVMFFIBacktrace`: the given frame, then the native frames of the caller's callers up to the
/// FFI boundary (past it with `cross_ffi_boundary`), in tvm-ffi's text form; the text lives until
/// this thread's next call.
///
/// # Safety
/// `filename` and `func` are null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBacktrace(
    filename: *const c_char,
    lineno: c_int,
    func: *const c_char,
    cross_ffi_boundary: c_int,
) -> *const TVMFFIByteArray {
    // SAFETY: by contract.
    let (f, fun) = unsafe { (cstr(filename), cstr(func)) };
    let text = std::panic::catch_unwind(|| {
        let s = |b: &[u8]| (!b.is_empty()).then(|| String::from_utf8_lossy(b).into_owned());
        let (f, fun) = (s(f), s(fun));
        crate::tvm_ffi::backtrace::capture(f.as_deref(), lineno as i64, fun.as_deref(), cross_ffi_boundary != 0)
    })
    .unwrap_or_default();
    BACKTRACE.with(|b| {
        let mut b = b.borrow_mut();
        b.0 = text;
        b.1 = TVMFFIByteArray::of(&b.0);
        &b.1 as *const TVMFFIByteArray
    })
}

static INIT_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `TVMFFIHandleInitOnce`: runs `init` once per handle slot.
///
/// # Safety
/// `handle_addr` is a valid slot; `init` writes a handle to its argument.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleInitOnce(
    handle_addr: *mut *mut c_void,
    init: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
) -> c_int {
    if handle_addr.is_null() {
        return FfiError::value("TVMFFIHandleInitOnce: handle address is NULL").raise();
    }
    // SAFETY: a valid slot by contract; reads race only with writes under the lock below.
    let slot = unsafe { &*(handle_addr as *const std::sync::atomic::AtomicPtr<c_void>) };
    if !slot.load(std::sync::atomic::Ordering::Acquire).is_null() {
        return 0;
    }
    let _g = INIT_LOCK.lock();
    if !slot.load(std::sync::atomic::Ordering::Acquire).is_null() {
        return 0;
    }
    let Some(init) = init else { return FfiError::value("TVMFFIHandleInitOnce: init is NULL").raise() };
    let mut h: *mut c_void = std::ptr::null_mut();
    // SAFETY: the caller's initializer.
    let rc = unsafe { init(&mut h) };
    if rc != 0 {
        return rc;
    }
    if h.is_null() {
        // A NULL handle would read as "not yet initialized" forever (tvm-ffi refuses it too).
        return FfiError::runtime("TVMFFIHandleInitOnce: the init function returned a NULL handle").raise();
    }
    slot.store(h, std::sync::atomic::Ordering::Release);
    0
}

/// `TVMFFIHandleDeinitOnce`: runs `deinit` on the handle once and clears the slot.
///
/// # Safety
/// `handle_addr` is a valid slot.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleDeinitOnce(
    handle_addr: *mut *mut c_void,
    deinit: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
) -> c_int {
    if handle_addr.is_null() {
        return FfiError::value("TVMFFIHandleDeinitOnce: handle address is NULL").raise();
    }
    let _g = INIT_LOCK.lock();
    // SAFETY: a valid slot.
    let slot = unsafe { &*(handle_addr as *const std::sync::atomic::AtomicPtr<c_void>) };
    let h = slot.swap(std::ptr::null_mut(), std::sync::atomic::Ordering::AcqRel);
    if h.is_null() {
        return 0;
    }
    match deinit {
        // SAFETY: the caller's finalizer for its handle.
        Some(d) => unsafe { d(h) },
        None => 0,
    }
}

/// `TVMFFICustomAllocator`.
#[repr(C)]
pub struct TVMFFICustomAllocator {
    /// Allocates an object's space.
    pub allocate: Option<unsafe extern "C" fn(usize, usize, i32, *mut c_void) -> *mut c_void>,
    /// Its context.
    pub context: *mut c_void,
}

static CUSTOM_ALLOCATOR: std::sync::atomic::AtomicPtr<TVMFFICustomAllocator> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// The custom allocator set by `TVMFFISetCustomAllocator` (NULL when none).
#[no_mangle]
pub extern "C" fn TVMFFIGetCustomAllocator() -> *mut TVMFFICustomAllocator {
    CUSTOM_ALLOCATOR.load(std::sync::atomic::Ordering::Acquire)
}

/// Records a custom allocator for objects made by code compiled against tvm-ffi's headers
/// (their `make_object` asks for it). Objects this library makes use its own allocator.
///
/// # Safety
/// `allocator` stays valid while set (or is null).
#[no_mangle]
pub unsafe extern "C" fn TVMFFISetCustomAllocator(allocator: *mut TVMFFICustomAllocator) -> c_int {
    CUSTOM_ALLOCATOR.store(allocator, std::sync::atomic::Ordering::Release);
    0
}

/// Keeps `TVMFFIObject` in this module's namespace for the header generator.
#[allow(dead_code, reason = "documents the layout next to the exports that take it")]
type ObjectHeader = TVMFFIObject;
