//! The environment of `c_env_api.h`: the frontend's C API (Python's signal check and GIL), the
//! per-thread current stream of each device, and the DLPack tensor allocator (per thread, with a
//! process-wide default).

use super::{FfiError, FfiResult};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};

static PY_CHECK_SIGNALS: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static PY_GIL_ENSURE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static PY_GIL_RELEASE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static GLOBAL_ALLOCATOR: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// `TVMFFIEnvRegisterCAPI`: the frontend's functions this library may call.
pub fn register_capi(name: &str, symbol: *mut c_void) -> FfiResult<()> {
    let slot = match name {
        "PyErr_CheckSignals" => &PY_CHECK_SIGNALS,
        "PyGILState_Ensure" => &PY_GIL_ENSURE,
        "PyGILState_Release" => &PY_GIL_RELEASE,
        super::module::cxx::BRIDGE_NAME => return super::module::cxx::install(symbol),
        _ => return Err(FfiError::value(format!("Unknown env API {name}"))),
    };
    slot.store(symbol, Ordering::Release);
    Ok(())
}

/// `TVMFFIEnvCheckSignals`: asks the frontend (holding its GIL) whether a signal is pending;
/// -1 when its handler raised (the frontend's error is then set), else 0.
pub fn check_signals() -> i32 {
    let check = PY_CHECK_SIGNALS.load(Ordering::Acquire);
    if check.is_null() {
        return 0;
    }
    let ensure = PY_GIL_ENSURE.load(Ordering::Acquire);
    let release = PY_GIL_RELEASE.load(Ordering::Acquire);
    if ensure.is_null() || release.is_null() {
        return 0;
    }
    // SAFETY: the frontend registered these as PyErr_CheckSignals, PyGILState_Ensure and
    // PyGILState_Release with their C signatures.
    unsafe {
        let ensure: extern "C" fn() -> *mut c_void = std::mem::transmute(ensure);
        let release: extern "C" fn(*mut c_void) = std::mem::transmute(release);
        let check: extern "C" fn() -> i32 = std::mem::transmute(check);
        let g = ensure();
        let rc = check();
        release(g);
        if rc != 0 {
            -1
        } else {
            0
        }
    }
}

thread_local! {
    static STREAMS: RefCell<Vec<Vec<*mut c_void>>> = const { RefCell::new(Vec::new()) };
    static ALLOCATOR: RefCell<*mut c_void> = const { RefCell::new(std::ptr::null_mut()) };
}

/// `TVMFFIEnvSetStream`: sets this thread's stream for a device; returns the previous one.
pub fn set_stream(device_type: i32, device_id: i32, stream: *mut c_void) -> FfiResult<*mut c_void> {
    let (t, i) = match (usize::try_from(device_type), usize::try_from(device_id)) {
        (Ok(t), Ok(i)) if t < 1 << 16 && i < 1 << 16 => (t, i),
        _ => return Err(FfiError::value(format!("invalid device ({device_type}, {device_id})"))),
    };
    Ok(STREAMS.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() <= t {
            s.resize(t + 1, Vec::new());
        }
        if s[t].len() <= i {
            s[t].resize(i + 1, std::ptr::null_mut());
        }
        std::mem::replace(&mut s[t][i], stream)
    }))
}

/// `TVMFFIEnvGetStream`: this thread's stream for a device (NULL when none).
pub fn get_stream(device_type: i32, device_id: i32) -> *mut c_void {
    let (Ok(t), Ok(i)) = (usize::try_from(device_type), usize::try_from(device_id)) else {
        return std::ptr::null_mut();
    };
    STREAMS.with(|s| s.borrow().get(t).and_then(|v| v.get(i)).copied().unwrap_or(std::ptr::null_mut()))
}

/// `TVMFFIEnvSetDLPackManagedTensorAllocator`: returns the previous allocator of this thread.
pub fn set_allocator(alloc: *mut c_void, write_to_global: bool) -> *mut c_void {
    let old = get_allocator();
    if write_to_global {
        GLOBAL_ALLOCATOR.store(alloc, Ordering::Release);
    }
    ALLOCATOR.with(|a| *a.borrow_mut() = alloc);
    old
}

/// `TVMFFIEnvGetDLPackManagedTensorAllocator`: this thread's, else the process's.
pub fn get_allocator() -> *mut c_void {
    let local = ALLOCATOR.with(|a| *a.borrow());
    if local.is_null() {
        GLOBAL_ALLOCATOR.load(Ordering::Acquire)
    } else {
        local
    }
}
