//! The simulated driver's state and its C entry points. `cuInit` reads the configuration
//! (`CUDASIM_DEVICES`, `CUDASIM_SM`, `CUDASIM_MEMORY_MB`, `CUDASIM_MAX_STEPS`, `CUDASIM_QUIET`)
//! and reserves, with no access, the host address range that device addresses live in. Each
//! device has one primary context whose state (memory, the work queue, events, the sticky
//! error) sits behind the device's lock; handles of streams, events, modules and functions are
//! opaque numbers checked against a registry, so a stale or foreign handle is an error, never a
//! crash.
//!
//! Lock order: a device's lock (devices in ascending order when several), then the handle
//! registry, then pinned memory. Never the other way round.

pub mod errors;

mod attrs;
mod ctx;
mod launch;
mod mem;
mod work;

pub use attrs::*;
pub use ctx::*;
pub use launch::*;
pub use mem::*;

use crate::memory::{DeviceMemory, PinnedMemory};
use crate::module::Module;
use crate::ptx::ir::Kernel;
use crate::ptx::lower::Windows;
use errors::*;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;
pub use work::Work;

/// The configuration read by `cuInit`.
#[derive(Clone, Debug)]
pub struct Config {
    /// Simulated devices (`CUDASIM_DEVICES`, default 1, at most 8).
    pub devices: usize,
    /// Compute capability as `major * 10 + minor` (`CUDASIM_SM`, default 70).
    pub sm: u32,
    /// Bytes of memory per device (`CUDASIM_MEMORY_MB`, default 4096).
    pub memory: u64,
    /// Warp-instructions a launch may run (`CUDASIM_MAX_STEPS`, default 2^31).
    pub max_steps: u64,
    /// No diagnostics on stderr (`CUDASIM_QUIET=1`).
    pub quiet: bool,
    /// Multiprocessors per device.
    pub sm_count: u32,
}

impl Config {
    fn from_env() -> Result<Config, String> {
        fn var<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
            match std::env::var(name) {
                Ok(s) if !s.is_empty() => s.trim().parse().map_err(|_| format!("{name}={s} is not valid")),
                _ => Ok(default),
            }
        }
        let devices: usize = var("CUDASIM_DEVICES", 1)?;
        let sm: u32 = var("CUDASIM_SM", 70)?;
        if devices > 8 || !(30..=120).contains(&sm) {
            return Err("CUDASIM_DEVICES must be 0..8 and CUDASIM_SM like 70".into());
        }
        let mb: u64 = var("CUDASIM_MEMORY_MB", 4096)?;
        Ok(Config {
            devices,
            sm,
            memory: mb.clamp(1, 1 << 20) << 20,
            max_steps: var("CUDASIM_MAX_STEPS", 1u64 << 31)?,
            quiet: var("CUDASIM_QUIET", 0u32)? != 0,
            sm_count: 80,
        })
    }
}

/// The state of one device's primary context.
pub struct DevState {
    /// Device memory.
    pub mem: DeviceMemory,
    /// Work submitted and not run yet, in submission order (all streams share it).
    pub queue: VecDeque<Work>,
    /// Items ever submitted / completed.
    pub submitted: u64,
    /// Items completed.
    pub completed: u64,
    /// The sticky error of a failed launch (`CUDA_SUCCESS` when none).
    pub sticky: CUresult,
    /// Retain count of the primary context.
    pub retain: u32,
    /// Its flags.
    pub flags: u32,
    /// Events of this device: submission number of their last record and completion time.
    pub events: HashMap<usize, (Option<u64>, Option<Instant>)>,
}

/// One simulated device.
pub struct Device {
    /// Its ordinal.
    pub ordinal: usize,
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: Mutex<DevState>,
}

/// A stream's device and flags.
pub struct StreamInfo {
    /// The device.
    pub dev: usize,
}

/// A loaded module.
pub struct ModEntry {
    /// The device.
    pub dev: usize,
    /// The module.
    pub module: Arc<Module>,
    /// Function handles handed out, by name.
    pub funcs: HashMap<String, usize>,
}

/// A function handle.
pub struct FuncEntry {
    /// The device.
    pub dev: usize,
    /// Its module's handle.
    pub module: usize,
    /// The kernel.
    pub kernel: Arc<Kernel>,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub max_dyn: u32,
    /// PTX version and target of its module.
    pub versions: (u32, u32),
}

