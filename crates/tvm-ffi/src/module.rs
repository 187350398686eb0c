//! `ffi.Module`: libraries of functions exported with tvm-ffi's conventions. A shared library
//! (`ffi.ModuleLoadFromFile`, `ffi.Module.load_from_file.so`) or the system library
//! (`ffi.SystemLib`, symbols registered with `TVMFFIEnvModRegisterSystemLibSymbol`) exports each
//! function `f` as the `TVMFFISafeCallType` symbol `__tvm_ffi_f`, with optional
//! `__tvm_ffi__metadata_f` / `__tvm_ffi__doc_f` getters; the loader fills the library's
//! `__tvm_ffi__library_ctx` with the module handle and each context symbol registered through
//! `TVMFFIEnvModRegisterContextSymbol`, and `TVMFFIEnvModLookupFromImports` resolves a name
//! through the module's imports, then the global registry.
//!
//! Layout: the field `imports_` (an `ffi.Array` of modules) is at header + 24, as tvm-ffi's
//! reflection reports it, and the word before the header is where C++'s `ModuleObj` keeps its
//! vtable pointer: the C++ layer's, where one is linked in ([`cxx`]), so that C++ code calls
//! virtual methods on a module of ours; modules made in C++ are driven through it too. The
//! dlopen machinery and the system symbol table are the classic runtime's
//! ([`tvm_runtime_core::library::dso`], [`tvm_runtime_core::library::symbols`]).

pub(crate) mod cxx;
pub mod library_bin;

use super::any::{Any, TVMFFIAny};
use super::containers::array::{make_array, seq_items};
use super::error::safe_call;
use super::globals::{arg_any, arg_str, expect_args};
use super::object::{make_prefixed_object, prefixed_deleter_of, ObjectRef, TVMFFIObject};
use super::registry::{self, Builder};
use super::types::{self, TVMFFIFieldInfo};
use super::{ti, FfiError, FfiResult, TVMFFIByteArray};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, OnceLock};
use tvm_runtime_core::library::context::{ContextVars, Link};
use tvm_runtime_core::library::dso::Dso;
use tvm_runtime_core::library::symbols as system_lib;
use tvm_runtime_core::passive::Passive;

/// `Module::kBinarySerializable`.
pub const PROPERTY_BINARY_SERIALIZABLE: i64 = 0b001;
/// `Module::kRunnable`.
pub(crate) const PROPERTY_RUNNABLE: i64 = 0b010;

/// tvm-ffi's `symbol::tvm_ffi_symbol_prefix`, `symbol::tvm_ffi_library_ctx` and
/// `symbol::tvm_ffi_library_bin`, defined once with the library_bin format in the core (with
/// the prefixes of a function's metadata and doc getters).
pub use tvm_runtime_core::formats::library_bin::{
    DOC_PREFIX, FUNCTION_PREFIX as SYMBOL_PREFIX, LIBRARY_BIN_SYMBOL as LIBRARY_BIN, LIBRARY_CTX_SYMBOL as LIBRARY_CTX,
    METADATA_PREFIX,
};

/// Where a module's symbols come from.
pub enum Library {
    /// A `dlopen`ed shared library.
    Dso(Arc<Dso>),
    /// The system library's symbol table, with a symbol prefix.
    System(String),
}

impl Library {
    /// `Library::GetSymbol`.
    pub fn symbol(&self, name: &str) -> Option<*mut c_void> {
        match self {
            Library::Dso(d) => d.symbol(name),
            Library::System(prefix) => system_lib::lookup_prefixed(prefix, name),
        }
    }
    /// `GetSymbolWithSymbolPrefix`: `__tvm_ffi_<name>` (the system library tries its prefix first).
    pub(crate) fn function_symbol(&self, name: &str) -> Option<*mut c_void> {
        match self {
            Library::Dso(d) => d.symbol(&format!("{SYMBOL_PREFIX}{name}")),
            Library::System(prefix) => system_lib::lookup(&format!("{SYMBOL_PREFIX}{prefix}{name}"))
                .or_else(|| system_lib::lookup(&format!("{SYMBOL_PREFIX}{name}"))),
        }
    }
}

/// The payload after the header.
#[repr(C)]
pub struct ModulePayload {
    /// `imports_`: an owned `ffi.Array` of modules (header + 24).
    imports: AtomicPtr<TVMFFIObject>,
    /// Where C++ keeps `import_lookup_cache_` (unused by C code; always null).
    _cache_slot: *mut c_void,
    /// What the functions come from (`None` for a module of imports only).
    lib: Option<Library>,
    /// A module implemented in Rust (the Relax VM's executable and machines).
    native: Option<Box<dyn NativeModule>>,
    /// Guards import changes and the lookup cache; replaced import arrays are kept until the
    /// module goes (a reader may still hold the old pointer).
    state: Mutex<State>,
    /// Where this module was written into its library's `__tvm_ffi__library_ctx`.
    ctx: OnceLock<Link<ObjectRef>>,
}

