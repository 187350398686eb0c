//! The `library` module kind: the functions of a compiled model library (a `dlopen`ed DSO, or
//! the system library's symbol table), called with the `TVMBackendPackedCFunc` convention. The
//! context function slots it fills are the core's (`tvm_runtime_core::library::slots`).
//!
//! # Module context and lifetimes
//!
//! `__tvm_module_ctx` receives the handle (object header address) of the library's own module
//! and holds no reference. A function handle keeps its module (and so the library) alive: every
//! function captures a [`Module`] clone. When the same library is loaded again while an earlier
//! load is alive, the new module takes over `__tvm_module_ctx` and keeps a reference to the
//! previous one, because generated code may have cached `TVMBackendGetFuncFromEnv` handles that
//! point into the previous module; when a module goes, it gives `__tvm_module_ctx` back to its
//! predecessor (or NULL), so the variable never names a freed module.

use super::dso::{self, Dso, SymbolKind};
use super::{system_lib, Module, ModuleNode};
use crate::abi::{DLTensor, TVMByteArray, TVMValue};
use crate::error::{last_error_message, split_kind, Error, Result};
use crate::function::PackedFunc;
use crate::ndarray::NDArray;
use crate::object::{ObjectHeader, ObjectRef};
use crate::value::{code, code_name, Value};
use parking_lot::RwLock;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
// The context slots and the blob's bounds are the core's, under the paths they always had.
use tvm_runtime_core::library::context::{ContextVars, Link};
pub use tvm_runtime_core::library::dso::blob_at;
pub use tvm_runtime_core::library::slots::{
    fill_context_slots, set_context_slots, CONTEXT_SLOT_NAMES, MAIN_SYMBOL, MODULE_CTX_SYMBOL,
};

/// The `__tvm_module_ctx` variables of DSOs and the modules they may name (see the core's
/// [`ContextVars`]).
static CTX_VARS: ContextVars = ContextVars::new(MODULE_CTX_SYMBOL);

/// A new reference to the module whose header `p` is, unless it is already being destroyed.
///
/// # Safety
/// `p` is NULL or the header of an object whose memory is not freed while the call runs.
unsafe fn try_retain_module(p: *mut c_void) -> Option<Module> {
    let hdr = p.cast::<ObjectHeader>();
    // SAFETY: per contract.
    let counter = &unsafe { hdr.as_ref() }?.ref_counter;
    let mut c = counter.load(Ordering::Relaxed);
    loop {
        if c <= 0 {
            return None;
        }
        match counter.compare_exchange_weak(c, c + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => c = now,
        }
    }
    // SAFETY: we just took a reference of our own.
    unsafe { ObjectRef::from_raw(hdr) }.and_then(Module::from_object)
}

/// Writes `m` (a library module) into the `__tvm_module_ctx` variable at `slot`. If the variable
/// names a live module from an earlier load of the same library, `m` keeps it alive and gives
/// the variable back to it when `m` goes.
///
/// # Safety
/// `slot` is the `__tvm_module_ctx` symbol of the library `m` holds (a pointer variable).
pub(crate) unsafe fn attach_module_ctx(m: &Module, slot: *mut c_void) -> Result<()> {
    let lib = m.downcast::<LibraryModule>().ok_or_else(|| Error::internal("module context of a non-library module"))?;
    let me = m.as_object().as_ptr().cast::<c_void>();
    // SAFETY: `slot` is a pointer variable of the library that `m` keeps loaded until it goes,
    // and `m` detaches before then (`Drop`). `retain` is called under the lock with a module
    // that is not destroyed yet (it leaves the live list, under that lock, from its destructor,
    // before its memory is freed).
    unsafe { CTX_VARS.attach(slot, me, &lib.ctx, |old| try_retain_module(old)) }
}

/// Writes the system library's module into a registered `__tvm_module_ctx` variable (the
/// singleton lives forever, so no bookkeeping is needed).
///
/// # Safety
/// `slot` is a pointer variable registered with the system library as a `__tvm_module_ctx`.
pub(crate) unsafe fn write_module_ctx(slot: *mut c_void, m: &Module) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { CTX_VARS.write_forever(slot, m.as_object().as_ptr().cast()) }
}

/// Where a library module finds its symbols.
pub enum Symbols {
    /// A loaded shared library.
    Dso(Arc<Dso>),
    /// The system library's table, consulted at call time; names are looked up with the
    /// prefix first (TVM v0.13+'s `runtime.SystemLib(prefix)`), then without.
    SystemLib(String),
}

