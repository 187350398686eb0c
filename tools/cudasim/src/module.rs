//! Loading an image into a device (`cuModuleLoadData`): PTX text is parsed, its `.target` and
//! `.version` checked against the device and the driver, its module variables allocated in
//! device memory (with their initializers) and each kernel lowered. Cubin and fatbin images
//! are refused with `CUDA_ERROR_NO_BINARY_FOR_GPU`: the simulator has no machine code for them.

use crate::memory::DeviceMemory;
use crate::ptx::ir::{Globals, Kernel};
use crate::ptx::lower::{lit_bits, lower_kernel, Windows};
use crate::ptx::parse::{parse, VarSpace};
use crate::ptx::{lex::tokenize, PtxError, PtxErrorKind, MAX_PTX_VERSION};
use std::sync::Arc;

/// A loaded module.
pub struct Module {
    /// Kernels by name.
    pub kernels: Vec<(String, Arc<Kernel>)>,
    /// Module variables: device address and size.
    pub globals: Globals,
    /// `.version` as `major * 10 + minor`.
    pub ptx_version: u32,
    /// `.target` (sm).
    pub target: u32,
}

/// Why an image was refused: the driver's error and the JIT log text.
#[derive(Debug)]
pub struct LoadError {
    /// `CUDA_ERROR_*`.
    pub code: i32,
    /// The log.
    pub log: String,
}

fn fail(code: i32, log: impl Into<String>) -> LoadError {
    LoadError { code, log: log.into() }
}

/// Loads `image` for an `sm_<sm>` device, allocating module variables in `mem`.
pub fn load(image: &[u8], sm: u32, mem: &mut DeviceMemory, win: Windows) -> Result<Module, LoadError> {
    use crate::driver::errors::*;
    if image.starts_with(b"\x7fELF") {
        return Err(fail(
            CUDA_ERROR_NO_BINARY_FOR_GPU,
            "cudasim: cubin (ELF) images hold machine code it cannot run; load PTX",
        ));
    }
    if image.starts_with(&[0x50, 0xED, 0x55, 0xBA]) || image.starts_with(&[0x46, 0x62, 0x43, 0xA1]) {
        return Err(fail(CUDA_ERROR_NO_BINARY_FOR_GPU, "cudasim: fatbin images are not supported; load PTX"));
    }
    let end = image.iter().position(|&b| b == 0).unwrap_or(image.len());
    let Ok(text) = std::str::from_utf8(&image[..end]) else {
        return Err(fail(CUDA_ERROR_INVALID_IMAGE, "cudasim: the image is neither PTX text nor a known binary"));
    };
    if !text.contains(".version") || !text.contains(".target") {
        return Err(fail(CUDA_ERROR_INVALID_IMAGE, "cudasim: the image is neither PTX text nor a known binary"));
    }
    let ptx_err = |e: PtxError| {
        let code = match e.kind {
            PtxErrorKind::Version => CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
            _ => CUDA_ERROR_INVALID_PTX,
        };
        fail(code, format!("ptxas application ptx input, {e}"))
    };
    let ast = tokenize(text).and_then(|t| parse(&t)).map_err(ptx_err)?;
    if ast.version > MAX_PTX_VERSION {
        let (a, b) = ast.version;
        let e = PtxError {
            kind: PtxErrorKind::Version,
            line: 0,
            msg: format!(
                "PTX ISA version {a}.{b} is newer than this driver supports ({}.{})",
                MAX_PTX_VERSION.0, MAX_PTX_VERSION.1
            ),
        };
        return Err(ptx_err(e));
    }
    if ast.target > sm {
        let e = PtxError {
            kind: PtxErrorKind::Target,
            line: 0,
            msg: format!("SM version specified by .target (sm_{}) is higher than the device's (sm_{sm})", ast.target),
        };
        return Err(ptx_err(e));
    }
    if ast.address_size != 64 {
        return Err(ptx_err(PtxError::unsupported(0, format!(".address_size {}", ast.address_size))));
    }
    let mut globals = Globals::new();
    let result = (|| {
        for v in ast.vars.iter().filter(|v| matches!(v.space, VarSpace::Global | VarSpace::Const)) {
            if v.external {
                return Err(ptx_err(PtxError::invalid(v.line, format!("unresolved extern variable {}", v.name))));
            }
            let size = v.size();
            if size == 0 {
                return Err(ptx_err(PtxError::invalid(v.line, format!("variable {} has no size", v.name))));
            }
            let addr = mem
                .alloc(size, true)
                .ok_or_else(|| fail(CUDA_ERROR_OUT_OF_MEMORY, format!("no device memory for {}", v.name)))?;
            let data = mem.slice(addr, size as usize).expect("just allocated");
            data.fill(0);
            if let Some(init) = &v.init {
                let esz = v.ty.bytes() as usize;
                if init.len() * esz > data.len() {
                    return Err(ptx_err(PtxError::invalid(v.line, format!("initializer of {} is too long", v.name))));
                }
                for (k, lit) in init.iter().enumerate() {
                    let bits = lit_bits(*lit, v.ty)
                        .ok_or_else(|| ptx_err(PtxError::invalid(v.line, format!("initializer of {}", v.name))))?;
                    data[k * esz..(k + 1) * esz].copy_from_slice(&bits.to_le_bytes()[..esz]);
                }
            }
            globals.insert(v.name.clone(), (addr, size));
        }
        let mut kernels = Vec::new();
        for f in ast.funcs.iter().filter(|f| f.entry && f.body.is_some()) {
            let k = lower_kernel(&ast, f, &globals, win).map_err(ptx_err)?;
            kernels.push((f.name.clone(), Arc::new(k)));
        }
        Ok(kernels)
    })();
    match result {
        Ok(kernels) => {
            let (a, b) = ast.version;
            Ok(Module { kernels, globals, ptx_version: a * 10 + b, target: ast.target })
        }
        Err(e) => {
            for (addr, _) in globals.values() {
                mem.free(*addr, true);
            }
            Err(e)
        }
    }
}
