//! Loading a model library: `runtime.module.loadfile_so`.
//!
//! 1. `dlopen(path, RTLD_NOW | RTLD_LOCAL)`.
//! 2. Fill the context function slots (`__TVMFuncCall`, ...).
//! 3. If the library has a `__tvm_dev_mblob`, build the module tree from it ([`super::blob`]),
//!    giving the blob's pages back to the kernel as they are copied out ([`crate::mapped`]);
//!    otherwise the root is one `library` module for the DSO. A library with tvm-ffi's
//!    `__tvm_ffi__library_bin` instead (TVM v0.22+) is refused, naming the release.
//! 4. Write the DSO's own module (the `_lib` one) into `__tvm_module_ctx`.
//! 5. Return the root.
//!
//! Deviation from TVM v0.8 (which uses `RTLD_LAZY`): every undefined symbol is resolved at load
//! time, so a library that needs a symbol nobody provides fails here with the loader's message
//! (`undefined symbol: ...`) instead of killing the process at its first call.
//!
//! Every step either completes or leaves nothing behind: on error the partly built tree is
//! dropped and the library is closed again (`__tvm_module_ctx` is written last).

use super::blob;
use super::library::{self, LibraryModule, SymbolKind, Symbols};
use super::Module;
use crate::error::{Error, Result};
use crate::mapped::Region;
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use std::ffi::c_void;
use std::sync::Arc;

/// The symbol of a TVM v0.22+ export's module tree (tvm-ffi's `__tvm_ffi__library_bin`).
use super::library_bin::LIBRARY_BIN_SYMBOL as TVM_FFI_LIBRARY_BIN;

/// A loaded shared library. Closed (`dlclose`) when the last module or function referring to
/// it goes.
pub struct Dso {
    lib: Library,
    path: String,
}

impl std::fmt::Debug for Dso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dso").field("path", &self.path).finish()
    }
}

impl Dso {
    /// `dlopen`s `path`.
    pub fn open(path: &str) -> Result<Arc<Dso>> {
        Dso::open_as(path, path)
    }

    /// `dlopen`s `path`, calling the library `name` in messages and in [`Dso::path`] (for a
    /// library loaded from memory, whose path means nothing after the load).
    pub fn open_as(path: &str, name: &str) -> Result<Arc<Dso>> {
        // Already loaded (another module of the same file): take another reference, without
        // touching the file (its check was made when it was first loaded).
        // SAFETY: RTLD_NOLOAD loads nothing and runs no initialiser; it only finds a library
        // this process has loaded.
        if let Ok(lib) = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL | libc::RTLD_NOLOAD) } {
            return Ok(Arc::new(Dso { lib, path: name.to_owned() }));
        }
        // A truncated library would crash the process inside dlopen (SIGBUS): refuse it first.
        super::elf::check_file(path, name)?;
        // SAFETY: loading a library runs its initialisers; a TVM model library's only ones are
        // the compiler's (none touch the runtime before the context slots are filled). That
        // the file is such a library is the caller's promise, as with TVM's own loader.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
            Error::tvm(format!("Failed to load dynamic shared library {name} {}", crate::error::source_chain(&e)))
        })?;
        Ok(Arc::new(Dso { lib, path: name.to_owned() }))
    }

    /// The path it was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The address of symbol `name` (`dlsym`), if the library defines it.
    pub fn symbol(&self, name: &str) -> Option<*mut c_void> {
        let mut cname = Vec::with_capacity(name.len() + 1);
        cname.extend_from_slice(name.as_bytes());
        cname.push(0);
        if cname[..name.len()].contains(&0) {
            return None;
        }
        // SAFETY: the symbol is taken as an untyped address (`*mut c_void`), never called or
        // read here; callers decide what it is (see `library`).
        let sym = unsafe { self.lib.get::<*mut c_void>(cname.as_slice()) }.ok()?;
        let addr = sym.into_raw();
        (!addr.is_null()).then_some(addr)
    }
}

/// What the dynamic linker knows about the symbol that starts exactly at `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolInfo {
    /// The symbol's type.
    pub kind: SymbolKind,
    /// Its size in bytes (`st_size`; 0 when the object file did not say).
    pub size: usize,
}

/// The ELF symbol starting at address `addr`, through glibc's `dladdr1(..., RTLD_DL_SYMENT)`; `None`
/// where that is not available or no symbol starts exactly there.
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
pub fn symbol_info(addr: usize) -> Option<SymbolInfo> {
    /// `Elf64_Sym` (elf.h).
    #[repr(C)]
    struct Elf64Sym {
        st_name: u32,
        st_info: u8,
        st_other: u8,
        st_shndx: u16,
        st_value: u64,
        st_size: u64,
    }
    /// `RTLD_DL_SYMENT` (dlfcn.h).
    const RTLD_DL_SYMENT: std::ffi::c_int = 1;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let mut sym: *const Elf64Sym = std::ptr::null();
    // SAFETY: `dladdr1` only reads the loader's tables; both out-pointers are valid for writes
    // of the types glibc documents for RTLD_DL_SYMENT.
    let rc = unsafe {
        libc::dladdr1(
            addr as *const c_void,
            info.as_mut_ptr(),
            (&mut sym as *mut *const Elf64Sym).cast(),
            RTLD_DL_SYMENT,
        )
    };
    if rc == 0 || sym.is_null() {
        return None;
    }
    // SAFETY: `dladdr1` succeeded, so it filled `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_saddr as usize != addr {
        return None;
    }
    // SAFETY: on success `sym` points into the loaded object's symbol table, which stays mapped
    // while the object is loaded (the caller holds it).
    let sym = unsafe { &*sym };
    let kind = match sym.st_info & 0xf {
        1 | 5 | 6 => SymbolKind::Data,  // STT_OBJECT, STT_COMMON, STT_TLS
        2 | 10 => SymbolKind::Function, // STT_FUNC, STT_GNU_IFUNC
        _ => SymbolKind::Unknown,
    };
    Some(SymbolInfo { kind, size: usize::try_from(sym.st_size).unwrap_or(usize::MAX) })
}

