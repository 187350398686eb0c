//! A loaded shared library ([`Dso`]: `dlopen`, `dlsym`), what the dynamic linker knows of its
//! symbols, and the bounds of a `__tvm_dev_mblob` symbol. Both module loaders (the classic
//! crate's `module::dso`, the tvm-ffi crate's library module) open libraries through it.

use crate::error::{Error, Result};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use std::ffi::c_void;
use std::sync::Arc;

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
    pub(crate) fn open_as(path: &str, name: &str) -> Result<Arc<Dso>> {
        // Already loaded (another module of the same file): take another reference, without
        // touching the file (its check was made when it was first loaded).
        // SAFETY: RTLD_NOLOAD loads nothing and runs no initialiser; it only finds a library
        // this process has loaded.
        if let Ok(lib) = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL | libc::RTLD_NOLOAD) } {
            return Ok(Arc::new(Dso { lib, path: name.to_owned() }));
        }
        // A truncated library would crash the process inside dlopen (SIGBUS): refuse it first.
        crate::formats::elf::check_file(path, name)?;
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
pub fn blob_capacity(addr: *const c_void) -> Option<usize> {
    match symbol_info(addr as usize) {
        Some(SymbolInfo { size, .. }) if size > 0 => Some(size),
        _ => readable_extent(addr),
    }
}

/// What a symbol is, as far as the dynamic linker can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    /// Code.
    Function,
    /// A data object.
    Data,
    /// Not known (no symbol information).
    Unknown,
}

/// The bytes of a `__tvm_dev_mblob` symbol: the 8-byte length prefix and the payload it
/// announces, checked against `capacity` (how many bytes may be read there; `None`: unknown,
/// the prefix is trusted as TVM does).
///
/// # Safety
/// `addr` is the blob symbol of a library that stays loaded for `'a`, and `capacity` (if any)
/// bytes from it are readable.
pub unsafe fn blob_at<'a>(addr: *mut c_void, capacity: Option<usize>) -> Result<&'a [u8]> {
    let cap = capacity.unwrap_or(usize::MAX);
    if cap < 8 {
        return Err(Error::value(format!(
            "__tvm_dev_mblob is {cap} bytes long, shorter than its 8-byte length prefix"
        )));
    }
    let p = addr.cast::<u8>().cast_const();
    // SAFETY: 8 bytes are readable per contract (checked above).
    let prefix = unsafe { std::ptr::read_unaligned(p.cast::<[u8; 8]>()) };
    let n = u64::from_le_bytes(prefix);
    let total = usize::try_from(n).ok().and_then(|n| n.checked_add(8)).filter(|&t| t <= cap).ok_or_else(|| {
        Error::value(format!(
            "__tvm_dev_mblob announces a {n}-byte payload, but only {} bytes follow its length prefix",
            cap - 8
        ))
    })?;
    // SAFETY: `total <= capacity` bytes are readable and stay mapped for 'a (contract).
    Ok(unsafe { std::slice::from_raw_parts(p, total) })
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
