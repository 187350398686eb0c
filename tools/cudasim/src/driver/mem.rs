//! Memory: device allocations, pinned host memory, address queries, memsets and copies.
//! Every device address is checked to lie inside one allocation; a host pointer passed where a
//! device pointer belongs is `CUDA_ERROR_INVALID_VALUE`. Synchronous copies first run the
//! device's queued work (legacy default-stream order); asynchronous copies are queued, except
//! those involving pageable host memory, which behave as the driver documents: host-to-device
//! copies take the host bytes at the call, device-to-host copies complete before returning.

use super::errors::*;
use super::work::{self, HostSrc, Work};
use super::{current, lock, out, run, sim, Sim, CTX_BASE};
use std::ffi::{c_int, c_uint, c_void};

/// Where an address lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// Inside an allocation of device `d`.
    Dev(usize),
    /// Inside pinned host memory.
    Pinned,
    /// Anywhere else (pageable host memory, or nothing).
    Host,
}

/// Where `[p, p + n)` lies; `CUDA_ERROR_INVALID_VALUE` when it starts in a device's memory but
/// is not inside one of its allocations.
pub fn locate(s: &Sim, p: u64, n: usize) -> Result<Where, CUresult> {
    if let Some(d) = s.owner(p) {
        let mut st = lock(&s.devices[d].state);
        return match st.mem.range(p) {
            Some((start, size)) if p - start + n as u64 <= size => Ok(Where::Dev(d)),
            _ => Err(CUDA_ERROR_INVALID_VALUE),
        };
    }
    if lock(&s.pinned).contains(p as usize, n.max(1)) {
        return Ok(Where::Pinned);
    }
    Ok(Where::Host)
}

/// `cuMemAlloc_v2`.
///
/// # Safety
/// `dptr` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut u64, bytes: usize) -> CUresult {
    run(|| {
        let (s, d) = current()?;
        if bytes == 0 || dptr.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let a = lock(&s.devices[d].state).mem.alloc(bytes as u64, false).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
        // SAFETY: per the contract.
        unsafe { out(dptr, a) }
    })
}

/// `cuMemFree_v2`: waits for the device's queued work first (as the driver does).
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: u64) -> CUresult {
    run(|| {
        let (s, _) = current()?;
        if dptr == 0 {
            return Ok(());
        }
        let d = s.owner(dptr).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let mut st = lock(&s.devices[d].state);
        work::run_queue(s, &mut st, u64::MAX)?;
        if st.mem.free(dptr, false) {
            Ok(())
        } else {
            Err(CUDA_ERROR_INVALID_VALUE)
        }
    })
}

fn alloc_host(pp: *mut *mut c_void, bytes: usize) -> Result<(), CUresult> {
    let (s, _) = current()?;
    if bytes == 0 || pp.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let p = lock(&s.pinned).alloc(bytes).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
    // SAFETY: `pp` is valid for writing (the callers' contract).
    unsafe { out(pp, p.cast()) }
}

/// `cuMemAllocHost_v2`: page-aligned, zeroed host memory kernels may also address.
///
/// # Safety
/// `pp` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytes: usize) -> CUresult {
    run(|| alloc_host(pp, bytes))
}

/// `cuMemHostAlloc` (flags accepted: all pinned memory is portable and mapped).
///
/// # Safety
/// `pp` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(pp: *mut *mut c_void, bytes: usize, _flags: c_uint) -> CUresult {
    run(|| alloc_host(pp, bytes))
}

/// `cuMemFreeHost`: waits for every device's queued work first.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    run(|| {
        let s = sim()?;
        work::flush_all(s);
        if lock(&s.pinned).free(p as usize) {
            Ok(())
        } else {
            Err(CUDA_ERROR_INVALID_VALUE)
        }
    })
}

/// `cuMemHostGetDevicePointer_v2`: pinned memory has the same address on the device.
///
/// # Safety
/// `dptr` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(dptr: *mut u64, p: *mut c_void, flags: c_uint) -> CUresult {
    run(|| {
        let s = sim()?;
        if flags != 0 || !lock(&s.pinned).contains(p as usize, 1) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: per the contract.
        unsafe { out(dptr, p as u64) }
    })
}

