//! The CUDA device API for `kDLCUDA` (2) and `kDLCUDAHost` (3) through the driver API:
//! each device's primary context, retained once and made current on the
//! calling thread before every driver call; a thread-local current device and stream slot;
//! memory, copies, streams, attributes and per-thread workspace pools.

use super::driver::{self, check, check_with, sys, CUcontext, CUdevice, CUdeviceptr, CUresult, CUstream};
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use tvm_runtime_classic::abi::{DLDataType, DLDevice};
use tvm_runtime_classic::device::workspace::{with_local_pool, LocalPool, RawAlloc, WorkspacePool};
use tvm_runtime_classic::device::{Attr, DeviceApi, CPU, CUDA, CUDA_HOST};
use tvm_runtime_classic::error::{Error, Result};

thread_local! {
    /// The calling thread's current CUDA device (`SetDevice`), 0 until set.
    static CURRENT: Cell<i32> = const { Cell::new(0) };
    /// The calling thread's stream for launches (`TVMSetStream`), shared by all devices.
    static STREAM: Cell<usize> = const { Cell::new(0) };
    /// Primary contexts this thread has looked up already, so that binding a device (done
    /// before every driver call, launches included) takes no process-wide lock.
    static KNOWN_CONTEXTS: RefCell<Vec<(i32, usize)>> = const { RefCell::new(Vec::new()) };
}

/// Primary contexts by device id, retained once and kept for the life of the process.
static CONTEXTS: Mutex<Vec<(i32, usize)>> = Mutex::new(Vec::new());

/// The driver handle of device `id` (`CUDA: invalid device ordinal`).
pub fn device(id: i32) -> Result<CUdevice> {
    driver::ready()?;
    let mut d: CUdevice = 0;
    // SAFETY: the driver is initialised; `d` is an out-pointer.
    check(unsafe { sys::cuDeviceGet(&mut d, id) })?;
    Ok(d)
}

/// The primary context of device `id`.
pub(crate) fn primary_context(id: i32) -> Result<CUcontext> {
    let known = |v: &[(i32, usize)]| v.iter().find(|(d, _)| *d == id).map(|&(_, c)| c as CUcontext);
    // `try_with`: workspace pools free their blocks during thread exit, after this may be gone.
    if let Some(c) = KNOWN_CONTEXTS.try_with(|k| known(&k.borrow())).ok().flatten() {
        return Ok(c);
    }
    let ctx = {
        let mut ctxs = CONTEXTS.lock();
        match known(&ctxs) {
            Some(c) => c,
            None => {
                let dev = device(id)?;
                let mut ctx: CUcontext = std::ptr::null_mut();
                // SAFETY: a valid device; the context is retained for the life of the process.
                check(unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
                ctxs.push((id, ctx as usize));
                ctx
            }
        }
    };
    let _ = KNOWN_CONTEXTS.try_with(|k| k.borrow_mut().push((id, ctx as usize)));
    Ok(ctx)
}

/// Makes device `id` current on this thread (its primary context and the thread's device).
pub fn bind(id: i32) -> Result<()> {
    if id < 0 {
        return Err(Error::tvm("CUDA: invalid device ordinal"));
    }
    let ctx = primary_context(id)?;
    // SAFETY: a retained primary context.
    check(unsafe { sys::cuCtxSetCurrent(ctx) })?;
    CURRENT.with(|c| c.set(id));
    Ok(())
}

/// The thread's current device, with its context made current (launches, pinned memory).
pub(crate) fn bind_current() -> Result<i32> {
    let id = current_device();
    bind(id)?;
    Ok(id)
}

/// The thread's current device id.
pub(crate) fn current_device() -> i32 {
    CURRENT.with(Cell::get)
}

/// The thread's launch stream (NULL: the legacy default stream).
pub(crate) fn current_stream() -> CUstream {
    STREAM.with(Cell::get) as CUstream
}

/// A device attribute.
fn attribute(dev: CUdevice, attr: sys::CUdevice_attribute) -> Result<i64> {
    let mut v = 0;
    // SAFETY: a valid device; `v` is an out-pointer.
    check(unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) })?;
    Ok(i64::from(v))
}

