//! `TVMFFIBacktrace`: the native frames of the calling thread, formatted as tvm-ffi formats them
//! (Python-style lines, innermost first), so that errors raised in C/C++ code and errors crossing
//! back through C++ callers carry the frames in between.
//!
//! Frames are found with glibc's `backtrace()` and named with `dladdr` (exported symbols; C++
//! names are demangled with the process's `__cxa_demangle` when it has one). As tvm-ffi does, the
//! walk stops at the FFI boundary (the Python interpreter's frames) unless asked to cross it,
//! leaves out frames of the FFI plumbing (`tvm::ffi::Function`, `tvm::ffi::detail::`, libc
//! start-up), and keeps at most `TVM_TRACEBACK_LIMIT` lines (512). This library's own frames
//! are left out: they are the runtime's internals, and being stripped they cannot be named.
//! Without debug information there are no file names or lines for native frames: they read
//! `File "<unknown>", line 0, in <symbol>`, as tvm-ffi's own build prints them then.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

fn limit() -> usize {
    std::env::var("TVM_TRACEBACK_LIMIT").ok().and_then(|v| v.parse::<u32>().ok()).map_or(512, |v| v as usize)
}

fn excluded(symbol: &str) -> bool {
    [
        "tvm::ffi::Function",
        "tvm::ffi::detail::",
        "TVMFFIBacktrace",
        "TVMFFIErrorSetRaisedFromCStr",
        "__libc_",
        "ffi_call_",
    ]
    .iter()
    .any(|p| symbol.starts_with(p))
}

fn boundary(symbol: &str) -> bool {
    ["TVMFFIFunctionCall", "slot_tp_call", "object_is_not_callable", "_Py", "PyObject"]
        .iter()
        .any(|p| symbol.starts_with(p))
}

type Demangle = unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

fn demangler() -> Option<Demangle> {
    static D: OnceLock<usize> = OnceLock::new();
    let p = *D.get_or_init(|| {
        // SAFETY: dlsym on the default namespace with a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__cxa_demangle".as_ptr()) as usize }
    });
    // SAFETY: a non-null __cxa_demangle has this C signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, Demangle>(p) })
}

fn demangle(name: &CStr) -> String {
    if let Some(d) = demangler().filter(|_| name.to_bytes().starts_with(b"_Z")) {
        let mut status: c_int = 0;
        // SAFETY: __cxa_demangle allocates the result with malloc (or returns null).
        unsafe {
            let out = d(name.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), &mut status);
            if !out.is_null() {
                let s = CStr::from_ptr(out).to_string_lossy().into_owned();
                libc::free(out.cast());
                if status == 0 {
                    return s;
                }
            }
        }
    }
    name.to_string_lossy().into_owned()
}

/// The base address of this library's mapping.
fn own_base() -> usize {
    static B: OnceLock<usize> = OnceLock::new();
    *B.get_or_init(|| {
        // SAFETY: Dl_info is plain data; all-zero is a valid value.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr on an address of this library's code.
        unsafe { libc::dladdr(own_base as *const c_void, &mut info) };
        info.dli_fbase as usize
    })
}

fn append(out: &mut Vec<u8>, file: &str, func: &str, line: i64) {
    out.extend_from_slice(format!("  File \"{file}\", line {line}, in {func}\n").as_bytes());
}

/// The backtrace text: the given frame first (when named), then the native frames of the caller's
/// callers. `cross_boundary` walks past the FFI boundary.
pub fn capture(file: Option<&str>, line: i64, func: Option<&str>, cross_boundary: bool) -> Vec<u8> {
    let max = limit();
    let mut out = Vec::new();
    let mut lines = 0;
    let given = matches!((file, func), (Some(_), Some(_)));
    if let (Some(f), Some(fun)) = (file, func) {
        if !excluded(fun) && lines < max {
            append(&mut out, f, fun, line);
            lines += 1;
        }
    }
    let mut buf = [std::ptr::null_mut::<c_void>(); 256];
    // SAFETY: the buffer has room for 256 return addresses.
    let n = unsafe { libc::backtrace(buf.as_mut_ptr(), buf.len() as c_int) }.max(0) as usize;
    let base = own_base();
    // Past this library's frames, the first is the caller: named above when given.
    let mut skip_caller = given;
    for &pc in &buf[..n] {
        // SAFETY: Dl_info is plain data; all-zero is a valid value.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the address.
        let found = unsafe { libc::dladdr(pc, &mut info) } != 0;
        // This library's frames (here, or further out where a callback was called from it)
        // stay unnamed; the walk goes on.
        if found && info.dli_fbase as usize == base {
            continue;
        }
        if skip_caller {
            skip_caller = false;
            continue;
        }
        let name = if found && !info.dli_sname.is_null() {
            // SAFETY: dladdr's symbol name is NUL-terminated.
            demangle(unsafe { CStr::from_ptr(info.dli_sname) })
        } else {
            continue;
        };
        if !cross_boundary && boundary(&name) {
            break;
        }
        if excluded(&name) {
            continue;
        }
        if lines >= max {
            break;
        }
        append(&mut out, "<unknown>", &name, 0);
        lines += 1;
    }
    out
}