/// `cuMemGetInfo_v2`.
///
/// # Safety
/// `free` and `total` are NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    run(|| {
        let (s, d) = current()?;
        let st = lock(&s.devices[d].state);
        // SAFETY: per the contract.
        unsafe {
            out(free, (st.mem.total - st.mem.used) as usize)?;
            out(total, st.mem.total as usize)
        }
    })
}

/// `cuMemGetAddressRange_v2`.
///
/// # Safety
/// `base` and `size` are NULL (not wanted) or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAddressRange_v2(base: *mut u64, size: *mut usize, dptr: u64) -> CUresult {
    run(|| {
        let (s, _) = current()?;
        let d = s.owner(dptr).ok_or(CUDA_ERROR_NOT_FOUND)?;
        let (b, n) = lock(&s.devices[d].state).mem.range(dptr).ok_or(CUDA_ERROR_NOT_FOUND)?;
        // SAFETY: per the contract (NULL pointers are skipped).
        unsafe {
            if !base.is_null() {
                out(base, b)?;
            }
            if !size.is_null() {
                out(size, n as usize)?;
            }
        }
        Ok(())
    })
}

/// `cuPointerGetAttribute` for device and pinned memory (context, memory type, device and
/// host pointers, managed, device ordinal, range start and size).
///
/// # Safety
/// `data` is NULL or valid for writing the attribute's type.
#[no_mangle]
pub unsafe extern "C" fn cuPointerGetAttribute(data: *mut c_void, attr: c_int, ptr: u64) -> CUresult {
    run(|| {
        let s = sim()?;
        let (kind, dev, start, len) = if let Some(d) = s.owner(ptr) {
            let (b, n) = lock(&s.devices[d].state).mem.range(ptr).ok_or(CUDA_ERROR_INVALID_VALUE)?;
            (2u32, d, b, n)
        } else {
            let (b, n) = lock(&s.pinned).range(ptr as usize).ok_or(CUDA_ERROR_INVALID_VALUE)?;
            let d = current().map(|(_, d)| d).unwrap_or(0);
            (1u32, d, b as u64, n as u64)
        };
        // SAFETY: `data` is valid for the attribute's type (the contract).
        unsafe {
            match attr {
                1 => out(data.cast::<*mut c_void>(), (CTX_BASE + dev) as *mut c_void),
                2 => out(data.cast::<u32>(), kind),
                3 => out(data.cast::<u64>(), ptr),
                4 if kind == 1 => out(data.cast::<u64>(), ptr),
                8 => out(data.cast::<u32>(), 0),
                9 => out(data.cast::<c_int>(), dev as c_int),
                11 => out(data.cast::<u64>(), start),
                12 => out(data.cast::<usize>(), len as usize),
                _ => Err(CUDA_ERROR_INVALID_VALUE),
            }
        }
    })
}

/// The device of a stream (`None`: the legacy default stream), checked.
pub fn stream_device(s: &Sim, stream: *mut c_void) -> Result<Option<usize>, CUresult> {
    // NULL, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) all act as the legacy stream.
    if (stream as usize) < 3 {
        return Ok(None);
    }
    lock(&s.handles).streams.get(&(stream as usize)).map(|st| Some(st.dev)).ok_or(CUDA_ERROR_INVALID_HANDLE)
}

fn memset(dst: u64, value: u32, elem: usize, count: usize, stream: Option<*mut c_void>) -> Result<(), CUresult> {
    let (s, _) = current()?;
    let Where::Dev(d) = locate(s, dst, elem * count)? else { return Err(CUDA_ERROR_INVALID_VALUE) };
    if dst % elem as u64 != 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    if let Some(st) = stream {
        if stream_device(s, st)?.is_some_and(|sd| sd != d) {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
    }
    if count > 0 {
        work::submit(s, d, Work::Memset { dst, value, elem, count })?;
    }
    Ok(())
}

/// `cuMemsetD8_v2`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: u64, v: u8, n: usize) -> CUresult {
    run(|| memset(dst, u32::from(v), 1, n, None))
}

/// `cuMemsetD16_v2`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD16_v2(dst: u64, v: u16, n: usize) -> CUresult {
    run(|| memset(dst, u32::from(v), 2, n, None))
}