/// The `__tvm_ffi__library_ctx` variables and the modules they may name (see the core's
/// [`ContextVars`]: a library loaded again names its newest module, which keeps the one before
/// alive and gives the variable back to it when it goes).
static CTX_VARS: ContextVars = ContextVars::new(LIBRARY_CTX);

/// A new reference to `p`, unless its last strong reference is already gone.
///
/// # Safety
/// `p` is null or an object whose memory is not freed while the call runs.
unsafe fn try_retain(p: *mut TVMFFIObject) -> Option<ObjectRef> {
    // SAFETY: per contract.
    let count = &unsafe { p.as_ref() }?.combined_ref_count;
    let mut c = count.load(Ordering::Relaxed);
    loop {
        if c & 0xFFFF_FFFF == 0 {
            return None;
        }
        match count.compare_exchange_weak(c, c + 1, Ordering::Acquire, Ordering::Relaxed) {
            // SAFETY: we just took a strong reference of our own.
            Ok(_) => return unsafe { ObjectRef::from_raw(p) },
            Err(now) => c = now,
        }
    }
}

/// Writes `m` into the `__tvm_ffi__library_ctx` variable at `slot`.
///
/// # Safety
/// `slot` is the `__tvm_ffi__library_ctx` symbol of the library `m` holds (a pointer variable).
unsafe fn attach_ctx(m: &ObjectRef, slot: *mut c_void) -> FfiResult<()> {
    let p = payload(m)?;
    // SAFETY: `slot` is a pointer variable of the library that `m` keeps loaded until it goes,
    // and `m` detaches before then (`Drop`). `retain` is called under the lock with a module
    // whose payload has not been dropped (it leaves the live list, under that lock, when it
    // is), so its memory is still there.
    unsafe { CTX_VARS.attach(slot, m.as_ptr().cast(), &p.ctx, |old| try_retain(old.cast())) }?;
    Ok(())
}

#[derive(Default)]
struct State {
    cache: HashMap<String, ObjectRef>,
    retired: Vec<ObjectRef>,
}

impl Drop for ModulePayload {
    fn drop(&mut self) {
        if let Some(link) = self.ctx.take() {
            // SAFETY: the library stays loaded while its module's payload lives.
            unsafe { CTX_VARS.detach(&link, |m| m.as_ptr().cast()) };
            // The module the variable named before goes now, outside the lock.
            drop(link);
        }
        let p = self.imports.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: the field owns one reference to its array.
        drop(unsafe { ObjectRef::from_raw(p) });
    }
}

/// A module whose functions are Rust code (C++'s `ModuleObj` subclasses: the Relax VM's
/// `relax.VMExecutable` and `relax.VirtualMachine`).
pub trait NativeModule: Send + Sync + 'static {
    /// `ModuleObj::kind()`.
    fn kind(&self) -> &str;
    /// The module's own function `name`; `this` is the module object (a function may hold it).
    fn get_function(&self, this: &ObjectRef, name: &str) -> FfiResult<Option<ObjectRef>>;
    /// `ModuleObj::GetPropertyMask()`.
    fn property_mask(&self) -> i64 {
        0
    }
    /// For downcasting to the implementation.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Makes a module over `lib`.
pub fn make_module(lib: Option<Library>) -> ObjectRef {
    make_module_with(lib, None)
}

/// Makes a module implemented in Rust.
pub fn make_native_module(native: Box<dyn NativeModule>) -> ObjectRef {
    make_module_with(None, Some(native))
}

/// The Rust implementation of a module made by [`make_native_module`].
pub fn native<T: 'static>(m: &ObjectRef) -> Option<&T> {
    payload(m).ok()?.native.as_ref()?.as_any().downcast_ref::<T>()
}

fn make_module_with(lib: Option<Library>, native: Option<Box<dyn NativeModule>>) -> ObjectRef {
    make_prefixed_object(
        ti::MODULE,
        cxx::module_prefix(),
        ModulePayload {
            imports: AtomicPtr::new(make_array(Vec::new()).into_raw()),
            _cache_slot: std::ptr::null_mut(),
            lib,
            native,
            state: Mutex::new(State::default()),
            ctx: OnceLock::new(),
        },
    )
}