/// Handles of streams, events, modules and functions.
#[derive(Default)]
pub struct Handles {
    next: u64,
    /// Streams.
    pub streams: HashMap<usize, StreamInfo>,
    /// Events: device and flags.
    pub events: HashMap<usize, (usize, u32)>,
    /// Modules.
    pub modules: HashMap<usize, ModEntry>,
    /// Functions.
    pub funcs: HashMap<usize, FuncEntry>,
}

impl Handles {
    /// A new opaque handle of `kind` (never a dereferenceable address).
    pub fn fresh(&mut self, kind: u64) -> usize {
        self.next += 1;
        (0x5EE0_0000_0000_0000u64 | (kind << 40) | self.next) as usize
    }

    /// Forgets every handle of device `dev` (a context reset).
    pub fn drop_device(&mut self, dev: usize) {
        self.streams.retain(|_, s| s.dev != dev);
        self.events.retain(|_, e| e.0 != dev);
        self.modules.retain(|_, m| m.dev != dev);
        self.funcs.retain(|_, f| f.dev != dev);
    }
}

/// The whole simulator.
pub struct Sim {
    /// Its configuration.
    pub cfg: Config,
    /// Generic windows of shared and local memory.
    pub windows: Windows,
    /// The devices.
    pub devices: Vec<Device>,
    /// Pinned host memory.
    pub pinned: Mutex<PinnedMemory>,
    /// Handles.
    pub handles: Mutex<Handles>,
}

static SIM: OnceLock<Result<Sim, CUresult>> = OnceLock::new();

/// Locks a mutex, ignoring poisoning (a panic is caught at the boundary and reported).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Handles of the primary contexts: this base plus the ordinal.
pub const CTX_BASE: usize = 0x5EE0_C000_0000_0000u64 as usize;

/// Creates the simulator (`cuInit`).
fn create() -> Result<Sim, CUresult> {
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cudasim: {e}");
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
    };
    if cfg.devices == 0 {
        return Err(CUDA_ERROR_NO_DEVICE);
    }
    let window = crate::exec::WINDOW;
    let span = (cfg.memory * 4).max(4 << 30);
    let len = 3 * window + span * cfg.devices as u64;
    // SAFETY: an anonymous mapping with no access: it only reserves addresses, which are
    // never dereferenced (device bytes live in host buffers). It is kept for the process.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        eprintln!("cudasim: cannot reserve {len} bytes of address space");
        return Err(CUDA_ERROR_OUT_OF_MEMORY);
    }
    let base = (p as u64).next_multiple_of(window);
    let windows = Windows { shared: base, local: base + window };
    let devices = (0..cfg.devices)
        .map(|i| {
            let start = base + 2 * window + span * i as u64;
            Device {
                ordinal: i,
                name: format!("cudasim simulated GPU {i} (sm_{})", cfg.sm),
                state: Mutex::new(DevState {
                    mem: DeviceMemory::new(start, span, cfg.memory),
                    queue: VecDeque::new(),
                    submitted: 0,
                    completed: 0,
                    sticky: CUDA_SUCCESS,
                    retain: 0,
                    flags: 0,
                    events: HashMap::new(),
                }),
            }
        })
        .collect();
    Ok(Sim {
        cfg,
        windows,
        devices,
        pinned: Mutex::new(PinnedMemory::default()),
        handles: Mutex::new(Handles::default()),
    })
}

/// The initialised simulator.
pub fn sim() -> Result<&'static Sim, CUresult> {
    match SIM.get() {
        None => Err(CUDA_ERROR_NOT_INITIALIZED),
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => Err(*e),
    }
}

impl Sim {
    /// Device `d`, or `CUDA_ERROR_INVALID_DEVICE`.
    pub fn device(&self, d: i64) -> Result<&Device, CUresult> {
        usize::try_from(d).ok().and_then(|d| self.devices.get(d)).ok_or(CUDA_ERROR_INVALID_DEVICE)
    }

    /// Which device's memory holds address `p`.
    pub fn owner(&self, p: u64) -> Option<usize> {
        self.devices.iter().position(|d| lock(&d.state).mem.owns(p))
    }

