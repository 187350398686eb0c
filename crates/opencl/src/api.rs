//! The OpenCL device API (type 4): one process-wide workspace (platform,
//! devices, one context, one in-order queue per device) set up on the first operation that needs
//! it, buffer descriptors as data pointers, copies, queue sync and per-thread workspace pools.

use super::driver::{self, check, Driver, Handle};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::OnceLock;
use tvm_runtime_classic::abi::{DLDataType, DLDevice};
use tvm_runtime_classic::device::workspace::{with_local_pool, LocalPool, RawAlloc, WorkspacePool};
use tvm_runtime_classic::device::{Attr, DeviceApi, CPU, OPENCL};
use tvm_runtime_classic::error::{Error, Result};

/// The chosen platform, its devices, the context and one queue per device.
pub struct Workspace {
    /// The driver entry points.
    pub drv: &'static Driver,
    /// The devices, in the driver's order; device id `i` is `devices[i]`.
    pub devices: Vec<Handle>,
    /// One context for all devices.
    pub context: Handle,
    /// One in-order queue per device.
    pub queues: Vec<Handle>,
    /// Platform name and version, for the program cache key.
    pub platform_desc: String,
}

// SAFETY: OpenCL contexts, queues, devices and platforms are thread-safe objects (OpenCL 1.2
// appendix A.2); the handles are only passed to the driver.
unsafe impl Send for Workspace {}
// SAFETY: as above; the workspace is immutable after initialisation.
unsafe impl Sync for Workspace {}

static WORKSPACE: OnceLock<std::result::Result<Workspace, String>> = OnceLock::new();

/// The OpenCL workspace, initialised on first use; the error (remembered) starts with
/// `No OpenCL device`.
pub fn workspace() -> Result<&'static Workspace> {
    match WORKSPACE.get_or_init(init) {
        Ok(w) => Ok(w),
        Err(why) => Err(Error::tvm(format!("No OpenCL device ({why})"))),
    }
}

/// The workspace if it was set up already (never initialises one).
pub(crate) fn workspace_if_ready() -> Result<&'static Workspace> {
    match WORKSPACE.get() {
        Some(Ok(w)) => Ok(w),
        _ => Err(Error::tvm("No OpenCL device")),
    }
}