/// Whether `m` is a module this library made (its deleter says so).
fn is_ours(m: &ObjectRef) -> bool {
    // SAFETY: `m` is live.
    let d = unsafe { (*m.as_ptr()).deleter }.map_or(0, |d| d as usize);
    d == prefixed_deleter_of::<ModulePayload>() as usize
}

/// Whether `m` is an `ffi.Module` made by C++ code (driven through [`cxx::call`]).
pub(crate) fn is_foreign(m: &ObjectRef) -> bool {
    m.type_index() == ti::MODULE && !is_ours(m)
}

/// The payload of a module this library made, or an error for anything else.
pub fn payload(m: &ObjectRef) -> FfiResult<&ModulePayload> {
    if m.type_index() != ti::MODULE {
        return Err(FfiError::type_error(format!("expected ffi.Module, got {}", types::type_key(m.type_index()))));
    }
    if !is_ours(m) {
        return Err(FfiError::runtime(
            "this ffi.Module was made by C++ code (the call needs a module of this library)",
        ));
    }
    // SAFETY: a module of ours has this payload.
    Ok(unsafe { m.payload::<ModulePayload>() })
}

/// The module's imports (new references).
pub fn imports(m: &ObjectRef) -> FfiResult<Vec<ObjectRef>> {
    if is_foreign(m) {
        let arr =
            cxx::call(m, "imports", &[])?.as_object().ok_or_else(|| FfiError::runtime("module has no imports"))?;
        return Ok(seq_items(&arr).iter().filter_map(|a| a.as_object()).collect());
    }
    let p = payload(m)?;
    let _g = p.state.lock();
    let arr = p.imports.load(Ordering::Acquire);
    // SAFETY: the field holds a live array while the lock is held.
    let arr = unsafe { ObjectRef::from_borrowed(arr) }.ok_or_else(|| FfiError::runtime("module has no imports"))?;
    Ok(seq_items(&arr).iter().filter_map(|a| a.as_object()).collect())
}

/// Replaces a module's imports.
pub fn replace_imports(m: &ObjectRef, items: Vec<ObjectRef>) -> FfiResult<()> {
    let p = payload(m)?;
    let mut st = p.state.lock();
    set_imports(p, &mut st, items);
    Ok(())
}

fn set_imports(p: &ModulePayload, state: &mut State, items: Vec<ObjectRef>) {
    let new = make_array(items.into_iter().map(Any::object).collect());
    let old = p.imports.swap(new.into_raw(), Ordering::AcqRel);
    // SAFETY: the field owned one reference to the old array; keep it until the module goes.
    if let Some(o) = unsafe { ObjectRef::from_raw(old) } {
        state.retired.push(o);
    }
    state.cache.clear();
}

/// `ModuleObj::GetFunction(name)`: the module's own function.
fn own_function(m: &ObjectRef, name: &str) -> FfiResult<Option<ObjectRef>> {
    if is_foreign(m) {
        return Ok(cxx::call(m, "GetFunction", &[Any::string(name), Any::bool(false)])?.as_object());
    }
    let p = payload(m)?;
    if let Some(n) = &p.native {
        return n.get_function(m, name);
    }
    let Some(lib) = &p.lib else { return Ok(None) };
    let Some(addr) = lib.function_symbol(name) else { return Ok(None) };
    // SAFETY: `__tvm_ffi_<name>` symbols are TVMFFISafeCallType functions by convention.
    let call: super::function::SafeCall = unsafe { std::mem::transmute::<*mut c_void, _>(addr) };
    Ok(Some(super::function::from_symbol(call, m.clone())))
}

/// Calls a no-argument getter symbol (`__tvm_ffi__metadata_<name>`, `__tvm_ffi__doc_<name>`).
fn own_string_symbol(m: &ObjectRef, symbol: &str) -> FfiResult<Option<Any>> {
    if is_foreign(m) {
        let (method, name) = match symbol.strip_prefix(DOC_PREFIX) {
            Some(n) => ("GetFunctionDoc", n),
            None => ("GetFunctionMetadata", symbol.strip_prefix(METADATA_PREFIX).unwrap_or(symbol)),
        };
        let v = cxx::call(m, method, &[Any::string(name), Any::bool(false)])?;
        return Ok((!v.is_none()).then_some(v));
    }
    let p = payload(m)?;
    let Some(addr) = p.lib.as_ref().and_then(|l| l.symbol(symbol)) else { return Ok(None) };
    // SAFETY: these symbols are TVMFFISafeCallType functions by convention.
    let call: super::function::SafeCall = unsafe { std::mem::transmute::<*mut c_void, _>(addr) };
    let mut out = TVMFFIAny::NONE;
    // SAFETY: no arguments; an owned value out.
    let rc = unsafe { call(std::ptr::null_mut(), std::ptr::null(), 0, &mut out) };
    if rc != 0 {
        return Err(FfiError::take_raised(rc));
    }
    // SAFETY: on success the callee wrote an owned value.
    Ok(Some(unsafe { Any::from_raw(out) }))
}