impl Symbols {
    fn lookup(&self, name: &str) -> Option<*mut c_void> {
        match self {
            Symbols::Dso(d) => d.symbol(name),
            Symbols::SystemLib(prefix) => system_lib::lookup_prefixed(prefix, name),
        }
    }

    fn kind(&self, addr: *mut c_void) -> SymbolKind {
        match self {
            Symbols::Dso(_) => dso::symbol_info(addr as usize).map_or(SymbolKind::Unknown, |i| i.kind),
            Symbols::SystemLib(_) => SymbolKind::Unknown,
        }
    }
}

/// A resolved function symbol.
#[derive(Clone, Copy)]
struct Resolved(usize);

/// The signature of every function of a compiled library (`TVMBackendPackedCFunc`).
pub(crate) type BackendPackedCFunc = unsafe extern "C" fn(
    args: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    out_ret_value: *mut TVMValue,
    out_ret_tcode: *mut c_int,
    resource_handle: *mut c_void,
) -> c_int;

/// A `library` module.
pub struct LibraryModule {
    // Field order matters: `ctx` (which may hold the previous module of the same library) goes
    // before `symbols` (which may hold the library).
    ctx: OnceLock<Link<Module>>,
    /// Symbol lookups of a DSO, hits and misses, so each name is looked up once.
    cache: RwLock<HashMap<Box<str>, Option<Resolved>>>,
    symbols: Symbols,
}

impl LibraryModule {
    /// A module over `symbols`.
    pub fn new(symbols: Symbols) -> LibraryModule {
        LibraryModule { ctx: OnceLock::new(), cache: RwLock::new(HashMap::new()), symbols }
    }

    /// The library this module belongs to (`None` for the system library).
    pub fn dso(&self) -> Option<&Arc<Dso>> {
        match &self.symbols {
            Symbols::Dso(d) => Some(d),
            Symbols::SystemLib(_) => None,
        }
    }

    /// The address of function `name`: data symbols are refused when the linker says so.
    fn resolve(&self, name: &str) -> Option<Resolved> {
        let find = || {
            let addr = self.symbols.lookup(name)?;
            (self.symbols.kind(addr) != SymbolKind::Data).then_some(Resolved(addr as usize))
        };
        match self.symbols {
            // The system library's table can change after creation: no caching.
            Symbols::SystemLib(_) => find(),
            Symbols::Dso(_) => {
                if let Some(hit) = self.cache.read().get(name) {
                    return *hit;
                }
                let r = find();
                self.cache.write().insert(name.into(), r);
                r
            }
        }
    }

    /// `__tvm_main__`: the name of the entry function (LLVM backend), or the entry function
    /// itself (C backend).
    fn main_function(&self, this: &Module) -> Option<PackedFunc> {
        let addr = self.symbols.lookup(MAIN_SYMBOL)?;
        let info = match &self.symbols {
            Symbols::Dso(_) => dso::symbol_info(addr as usize),
            Symbols::SystemLib(_) => None,
        };
        match entry_name(addr, info) {
            EntryName::Name(n) => self.resolve(&n).map(|r| wrap(r, this.clone())),
            EntryName::NotAString => Some(wrap(Resolved(addr as usize), this.clone())),
            EntryName::Invalid => None,
        }
    }
}

enum EntryName {
    /// A NUL-terminated identifier.
    Name(String),
    /// Code, not a string: call the symbol itself.
    NotAString,
    /// A data symbol that holds no identifier.
    Invalid,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$'
}

/// Reads the entry function's name at `addr`. With symbol information, a data symbol is read
/// within its size and a function symbol is code. Without it, bytes are read one at a time up to
/// 256 and only while they look like an identifier: a string ends at its NUL; code has a
/// non-identifier byte within its first few bytes (an x86-64 function starts with `endbr64`
/// `f3 0f 1e fa` or `push %rbp` `55 48 89 e5`), so the read stays inside the symbol.
fn entry_name(addr: *mut c_void, info: Option<dso::SymbolInfo>) -> EntryName {
    const MAX: usize = 256;
    let (limit, known_data) = match info {
        Some(i) if i.kind == SymbolKind::Function => return EntryName::NotAString,
        Some(i) if i.kind == SymbolKind::Data && i.size > 0 => (i.size.min(MAX), true),
        _ => (MAX, false),
    };
    let p = addr.cast::<u8>().cast_const();
    let mut name = Vec::new();
    for k in 0..limit {
        // SAFETY: byte `k` is inside the symbol: either within its known size, or (unknown size)
        // every earlier byte was a non-NUL identifier byte, so we are still inside the string
        // (see the function's doc).
        let b = unsafe { p.add(k).read() };
        if b == 0 {
            return match std::str::from_utf8(&name) {
                Ok(s) if !s.is_empty() => EntryName::Name(s.to_owned()),
                _ if known_data => EntryName::Invalid,
                _ => EntryName::NotAString,
            };
        }
        if !is_ident_byte(b) {
            break;
        }
        name.push(b);
    }
    if known_data {
        EntryName::Invalid
    } else {
        EntryName::NotAString
    }
}

