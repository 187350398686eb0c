//! Driving the simulator through its driver entry points, as a CUDA program would: a context
//! on device 0 (two devices are configured), modules from PTX text, device buffers, launches
//! with parameters passed by address.
//!
//! `CUDASIM_TEST_DRIVER=<library>` runs the same calls on another driver, opened at run time
//! (NVIDIA's `libcuda.so.1` on a GPU machine, `scripts/gpu-check.sh`): the kernel tests then
//! check a real GPU against the same expected results.
#![allow(dead_code, reason = "each test binary uses a different part")]

use cudasim::driver::errors::*;
use std::ffi::{c_void, CString};
use std::sync::{Once, OnceLock};

/// The driver named by `CUDASIM_TEST_DRIVER`, opened once (a `dlopen` handle), or `None`: the
/// simulator linked into the test.
fn external() -> Option<usize> {
    static LIB: OnceLock<Option<usize>> = OnceLock::new();
    *LIB.get_or_init(|| {
        let path = std::env::var("CUDASIM_TEST_DRIVER").ok().filter(|p| !p.is_empty())?;
        let c = CString::new(path.clone()).unwrap();
        // SAFETY: a valid C string; the handle is kept for the process's life.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null(), "CUDASIM_TEST_DRIVER={path} cannot be opened");
        Some(h as usize)
    })
}

/// Whether the tests run on the simulator (no `CUDASIM_TEST_DRIVER`).
pub fn simulated() -> bool {
    external().is_none()
}

/// The driver entry points the tests call: each goes to the simulator or, with
/// `CUDASIM_TEST_DRIVER`, to the same symbol of that library.
macro_rules! entry_points {
    ($($name:ident($($a:ident: $t:ty),*);)*) => {$(
        /// The driver's entry point of this name (see [`external`]).
        ///
        /// # Safety
        /// As the driver API documents for this call.
        pub unsafe fn $name($($a: $t),*) -> CUresult {
            match external() {
                Some(h) => {
                    let sym = CString::new(stringify!($name)).unwrap();
                    // SAFETY: a live handle and a C string.
                    let p = unsafe { libc::dlsym(h as *mut c_void, sym.as_ptr()) };
                    assert!(!p.is_null(), "the driver lacks {}", stringify!($name));
                    // SAFETY: the symbol is the driver API function of this name, whose C
                    // prototype these parameter types spell.
                    let f: unsafe extern "C" fn($($t),*) -> CUresult = unsafe { std::mem::transmute(p) };
                    // SAFETY: the caller's contract.
                    unsafe { f($($a),*) }
                }
                // SAFETY: the caller's contract.
                None => unsafe { cudasim::driver::$name($($a),*) },
            }
        }
    )*};
}

/// The entry points through [`external`] (used by the helpers below and the kernel tests;
/// the simulator-only tests call `cudasim::driver` directly).
#[allow(non_snake_case, clippy::too_many_arguments, reason = "the driver API's names and prototypes")]
pub mod drv {
    use super::{external, CUresult};
    use std::ffi::{c_char, c_int, c_uint, c_void, CString};

    entry_points! {
        cuInit(flags: c_uint);
        cuDevicePrimaryCtxRetain(ctx: *mut *mut c_void, d: c_int);
        cuCtxSetCurrent(ctx: *mut c_void);
        cuCtxSynchronize();
        cuMemAlloc_v2(p: *mut u64, n: usize);
        cuMemFree_v2(p: u64);
        cuMemcpyHtoD_v2(dst: u64, src: *const c_void, n: usize);
        cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, n: usize);
        cuMemsetD32_v2(dst: u64, v: u32, n: usize);
        cuModuleLoadDataEx(m: *mut *mut c_void, image: *const c_void, n: c_uint, opts: *mut c_int, vals: *mut *mut c_void);
        cuModuleUnload(m: *mut c_void);
        cuModuleGetFunction(f: *mut *mut c_void, m: *mut c_void, name: *const c_char);
        cuModuleGetGlobal_v2(p: *mut u64, bytes: *mut usize, m: *mut c_void, name: *const c_char);
        cuLaunchKernel(
            f: *mut c_void, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
            shared: c_uint, stream: *mut c_void, params: *mut *mut c_void, extra: *mut *mut c_void
        );
    }
}
use drv::*;

/// Panics with the result's name unless it is `CUDA_SUCCESS`.
#[track_caller]
pub fn ok(r: CUresult) {
    assert_eq!(r, CUDA_SUCCESS, "driver call failed with {}", name(r));
}

/// The name of a result.
pub fn name(r: CUresult) -> String {
    describe(r).map_or_else(|| format!("CUresult {r}"), |(n, _)| n.to_string_lossy().into_owned())
}

static INIT: Once = Once::new();

/// Initialises the driver (two devices) and makes device `dev`'s primary context current on
/// this thread.
pub fn setup(dev: i32) {
    INIT.call_once(|| {
        if std::env::var("CUDASIM_DEVICES").is_err() {
            std::env::set_var("CUDASIM_DEVICES", "2");
        }
        std::env::set_var("CUDASIM_QUIET", "1");
        // SAFETY: no preconditions.
        ok(unsafe { cuInit(0) });
    });
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out-pointer; a retained primary context.
    unsafe {
        ok(cuDevicePrimaryCtxRetain(&mut ctx, dev));
        ok(cuCtxSetCurrent(ctx));
    }
}

/// A loaded module.
pub struct Module(pub *mut c_void);