/// A string-valued info query (trailing NULs stripped).
fn info_string(f: driver::InfoFn, obj: Handle, param: u32) -> Result<String> {
    let mut n = 0usize;
    // SAFETY: a size query with a NULL buffer.
    check(unsafe { f(obj, param, 0, std::ptr::null_mut(), &mut n) })?;
    let mut buf = vec![0u8; n];
    // SAFETY: `buf` has the `n` bytes the driver asked for.
    check(unsafe { f(obj, param, n, buf.as_mut_ptr().cast(), std::ptr::null_mut()) })?;
    while buf.last() == Some(&0) {
        buf.pop();
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// A fixed-size info query.
fn info_value<T: Copy + Default>(drv: &Driver, device: Handle, param: u32) -> Result<T> {
    let mut v = T::default();
    // SAFETY: `v` is a writable buffer of exactly size_of::<T>() bytes.
    check(unsafe {
        (drv.GetDeviceInfo)(device, param, std::mem::size_of::<T>(), (&mut v as *mut T).cast(), std::ptr::null_mut())
    })?;
    Ok(v)
}

fn devices_of(drv: &Driver, platform: Handle, kind: u64) -> Vec<Handle> {
    let mut n: u32 = 0;
    // SAFETY: a count query with a NULL list.
    if unsafe { (drv.GetDeviceIDs)(platform, kind, 0, std::ptr::null_mut(), &mut n) } != driver::SUCCESS || n == 0 {
        return Vec::new();
    }
    let mut devs = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: `devs` holds `n` entries.
    if unsafe { (drv.GetDeviceIDs)(platform, kind, n, devs.as_mut_ptr(), std::ptr::null_mut()) } != driver::SUCCESS {
        return Vec::new();
    }
    devs
}

fn warn(msg: &str) {
    eprintln!("[tvm-runtime] warning: {msg}");
}

/// Discovery: the first platform with GPU devices, or else CPU devices on that
/// same platform; all of its devices; one context; one queue each.
fn init() -> std::result::Result<Workspace, String> {
    let drv = driver::driver().map_err(str::to_owned)?;
    let mut n: u32 = 0;
    // SAFETY: a count query with a NULL list.
    let rc = unsafe { (drv.GetPlatformIDs)(0, std::ptr::null_mut(), &mut n) };
    if rc != driver::SUCCESS || n == 0 {
        warn("No OpenCL platform matched given existing options ...");
        return Err(if rc != driver::SUCCESS {
            format!("no OpenCL platform: clGetPlatformIDs returned {rc} ({})", driver::error_name(rc))
        } else {
            "no OpenCL platform is installed".into()
        });
    }
    let mut platforms = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: `platforms` holds `n` entries.
    check(unsafe { (drv.GetPlatformIDs)(n, platforms.as_mut_ptr(), std::ptr::null_mut()) })
        .map_err(|e| e.to_string())?;
    let mut chosen = None;
    for &p in &platforms {
        let mut devs = devices_of(drv, p, driver::DEVICE_TYPE_GPU);
        if devs.is_empty() {
            warn("Using CPU OpenCL device");
            devs = devices_of(drv, p, driver::DEVICE_TYPE_CPU);
        }
        if !devs.is_empty() {
            chosen = Some((p, devs));
            break;
        }
    }
    let Some((platform, devices)) = chosen else {
        warn("No OpenCL device");
        return Err("no OpenCL platform has a GPU or CPU device".into());
    };
    let mut err = 0;
    // SAFETY: `devices` holds `devices.len()` valid device handles; no callback.
    let context = unsafe {
        (drv.CreateContext)(
            std::ptr::null(),
            devices.len() as u32,
            devices.as_ptr(),
            None,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    check(err).map_err(|e| e.to_string())?;
    let mut queues = Vec::with_capacity(devices.len());
    for &d in &devices {
        // SAFETY: `context` holds `d`; properties 0 = in order, no profiling.
        let q = unsafe { (drv.CreateCommandQueue)(context, d, 0, &mut err) };
        check(err).map_err(|e| e.to_string())?;
        queues.push(q);
    }
    let platform_desc = format!(
        "{} {}",
        info_string(drv.GetPlatformInfo, platform, driver::PLATFORM_NAME).unwrap_or_default(),
        info_string(drv.GetPlatformInfo, platform, driver::PLATFORM_VERSION).unwrap_or_default()
    );
    Ok(Workspace { drv, devices, context, queues, platform_desc })
}

impl Workspace {
    /// The device handle of `id` (`Invalid OpenCL device_id=<id>`).
    pub fn device(&self, id: i32) -> Result<Handle> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.devices.get(i).copied())
            .ok_or_else(|| Error::value(format!("Invalid OpenCL device_id={id}")))
    }

    /// The queue of device `id` (`GetQueue`).
    pub fn queue(&self, id: i32) -> Result<Handle> {
        self.device(id)?;
        Ok(self.queues[id as usize])
    }

    /// A string describing device `id` for cache keys: name, versions, driver.
    pub(crate) fn device_desc(&self, id: i32) -> Result<String> {
        let d = self.device(id)?;
        let q = |p| info_string(self.drv.GetDeviceInfo, d, p).unwrap_or_default();
        Ok(format!(
            "{} | {} | {} | {}",
            self.platform_desc,
            q(driver::DEVICE_NAME),
            q(driver::DEVICE_VERSION),
            q(driver::DRIVER_VERSION)
        ))
    }
}

/// What an OpenCL data pointer points to: the `cl_mem` first.
#[repr(C)]
pub(crate) struct BufferDesc {
    /// The buffer.
    pub buffer: Handle,
    /// 0: 1-D buffer (the only layout this runtime makes).
    pub layout: i32,
}

thread_local! {
    /// The calling thread's OpenCL device id (`SetDevice`).
    static THREAD_DEVICE: Cell<i32> = const { Cell::new(0) };
}

/// The calling thread's OpenCL device id.
pub(crate) fn thread_device() -> i32 {
    THREAD_DEVICE.with(Cell::get)
}

/// The OpenCL device API.
pub struct OpenClApi;

/// The one instance.
pub static OPENCL_API: OpenClApi = OpenClApi;

fn buffer_of(ptr: *const c_void) -> Result<Handle> {
    if ptr.is_null() {
        return Err(Error::value("OpenCL copy with a NULL data pointer"));
    }
    // SAFETY: OpenCL data pointers are descriptors made by `alloc_data_space` (the C API's
    // contract for device pointers of type 4); the `cl_mem` is their first word.
    Ok(unsafe { (*ptr.cast::<BufferDesc>()).buffer })
}

impl DeviceApi for OpenClApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        THREAD_DEVICE.with(|d| d.set(dev.device_id));
        Ok(())
    }

    fn get_attr(&self, dev: DLDevice, kind: i32) -> Result<Attr> {
        if kind == 0 {
            let n = workspace().map(|w| w.devices.len()).unwrap_or(0);
            return Ok(Attr::Int(i64::from(usize::try_from(dev.device_id).is_ok_and(|i| i < n))));
        }
        let ws = workspace()?;
        let d = ws.device(dev.device_id).map_err(|_| Error::value(format!("Invalid device id {}", dev.device_id)))?;
        let drv = ws.drv;
        let s = |p| info_string(drv.GetDeviceInfo, d, p);
        Ok(match kind {
            1 => Attr::Int(info_value::<usize>(drv, d, driver::DEVICE_MAX_WORK_GROUP_SIZE)? as i64),
            2 => Attr::Int(1),
            3 => Attr::Int(info_value::<u64>(drv, d, driver::DEVICE_LOCAL_MEM_SIZE)? as i64),
            4 => {
                let v = s(driver::DEVICE_VERSION)?;
                let rest = v.get(7..).unwrap_or("");
                Attr::Str(rest.split(' ').next().unwrap_or("").to_owned())
            }
            5 => Attr::Str(s(driver::DEVICE_NAME)?),
            6 => Attr::Int(i64::from(info_value::<u32>(drv, d, driver::DEVICE_MAX_CLOCK_FREQUENCY)?) * 1000),
            7 => Attr::Int(i64::from(info_value::<u32>(drv, d, driver::DEVICE_MAX_COMPUTE_UNITS)?)),
            8 => {
                let dims = info_value::<[usize; 3]>(drv, d, driver::DEVICE_MAX_WORK_ITEM_SIZES)?;
                Attr::Str(format!("[{}, {}, {}]", dims[0], dims[1], dims[2]))
            }
            11 => Attr::Int(120),
            12 => {
                let mut v = s(driver::DRIVER_VERSION)?;
                v.truncate(127);
                Attr::Str(v)
            }
            _ => Attr::Null,
        })
    }

    fn alloc_data_space(&self, _dev: DLDevice, nbytes: usize, _align: usize, _hint: DLDataType) -> Result<*mut c_void> {
        let ws = workspace()?;
        let mut err = 0;
        // SAFETY: a plain read-write buffer with no host pointer.
        let buffer = unsafe {
            (ws.drv.CreateBuffer)(ws.context, driver::MEM_READ_WRITE, nbytes.max(1), std::ptr::null_mut(), &mut err)
        };
        check(err).map_err(|e| e.context(format!("allocating {nbytes} bytes of OpenCL memory")))?;
        Ok(Box::into_raw(Box::new(BufferDesc { buffer, layout: 0 })).cast())
    }

    fn alloc_data_space_scoped(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        scope: Option<&str>,
    ) -> Result<*mut c_void> {
        match scope {
            None | Some("global") => {
                let n = tvm_runtime_classic::device::shape_bytes(shape, dtype)?;
                self.alloc_data_space(dev, n, tvm_runtime_classic::device::data_alignment(dtype), dtype)
            }
            Some(s) if s.contains("texture") => Err(Error::value(format!(
                "OpenCL texture memory (scope {s}) is not supported by this runtime; use buffer (global) scope"
            ))),
            Some(s) => Err(tvm_runtime_classic::device::unsupported_scope(s)),
        }
    }

    fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let ws = workspace()?;
        let q = ws.queue(dev.device_id)?;
        // SAFETY: `ptr` is a descriptor from `alloc_data_space` (the caller's contract), freed
        // once; the queue is finished first so no queued command still uses the buffer.
        unsafe {
            check((ws.drv.Finish)(q))?;
            let desc = Box::from_raw(ptr.cast::<BufferDesc>());
            check((ws.drv.ReleaseMemObject)(desc.buffer))
        }
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
        _stream: *mut c_void,
    ) -> Result<()> {
        let (fo, to_off) = (from_offset as usize, to_offset as usize);
        let (ft, tt) = (dev_from.device_type, dev_to.device_type);
        if !matches!((ft, tt), (OPENCL, OPENCL) | (OPENCL, CPU) | (CPU, OPENCL)) {
            return Err(Error::value("Expect copy from/to OpenCL or between OpenCL"));
        }
        let ws = workspace()?;
        // Device-to-device copies go on the destination's queue, host transfers on the device's.
        let q = ws.queue(if tt == OPENCL { dev_to.device_id } else { dev_from.device_id })?;
        if nbytes == 0 {
            return Ok(());
        }
        let host = |p: *const c_void, off: usize| -> Result<*mut c_void> {
            if p.is_null() {
                return Err(Error::value("copy with a NULL host pointer"));
            }
            Ok(p.cast::<u8>().wrapping_add(off).cast::<c_void>().cast_mut())
        };
        let (none, no_event) = (std::ptr::null(), std::ptr::null_mut());
        // SAFETY: the buffers are live descriptors and the host ranges hold `nbytes` past their
        // offsets (the tensor contract the caller checked); host transfers finish before return.
        unsafe {
            match (ft, tt) {
                (OPENCL, OPENCL) => check((ws.drv.EnqueueCopyBuffer)(
                    q,
                    buffer_of(from)?,
                    buffer_of(to)?,
                    fo,
                    to_off,
                    nbytes,
                    0,
                    none,
                    no_event,
                )),
                (OPENCL, _) => {
                    let h = host(to, to_off)?;
                    check((ws.drv.EnqueueReadBuffer)(q, buffer_of(from)?, 0, fo, nbytes, h, 0, none, no_event))?;
                    check((ws.drv.Finish)(q))
                }
                _ => {
                    let h = host(from, fo)?;
                    check((ws.drv.EnqueueWriteBuffer)(q, buffer_of(to)?, 0, to_off, nbytes, h, 0, none, no_event))?;
                    check((ws.drv.Finish)(q))
                }
            }
        }
    }

    fn stream_sync(&self, dev: DLDevice, stream: *mut c_void) -> Result<()> {
        if !stream.is_null() {
            return Err(Error::value("Check failed: (stream == nullptr) is false: OpenCL has no streams"));
        }
        let ws = workspace()?;
        let q = ws.queue(dev.device_id)?;
        // SAFETY: a queue of the workspace.
        check(unsafe { (ws.drv.Finish)(q) })
    }

    fn alloc_workspace(&self, dev: DLDevice, nbytes: u64, _hint: DLDataType) -> Result<*mut c_void> {
        with_pool(|p| p.alloc(&OpenClAlloc, dev.device_id, nbytes))
    }

    fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        with_pool(|p| p.free(&OpenClAlloc, dev.device_id, ptr))
    }
}

/// Workspace blocks are ordinary OpenCL allocations.
struct OpenClAlloc;

impl RawAlloc for OpenClAlloc {
    fn alloc(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        let dev = DLDevice { device_type: OPENCL, device_id };
        OPENCL_API.alloc_data_space(
            dev,
            nbytes,
            tvm_runtime_classic::device::ALLOC_ALIGNMENT,
            tvm_runtime_classic::value::dtype::dtype(1, 8, 1),
        )
    }

    fn free(&self, device_id: i32, ptr: *mut c_void) {
        let _ = OPENCL_API.free_data_space(DLDevice { device_type: OPENCL, device_id }, ptr);
    }
}

thread_local! {
    /// The thread's OpenCL workspace pool; its free blocks are released at thread exit.
    static POOL: RefCell<LocalPool<OpenClAlloc>> = RefCell::new(LocalPool::new(OpenClAlloc));
}

fn with_pool<T>(f: impl FnOnce(&mut WorkspacePool) -> Result<T>) -> Result<T> {
    with_local_pool(&POOL, |p, _| f(p))
}