/// `cuMemsetD32_v2`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD32_v2(dst: u64, v: u32, n: usize) -> CUresult {
    run(|| memset(dst, v, 4, n, None))
}

/// `cuMemsetD8Async`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8Async(dst: u64, v: u8, n: usize, s: *mut c_void) -> CUresult {
    run(|| memset(dst, u32::from(v), 1, n, Some(s)))
}

/// `cuMemsetD16Async`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD16Async(dst: u64, v: u16, n: usize, s: *mut c_void) -> CUresult {
    run(|| memset(dst, u32::from(v), 2, n, Some(s)))
}

/// `cuMemsetD32Async`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD32Async(dst: u64, v: u32, n: usize, s: *mut c_void) -> CUresult {
    run(|| memset(dst, v, 4, n, Some(s)))
}

/// A copy of `n` bytes from `src` to `dst`, each a device, pinned or pageable host address;
/// `stream` is `None` for the synchronous calls.
///
/// # Safety
/// Host addresses hold `n` bytes (the driver API's contract).
unsafe fn copy(dst: u64, src: u64, n: usize, stream: Option<*mut c_void>) -> Result<(), CUresult> {
    let (s, cur) = current()?;
    let sdev = match stream {
        Some(st) => stream_device(s, st)?,
        None => None,
    };
    if n == 0 {
        return Ok(());
    }
    if dst == 0 || src == 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let (wd, ws) = (locate(s, dst, n)?, locate(s, src, n)?);
    let on = |d: usize| -> Result<usize, CUresult> {
        if sdev.is_some_and(|sd| sd != d) {
            Err(CUDA_ERROR_INVALID_HANDLE)
        } else {
            Ok(d)
        }
    };
    let finish = |d: usize| if stream.is_none() { work::flush(s, d, u64::MAX) } else { Ok(()) };
    match (wd, ws) {
        (Where::Dev(a), Where::Dev(b)) if a != b => {
            // Between devices: both devices' work first, then the bytes.
            work::flush(s, b, u64::MAX)?;
            work::flush(s, a, u64::MAX)?;
            let bytes = lock(&s.devices[b].state).mem.slice(src, n).ok_or(CUDA_ERROR_INVALID_VALUE)?.to_vec();
            lock(&s.devices[a].state).mem.slice(dst, n).ok_or(CUDA_ERROR_INVALID_VALUE)?.copy_from_slice(&bytes);
            Ok(())
        }
        (Where::Dev(d), Where::Dev(_) | Where::Pinned) | (Where::Pinned, Where::Dev(d)) => {
            let d = on(d)?;
            work::submit(s, d, Work::Copy { dst, src, n })?;
            finish(d)
        }
        (Where::Dev(d), Where::Host) => {
            // From pageable host memory: the bytes are taken now.
            let d = on(d)?;
            // SAFETY: `src` holds `n` bytes (the contract).
            let bytes = unsafe { std::slice::from_raw_parts(src as usize as *const u8, n) }.to_vec();
            work::submit(s, d, Work::ToDevice { dst, src: HostSrc::Staged(bytes), n })?;
            finish(d)
        }
        (Where::Host, Where::Dev(d)) => {
            // To pageable host memory: completes before returning.
            let d = on(d)?;
            let mut st = lock(&s.devices[d].state);
            work::run_queue(s, &mut st, u64::MAX)?;
            let b = st.mem.slice(src, n).ok_or(CUDA_ERROR_INVALID_VALUE)?;
            // SAFETY: `dst` holds `n` bytes (the contract); device bytes are not host memory.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst as usize as *mut u8, n) };
            Ok(())
        }
        _ => {
            // Host to host (pinned or not), in order with the queue.
            work::flush(s, sdev.unwrap_or(cur), u64::MAX)?;
            // SAFETY: both hold `n` bytes (the contract); they may overlap.
            unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, n) };
            Ok(())
        }
    }
}

/// Checks that `p` is device memory (`dev`) or pinned memory (`pinned_ok`).
fn expect(s: &Sim, p: u64, n: usize, pinned_ok: bool) -> Result<(), CUresult> {
    match locate(s, p, n)? {
        Where::Dev(_) => Ok(()),
        Where::Pinned if pinned_ok => Ok(()),
        _ => Err(CUDA_ERROR_INVALID_VALUE),
    }
}