/// With `TVMRT_PTXAS=<ptxas>` (scripts/gpu-check.sh --simulator), PTX the kernel tests load
/// must be accepted by NVIDIA's assembler for `TVMRT_PTXAS_ARCH` (default sm_90), as a real
/// driver's JIT would have to; PTX with `.extern` functions (libdevice, resolved by whoever
/// loads it) is assembled as relocatable code (`-c`).
pub fn ptxas_check(ptx: &str) {
    let Some(ptxas) = std::env::var_os("TVMRT_PTXAS") else { return };
    let arch = std::env::var("TVMRT_PTXAS_ARCH").unwrap_or_else(|_| "sm_90".into());
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::var_os("TVMRT_TEST_TMPDIR").map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("cudasim-ptxas-{}-{n}.ptx", std::process::id()));
    std::fs::write(&path, ptx).unwrap();
    let mut cmd = std::process::Command::new(&ptxas);
    cmd.arg(format!("-arch={arch}")).arg(&path).arg("-o").arg(path.with_extension("cubin"));
    if ptx.contains(".extern .func") {
        cmd.arg("-c");
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("running ptxas: {e}"));
    assert!(
        out.status.success(),
        "ptxas -arch={arch} refuses {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Loads PTX into the current context; the error and JIT log on failure.
pub fn try_load(ptx: &str) -> Result<Module, (CUresult, String)> {
    let text = CString::new(ptx).unwrap();
    let mut m = std::ptr::null_mut();
    let mut log = vec![0u8; 4096];
    let mut opts = [5i32, 6];
    let mut vals = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
    // SAFETY: valid pointers; two options with their values.
    let r = unsafe { cuModuleLoadDataEx(&mut m, text.as_ptr().cast(), 2, opts.as_mut_ptr(), vals.as_mut_ptr()) };
    if r == CUDA_SUCCESS {
        Ok(Module(m))
    } else {
        let end = log.iter().position(|&b| b == 0).unwrap_or(0);
        Err((r, String::from_utf8_lossy(&log[..end]).into_owned()))
    }
}

/// Loads PTX, panicking with the log on failure.
#[track_caller]
pub fn load(ptx: &str) -> Module {
    ptxas_check(ptx);
    try_load(ptx).unwrap_or_else(|(r, log)| panic!("load failed with {}: {log}", name(r)))
}

impl Module {
    /// A kernel.
    pub fn func(&self, n: &str) -> *mut c_void {
        let c = CString::new(n).unwrap();
        let mut f = std::ptr::null_mut();
        // SAFETY: valid pointers.
        ok(unsafe { cuModuleGetFunction(&mut f, self.0, c.as_ptr()) });
        f
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: a loaded module, unloaded once.
        unsafe { cuModuleUnload(self.0) };
    }
}

/// A device buffer.
pub struct Buf(pub u64, pub usize);

impl Buf {
    /// `n` bytes of device memory.
    pub fn new(n: usize) -> Buf {
        let mut p = 0;
        // SAFETY: valid out-pointer.
        ok(unsafe { cuMemAlloc_v2(&mut p, n) });
        Buf(p, n)
    }

    /// A buffer holding `v`.
    pub fn from<T: Copy>(v: &[T]) -> Buf {
        let n = std::mem::size_of_val(v);
        let b = Buf::new(n.max(1));
        // SAFETY: `v` holds `n` bytes; the buffer too.
        ok(unsafe { cuMemcpyHtoD_v2(b.0, v.as_ptr().cast(), n) });
        b
    }

    /// The first `n` elements.
    pub fn read<T: Copy + Default>(&self, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        // SAFETY: `out` holds the bytes asked for.
        ok(unsafe { cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), self.0, n * std::mem::size_of::<T>()) });
        out
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: an allocation freed once (errors of a poisoned context are ignored).
        unsafe { cuMemFree_v2(self.0) };
    }
}

/// A kernel parameter.
#[derive(Clone, Copy)]
pub enum P {
    /// A pointer or 64-bit integer.
    U64(u64),
    /// A 32-bit integer.
    U32(u32),
    /// A float.
    F32(f32),
    /// A double.
    F64(f64),
}

/// Launches `f` and returns the launch's result (not waiting for it).
pub fn launch_async(f: *mut c_void, grid: [u32; 3], block: [u32; 3], shmem: u32, args: &[P]) -> CUresult {
    let mut slots: Vec<u64> = args
        .iter()
        .map(|a| match *a {
            P::U64(v) => v,
            P::U32(v) => u64::from(v),
            P::F32(v) => u64::from(v.to_bits()),
            P::F64(v) => v.to_bits(),
        })
        .collect();
    let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast()).collect();
    // SAFETY: one pointer per parameter, each to 8 bytes (little-endian: 4-byte values first).
    unsafe {
        cuLaunchKernel(
            f,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shmem,
            std::ptr::null_mut(),
            ptrs.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
}

/// Launches `f` and waits; the first error.
pub fn launch(f: *mut c_void, grid: [u32; 3], block: [u32; 3], shmem: u32, args: &[P]) -> CUresult {
    let r = launch_async(f, grid, block, shmem, args);
    if r != CUDA_SUCCESS {
        return r;
    }
    // SAFETY: no preconditions.
    unsafe { cuCtxSynchronize() }
}

/// Runs a one-kernel module `k` with one block of `threads` threads: `out` (u64 values, as
/// many as `n`) is the first parameter, then `args`; returns the output slots.
pub fn run1(ptx: &str, threads: u32, n: usize, args: &[P]) -> Vec<u64> {
    let m = load(ptx);
    let out = Buf::from(&vec![0u64; n]);
    let mut all = vec![P::U64(out.0)];
    all.extend_from_slice(args);
    ok(launch(m.func("k"), [1, 1, 1], [threads, 1, 1], 0, &all));
    out.read(n)
}

/// PTX text with the usual header.
pub fn ptx(body: &str) -> String {
    format!(".version 7.0\n.target sm_70\n.address_size 64\n{body}")
}