impl Drop for LibraryModule {
    fn drop(&mut self) {
        if let Some(link) = self.ctx.get() {
            // SAFETY: the library is loaded while its module lives (`symbols` holds it).
            unsafe { CTX_VARS.detach(link, |m| m.as_object().as_ptr().cast::<c_void>()) };
        }
    }
}

impl ModuleNode for LibraryModule {
    fn type_key(&self) -> &str {
        "library"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        if name == MAIN_SYMBOL {
            return Ok(self.main_function(this));
        }
        Ok(self.resolve(name).map(|r| wrap(r, this.clone())))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The error of a generated function that returned `ret != 0`: its message (set through
/// `TVMAPISetLastError`) wrapped as TVM does, keeping a leading error kind (`ValueError: `,
/// any `...Error`) in front.
fn call_error(ret: c_int) -> Error {
    let e = crate::error::foreign_error(ret);
    if !matches!(e.repr(), crate::error::Repr::Raw(_)) {
        // -2, or a Python exception raised by a callback the function called: kept as is.
        return e;
    }
    let text = last_error_message();
    // Only a real error kind moves to the front: generated messages such as
    // `add_one: num_args should be 2` start with a function name, not a kind.
    let (kind, rest) = match split_kind(&text) {
        (k, rest) if k.ends_with("Error") => (k, rest),
        _ => ("TVMError", text.as_str()),
    };
    Error::from_foreign(format!("{kind}: Check failed: ret == 0 ({ret} vs. 0) : {rest}"))
}

/// Takes over a value that generated code returned: codes 0..10 and 13 are
/// adopted (objects, modules, arrays and functions with their reference), strings and bytes
/// are copied, extension codes are passed through.
///
/// # Safety
/// `v` is valid for `c` and owned by the caller, as the calling convention promises.
unsafe fn adopt_return(v: TVMValue, c: c_int) -> Result<Value> {
    // Every `unsafe` below reads the union member that code `c` selects (per contract); the
    // handles of codes 8, 9, 10 and 13 carry one reference that the callee handed over.
    Ok(match c {
        // SAFETY: see above.
        code::INT => Value::Int(unsafe { v.v_int64 }),
        // SAFETY: see above.
        code::UINT => Value::UInt(unsafe { v.v_int64 }),
        // SAFETY: see above.
        code::FLOAT => Value::Float(unsafe { v.v_float64 }),
        // SAFETY: see above.
        code::HANDLE => Value::Handle(unsafe { v.v_handle }),
        code::NULL => Value::Null,
        // SAFETY: see above.
        code::DATA_TYPE => Value::DataType(unsafe { v.v_type }),
        // SAFETY: see above.
        code::DEVICE => Value::Device(unsafe { v.v_device }),
        // SAFETY: see above.
        code::DLTENSOR => Value::DLTensor(unsafe { v.v_handle }.cast::<DLTensor>()),
        code::OBJECT | code::MODULE => {
            // SAFETY: see above: an object header whose reference is now ours (or NULL).
            Value::from_opt_object(unsafe { ObjectRef::from_raw(v.v_handle.cast::<ObjectHeader>()) })
        }
        code::NDARRAY => {
            // SAFETY: see above.
            let h = unsafe { v.v_handle }.cast::<DLTensor>();
            if h.is_null() {
                Value::Null
            } else {
                // SAFETY: an NDArray handle made by this runtime, 16 bytes past its header;
                // its reference is now ours.
                Value::from_opt_object(unsafe { ObjectRef::from_raw(NDArray::header_of_handle(h)) })
            }
        }
        code::FUNC => {
            // SAFETY: see above.
            let h = unsafe { v.v_handle }.cast::<PackedFunc>();
            if h.is_null() {
                Value::Null
            } else {
                // SAFETY: an owned function handle of this runtime (a `Box<PackedFunc>`, as
                // `TVMFuncCall` returns them), now ours.
                Value::Func(unsafe { Box::from_raw(h) })
            }
        }
        code::STR => {
            // SAFETY: see above.
            let p = unsafe { v.v_str };
            if p.is_null() {
                Value::Null
            } else {
                // SAFETY: a NUL-terminated string, valid until the callee's thread makes its
                // next call; copied at once.
                Value::str(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            }
        }
        code::BYTES => {
            // SAFETY: see above: a `TVMByteArray*` (or NULL), valid like a string; copied.
            match unsafe { v.v_handle.cast::<TVMByteArray>().as_ref() } {
                None => Value::Null,
                Some(ba) => {
                    // SAFETY: `data` holds `size` bytes.
                    Value::bytes(unsafe { crate::value::slice_from_raw(ba.data.cast::<u8>(), ba.size)? }.to_vec())
                }
            }
        }
        // SAFETY: see above (a bool in v_int64, TVM v0.18+).
        code::BOOL => Value::Int(i64::from(unsafe { v.v_int64 } != 0)),
        c if (code::BOOL + 1..code::EXT_END).contains(&c) => Value::ext(c, v),
        c => {
            return Err(Error::internal(format!(
                "a compiled function returned a value of type code {c} ({}), which cannot be returned",
                code_name(c)
            )))
        }
    })
}

/// A PackedFunc calling the library function at `r`; it keeps `keep` (its module) alive.
fn wrap(r: Resolved, keep: Module) -> PackedFunc {
    // SAFETY: `r` is the address of a symbol that the library exports as a function of the
    // TVMBackendPackedCFunc convention; as in TVM, any exported name can be
    // fetched, and calling one that is not such a function is the caller's error. The library
    // stays loaded while `keep` lives.
    let f = unsafe { std::mem::transmute::<usize, BackendPackedCFunc>(r.0) };
    PackedFunc::new(move |args, ret| {
        let _module = &keep;
        let n = c_int::try_from(args.len()).map_err(|_| Error::value("too many arguments"))?;
        let mut rv = TVMValue::ZERO;
        let mut rc: c_int = code::NULL;
        // SAFETY: the caller's arrays (borrowed for the call) are passed unchanged, as TVM does;
        // generated code only reads them. The return slot is ours; resource_handle is NULL.
        let status = unsafe {
            f(
                args.values().as_ptr().cast_mut(),
                args.codes().as_ptr().cast_mut(),
                n,
                &mut rv,
                &mut rc,
                std::ptr::null_mut(),
            )
        };
        if status != 0 {
            return Err(call_error(status));
        }
        if rc != code::NULL {
            // SAFETY: the function returned 0, so (rv, rc) is a value it hands over.
            *ret = unsafe { adopt_return(rv, rc)? };
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        static NAME: &[u8] = b"add_one\0";
        match entry_name(NAME.as_ptr().cast_mut().cast(), None) {
            EntryName::Name(n) => assert_eq!(n, "add_one"),
            _ => panic!("not read as a name"),
        }
        static CODE: &[u8] = &[0xf3, 0x0f, 0x1e, 0xfa, 0x55];
        assert!(matches!(entry_name(CODE.as_ptr().cast_mut().cast(), None), EntryName::NotAString));
        let info = dso::SymbolInfo { kind: SymbolKind::Data, size: 3 };
        assert!(matches!(entry_name(NAME.as_ptr().cast_mut().cast(), Some(info)), EntryName::Invalid));
    }

    #[test]
    fn call_errors_keep_the_kind() {
        crate::error::set_last_error("ValueError: bad input");
        assert_eq!(call_error(-1).to_string(), "ValueError: Check failed: ret == 0 (-1 vs. 0) : bad input");
        crate::error::set_last_error("Assert fail: x == 2, f: num_args should be 2");
        assert_eq!(
            call_error(-1).to_string(),
            "TVMError: Check failed: ret == 0 (-1 vs. 0) : Assert fail: x == 2, f: num_args should be 2"
        );
        crate::error::set_last_error("add_one: num_args should be 2");
        assert_eq!(
            call_error(-1).to_string(),
            "TVMError: Check failed: ret == 0 (-1 vs. 0) : add_one: num_args should be 2"
        );
        assert!(call_error(-2).is_already_set());
    }

    #[test]
    fn blob_prefix_is_checked() {
        let mut b = 5u64.to_le_bytes().to_vec();
        b.extend_from_slice(b"abcde");
        // SAFETY: `b` is live and `b.len()` bytes long.
        let ok = unsafe { blob_at(b.as_mut_ptr().cast(), Some(b.len())) }.unwrap();
        assert_eq!(ok.len(), 13);
        // SAFETY: as above.
        let e = unsafe { blob_at(b.as_mut_ptr().cast(), Some(12)) }.unwrap_err().to_string();
        assert!(e.contains("announces a 5-byte payload, but only 4 bytes"), "{e}");
        // SAFETY: as above.
        let e = unsafe { blob_at(b.as_mut_ptr().cast(), Some(7)) }.unwrap_err().to_string();
        assert!(e.contains("shorter than its 8-byte length prefix"), "{e}");
    }
}
