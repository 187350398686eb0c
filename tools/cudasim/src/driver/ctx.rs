//! Contexts: the primary context of each device (retain, release, reset, state) and the
//! calling thread's context stack (`cuCtxSetCurrent`, push, pop). Only primary contexts exist.

use super::errors::*;
use super::{current, lock, out, run, sim, work, CTX_BASE, STACK};
use std::ffi::{c_int, c_uint, c_void};

/// The device of a context handle.
fn device_of(ctx: *mut c_void) -> Result<usize, CUresult> {
    let s = sim()?;
    let d = (ctx as usize).wrapping_sub(CTX_BASE);
    if d < s.devices.len() {
        Ok(d)
    } else {
        Err(CUDA_ERROR_INVALID_CONTEXT)
    }
}

/// `cuDevicePrimaryCtxRetain`.
///
/// # Safety
/// `ctx` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut *mut c_void, d: c_int) -> CUresult {
    run(|| {
        let dev = sim()?.device(i64::from(d))?;
        if ctx.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        lock(&dev.state).retain += 1;
        // SAFETY: per the contract.
        unsafe { out(ctx, (CTX_BASE + dev.ordinal) as *mut c_void) }
    })
}

/// Frees every resource of a device's context and clears its sticky error.
fn reset(d: usize) -> Result<(), CUresult> {
    let s = sim()?;
    let mut st = lock(&s.devices[d].state);
    st.queue.clear();
    st.completed = st.submitted;
    st.mem.clear();
    st.events.clear();
    st.sticky = CUDA_SUCCESS;
    lock(&s.handles).drop_device(d);
    Ok(())
}

/// `cuDevicePrimaryCtxRelease_v2`: at zero retains the context's resources are freed.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(d: c_int) -> CUresult {
    run(|| {
        let dev = sim()?.device(i64::from(d))?;
        let now = {
            let mut st = lock(&dev.state);
            if st.retain == 0 {
                return Err(CUDA_ERROR_INVALID_CONTEXT);
            }
            st.retain -= 1;
            st.retain
        };
        if now == 0 {
            reset(dev.ordinal)?;
        }
        Ok(())
    })
}

/// `cuDevicePrimaryCtxRelease` (the pre-11 name).
///
/// # Safety
/// As [`cuDevicePrimaryCtxRelease_v2`].
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease(d: c_int) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDevicePrimaryCtxRelease_v2(d) }
}

/// `cuDevicePrimaryCtxReset_v2`: frees all memory, modules, streams and events of the device
/// and clears a sticky error.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxReset_v2(d: c_int) -> CUresult {
    run(|| {
        let dev = sim()?.device(i64::from(d))?;
        reset(dev.ordinal)
    })
}

/// `cuDevicePrimaryCtxReset`.
///
/// # Safety
/// As [`cuDevicePrimaryCtxReset_v2`].
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxReset(d: c_int) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDevicePrimaryCtxReset_v2(d) }
}

/// `cuDevicePrimaryCtxGetState`.
///
/// # Safety
/// `flags` and `active` are NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(d: c_int, flags: *mut c_uint, active: *mut c_int) -> CUresult {
    run(|| {
        let dev = sim()?.device(i64::from(d))?;
        let st = lock(&dev.state);
        // SAFETY: per the contract.
        unsafe {
            out(flags, st.flags)?;
            out(active, c_int::from(st.retain > 0))
        }
    })
}

/// `cuDevicePrimaryCtxSetFlags_v2`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxSetFlags_v2(d: c_int, flags: c_uint) -> CUresult {
    run(|| {
        let dev = sim()?.device(i64::from(d))?;
        lock(&dev.state).flags = flags;
        Ok(())
    })
}

/// `cuCtxSetCurrent`: replaces the top of the thread's stack (NULL pops it).
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: *mut c_void) -> CUresult {
    run(|| {
        sim()?;
        if ctx.is_null() {
            STACK.with(|s| s.borrow_mut().pop());
            return Ok(());
        }
        device_of(ctx)?;
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            s.pop();
            s.push(ctx as usize)
        })
    })
}

/// `cuCtxGetCurrent`.
///
/// # Safety
/// `ctx` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut *mut c_void) -> CUresult {
    run(|| {
        sim()?;
        let top = STACK.with(|s| s.borrow().top()).unwrap_or(0);
        // SAFETY: per the contract.
        unsafe { out(ctx, top as *mut c_void) }
    })
}

/// `cuCtxPushCurrent_v2`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: *mut c_void) -> CUresult {
    run(|| {
        device_of(ctx)?;
        STACK.with(|s| s.borrow_mut().push(ctx as usize))
    })
}

/// `cuCtxPopCurrent_v2`.
///
/// # Safety
/// `ctx` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(ctx: *mut *mut c_void) -> CUresult {
    run(|| {
        sim()?;
        let top = STACK.with(|s| s.borrow_mut().pop()).ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
        if !ctx.is_null() {
            // SAFETY: per the contract.
            unsafe { out(ctx, top as *mut c_void)? };
        }
        Ok(())
    })
}

/// `cuCtxGetDevice`.
///
/// # Safety
/// `d` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(d: *mut c_int) -> CUresult {
    run(|| {
        let (_, dev) = current()?;
        // SAFETY: per the contract.
        unsafe { out(d, dev as c_int) }
    })
}

/// `cuCtxGetApiVersion`.
///
/// # Safety
/// `v` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetApiVersion(ctx: *mut c_void, v: *mut c_uint) -> CUresult {
    run(|| {
        if !ctx.is_null() {
            device_of(ctx)?;
        }
        // SAFETY: per the contract.
        unsafe { out(v, 3020) }
    })
}

/// `cuCtxSynchronize`: runs everything submitted to the current device.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    run(|| {
        let (s, d) = current()?;
        work::flush(s, d, u64::MAX)
    })
}