/// Looks `f` up in the module, then (with `query_imports`) depth-first in its imports.
fn find<T>(m: &ObjectRef, query_imports: bool, f: &dyn Fn(&ObjectRef) -> FfiResult<Option<T>>) -> FfiResult<Option<T>> {
    if let Some(v) = f(m)? {
        return Ok(Some(v));
    }
    if query_imports {
        for i in imports(m)? {
            if let Some(v) = find(&i, true, f)? {
                return Ok(Some(v));
            }
        }
    }
    Ok(None)
}

/// `ModuleObj::GetFunction(name, query_imports)`.
pub fn get_function(m: &ObjectRef, name: &str, query_imports: bool) -> FfiResult<Option<ObjectRef>> {
    find(m, query_imports, &|m| own_function(m, name))
}

fn get_prefixed_string(m: &ObjectRef, prefix: &str, name: &str, query_imports: bool) -> FfiResult<Any> {
    let sym = format!("{prefix}{name}");
    Ok(find(m, query_imports, &|m| own_string_symbol(m, &sym))?.unwrap_or_default())
}

/// `ModuleObj::ImportModule`: refuses a cycle.
pub(crate) fn import_module(m: &ObjectRef, other: &ObjectRef) -> FfiResult<()> {
    if is_foreign(m) {
        return cxx::call(m, "ImportModule", &[Any::object(other.clone())]).map(drop);
    }
    let mut seen = vec![other.as_ptr()];
    let mut stack = vec![other.clone()];
    while let Some(n) = stack.pop() {
        for i in imports(&n)? {
            if !seen.contains(&i.as_ptr()) {
                seen.push(i.as_ptr());
                stack.push(i);
            }
        }
    }
    if seen.contains(&m.as_ptr()) {
        return Err(FfiError::runtime("Cyclic dependency detected during import"));
    }
    let mut items = imports(m)?;
    items.push(other.clone());
    let p = payload(m)?;
    let mut st = p.state.lock();
    set_imports(p, &mut st, items);
    Ok(())
}

/// `ModuleObj::ClearImports`.
pub fn clear_imports(m: &ObjectRef) -> FfiResult<()> {
    if is_foreign(m) {
        return cxx::call(m, "ClearImports", &[]).map(drop);
    }
    let p = payload(m)?;
    let mut st = p.state.lock();
    set_imports(p, &mut st, Vec::new());
    Ok(())
}

/// `TVMFFIEnvModLookupFromImports`: `name` from the module's imports, else the global registry;
/// the result is borrowed (the module's cache keeps it).
///
/// # Safety
/// `ctx` is null or a module handle this library filled into `__tvm_ffi__library_ctx`.
pub unsafe fn lookup_from_imports(ctx: *mut TVMFFIObject, name: &str) -> FfiResult<*mut TVMFFIObject> {
    if ctx.is_null() {
        return Err(FfiError::value(
            "TVMFFIEnvModLookupFromImports: the library context is NULL (a library loaded earlier with RTLD_GLOBAL, \
             such as a system-library export, may define this library's symbols)",
        ));
    }
    let m = CTX_VARS.with_live(ctx.cast(), |live| {
        if live {
            // SAFETY: a module this runtime wrote into a context variable whose payload has not
            // been dropped (so its memory is there, under the lock): retained unless it is going.
            unsafe { try_retain(ctx) }.ok_or_else(|| {
                FfiError::value("TVMFFIEnvModLookupFromImports: the library context is a module being destroyed")
            })
        } else {
            // Any other module handle, which the caller holds (by contract).
            // SAFETY: by contract.
            Ok(unsafe { ObjectRef::from_borrowed(ctx) }.expect("checked non-null"))
        }
    })?;
    let p = payload(&m)?;
    if let Some(f) = p.state.lock().cache.get(name) {
        return Ok(f.as_ptr());
    }
    let mut found = None;
    for i in imports(&m)? {
        if let Some(f) = get_function(&i, name, true)? {
            found = Some(f);
            break;
        }
    }
    let f = found.or_else(|| registry::get(name)).ok_or_else(|| {
        FfiError::runtime(format!("Cannot find function {name} in the imported modules or global registry."))
    })?;
    // The pointer of the entry the cache keeps: another thread may have put one in first, and
    // `f` (which may be a different object for the same name) is dropped then.
    let ptr = p.state.lock().cache.entry(name.to_owned()).or_insert(f).as_ptr();
    Ok(ptr)
}

