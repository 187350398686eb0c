//! The OpenCL module (type key `opencl`): kernel source
//! split per kernel at load time (no driver needed), one program per (kernel, device) built on
//! first call, one `cl_kernel` per (thread, module, kernel, device), launched with the NDRange
//! the kernel's thread tags give.
//!
//! Beyond TVM: built programs can be cached on disk ([`set_cache_dir`]; the environment
//! variable `TVM_OPENCL_PROGRAM_CACHE` sets the directory at start), keyed by the kernel source
//! and the device's platform, name, version and driver, so a second process skips the compile.

use super::api::{self, thread_device, Workspace};
use super::driver::{check, Handle};
use parking_lot::{Mutex, RwLock};
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use tvm_runtime_classic::device::kernel::{self, FunctionMap, KernelSig};
use tvm_runtime_classic::error::{Error, Result};
use tvm_runtime_classic::function::PackedFunc;
use tvm_runtime_classic::io::{Reader, Writer};
use tvm_runtime_classic::module::{Module, ModuleNode};
use tvm_runtime_classic::value::Args;

/// The delimiter before each kernel in the source.
const DELIMITER: &str = "// Function: ";

/// Splits kernel-delimited source into (name, piece) pairs.
pub(crate) fn split_kernels(source: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pos = match source.find(DELIMITER) {
        Some(p) => p,
        None => return out,
    };
    loop {
        let start = pos + DELIMITER.len();
        let (name, body_start) = match source[start..].find('\n') {
            Some(nl) => (&source[start..start + nl], start + nl + 1),
            None => (&source[start..], source.len()),
        };
        let end = source[body_start..].find(DELIMITER).map_or(source.len(), |p| body_start + p);
        out.push((name.to_owned(), source[body_start..end].to_owned()));
        if end == source.len() {
            return out;
        }
        pos = end;
    }
}

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// The uids of the modules alive now, and how many modules have gone: a thread's kernel table
/// drops the entries of gone modules when it next adds one, so loading and freeing modules in a
/// loop does not grow it.
static LIVE_UIDS: Mutex<std::collections::BTreeSet<u64>> = Mutex::new(std::collections::BTreeSet::new());
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// The state shared by the module and the functions it hands out.
struct Inner {
    uid: u64,
    fmt: String,
    fmap: FunctionMap,
    data: Vec<u8>,
    /// The source piece of each `fmap` entry, by index.
    pieces: Vec<String>,
    /// Built programs by (kernel index, device id).
    programs: Mutex<HashMap<(usize, i32), Handle>>,
    /// Every kernel object made on any thread, released with the module.
    kernels: Mutex<Vec<Handle>>,
}

// SAFETY: programs are thread-safe OpenCL objects; the kernels listed here are only released
// (in Drop), never used, through this list: each is used by the one thread that made it.
unsafe impl Send for Inner {}
// SAFETY: as above; the maps are behind mutexes.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        LIVE_UIDS.lock().remove(&self.uid);
        DROPPED.fetch_add(1, Ordering::Release);
        if let Ok(ws) = api::workspace_if_ready() {
            for &k in self.kernels.get_mut().iter() {
                // SAFETY: made by clCreateKernel for this module and no longer reachable: the
                // thread tables key it by this module's uid, which nothing can look up now.
                unsafe { (ws.drv.ReleaseKernel)(k) };
            }
            for &p in self.programs.get_mut().values() {
                // SAFETY: made for this module; its kernels were released just above.
                unsafe { (ws.drv.ReleaseProgram)(p) };
            }
        }
    }
}

/// Kernel objects by (module uid, kernel index, device id).
type KernelTable = HashMap<(u64, usize, i32), Handle>;

thread_local! {
    /// This thread's kernels by (module uid, kernel index, device id), and the [`DROPPED`] count
    /// at its last sweep. Module uids are never reused, so an entry of a dropped module is never
    /// looked up again; sweeps remove such entries.
    static THREAD_KERNELS: RefCell<(u64, KernelTable)> = RefCell::new((0, HashMap::new()));
}

/// An OpenCL module.
pub struct OpenClModule {
    inner: Arc<Inner>,
}

impl OpenClModule {
    /// The function map.
    pub fn fmap(&self) -> &FunctionMap {
        &self.inner.fmap
    }