/// `"<major>.<minor>"` and `major * 10 + minor` of device `id`.
pub(crate) fn compute_capability(id: i32) -> Result<(String, u32)> {
    use sys::CUdevice_attribute as A;
    let d = device(id)?;
    let major = attribute(d, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(d, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok((format!("{major}.{minor}"), (major * 10 + minor) as u32))
}

fn ptr(p: *const c_void, offset: u64) -> CUdeviceptr {
    (p as usize as u64).wrapping_add(offset)
}

/// The CUDA device API (types 2 and 3 share it and branch on the type, as in v0.8).
pub struct CudaApi;

/// The one instance.
pub static CUDA_API: CudaApi = CudaApi;

fn check_alignment(alignment: usize) -> Result<()> {
    if alignment == 0 || 256 % alignment != 0 {
        return Err(Error::value("CUDA space is aligned at 256 bytes"));
    }
    Ok(())
}

impl DeviceApi for CudaApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        bind(dev.device_id)
    }

    fn get_attr(&self, dev: DLDevice, kind: i32) -> Result<Attr> {
        use sys::CUdevice_attribute as A;
        if kind == 0 {
            let ok = driver::is_ready()
                && device(dev.device_id)
                    .and_then(|d| attribute(d, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK))
                    .is_ok();
            return Ok(Attr::Int(i64::from(ok)));
        }
        let d = device(dev.device_id)?;
        let at = |a| attribute(d, a).map(Attr::Int);
        match kind {
            1 => at(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            2 => at(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE),
            3 => at(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            4 => Ok(Attr::Str(compute_capability(dev.device_id)?.0)),
            5 => {
                let mut buf = [0 as std::ffi::c_char; 256];
                // SAFETY: a 256-byte buffer, as the length says.
                driver::check_call(unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), 256, d) }, "cuDeviceGetName")?;
                // SAFETY: the driver wrote a NUL-terminated name into `buf`.
                let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
                Ok(Attr::Str(name.to_string_lossy().into_owned()))
            }
            6 => at(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            7 => at(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            8 => {
                let x = attribute(d, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?;
                let y = attribute(d, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?;
                let z = attribute(d, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?;
                Ok(Attr::Str(format!("[{x}, {y}, {z}]")))
            }
            9 => at(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
            10 | 12 => Ok(Attr::Null),
            11 => {
                // No toolkit at build time: the driver's version stands in for CUDA_VERSION.
                let mut v = 0;
                // SAFETY: an out-pointer.
                check(unsafe { sys::cuDriverGetVersion(&mut v) })?;
                Ok(Attr::Int(i64::from(v)))
            }
            _ => Ok(Attr::Int(0)),
        }
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _hint: DLDataType,
    ) -> Result<*mut c_void> {
        check_alignment(alignment)?;
        if dev.device_type == CUDA_HOST {
            bind_current()?;
            if nbytes == 0 {
                return Ok(std::ptr::null_mut());
            }
            let mut p = std::ptr::null_mut();
            // SAFETY: a context is current; `p` is an out-pointer.
            check_with(unsafe { sys::cuMemAllocHost_v2(&mut p, nbytes) }, || {
                format!("cuMemAllocHost of {nbytes} bytes of pinned host memory")
            })?;
            return Ok(p);
        }
        bind(dev.device_id)?;
        if nbytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let mut p: CUdeviceptr = 0;
        // SAFETY: the device's context is current; `p` is an out-pointer.
        check_with(unsafe { sys::cuMemAlloc_v2(&mut p, nbytes) }, || {
            format!("cuMemAlloc of {nbytes} bytes on cuda({})", dev.device_id)
        })?;
        Ok(p as usize as *mut c_void)
    }

    #[expect(clippy::not_unsafe_ptr_arg_deref, reason = "device pointers are handles the caller vouches for")]
    fn free_data_space(&self, dev: DLDevice, p: *mut c_void) -> Result<()> {
        if p.is_null() {
            return Ok(());
        }
        let r = if dev.device_type == CUDA_HOST {
            bind_current()?;
            // SAFETY: pinned memory from `alloc_data_space` (the caller's contract).
            unsafe { sys::cuMemFreeHost(p) }
        } else {
            bind(dev.device_id)?;
            // SAFETY: device memory from `alloc_data_space` (the caller's contract).
            unsafe { sys::cuMemFree_v2(p as usize as CUdeviceptr) }
        };
        if driver::is_deinitialized(r) {
            return Ok(());
        }
        check(r)
    }

    fn copy_flat(
        &self,
        from: *const c_void,
        from_offset: u64,
        to: *mut c_void,
        to_offset: u64,
        nbytes: usize,
        dev_from: DLDevice,
        dev_to: DLDevice,
        _hint: DLDataType,
        stream: *mut c_void,
    ) -> Result<()> {
        let host = |t: i32| t == CPU || t == CUDA_HOST;
        let s = stream as CUstream;
        let (src, dst) = (ptr(from, from_offset), ptr(to, to_offset));
        let (ft, tt) = (dev_from.device_type, dev_to.device_type);
        if host(ft) && host(tt) {
            if nbytes > 0 {
                // SAFETY: both host ranges hold `nbytes` (the tensor contract); overlap allowed.
                unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, nbytes) };
            }
            return Ok(());
        }
        if nbytes == 0 && (host(ft) || ft == CUDA) && (host(tt) || tt == CUDA) {
            return Ok(());
        }
        // SAFETY: the ranges hold `nbytes` bytes (the tensor contract the caller checked), the
        // relevant context is made current before each driver call, `s` is NULL or a live stream.
        let r = unsafe {
            match (host(ft), host(tt)) {
                (true, false) if tt == CUDA => {
                    bind(dev_to.device_id)?;
                    let h = src as usize as *const c_void;
                    if s.is_null() {
                        sys::cuMemcpyHtoD_v2(dst, h, nbytes)
                    } else {
                        sys::cuMemcpyHtoDAsync_v2(dst, h, nbytes, s)
                    }
                }
                (false, true) if ft == CUDA => {
                    bind(dev_from.device_id)?;
                    let h = dst as usize as *mut c_void;
                    if s.is_null() {
                        sys::cuMemcpyDtoH_v2(h, src, nbytes)
                    } else {
                        sys::cuMemcpyDtoHAsync_v2(h, src, nbytes, s)
                    }
                }
                (false, false) if ft == CUDA && tt == CUDA => {
                    bind(dev_from.device_id)?;
                    if dev_from.device_id == dev_to.device_id {
                        if s.is_null() {
                            sys::cuMemcpyDtoD_v2(dst, src, nbytes)
                        } else {
                            sys::cuMemcpyDtoDAsync_v2(dst, src, nbytes, s)
                        }
                    } else {
                        let (cf, ct) = (primary_context(dev_from.device_id)?, primary_context(dev_to.device_id)?);
                        sys::cuMemcpyPeerAsync(dst, ct, src, cf, nbytes, s)
                    }
                }
                _ => return Err(Error::value("expect copy from/to GPU or between GPU")),
            }
        };
        check(r)
    }

    fn create_stream(&self, dev: DLDevice) -> Result<*mut c_void> {
        bind(dev.device_id)?;
        let mut s: CUstream = std::ptr::null_mut();
        // SAFETY: a context is current; default flags (blocking w.r.t. the legacy stream).
        check(unsafe { sys::cuStreamCreate(&mut s, 0) })?;
        Ok(s.cast())
    }

    fn free_stream(&self, dev: DLDevice, stream: *mut c_void) -> Result<()> {
        bind(dev.device_id)?;
        // SAFETY: a stream from `create_stream` (the caller's contract).
        let r = unsafe { sys::cuStreamDestroy_v2(stream.cast()) };
        if driver::is_deinitialized(r) {
            return Ok(());
        }
        check(r)
    }

    fn stream_sync(&self, dev: DLDevice, stream: *mut c_void) -> Result<()> {
        bind(dev.device_id)?;
        // SAFETY: NULL (the legacy default stream) or a live stream.
        check(unsafe { sys::cuStreamSynchronize(stream.cast()) })
    }

    fn set_stream(&self, _dev: DLDevice, stream: *mut c_void) -> Result<()> {
        STREAM.with(|s| s.set(stream as usize));
        Ok(())
    }

    fn sync_stream_from_to(&self, dev: DLDevice, src: *mut c_void, dst: *mut c_void) -> Result<()> {
        bind(dev.device_id)?;
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: a context is current; `src`/`dst` are NULL or live streams; the event is
        // destroyed after the wait is queued (the driver keeps what it needs).
        unsafe {
            check(sys::cuEventCreate(&mut e, 0))?;
            let r = sys::cuEventRecord(e, src.cast());
            let r = if r == CUresult::CUDA_SUCCESS { sys::cuStreamWaitEvent(dst.cast(), e, 0) } else { r };
            sys::cuEventDestroy_v2(e);
            check(r)
        }
    }

    fn alloc_workspace(&self, dev: DLDevice, nbytes: u64, _hint: DLDataType) -> Result<*mut c_void> {
        with_pool(dev.device_type, |p, a| p.alloc(a, dev.device_id, nbytes))
    }

    fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        with_pool(dev.device_type, |p, a| p.free(a, dev.device_id, ptr))
    }
}

/// Workspace blocks of one device type.
struct CudaAlloc(i32);

impl RawAlloc for CudaAlloc {
    fn alloc(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        let dev = DLDevice { device_type: self.0, device_id };
        CUDA_API.alloc_data_space(dev, nbytes, 256, tvm_runtime_classic::value::dtype::dtype(1, 8, 1))
    }

    fn free(&self, device_id: i32, ptr: *mut c_void) {
        let _ = CUDA_API.free_data_space(DLDevice { device_type: self.0, device_id }, ptr);
    }
}

thread_local! {
    /// The thread's pool of device memory workspaces.
    static DEVICE_POOL: RefCell<LocalPool<CudaAlloc>> = RefCell::new(LocalPool::new(CudaAlloc(CUDA)));
    /// The thread's pool of pinned host workspaces, kept apart from device memory (unlike v0.8).
    static HOST_POOL: RefCell<LocalPool<CudaAlloc>> = RefCell::new(LocalPool::new(CudaAlloc(CUDA_HOST)));
}

fn with_pool<T>(device_type: i32, f: impl FnOnce(&mut WorkspacePool, &CudaAlloc) -> Result<T>) -> Result<T> {
    with_local_pool(if device_type == CUDA_HOST { &HOST_POOL } else { &DEVICE_POOL }, f)
}

/// `runtime.GetCudaFreeMemory`: free and total memory of the thread's current device.
pub(crate) fn free_memory_text() -> Result<String> {
    bind_current()?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: a context is current; out-pointers.
    check(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
    Ok(format!("Current CUDA memory is {free} bytes free out of {total} bytes on device"))
}