/// Checks that `p` is host memory (pageable or pinned), not a device address.
fn expect_host(s: &Sim, p: u64, n: usize) -> Result<(), CUresult> {
    match locate(s, p, n) {
        Ok(Where::Host | Where::Pinned) => Ok(()),
        _ => Err(CUDA_ERROR_INVALID_VALUE),
    }
}

macro_rules! copies {
    ($( $(#[$doc:meta])* $name:ident ($($arg:ident : $ty:ty),*) => |$s:ident| $check:expr, ($d:expr, $src:expr, $n:expr, $stream:expr); )*) => {
        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// Host pointers hold the bytes copied; device pointers are device allocations.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
                run(|| {
                    let $s = sim()?;
                    if $n > 0 {
                        $check?;
                    }
                    // SAFETY: per the contract.
                    unsafe { copy($d, $src, $n, $stream) }
                })
            }
        )*
    };
}

copies! {
    /// `cuMemcpyHtoD_v2`.
    cuMemcpyHtoD_v2(dst: u64, src: *const c_void, n: usize) => |s| expect(s, dst, n, true).and(expect_host(s, src as u64, n)), (dst, src as u64, n, None);
    /// `cuMemcpyDtoH_v2`.
    cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, n: usize) => |s| expect(s, src, n, true).and(expect_host(s, dst as u64, n)), (dst as u64, src, n, None);
    /// `cuMemcpyDtoD_v2`.
    cuMemcpyDtoD_v2(dst: u64, src: u64, n: usize) => |s| expect(s, dst, n, true).and(expect(s, src, n, true)), (dst, src, n, None);
    /// `cuMemcpyHtoDAsync_v2`.
    cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, n: usize, st: *mut c_void) => |s| expect(s, dst, n, true).and(expect_host(s, src as u64, n)), (dst, src as u64, n, Some(st));
    /// `cuMemcpyDtoHAsync_v2`.
    cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: u64, n: usize, st: *mut c_void) => |s| expect(s, src, n, true).and(expect_host(s, dst as u64, n)), (dst as u64, src, n, Some(st));
    /// `cuMemcpyDtoDAsync_v2`.
    cuMemcpyDtoDAsync_v2(dst: u64, src: u64, n: usize, st: *mut c_void) => |s| expect(s, dst, n, true).and(expect(s, src, n, true)), (dst, src, n, Some(st));
    /// `cuMemcpy` (unified addressing: the kinds of memory come from the addresses).
    cuMemcpy(dst: u64, src: u64, n: usize) => |_s| Ok::<(), CUresult>(()), (dst, src, n, None);
    /// `cuMemcpyAsync`.
    cuMemcpyAsync(dst: u64, src: u64, n: usize, st: *mut c_void) => |_s| Ok::<(), CUresult>(()), (dst, src, n, Some(st));
}

fn peer(dst: u64, dctx: *mut c_void, src: u64, sctx: *mut c_void, n: usize) -> Result<(), CUresult> {
    let (s, _) = current()?;
    let ctx_dev = |c: *mut c_void| {
        let d = (c as usize).wrapping_sub(CTX_BASE);
        if d < s.devices.len() {
            Ok(d)
        } else {
            Err(CUDA_ERROR_INVALID_CONTEXT)
        }
    };
    let (a, b) = (ctx_dev(dctx)?, ctx_dev(sctx)?);
    if n == 0 {
        return Ok(());
    }
    if locate(s, dst, n)? != Where::Dev(a) || locate(s, src, n)? != Where::Dev(b) {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: both are device addresses (checked), no host memory is touched.
    unsafe { copy(dst, src, n, None) }
}

/// `cuMemcpyPeer`.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyPeer(dst: u64, dctx: *mut c_void, src: u64, sctx: *mut c_void, n: usize) -> CUresult {
    run(|| peer(dst, dctx, src, sctx, n))
}

/// `cuMemcpyPeerAsync` (runs at once: an asynchronous copy may complete early).
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyPeerAsync(
    dst: u64,
    dctx: *mut c_void,
    src: u64,
    sctx: *mut c_void,
    n: usize,
    stream: *mut c_void,
) -> CUresult {
    run(|| {
        stream_device(sim()?, stream)?;
        peer(dst, dctx, src, sctx, n)
    })
}