/// The context symbols: the C functions that compiled kernels call through `__<name>` pointer
/// variables. They start with the ones the library's face installed ([`install_context_symbols`],
/// those TVM's runtime registers at start-up in `module.cc`), followed by any registered since.
static CONTEXT_SYMBOLS: Passive<Mutex<Vec<(String, usize)>>, BuiltInSymbols> = Passive::new();

/// The built-in context symbols: names and addresses.
pub(crate) type BuiltInSymbols = fn() -> Vec<(&'static str, usize)>;

fn context_symbols() -> &'static Mutex<Vec<(String, usize)>> {
    CONTEXT_SYMBOLS.get(|built_ins| {
        Mutex::new(built_ins.map(|f| f()).unwrap_or_default().into_iter().map(|(n, f)| (n.to_owned(), f)).collect())
    })
}

/// Installs the built-in context symbols (once): first in the list, or added now to a list that
/// has started (where a name is not there yet).
pub fn install_context_symbols(built_ins: BuiltInSymbols) {
    CONTEXT_SYMBOLS.install(built_ins, |list, built_ins| {
        let mut l = list.lock();
        for (n, f) in built_ins() {
            if !l.iter().any(|(m, _)| m == n) {
                l.push((n.to_owned(), f));
            }
        }
    });
}

/// The context symbols, copied.
pub fn context_symbol_list() -> Vec<(String, usize)> {
    context_symbols().lock().clone()
}

/// `TVMFFIEnvModRegisterContextSymbol`: every library loaded later gets `symbol` written into
/// its variable `name` (when it has one).
pub fn register_context_symbol(name: &str, symbol: *mut c_void) {
    context_symbols().lock().push((name.to_owned(), symbol as usize));
}

/// `CreateLibraryModule`: fills the context symbols and `__tvm_ffi__library_ctx`, and builds
/// the import tree of `__tvm_ffi__library_bin` when the library has one.
pub(crate) fn create_library_module(lib: Library) -> FfiResult<ObjectRef> {
    let vars: Vec<(String, *mut c_void, usize)> = context_symbols()
        .lock()
        .iter()
        .filter_map(|(name, value)| lib.symbol(name).map(|slot| (name.clone(), slot, *value)))
        .collect();
    let vars: Vec<_> = vars.iter().map(|(n, slot, v)| (n.as_str(), *slot, *v as *const c_void)).collect();
    // SAFETY: a context symbol is a pointer variable of the library, by convention, live while
    // the library is loaded.
    unsafe { tvm_runtime_core::library::slots::store_pointers(&vars) }?;
    let bin = lib.symbol(LIBRARY_BIN);
    let ctx_slot = lib.symbol(LIBRARY_CTX);
    let lib_mod = make_module(Some(lib));
    if let Some(slot) = ctx_slot {
        // `__tvm_ffi__library_ctx` is a `void*` variable of the library; it names the module
        // without holding a reference (functions keep the module alive).
        // SAFETY: the library's `__tvm_ffi__library_ctx`, which `lib_mod` keeps loaded.
        unsafe { attach_ctx(&lib_mod, slot) }?;
    }
    match bin {
        // SAFETY: `__tvm_ffi__library_bin` starts with its length (8 bytes, little endian).
        Some(b) => unsafe { library_bin::process(b.cast(), lib_mod) },
        None => Ok(lib_mod),
    }
}

/// `ffi.Module.load_from_file.so`.
pub fn load_dso(path: &str) -> FfiResult<ObjectRef> {
    let d = Dso::open(path)?;
    create_library_module(Library::Dso(d))
}

/// A library loaded from its bytes (an anonymous file, see [`tvm_runtime_core::library::memfd`]) as
/// [`load_dso`] loads a file: its `__tvm_ffi__library_bin` module tree, or the library module.
pub fn load_dso_from_bytes(bytes: &[u8], name: &str) -> FfiResult<ObjectRef> {
    let d = tvm_runtime_core::library::memfd::open_bytes(bytes, name)?;
    create_library_module(Library::Dso(d))
}

