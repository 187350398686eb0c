//! The CUDA module (type key `cuda`): PTX, cubin or fatbin
//! kept as loaded (plus one NUL), put into each device with `cuModuleLoadData` on the first call
//! there, kernels launched with the grid and block their thread tags give. Parsing never
//! touches the driver, so CUDA exports load on machines without one.

use super::api::{self, bind, bind_current, current_stream};
use super::driver::{self, sys, CUfunction, CUmodule, CUresult};
use super::libdevice;
use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;
use tvm_runtime_classic::device::kernel::{self, FunctionMap, KernelSig};
use tvm_runtime_classic::error::{Error, Result};
use tvm_runtime_classic::function::PackedFunc;
use tvm_runtime_classic::io::Reader;
use tvm_runtime_classic::module::{Module, ModuleNode};
use tvm_runtime_classic::value::Args;

/// What the module shares with its functions.
struct Inner {
    fmt: String,
    fmap: FunctionMap,
    /// The image with one NUL appended (PTX must be NUL-terminated; harmless for binaries).
    image: Vec<u8>,
    /// PTX with libdevice declarations defined ([`libdevice::define_externs`]), NUL-terminated:
    /// what the driver gets instead of `image` when present.
    jit_image: Option<Vec<u8>>,
    /// `CUmodule` per device id, loaded on first use.
    modules: Mutex<HashMap<i32, usize>>,
}

impl Inner {
    fn data(&self) -> &[u8] {
        &self.image[..self.image.len() - 1]
    }

    /// The module loaded into device `dev` (whose context is current); `kernel` (the function
    /// being called) names what failed in an error.
    fn module_for(&self, dev: i32, kernel: &str) -> Result<CUmodule> {
        let mut mods = self.modules.lock();
        if let Some(&m) = mods.get(&dev) {
            return Ok(m as CUmodule);
        }
        if let Ok((cc, sm)) = api::compute_capability(dev) {
            if let Some(e) = arch_mismatch(self.data(), sm, &cc) {
                return Err(Error::with_kind(
                    "CUDAError",
                    format!("cuModuleLoadData refused the module of kernel {kernel} on cuda({dev}): {e}"),
                ));
            }
        }
        let jit = self.jit_image.as_ref().unwrap_or(&self.image);
        let mut m: CUmodule = std::ptr::null_mut();
        // The JIT compiler's error log, kept for the message.
        let mut log = vec![0u8; 4096];
        let mut opts =
            [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut vals = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
        // SAFETY: the device's context is current; the image is NUL-terminated; two options
        // with their values (a buffer and its size in bytes).
        let r =
            unsafe { sys::cuModuleLoadDataEx(&mut m, jit.as_ptr().cast(), 2, opts.as_mut_ptr(), vals.as_mut_ptr()) };
        if r != CUresult::CUDA_SUCCESS {
            let mut msg = format!(
                "cuModuleLoadData of the module of kernel {kernel} on cuda({dev}) failed with error: {}",
                driver::error_name(r)
            );
            if let Ok((cc, sm)) = api::compute_capability(dev) {
                let archs = image_archs(self.data());
                if !archs.is_empty() {
                    msg += &format!(
                        " (the module holds code for {}; device {dev} is sm_{sm}, compute capability {cc})",
                        describe(&archs)
                    );
                }
            }
            if let Ok(text) = std::str::from_utf8(&jit[..jit.len() - 1]) {
                let missing = libdevice::unresolved(text);
                if !missing.is_empty() {
                    msg += &format!(
                        " (the PTX calls libdevice's {} without a definition: export it with libdevice linked in)",
                        missing.join(", ")
                    );
                }
            }
            let end = log.iter().position(|&b| b == 0).unwrap_or(0);
            let log = String::from_utf8_lossy(&log[..end]);
            if !log.trim().is_empty() {
                msg += &format!("\n{}", log.trim_end());
            }
            return Err(Error::with_kind("CUDAError", msg));
        }
        mods.insert(dev, m as usize);
        Ok(m)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for (&dev, &m) in self.modules.get_mut().iter() {
            if bind(dev).is_ok() {
                // SAFETY: loaded into this device by `module_for`; no function of it is alive
                // (they hold this Inner). Errors (e.g. deinitialized at exit) are ignored.
                unsafe { sys::cuModuleUnload(m as CUmodule) };
            }
        }
    }
}

/// A CUDA module.
pub struct CudaModule {
    inner: Arc<Inner>,
}

impl CudaModule {
    /// A module from its payload fields (no driver needed).
    pub fn new(fmt: String, fmap: FunctionMap, data: Vec<u8>) -> CudaModule {
        let jit_image = std::str::from_utf8(&data).ok().and_then(libdevice::define_externs).map(|t| {
            let mut v = t.into_bytes();
            v.push(0);
            v
        });
        let mut image = data;
        image.push(0);
        CudaModule { inner: Arc::new(Inner { fmt, fmap, image, jit_image, modules: Mutex::new(HashMap::new()) }) }
    }