    /// A module from its payload fields. Splits the source (errors as in v0.8); does not touch
    /// the driver.
    pub fn new(fmt: String, fmap: FunctionMap, data: Vec<u8>) -> Result<OpenClModule> {
        if fmt != "cl" {
            return Err(Error::value(format!(
                "OpenCL binary formats are not supported (format {fmt}): The OpenCL module expects a kernel \
                 delimited source from code generation, but no kernel delimiter was found."
            )));
        }
        let source = String::from_utf8_lossy(&data).into_owned();
        let parsed = split_kernels(&source);
        if parsed.is_empty() {
            return Err(Error::value(
                "The OpenCL module expects a kernel delimited source from code generation, but no kernel delimiter was found.",
            ));
        }
        if parsed.len() != fmap.len() {
            return Err(Error::value(format!(
                "The number of parsed kernel sources does not match the number of kernel functions ({} sources, {} functions)",
                parsed.len(),
                fmap.len()
            )));
        }
        let mut by_name: HashMap<String, String> = parsed.into_iter().collect();
        let mut pieces = Vec::with_capacity(fmap.len());
        for name in fmap.keys() {
            let piece =
                by_name.remove(name).ok_or_else(|| Error::value(format!("no kernel source for function {name}")))?;
            pieces.push(piece);
        }
        let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        LIVE_UIDS.lock().insert(uid);
        let inner = Inner {
            uid,
            fmt,
            fmap,
            data,
            pieces,
            programs: Mutex::new(HashMap::new()),
            kernels: Mutex::new(Vec::new()),
        };
        Ok(OpenClModule { inner: Arc::new(inner) })
    }

    /// `runtime.module.loadbinary_opencl`: `fmt`, function map, source.
    pub fn load(r: &mut Reader<'_>) -> Result<OpenClModule> {
        let (fmt, fmap, data) = kernel::read_payload(r)?;
        OpenClModule::new(fmt, fmap, data)
    }

    /// `runtime.module.loadfile_cl(path, format)`.
    pub fn load_file(path: &str, format: &str) -> Result<OpenClModule> {
        let f = kernel::read_device_file(path, format)?;
        OpenClModule::new(f.fmt, f.fmap, f.data)
    }
}