/// `Module::LoadFromFile`: the loader `ffi.Module.load_from_file.<ext>` of the file's extension.
pub fn load_from_file(path: &str) -> FfiResult<ObjectRef> {
    let fmt = match path.rfind('.') {
        Some(i) => &path[i + 1..],
        None => return Err(FfiError::runtime(format!("Failed to get file format from {path}"))),
    };
    let fmt = if matches!(fmt, "dll" | "dylib" | "dso") { "so" } else { fmt };
    let loader_name = format!("ffi.Module.load_from_file.{fmt}");
    let loader = registry::get(&loader_name).ok_or_else(|| {
        FfiError::runtime(format!(
            "Loader for `.{fmt}` files is not registered, resolved to ({loader_name}) in the global registry.\
             Ensure that you have loaded the correct runtime code, and\
             that you are on the correct hardware architecture."
        ))
    })?;
    let r = super::function::call_any(&loader, &[Any::string(path), Any::string(fmt)])?;
    r.into_object().map_err(|_| FfiError::type_error(format!("{loader_name} did not return a module")))
}

/// `ffi.SystemLib(prefix)`: one module per prefix, for the process.
pub fn system_lib(prefix: &str) -> FfiResult<ObjectRef> {
    static MODS: OnceLock<Mutex<HashMap<String, ObjectRef>>> = OnceLock::new();
    let mut mods = MODS.get_or_init(Mutex::default).lock();
    if let Some(m) = mods.get(prefix) {
        return Ok(m.clone());
    }
    let m = create_library_module(Library::System(prefix.to_owned()))?;
    mods.insert(prefix.to_owned(), m.clone());
    Ok(m)
}

fn module_globals() -> &'static Mutex<Vec<ObjectRef>> {
    static G: OnceLock<Mutex<Vec<ObjectRef>>> = OnceLock::new();
    G.get_or_init(Mutex::default)
}

fn arg_module(name: &str, args: &[TVMFFIAny], i: usize) -> FfiResult<ObjectRef> {
    let a = arg_any(name, args, i)?;
    let t = a.type_index();
    match a.into_object() {
        Ok(o) if o.type_index() == ti::MODULE => Ok(o),
        _ => Err(FfiError::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{name}`. Expected `ffi.Module` but got `{}`",
            types::type_key(t)
        ))),
    }
}

fn arg_bool(name: &str, args: &[TVMFFIAny], i: usize) -> FfiResult<bool> {
    args.get(i).and_then(super::any::view_as_bool).ok_or_else(|| {
        FfiError::type_error(format!("Mismatched type on argument #{i} when calling: `{name}`. Expected `bool`"))
    })
}

fn arg_ptr(name: &str, args: &[TVMFFIAny], i: usize) -> FfiResult<*mut c_void> {
    let v = args.get(i).ok_or_else(|| FfiError::type_error(format!("`{name}`: missing argument #{i}")))?;
    match v.type_index {
        ti::NONE => Ok(std::ptr::null_mut()),
        ti::OPAQUE_PTR | ti::INT => Ok(v.bits() as usize as *mut c_void),
        t => Err(FfiError::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{name}`. Expected `void*` but got `{}`",
            types::type_key(t)
        ))),
    }
}

unsafe extern "C" fn imports_getter(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: called with the address of a module's `imports_` field and a result cell.
        unsafe {
            let arr = *field.cast::<*mut TVMFFIObject>();
            *result = Any::opt_object(ObjectRef::from_borrowed(arr)).into_raw();
        }
        Ok(())
    })
}

unsafe extern "C" fn imports_setter(_field: *mut c_void, _value: *const TVMFFIAny) -> i32 {
    FfiError::attribute("ffi.Module.imports_ is read-only (use ffi.ModuleImportModule)").raise()
}

fn register_imports_field() {
    let name = b"imports_";
    let meta = br#"{"type_schema":"{\"type\":\"ffi.Array\",\"args\":[{\"type\":\"Any\"}]}"}"#;
    let info = TVMFFIFieldInfo {
        name: TVMFFIByteArray::of(name),
        doc: TVMFFIByteArray::EMPTY,
        metadata: TVMFFIByteArray::of(meta),
        flags: 0,
        size: 8,
        alignment: 8,
        offset: 24,
        getter: Some(imports_getter),
        setter: imports_setter as *mut c_void,
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: ti::ARRAY,
    };
    let _ = types::register_field(ti::MODULE, &info);
    // ObjectDef<ModuleObj> records C++'s size: vtable pointer, header, imports_, lookup cache.
    let meta = types::TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: None,
        total_size: 48,
        structural_eq_hash_kind: 0,
    };
    let _ = types::register_metadata(ti::MODULE, &meta);
    // ModuleObj is final (`_type_final`), which tvm-ffi's ObjectDef records as an attribute.
    let _ = types::register_attr(ti::MODULE, "__ffi_type_final__", Any::bool(true).raw());
}