    /// `runtime.module.loadbinary_cuda`: `fmt`, function map, image.
    pub fn load(r: &mut Reader<'_>) -> Result<CudaModule> {
        let (fmt, fmap, data) = kernel::read_payload(r)?;
        Ok(CudaModule::new(fmt, fmap, data))
    }

    /// `runtime.module.loadfile_ptx` / `loadfile_cubin` / `loadfile_fatbin`.
    pub fn load_file(path: &str, format: &str) -> Result<CudaModule> {
        let f = kernel::read_device_file(path, format)?;
        Ok(CudaModule::new(f.fmt, f.fmap, f.data))
    }

    /// The function map.
    pub fn fmap(&self) -> &FunctionMap {
        &self.inner.fmap
    }
}

impl ModuleNode for CudaModule {
    fn type_key(&self) -> &str {
        "cuda"
    }

    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        if name == "__tvm_main__" {
            return Err(Error::value("Device function do not have main"));
        }
        if name == "__tvm_prepare_global_barrier" {
            let inner = Arc::clone(&self.inner);
            let ptrs: Mutex<HashMap<i32, u64>> = Mutex::new(HashMap::new());
            return Ok(Some(PackedFunc::new(move |_, _| prepare_global_barrier(&inner, &ptrs))));
        }
        let Some(info) = self.inner.fmap.get(name) else { return Ok(None) };
        let sig = KernelSig::new(name, info)?;
        let inner = Arc::clone(&self.inner);
        let funcs: Mutex<HashMap<i32, usize>> = Mutex::new(HashMap::new());
        Ok(Some(PackedFunc::new(move |args, _ret| launch(&inner, &funcs, &sig, args))))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        Ok(kernel::write_payload(&self.inner.fmt, &self.inner.fmap, self.inner.data()))
    }

    fn save_to_file(&self, path: &str, format: &str) -> Result<()> {
        kernel::save_device_file(path, format, &self.inner.fmt, self.inner.data(), &self.inner.fmap)
    }