    /// Prints a diagnostic unless quiet.
    pub fn say(&self, msg: &str) {
        if !self.cfg.quiet {
            eprintln!("cudasim: {msg}");
        }
    }
}

/// A thread's context stack. It needs no destructor, so it stays usable while other
/// thread-local destructors run at thread exit (freeing memory through the driver then works,
/// as with a real driver).
pub struct CtxStack {
    items: [usize; 32],
    len: usize,
}

impl CtxStack {
    /// The top.
    pub fn top(&self) -> Option<usize> {
        self.len.checked_sub(1).map(|i| self.items[i])
    }
    /// Pops the top.
    pub fn pop(&mut self) -> Option<usize> {
        let t = self.top()?;
        self.len -= 1;
        Some(t)
    }
    /// Pushes (`CUDA_ERROR_INVALID_VALUE` beyond 32 levels).
    pub fn push(&mut self, c: usize) -> Result<(), CUresult> {
        *self.items.get_mut(self.len).ok_or(CUDA_ERROR_INVALID_VALUE)? = c;
        self.len += 1;
        Ok(())
    }
}

thread_local! {
    /// This thread's context stack (handles).
    static STACK: RefCell<CtxStack> = const { RefCell::new(CtxStack { items: [0; 32], len: 0 }) };
}

/// The device of the calling thread's current context, checked: a context must be current,
/// active, and free of a sticky error.
pub fn current() -> Result<(&'static Sim, usize), CUresult> {
    let s = sim()?;
    let top = STACK.with(|st| st.borrow().top()).ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
    let d = top.wrapping_sub(CTX_BASE);
    let dev = s.devices.get(d).ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
    let st = lock(&dev.state);
    if st.retain == 0 {
        return Err(CUDA_ERROR_INVALID_CONTEXT);
    }
    if st.sticky != CUDA_SUCCESS {
        return Err(st.sticky);
    }
    Ok((s, d))
}

/// Runs an entry point's body: its error as the result, a panic as `CUDA_ERROR_UNKNOWN`.
pub fn run(f: impl FnOnce() -> Result<(), CUresult>) -> CUresult {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => CUDA_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => {
            eprintln!("cudasim: internal error (a panic) in a driver call");
            CUDA_ERROR_UNKNOWN
        }
    }
}

/// Writes `v` through an out-pointer (`CUDA_ERROR_INVALID_VALUE` when NULL).
///
/// # Safety
/// `p` is NULL or valid for writing a `T`.
pub unsafe fn out<T>(p: *mut T, v: T) -> Result<(), CUresult> {
    if p.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-NULL and valid per the contract.
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// `cuInit`: creates the simulator on the first call.
///
/// # Safety
/// Callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: std::ffi::c_uint) -> CUresult {
    run(|| {
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        match SIM.get_or_init(create) {
            Ok(_) => Ok(()),
            Err(e) => Err(*e),
        }
    })
}

/// `cuDriverGetVersion`: 12080 (CUDA 12.8), before `cuInit` too.
///
/// # Safety
/// `v` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(v: *mut std::ffi::c_int) -> CUresult {
    // SAFETY: per the contract.
    run(|| unsafe { out(v, 12080) })
}

/// `cuGetErrorName`.
///
/// # Safety
/// `p` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(e: CUresult, p: *mut *const std::ffi::c_char) -> CUresult {
    run(|| match describe(e) {
        // SAFETY: per the contract; the strings are static.
        Some((name, _)) => unsafe { out(p, name.as_ptr()) },
        None => {
            // SAFETY: as above.
            unsafe { out(p, std::ptr::null())? };
            Err(CUDA_ERROR_INVALID_VALUE)
        }
    })
}

/// `cuGetErrorString`.
///
/// # Safety
/// `p` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(e: CUresult, p: *mut *const std::ffi::c_char) -> CUresult {
    run(|| match describe(e) {
        // SAFETY: per the contract; the strings are static.
        Some((_, text)) => unsafe { out(p, text.as_ptr()) },
        None => {
            // SAFETY: as above.
            unsafe { out(p, std::ptr::null())? };
            Err(CUDA_ERROR_INVALID_VALUE)
        }
    })
}