/// Adds the `ffi.Module*` globals, `ffi.SystemLib` and `ffi.FunctionFromExternC`.
pub fn register(b: &mut Builder) {
    register_imports_field();
    b.add("ffi.ModuleLoadFromFile", |a| {
        expect_args("ffi.ModuleLoadFromFile", a, 1)?;
        Ok(Any::object(load_from_file(arg_str("ffi.ModuleLoadFromFile", a, 0)?)?))
    });
    b.add("ffi.Module.load_from_file.so", |a| {
        expect_args("ffi.Module.load_from_file.so", a, 2)?;
        Ok(Any::object(load_dso(arg_str("ffi.Module.load_from_file.so", a, 0)?)?))
    });
    b.add("ffi.SystemLib", |a| {
        let prefix = if a.is_empty() { "" } else { arg_str("ffi.SystemLib", a, 0)? };
        Ok(Any::object(system_lib(prefix)?))
    });
    b.add("ffi.ModuleGetFunction", |a| {
        let n = "ffi.ModuleGetFunction";
        expect_args(n, a, 3)?;
        Ok(Any::opt_object(get_function(&arg_module(n, a, 0)?, arg_str(n, a, 1)?, arg_bool(n, a, 2)?)?))
    });
    b.add("ffi.ModuleImplementsFunction", |a| {
        let n = "ffi.ModuleImplementsFunction";
        expect_args(n, a, 3)?;
        let f = get_function(&arg_module(n, a, 0)?, arg_str(n, a, 1)?, arg_bool(n, a, 2)?)?;
        Ok(Any::bool(f.is_some()))
    });
    b.add("ffi.ModuleGetFunctionMetadata", |a| {
        let n = "ffi.ModuleGetFunctionMetadata";
        expect_args(n, a, 3)?;
        get_prefixed_string(&arg_module(n, a, 0)?, METADATA_PREFIX, arg_str(n, a, 1)?, arg_bool(n, a, 2)?)
    });
    b.add("ffi.ModuleGetFunctionDoc", |a| {
        let n = "ffi.ModuleGetFunctionDoc";
        expect_args(n, a, 3)?;
        get_prefixed_string(&arg_module(n, a, 0)?, DOC_PREFIX, arg_str(n, a, 1)?, arg_bool(n, a, 2)?)
    });
    b.add("ffi.ModuleGetPropertyMask", |a| {
        expect_args("ffi.ModuleGetPropertyMask", a, 1)?;
        let m = arg_module("ffi.ModuleGetPropertyMask", a, 0)?;
        if is_foreign(&m) {
            return cxx::call(&m, "GetPropertyMask", &[]);
        }
        let p = payload(&m)?;
        Ok(Any::int(match (&p.lib, &p.native) {
            (_, Some(n)) => n.property_mask(),
            (Some(_), None) => PROPERTY_BINARY_SERIALIZABLE | PROPERTY_RUNNABLE,
            (None, None) => 0,
        }))
    });
    b.add("ffi.ModuleGetKind", |a| {
        expect_args("ffi.ModuleGetKind", a, 1)?;
        let m = arg_module("ffi.ModuleGetKind", a, 0)?;
        if is_foreign(&m) {
            return cxx::call(&m, "kind", &[]);
        }
        Ok(Any::string(payload(&m)?.native.as_ref().map_or("library", |n| n.kind())))
    });
    b.add("ffi.ModuleGetWriteFormats", |a| {
        expect_args("ffi.ModuleGetWriteFormats", a, 1)?;
        let m = arg_module("ffi.ModuleGetWriteFormats", a, 0)?;
        if is_foreign(&m) {
            return cxx::call(&m, "GetWriteFormats", &[]);
        }
        payload(&m)?;
        Ok(Any::object(make_array(Vec::new())))
    });
    b.add("ffi.ModuleWriteToFile", |a| {
        expect_args("ffi.ModuleWriteToFile", a, 3)?;
        let m = arg_module("ffi.ModuleWriteToFile", a, 0)?;
        if is_foreign(&m) {
            return cxx::call(
                &m,
                "WriteToFile",
                &[arg_any("ffi.ModuleWriteToFile", a, 1)?, arg_any("ffi.ModuleWriteToFile", a, 2)?],
            );
        }
        payload(&m)?;
        Err(FfiError::runtime("Module[library] does not support WriteToFile"))
    });
    b.add("ffi.ModuleInspectSource", |a| {
        expect_args("ffi.ModuleInspectSource", a, 2)?;
        let m = arg_module("ffi.ModuleInspectSource", a, 0)?;
        if is_foreign(&m) {
            return cxx::call(&m, "InspectSource", &[arg_any("ffi.ModuleInspectSource", a, 1)?]);
        }
        payload(&m)?;
        Ok(Any::string(""))
    });
    b.add("ffi.ModuleImportModule", |a| {
        let n = "ffi.ModuleImportModule";
        expect_args(n, a, 2)?;
        import_module(&arg_module(n, a, 0)?, &arg_module(n, a, 1)?)?;
        Ok(Any::none())
    });
    b.add("ffi.ModuleClearImports", |a| {
        expect_args("ffi.ModuleClearImports", a, 1)?;
        clear_imports(&arg_module("ffi.ModuleClearImports", a, 0)?)?;
        Ok(Any::none())
    });
    b.add("ffi.ModuleGlobalsAdd", |a| {
        expect_args("ffi.ModuleGlobalsAdd", a, 1)?;
        let m = arg_module("ffi.ModuleGlobalsAdd", a, 0)?;
        let mut g = module_globals().lock();
        if !g.iter().any(|x| x.same_as(&m)) {
            g.push(m);
        }
        Ok(Any::none())
    });
    b.add("ffi.ModuleGlobalsRemove", |a| {
        expect_args("ffi.ModuleGlobalsRemove", a, 1)?;
        let m = arg_module("ffi.ModuleGlobalsRemove", a, 0)?;
        let removed = {
            let mut g = module_globals().lock();
            g.iter().position(|x| x.same_as(&m)).map(|i| g.remove(i))
        };
        drop(removed);
        Ok(Any::none())
    });
    b.add("ffi.FunctionFromExternC", |a| {
        let n = "ffi.FunctionFromExternC";
        expect_args(n, a, 3)?;
        let (handle, call, deleter) = (arg_ptr(n, a, 0)?, arg_ptr(n, a, 1)?, arg_ptr(n, a, 2)?);
        if call.is_null() {
            return Err(FfiError::value("ffi.FunctionFromExternC: safe_call is NULL"));
        }
        // SAFETY: the caller hands a TVMFFISafeCallType and an optional `void(void*)` deleter.
        let (call, deleter) = unsafe {
            (
                std::mem::transmute::<*mut c_void, super::function::SafeCall>(call),
                (!deleter.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(deleter)),
            )
        };
        Ok(Any::object(super::function::from_extern_c(handle, call, deleter)))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn add_one(_h: *mut c_void, args: *const TVMFFIAny, n: i32, out: *mut TVMFFIAny) -> i32 {
        // SAFETY: called with n valid cells and a result cell.
        unsafe {
            let a = super::super::function::arg_slice(args, n);
            *out = Any::int(a[0].bits() as i64 + 1).into_raw();
        }
        0
    }

    #[test]
    fn system_lib_functions_imports_and_lookup() {
        system_lib::register_symbol("__tvm_ffi_mtest.add_one", add_one as *mut c_void);
        let m = system_lib("").unwrap();
        assert!(system_lib("").unwrap().same_as(&m));
        let f = get_function(&m, "mtest.add_one", false).unwrap().unwrap();
        let r = super::super::function::call_any(&f, &[Any::int(41)]).unwrap();
        assert_eq!(r.as_i64(), Some(42));
        assert!(get_function(&m, "mtest.nothing", true).unwrap().is_none());

        let outer = make_module(None);
        assert!(get_function(&outer, "mtest.add_one", false).unwrap().is_none());
        import_module(&outer, &m).unwrap();
        assert!(get_function(&outer, "mtest.add_one", true).unwrap().is_some());
        assert_eq!(import_module(&m, &outer).unwrap_err().message(), "Cyclic dependency detected during import");
        // SAFETY: `outer` is a live module of ours.
        let g = unsafe { lookup_from_imports(outer.as_ptr(), "mtest.add_one") }.unwrap();
        // SAFETY: as above; the cache keeps the first result.
        assert_eq!(g, unsafe { lookup_from_imports(outer.as_ptr(), "mtest.add_one") }.unwrap());
        // SAFETY: as above.
        assert!(unsafe { lookup_from_imports(outer.as_ptr(), "mtest.none") }.is_err());
        clear_imports(&outer).unwrap();
        assert!(imports(&outer).unwrap().is_empty());
    }

    #[test]
    fn load_errors_are_clear() {
        let e = load_from_file("/nonexistent/lib").unwrap_err();
        assert!(e.message().contains("Failed to get file format"), "{}", e.message());
        assert!(load_dso("/nonexistent/lib.so").is_err());
    }
}