    fn get_source(&self, format: &str) -> Result<String> {
        Ok(if format == self.inner.fmt || self.inner.fmt == "ptx" {
            String::from_utf8_lossy(self.inner.data()).into_owned()
        } else {
            String::new()
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One kernel launch.
fn launch(inner: &Inner, funcs: &Mutex<HashMap<i32, usize>>, sig: &KernelSig, args: &Args<'_>) -> Result<()> {
    let call = sig.decode(args)?;
    let dev = bind_current()?;
    let f = {
        let mut funcs = funcs.lock();
        match funcs.get(&dev) {
            Some(&f) => f as CUfunction,
            None => {
                let m = inner.module_for(dev, &sig.name)?;
                let name = CString::new(sig.name.as_str()).map_err(|_| Error::value("kernel name contains NUL"))?;
                let mut f: CUfunction = std::ptr::null_mut();
                // SAFETY: a module loaded into the current context; NUL-terminated name.
                let r = unsafe { sys::cuModuleGetFunction(&mut f, m, name.as_ptr()) };
                driver::check_call(r, &format!("cuModuleGetFunction {}", sig.name))?;
                funcs.insert(dev, f as usize);
                f
            }
        }
    };
    // Every parameter is passed by the address of its value; 4-byte kinds hold theirs in the
    // first 4 bytes of the word.
    let mut words = call.words;
    let mut params: Vec<*mut c_void> = words.iter_mut().map(|w| (w as *mut u64).cast()).collect();
    let d = call.dims;
    // SAFETY: `f` belongs to the current context; `params` holds one pointer per kernel
    // parameter, each to a value of the parameter's size, alive until the call returns.
    let r = unsafe {
        sys::cuLaunchKernel(
            f,
            d.grid[0],
            d.grid[1],
            d.grid[2],
            d.block[0],
            d.block[1],
            d.block[2],
            d.dyn_shmem,
            current_stream(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if r == CUresult::CUDA_SUCCESS {
        LAST_KERNEL.with(|l| {
            let mut l = l.borrow_mut();
            if l.0 != sig.name {
                l.0.clear();
                l.0.push_str(&sig.name);
            }
            l.1 = dev;
        });
        return Ok(());
    }
    if driver::is_deinitialized(r) {
        return Ok(());
    }
    Err(Error::tvm(launch_error(&driver::error_name(r), &d, &sig.name) + &driver::sticky_note(r)))
}

thread_local! {
    /// The kernel this thread last launched, and on which device (for the message of a fault
    /// that shows at a later synchronisation).
    static LAST_KERNEL: std::cell::RefCell<(String, i32)> = const { std::cell::RefCell::new((String::new(), 0)) };
}

/// The kernel this thread last launched and its device, if any.
pub(crate) fn last_kernel() -> Option<(String, i32)> {
    LAST_KERNEL.with(|l| {
        let l = l.borrow();
        (!l.0.is_empty()).then(|| l.clone())
    })
}

/// TVM's launch error text (without the PTX source).
pub(crate) fn launch_error(result_name: &str, d: &kernel::LaunchDims, kernel: &str) -> String {
    format!(
        "CUDALaunch Error: {result_name}\n grid=({},{},{}),  block=({},{},{})\n// func_name={kernel}",
        d.grid[0], d.grid[1], d.grid[2], d.block[0], d.block[1], d.block[2]
    )
}

/// `__tvm_prepare_global_barrier`: zero the module's `__tvm_global_barrier_state` counter on
/// the current device.
fn prepare_global_barrier(inner: &Inner, ptrs: &Mutex<HashMap<i32, u64>>) -> Result<()> {
    let dev = bind_current()?;
    let mut ptrs = ptrs.lock();
    let p = match ptrs.get(&dev) {
        Some(&p) => p,
        None => {
            let m = inner.module_for(dev, "__tvm_prepare_global_barrier")?;
            let (mut p, mut size) = (0u64, 0usize);
            let name = c"__tvm_global_barrier_state";
            // SAFETY: a loaded module; out-pointers; NUL-terminated name.
            let r = unsafe { sys::cuModuleGetGlobal_v2(&mut p, &mut size, m, name.as_ptr()) };
            driver::check_call(r, "cuModuleGetGlobal __tvm_global_barrier_state")?;
            if size != 4 {
                return Err(Error::value(format!("__tvm_global_barrier_state has {size} bytes, expected 4")));
            }
            ptrs.insert(dev, p);
            p
        }
    };
    // SAFETY: a 4-byte device global of the current context.
    driver::check_call(unsafe { sys::cuMemsetD32_v2(p, 0, 1) }, "cuMemsetD32")
}

// ---------------------------------------------------------------------------------------------
// Which architectures an image holds (for errors that name both sides).

/// One piece of device code in an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// PTX for `compute_<n>`/`sm_<n>` (JIT-compiled by the driver for that or a newer device).
    Ptx(u32),
    /// Machine code (cubin) for `sm_<n>`.
    Sass(u32),
}

fn describe(archs: &[Arch]) -> String {
    let parts: Vec<String> = archs
        .iter()
        .map(|a| match a {
            Arch::Ptx(n) => format!("PTX sm_{n}"),
            Arch::Sass(n) => format!("cubin sm_{n}"),
        })
        .collect();
    parts.join(", ")
}

fn ptx_target(text: &[u8]) -> Option<u32> {
    let s = String::from_utf8_lossy(&text[..text.len().min(1 << 16)]).into_owned();
    let rest = &s[s.find(".target")? + ".target".len()..];
    let rest = rest.trim_start();
    let digits: String = rest.strip_prefix("sm_")?.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn elf_sm(elf: &[u8]) -> Option<u32> {
    // 64-bit ELF: e_flags at byte 48. CUDA's ELF ABI before version 8 keeps the SM in the low
    // byte; version 8 (CUDA 12.8+) in the second byte.
    let flags = u32::from_le_bytes(elf.get(48..52)?.try_into().ok()?);
    let abi = *elf.get(8)?;
    Some(if abi >= 8 { (flags >> 8) & 0xff } else { flags & 0xff })
}

/// The architectures of a PTX text, cubin (ELF) or fatbin image (best effort: empty when the
/// format is not recognised).
pub fn image_archs(data: &[u8]) -> Vec<Arch> {
    const FATBIN: [u8; 4] = [0x50, 0xED, 0x55, 0xBA];
    if data.starts_with(b"\x7fELF") {
        return elf_sm(data).map(Arch::Sass).into_iter().collect();
    }
    if data.starts_with(&FATBIN) {
        let mut out = Vec::new();
        let Some(hsize) = data.get(6..8).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize) else { return out };
        let mut pos = hsize;
        // Entries: kind u16 (1 PTX, 2 ELF), version u16, header size u32, payload size u64,
        // ..., arch u32 at offset 28.
        while let Some(h) = data.get(pos..pos + 32) {
            let kind = u16::from_le_bytes([h[0], h[1]]);
            let hs = u32::from_le_bytes(h[4..8].try_into().unwrap_or_default()) as usize;
            let size = u64::from_le_bytes(h[8..16].try_into().unwrap_or_default()) as usize;
            let arch = u32::from_le_bytes(h[28..32].try_into().unwrap_or_default());
            match kind {
                1 => out.push(Arch::Ptx(arch)),
                2 => out.push(Arch::Sass(arch)),
                _ => break,
            }
            let Some(next) = pos.checked_add(hs).and_then(|p| p.checked_add(size)) else { break };
            if hs == 0 || next <= pos {
                break;
            }
            pos = next;
        }
        return out;
    }
    ptx_target(data).map(Arch::Ptx).into_iter().collect()
}

/// Whether some piece of the image can run on an `sm_<device>` GPU: PTX for the same or an
/// older architecture, or a cubin of the same major version and an older or equal minor.
pub(crate) fn runs_on(archs: &[Arch], device: u32) -> bool {
    archs.iter().any(|a| match *a {
        Arch::Ptx(n) => n <= device,
        Arch::Sass(n) => n / 10 == device / 10 && n <= device,
    })
}

/// The error for an image that cannot run on the device, naming both architectures; `None`
/// when it can run or its architecture is not known.
pub fn arch_mismatch(data: &[u8], device: u32, cc: &str) -> Option<String> {
    let archs = image_archs(data);
    (!archs.is_empty() && !runs_on(&archs, device)).then(|| {
        format!(
            "the CUDA module holds code for {} only, which cannot run on this GPU (sm_{device}, compute capability {cc})",
            describe(&archs)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_runtime_classic::device::kernel::FunctionInfo;

    #[test]
    fn architectures_of_images() {
        let ptx = b"//\n.version 6.3\n.target sm_70\n.address_size 64\n";
        assert_eq!(image_archs(ptx), vec![Arch::Ptx(70)]);
        assert_eq!(image_archs(b".target sm_90a\n"), vec![Arch::Ptx(90)]);
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[48..52].copy_from_slice(&0x0050_0546u32.to_le_bytes());
        assert_eq!(image_archs(&elf), vec![Arch::Sass(70)]);
        elf[8] = 8;
        elf[48..52].copy_from_slice(&0x0000_5a00u32.to_le_bytes());
        assert_eq!(image_archs(&elf), vec![Arch::Sass(90)]);
        // A fatbin with a cubin for sm_80 and PTX for sm_80.
        let mut fat = vec![0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0];
        fat.extend_from_slice(&0u64.to_le_bytes());
        for kind in [2u16, 1] {
            let mut h = vec![0u8; 64];
            h[0..2].copy_from_slice(&kind.to_le_bytes());
            h[4..8].copy_from_slice(&64u32.to_le_bytes());
            h[8..16].copy_from_slice(&8u64.to_le_bytes());
            h[28..32].copy_from_slice(&80u32.to_le_bytes());
            fat.extend_from_slice(&h);
            fat.extend_from_slice(&[0u8; 8]);
        }
        assert_eq!(image_archs(&fat), vec![Arch::Sass(80), Arch::Ptx(80)]);
        assert!(image_archs(b"garbage").is_empty());
        assert!(image_archs(&fat[..20]).is_empty());
    }

    #[test]
    fn compatibility_names_both_architectures() {
        let ptx90 = b".target sm_90\n";
        let e = arch_mismatch(ptx90, 70, "7.0").unwrap();
        assert!(e.contains("PTX sm_90") && e.contains("sm_70") && e.contains("7.0"), "{e}");
        assert!(arch_mismatch(b".target sm_70\n", 90, "9.0").is_none(), "PTX JIT-compiles forward");
        assert!(runs_on(&[Arch::Sass(80)], 86));
        assert!(!runs_on(&[Arch::Sass(80)], 90));
        assert!(!runs_on(&[Arch::Sass(86)], 80));
        assert!(runs_on(&[Arch::Sass(90), Arch::Ptx(70)], 80));
        assert!(arch_mismatch(b"unknown", 70, "7.0").is_none());
    }

    #[test]
    fn payload_round_trip_without_a_driver() {
        let mut fmap = FunctionMap::new();
        fmap.insert(
            "k".into(),
            FunctionInfo {
                name: String::new(),
                arg_types: vec![tvm_runtime_classic::value::dtype::dtype(3, 64, 1)],
                launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
            },
        );
        let m = CudaModule::new("ptx".into(), fmap.clone(), b".target sm_70\n".to_vec());
        let bin = m.save_to_binary().unwrap();
        let back = CudaModule::load(&mut Reader::new(&bin, "cuda")).unwrap();
        assert_eq!(back.inner.fmap, fmap);
        assert_eq!(back.inner.data(), b".target sm_70\n");
        assert_eq!(*back.inner.image.last().unwrap(), 0);
        for cut in 0..bin.len() {
            assert!(CudaModule::load(&mut Reader::new(&bin[..cut], "cuda")).is_err(), "cut {cut}");
        }
        assert_eq!(m.get_source("").unwrap(), ".target sm_70\n");
        let d = kernel::LaunchDims { grid: [4, 1, 1], block: [64, 1, 1], dyn_shmem: 0 };
        assert_eq!(
            launch_error("CUDA_ERROR_INVALID_VALUE", &d, "k"),
            "CUDALaunch Error: CUDA_ERROR_INVALID_VALUE\n grid=(4,1,1),  block=(64,1,1)\n// func_name=k"
        );
    }
}