/// Fallback where `dladdr1` does not exist: nothing is known.
#[cfg(not(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64")))]
pub fn symbol_info(_addr: usize) -> Option<SymbolInfo> {
    None
}

/// How many bytes from `addr` on are readable: up to the end of the run of contiguous readable
/// mappings that contains it (`/proc/self/maps`). `None` if that file cannot be read; `Some(0)`
/// if `addr` is not in a readable mapping.
pub fn readable_extent(addr: *const c_void) -> Option<usize> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let a = addr as usize;
    let mut end_of_run: Option<usize> = None;
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        let Some((s, e)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16)) else { continue };
        let readable = perms.starts_with('r');
        match end_of_run {
            None if readable && (start..end).contains(&a) => end_of_run = Some(end),
            Some(run_end) if readable && start == run_end => end_of_run = Some(end),
            Some(_) => break,
            None => {}
        }
    }
    Some(end_of_run.map_or(0, |end| end - a))
}

/// How many bytes may be read at the blob symbol `addr` of a DSO: the symbol's size when the
/// dynamic linker knows it, else the readable extent, else `None` (trust the blob's prefix).
pub(crate) fn blob_capacity(addr: *const c_void) -> Option<usize> {
    match symbol_info(addr as usize) {
        Some(SymbolInfo { size, .. }) if size > 0 => Some(size),
        _ => readable_extent(addr),
    }
}

/// `runtime.module.loadfile_so(path, ...)`: loads a model library and builds its module tree.
pub fn load(path: &str) -> Result<Module> {
    load_opened(Dso::open(path)?)
}

/// Builds the module tree of a library already opened (steps 2 to 5 of the module doc).
pub fn load_opened(dso: Arc<Dso>) -> Result<Module> {
    let path = dso.path().to_owned();
    if dso.symbol(blob::BLOB_SYMBOL).is_none() && dso.symbol(TVM_FFI_LIBRARY_BIN).is_some() {
        // Its module tree (a Relax VM executable, device code) is tvm-ffi's, which this loader
        // would drop, leaving an empty library.
        return Err(Error::tvm(format!(
            "{path} is an export of TVM v0.22 or later: its module tree is in {TVM_FFI_LIBRARY_BIN} \
             (tvm-ffi's format), which the classic loader does not read; load it through the tvm-ffi ABI \
             (ffi.ModuleLoadFromFile, tvm.runtime.load_module of TVM v0.20+; in Rust tvm_rt::RelaxModule::load)"
        )));
    }
    library::fill_context_slots(&|name| dso.symbol(name))?;
    let make_lib = || Module::new(LibraryModule::new(Symbols::Dso(dso.clone())));
    let (root, dso_module) = match dso.symbol(blob::BLOB_SYMBOL) {
        Some(addr) => {
            // SAFETY: `addr` is the blob symbol of the loaded library, which stays mapped while
            // `dso` lives; at most `blob_capacity` bytes (its symbol size or readable extent)
            // are read.
            let bytes = unsafe { library::blob_at(addr, blob_capacity(addr)) }
                .map_err(|e| e.context(format_args!("{path}")))?;
            // The blob's pages are given back as its entries are copied out (weights held once);
            // aligned weights may be used in place, which keeps the library loaded.
            let region = Region::new(bytes, Some(dso.clone()));
            let tree = blob::process_in(blob::frame(bytes)?, &make_lib, Some(&region))
                .map_err(|e| e.context(format_args!("{path}")))?;
            region.release_rest();
            (tree.root, tree.dso_module)
        }
        None => {
            let m = make_lib();
            (m.clone(), Some(m))
        }
    };
    if let (Some(m), Some(slot)) = (dso_module, dso.symbol(library::MODULE_CTX_SYMBOL)) {
        library::attach_module_ctx(&m, slot)?;
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_extent_of_a_static() {
        static DATA: [u8; 64] = [7; 64];
        let n = readable_extent(DATA.as_ptr().cast()).unwrap_or(usize::MAX);
        assert!(n >= 64, "{n}");
        assert_eq!(readable_extent(std::ptr::null()), Some(0));
    }

    #[test]
    fn open_errors_name_the_path() {
        let e = Dso::open("/nonexistent/dir/lib.so").unwrap_err().to_string();
        assert!(e.starts_with("TVMError: Failed to load dynamic shared library /nonexistent/dir/lib.so"), "{e}");
    }
}