impl ModuleNode for OpenClModule {
    fn type_key(&self) -> &str {
        "opencl"
    }

    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        if name == "__tvm_main__" {
            return Err(Error::value("Device function do not have main"));
        }
        let Some((idx, _, info)) = self.inner.fmap.get_full(name) else { return Ok(None) };
        let sig = KernelSig::new(name, info)?;
        let inner = Arc::clone(&self.inner);
        Ok(Some(PackedFunc::new(move |args, _ret| launch(&inner, idx, &sig, args))))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        Ok(kernel::write_payload(&self.inner.fmt, &self.inner.fmap, &self.inner.data))
    }

    fn save_to_file(&self, path: &str, format: &str) -> Result<()> {
        kernel::save_device_file(path, format, &self.inner.fmt, &self.inner.data, &self.inner.fmap)
    }

    fn get_source(&self, format: &str) -> Result<String> {
        Ok(if format == self.inner.fmt || self.inner.fmt == "cl" {
            String::from_utf8_lossy(&self.inner.data).into_owned()
        } else {
            String::new()
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One kernel call.
fn launch(inner: &Inner, idx: usize, sig: &KernelSig, args: &Args<'_>) -> Result<()> {
    let ws = api::workspace()?;
    let dev = thread_device();
    let queue = ws.queue(dev)?;
    let call = sig.decode(args)?;
    let k = thread_kernel(ws, inner, idx, dev, &sig.name)?;
    let drv = ws.drv;
    for (i, (&w, kind)) in call.words.iter().zip(&sig.kinds).enumerate() {
        let rc = if *kind == kernel::ArgKind::Handle {
            // The descriptor's first word is the cl_mem: pass the descriptor address itself as
            // the pointer to the argument value (NULL = a NULL buffer).
            // SAFETY: `w` is NULL or a descriptor pointer (the caller's contract for buffers).
            unsafe { (drv.SetKernelArg)(k, i as u32, std::mem::size_of::<Handle>(), w as usize as *const c_void) }
        } else {
            // SAFETY: `w` holds the converted value in its first `size` bytes (little endian).
            unsafe { (drv.SetKernelArg)(k, i as u32, kind.size(), (&w as *const u64).cast()) }
        };
        check(rc).map_err(|e| e.context(format!("setting argument {i} of kernel {}", sig.name)))?;
    }
    let d = sig.launch.work_dim() as usize;
    let mut global = [1usize; 3];
    let mut local = [1usize; 3];
    for i in 0..d {
        local[i] = call.dims.block[i] as usize;
        global[i] = call.dims.grid[i] as usize * local[i];
    }
    // SAFETY: `k` and `queue` are live; the size arrays hold `d <= 3` entries.
    let rc = unsafe {
        (drv.EnqueueNDRangeKernel)(
            queue,
            k,
            d as u32,
            std::ptr::null(),
            global.as_ptr(),
            local.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null_mut(),
        )
    };
    check(rc).map_err(|e| {
        e.context(format!("launching {} with global {:?} local {:?}", sig.name, &global[..d], &local[..d]))
    })
}

/// This thread's kernel object for (module, kernel, device), made on first use (8.5).
fn thread_kernel(ws: &Workspace, inner: &Inner, idx: usize, dev: i32, name: &str) -> Result<Handle> {
    let key = (inner.uid, idx, dev);
    if let Some(k) = THREAD_KERNELS.with(|t| t.borrow().1.get(&key).copied()) {
        return Ok(k);
    }
    let program = program(ws, inner, idx, dev)?;
    let cname = CString::new(name).map_err(|_| Error::value("kernel name contains NUL"))?;
    let mut err: i32 = 0;
    // SAFETY: `program` is built for `dev`; `cname` is NUL-terminated.
    let k = unsafe { (ws.drv.CreateKernel)(program, cname.as_ptr(), &mut err) };
    check(err).map_err(|e| e.context(format!("clCreateKernel {name}")))?;
    inner.kernels.lock().push(k);
    THREAD_KERNELS.with(|t| {
        let (swept, table) = &mut *t.borrow_mut();
        let dropped = DROPPED.load(Ordering::Acquire);
        if *swept != dropped {
            let live = LIVE_UIDS.lock();
            table.retain(|k, _| live.contains(&k.0));
            *swept = dropped;
        }
        table.insert(key, k)
    });
    Ok(k)
}

/// The built program of kernel `idx` for device `dev`, built on first use under the module's
/// lock (from the disk cache when enabled and present).
fn program(ws: &Workspace, inner: &Inner, idx: usize, dev: i32) -> Result<Handle> {
    let mut programs = inner.programs.lock();
    if let Some(&p) = programs.get(&(idx, dev)) {
        return Ok(p);
    }
    let device = ws.device(dev)?;
    let source = &inner.pieces[idx];
    let cache = cache_dir().map(|dir| (dir, ws.device_desc(dev).unwrap_or_default()));
    let cached = cache.as_ref().and_then(|(dir, desc)| cache_read(dir, desc, source));
    let mut p = None;
    if let Some(bin) = cached {
        p = build_from_binary(ws, device, &bin).ok();
    }
    let p = match p {
        Some(p) => p,
        None => {
            let p = build_from_source(ws, device, source)?;
            if let Some((dir, desc)) = &cache {
                if let Ok(bin) = program_binary(ws, p) {
                    cache_write(dir, desc, source, &bin);
                }
            }
            p
        }
    };
    programs.insert((idx, dev), p);
    Ok(p)
}

fn build(ws: &Workspace, device: Handle, program: Handle) -> Result<()> {
    // SAFETY: `program` belongs to the workspace context, which holds `device`; no options.
    let rc = unsafe { (ws.drv.BuildProgram)(program, 1, &device, std::ptr::null(), None, std::ptr::null_mut()) };
    if rc == super::driver::SUCCESS {
        return Ok(());
    }
    let log = build_log(ws, device, program);
    // SAFETY: the program failed to build and is not used again.
    unsafe { (ws.drv.ReleaseProgram)(program) };
    Err(Error::tvm(format!(
        "OpenCL build error for device={device:p} (OpenCL Error, code={rc}: {})\n{log}",
        super::driver::error_name(rc)
    )))
}

fn build_log(ws: &Workspace, device: Handle, program: Handle) -> String {
    let mut n = 0usize;
    // SAFETY: a size query with a NULL buffer.
    let rc = unsafe {
        (ws.drv.GetProgramBuildInfo)(program, device, super::driver::PROGRAM_BUILD_LOG, 0, std::ptr::null_mut(), &mut n)
    };
    if rc != 0 {
        return String::new();
    }
    let mut buf = vec![0u8; n];
    // SAFETY: `buf` holds the `n` bytes asked for.
    unsafe {
        (ws.drv.GetProgramBuildInfo)(
            program,
            device,
            super::driver::PROGRAM_BUILD_LOG,
            n,
            buf.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    while buf.last() == Some(&0) {
        buf.pop();
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn build_from_source(ws: &Workspace, device: Handle, source: &str) -> Result<Handle> {
    let ptr = source.as_ptr().cast::<std::ffi::c_char>();
    let len = source.len();
    let mut err: i32 = 0;
    // SAFETY: one string of `len` bytes (lengths given, so no NUL is needed).
    let p = unsafe { (ws.drv.CreateProgramWithSource)(ws.context, 1, &ptr, &len, &mut err) };
    check(err).map_err(|e| e.context("clCreateProgramWithSource"))?;
    build(ws, device, p)?;
    Ok(p)
}

fn build_from_binary(ws: &Workspace, device: Handle, bin: &[u8]) -> Result<Handle> {
    let ptr = bin.as_ptr();
    let len = bin.len();
    let mut status: i32 = 0;
    let mut err: i32 = 0;
    // SAFETY: one binary of `len` bytes for one device of the context.
    let p = unsafe { (ws.drv.CreateProgramWithBinary)(ws.context, 1, &device, &len, &ptr, &mut status, &mut err) };
    check(err)?;
    if status != 0 {
        // SAFETY: not used again.
        unsafe { (ws.drv.ReleaseProgram)(p) };
        return check(status).map(|_| std::ptr::null_mut());
    }
    build(ws, device, p)?;
    Ok(p)
}

/// The binary of a program built for one device.
fn program_binary(ws: &Workspace, program: Handle) -> Result<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: one device, so one size.
    check(unsafe {
        (ws.drv.GetProgramInfo)(
            program,
            super::driver::PROGRAM_BINARY_SIZES,
            std::mem::size_of::<usize>(),
            (&mut size as *mut usize).cast(),
            std::ptr::null_mut(),
        )
    })?;
    if size == 0 {
        return Err(Error::tvm("the OpenCL driver gives no program binary"));
    }
    let mut bin = vec![0u8; size];
    let mut ptr = bin.as_mut_ptr();
    // SAFETY: one pointer to a buffer of the size the driver reported.
    check(unsafe {
        (ws.drv.GetProgramInfo)(
            program,
            super::driver::PROGRAM_BINARIES,
            std::mem::size_of::<*mut u8>(),
            (&mut ptr as *mut *mut u8).cast(),
            std::ptr::null_mut(),
        )
    })?;
    Ok(bin)
}

// ---------------------------------------------------------------------------------------------
// The program binary cache.

fn cache_slot() -> &'static RwLock<Option<PathBuf>> {
    static DIR: OnceLock<RwLock<Option<PathBuf>>> = OnceLock::new();
    DIR.get_or_init(|| {
        RwLock::new(std::env::var_os("TVM_OPENCL_PROGRAM_CACHE").filter(|v| !v.is_empty()).map(PathBuf::from))
    })
}

/// Sets (or, with `None`, turns off) the directory of the program binary cache.
pub(crate) fn set_cache_dir(dir: Option<PathBuf>) {
    *cache_slot().write() = dir;
}

/// The cache directory, if caching is on.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    cache_slot().read().clone()
}

const CACHE_MAGIC: &[u8; 8] = b"TVMRTCL1";

/// The cache key: the device description and the source (compared in full on read, so a hash
/// collision can never hand back the wrong binary).
fn cache_key(desc: &str, source: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(desc.len() + source.len() + 1);
    k.extend_from_slice(desc.as_bytes());
    k.push(0);
    k.extend_from_slice(source.as_bytes());
    k
}

fn cache_file(dir: &std::path::Path, key: &[u8]) -> PathBuf {
    // FNV-1a, 64 bits: stable across builds (the file name only spreads entries; the key is
    // stored and compared in full).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    dir.join(format!("{h:016x}.clbin"))
}

fn cache_read(dir: &std::path::Path, desc: &str, source: &str) -> Option<Vec<u8>> {
    let key = cache_key(desc, source);
    let bytes = std::fs::read(cache_file(dir, &key)).ok()?;
    let mut r = Reader::new(&bytes, "OpenCL program cache entry");
    if r.bytes(8).ok()? != CACHE_MAGIC || r.str_bytes().ok()? != key.as_slice() {
        return None;
    }
    let bin = r.str_bytes().ok()?;
    (r.remaining() == 0).then(|| bin.to_vec())
}

fn cache_write(dir: &std::path::Path, desc: &str, source: &str, bin: &[u8]) {
    let key = cache_key(desc, source);
    let path = cache_file(dir, &key);
    let mut w = Writer::default();
    w.bytes(CACHE_MAGIC);
    w.str_bytes(&key);
    w.str_bytes(bin);
    // Written to a temporary name and renamed, so a concurrent reader never sees half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let ok = std::fs::create_dir_all(dir).is_ok() && std::fs::write(&tmp, &w.buf).is_ok();
    if !ok || std::fs::rename(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_runtime_classic::device::kernel::FunctionInfo;

    fn fmap(names: &[&str]) -> FunctionMap {
        names.iter().map(|n| (n.to_string(), FunctionInfo::default())).collect()
    }

    #[test]
    fn splitting() {
        let src = "header\n// Function: a\nkernel A\n// Function: b\nkernel B\n";
        let k = split_kernels(src);
        assert_eq!(k, vec![("a".into(), "kernel A\n".into()), ("b".into(), "kernel B\n".into())]);
        assert!(split_kernels("no delimiter").is_empty());
        assert_eq!(split_kernels("// Function: x"), vec![("x".into(), String::new())]);
    }

    #[test]
    fn creation_errors_need_no_driver() {
        let src = b"// Function: a\nA\n// Function: b\nB\n".to_vec();
        assert!(OpenClModule::new("cl".into(), fmap(&["a", "b"]), src.clone()).is_ok());
        let e = OpenClModule::new("cl".into(), fmap(&["a"]), src.clone()).err().unwrap().to_string();
        assert!(e.contains("number of parsed kernel sources does not match"), "{e}");
        let e = OpenClModule::new("cl".into(), fmap(&["a", "c"]), src.clone()).err().unwrap().to_string();
        assert!(e.contains("no kernel source for function c"), "{e}");
        let e = OpenClModule::new("cl".into(), fmap(&["a"]), b"kernel".to_vec()).err().unwrap().to_string();
        assert!(e.contains("no kernel delimiter was found"), "{e}");
        let e = OpenClModule::new("clbin".into(), fmap(&["a"]), src).err().unwrap().to_string();
        assert!(e.contains("binary formats are not supported"), "{e}");
    }

    #[test]
    fn save_load_round_trip() {
        let src = b"// Function: a\nA\n".to_vec();
        let mut m = fmap(&["a"]);
        m["a"].launch_param_tags = vec!["blockIdx.x".into(), "threadIdx.x".into()];
        let module = OpenClModule::new("cl".into(), m.clone(), src.clone()).unwrap();
        let bin = module.save_to_binary().unwrap();
        let back = OpenClModule::load(&mut Reader::new(&bin, "opencl")).unwrap();
        assert_eq!(back.inner.fmap, m);
        assert_eq!(back.inner.data, src);
        for cut in 0..bin.len() {
            assert!(OpenClModule::load(&mut Reader::new(&bin[..cut], "opencl")).is_err(), "cut {cut}");
        }
        let dir = std::env::temp_dir().join(format!("tvmrt-cl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k.cl");
        let p = path.to_str().unwrap();
        module.save_to_file(p, "").unwrap();
        assert!(module.save_to_file(p, "clbin").is_err());
        let again = OpenClModule::load_file(p, "").unwrap();
        assert_eq!(again.inner.fmap, m);
        assert!(OpenClModule::load_file(dir.join("missing.cl").to_str().unwrap(), "").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cache_entries_check_their_key() {
        let dir = std::env::temp_dir().join(format!("tvmrt-clcache-{}", std::process::id()));
        cache_write(&dir, "dev", "src", b"BINARY");
        assert_eq!(cache_read(&dir, "dev", "src").as_deref(), Some(&b"BINARY"[..]));
        assert!(cache_read(&dir, "dev2", "src").is_none());
        assert!(cache_read(&dir, "dev", "src2").is_none());
        // A damaged entry is a miss, not an error.
        let f = cache_file(&dir, &cache_key("dev", "src"));
        let mut bytes = std::fs::read(&f).unwrap();
        bytes.truncate(bytes.len() - 1);
        std::fs::write(&f, bytes).unwrap();
        assert!(cache_read(&dir, "dev", "src").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
