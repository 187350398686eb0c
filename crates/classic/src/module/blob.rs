//! The `__tvm_dev_mblob` blob of a model library: the imported modules of the
//! library, serialized, and the import tree that connects them to the library's own code.
//!
//! Layout: an 8-byte little-endian payload length, then the payload: a u64 entry count and the
//! entries, each a length-prefixed key followed by its data: `_lib` (no data: the library's own
//! module), `_import_tree` (two `vec<u64>`: CSR row pointers and child indices), or a module
//! type key followed by that module's serialized form, which the global
//! `runtime.module.loadbinary_<type_key>` reads. Blobs without an import tree (exports older
//! than v0.7) make a new library module the root that imports every entry in order.
//!
//! Everything is checked: every length against what is left before anything is allocated,
//! every import-tree index against the module list, the tree for cycles and for its single
//! root (module 0). Errors leave nothing half-built: modules made so far are dropped.
//!
//! # The loader protocol (`runtime.module.loadbinary_<type_key>`)
//!
//! A loader is called with two arguments and returns the module (code 9):
//!
//! 0. `stream` (code 3, `kTVMOpaqueHandle`): a `*mut` [`BlobStream`] positioned at the first
//!    byte of the entry's data. It is meaningful only to this runtime, only on the calling
//!    thread, and only during the call. Loaders compiled into this runtime read it through
//!    [`with_stream`] (never by dereferencing the pointer themselves); the parser continues
//!    after the last byte they consumed.
//! 1. `rest` (code 12, `kTVMBytes`): a read-only view (borrowed for the call, not a copy) of the
//!    bytes from the entry's data to the end of the payload. The entry's own data is a prefix
//!    of it; its length is only known to the loader.
//!
//! Loaders written in C (or any language, through the C API) cannot use the Rust stream, so
//! this runtime registers two globals that work on the handle of a running loader:
//!
//! * `runtime.module.blob_stream_read(stream, nbytes: int) -> bytes`: the next `nbytes` bytes
//!   (consumed; an error if fewer are left);
//! * `runtime.module.blob_stream_skip(stream, nbytes: int) -> None`: consumes `nbytes` bytes, for
//!   loaders that parse the `rest` view themselves and then say how much they used.
//!
//! A C loader must consume exactly its entry's data with these, or the next entry is misread
//! (and then rejected). The handle is checked against the streams open on the calling thread,
//! so a stale or foreign handle is an error, never a wild read. This differs from TVM v0.8,
//! whose loaders receive a C++ `dmlc::Stream*`: loaders compiled for
//! TVM's C++ runtime cannot be used with this one. To make a module from C functions, a C
//! loader can call `runtime.ModuleFromFunctions(type_key, name0, func0, name1, func1, ...)`.

use super::Module;
use crate::abi::{TVMByteArray, TVMValue};
use crate::error::{Error, Result};
use crate::io::Reader;
use crate::mapped::Region;
use crate::registry;
use crate::value::{code, code_name, Args, Value};
use std::cell::RefCell;
use std::ffi::c_void;

/// The symbol holding the blob.
pub(crate) const BLOB_SYMBOL: &str = "__tvm_dev_mblob";

pub use super::import_tree::{MAX_IMPORT_DEPTH, MAX_IMPORT_PATHS};

/// The prefix of the loader globals.
pub const LOADER_PREFIX: &str = "runtime.module.loadbinary_";

/// A reader over one blob entry's data, handed to its loader (see the module doc). It derefs to
/// its [`Reader`], so a loader reads it with the dmlc::Stream encodings directly.
///
/// `repr(C)` with the reader first: a loader that casts the handle to `*mut Reader` reads the
/// right object. That cast skips the checks of [`with_stream`]; use [`with_stream`].
#[repr(C)]
pub struct BlobStream<'a> {
    reader: Reader<'a>,
    type_key: &'a str,
}

impl<'a> std::ops::Deref for BlobStream<'a> {
    type Target = Reader<'a>;
    fn deref(&self) -> &Reader<'a> {
        &self.reader
    }
}

impl<'a> std::ops::DerefMut for BlobStream<'a> {
    fn deref_mut(&mut self) -> &mut Reader<'a> {
        &mut self.reader
    }
}

impl<'a> BlobStream<'a> {
    /// A stream over `rest` (the entry's data and everything after it) for module `type_key`.
    pub fn new(rest: &'a [u8], type_key: &'a str) -> BlobStream<'a> {
        BlobStream { reader: Reader::new(rest, "__tvm_dev_mblob entry"), type_key }
    }

    /// The same, over bytes of a library's mapping (`region`): loaders that copy large data
    /// out (NDArray records) give the pages behind them back as they go.
    pub(crate) fn in_region(rest: &'a [u8], type_key: &'a str, region: Option<&'a Region>) -> BlobStream<'a> {
        BlobStream { reader: Reader::new(rest, "__tvm_dev_mblob entry").with_region(region), type_key }
    }

    /// The type key of the entry.
    pub fn type_key(&self) -> &str {
        self.type_key
    }

    /// The reader, for the dmlc::Stream encodings.
    pub fn reader(&mut self) -> &mut Reader<'a> {
        &mut self.reader
    }

    /// The next `n` bytes.
    pub(crate) fn read_bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        self.reader.bytes(n)
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.reader.position()
    }

    /// Bytes left up to the end of the payload.
    pub fn remaining(&self) -> usize {
        self.reader.remaining()
    }
}

/// A stream that a loader is running with on this thread.
struct Active {
    addr: usize,
    busy: bool,
}

thread_local! {
    static ACTIVE: RefCell<Vec<Active>> = const { RefCell::new(Vec::new()) };
}

/// Marks a stream as open for its loader call; unmarks it when dropped (also on unwinding).
struct Open(usize);

impl Open {
    fn new(addr: usize) -> Open {
        ACTIVE.with(|a| a.borrow_mut().push(Active { addr, busy: false }));
        Open(addr)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            let mut a = a.borrow_mut();
            if let Some(i) = a.iter().rposition(|s| s.addr == self.0) {
                a.remove(i);
            }
        });
    }
}

/// Marks an open stream as borrowed by [`with_stream`]; unmarks it when dropped.
struct Busy(usize);

impl Drop for Busy {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            if let Some(s) = a.borrow_mut().iter_mut().rev().find(|s| s.addr == self.0) {
                s.busy = false;
            }
        });
    }
}

/// Runs `f` on the stream behind a loader's `stream` handle. Fails unless the handle is a stream
/// handed to a loader that is running on this thread, and not already in use.
pub fn with_stream<R>(handle: *mut c_void, f: impl for<'s> FnOnce(&mut BlobStream<'s>) -> Result<R>) -> Result<R> {
    let addr = handle as usize;
    let ok = ACTIVE.with(|a| match a.borrow_mut().iter_mut().rev().find(|s| s.addr == addr) {
        Some(s) if !s.busy => {
            s.busy = true;
            Ok(())
        }
        Some(_) => Err(Error::value("the blob stream is already in use by an outer call")),
        None => Err(Error::value(format!("{handle:p} is not the stream of a blob loader running on this thread"))),
    });
    ok?;
    let _busy = Busy(addr);
    // SAFETY: the handle is registered as open, so it is the address of a `BlobStream` that
    // `process` keeps alive and does not touch until its loader call returns (which is after
    // this call, on this same thread); the busy flag makes this the only reference to it.
    // The stream's lifetime is hidden behind the higher-ranked closure, so no borrowed bytes
    // escape.
    let stream = unsafe { &mut *handle.cast::<BlobStream<'_>>() };
    f(stream)
}

/// What a blob built: the root module and the library's own module (`_lib`), which receives
/// `__tvm_module_ctx`.
pub struct LoadedBlob {
    /// The module to return to the user.
    pub root: Module,
    /// The library module of the DSO (`None` if the tree has no `_lib`).
    pub dso_module: Option<Module>,
}

/// The payload of a blob (`bytes` = the 8-byte length prefix and at least that many bytes).
pub fn frame(bytes: &[u8]) -> Result<&[u8]> {
    let prefix: [u8; 8] = bytes
        .get(..8)
        .and_then(|p| p.try_into().ok())
        .ok_or_else(|| Error::value("__tvm_dev_mblob is shorter than its 8-byte length prefix"))?;
    let n = u64::from_le_bytes(prefix);
    usize::try_from(n).ok().and_then(|n| bytes.get(8..8 + n.min(usize::MAX - 8))).ok_or_else(|| {
        Error::value(format!(
            "__tvm_dev_mblob announces a {n}-byte payload, but only {} bytes follow its length prefix",
            bytes.len() - 8
        ))
    })
}

/// The type keys that have a loader, sorted.
fn available_loaders() -> Vec<String> {
    let mut v: Vec<String> =
        registry::list_names().into_iter().filter_map(|n| n.strip_prefix(LOADER_PREFIX).map(str::to_owned)).collect();
    v.sort_unstable(); // names are unique
    v
}

/// Calls the loader of `key` on the entry data at the reader's position; advances the reader
/// past what the loader consumed.
fn load_entry(key: &str, payload: &[u8], r: &mut Reader<'_>) -> Result<Module> {
    let name = format!("{LOADER_PREFIX}{key}");
    let loader = registry::get(&name).ok_or_else(|| {
        let what = super::kinds::module_kind(key).map(|k| format!(" ({key} is {k})")).unwrap_or_default();
        Error::tvm(format!(
            "Binary was created using {key}{what} but a loader of that name is not registered ({name}). \
             Available loaders are {}. Perhaps you need to recompile with this runtime enabled.",
            available_loaders().join(", ")
        ))
    })?;
    let rest = payload.get(r.position()..).unwrap_or_default();
    let (m, used) = call_loader(&name, &loader, key, rest, r.region())?;
    r.bytes(used)?;
    Ok(m)
}

/// Calls classic loader `loader` (named `name`) of module kind `key` over `rest`; returns the
/// module and how many bytes the loader read.
fn call_loader(
    name: &str,
    loader: &crate::function::PackedFunc,
    key: &str,
    rest: &[u8],
    region: Option<&Region>,
) -> Result<(Module, usize)> {
    let mut stream = BlobStream::in_region(rest, key, region);
    let handle: *mut BlobStream<'_> = &mut stream;
    let view = TVMByteArray { data: rest.as_ptr().cast(), size: rest.len() };
    let values =
        [TVMValue { v_handle: handle.cast() }, TVMValue { v_handle: (&view as *const TVMByteArray).cast_mut().cast() }];
    let codes = [code::HANDLE, code::BYTES];
    let mut ret = Value::Null;
    {
        let _open = Open::new(handle as usize);
        // SAFETY: argument 0 is an opaque handle; argument 1 points to `view`, a byte array over
        // `rest`, both alive for the call.
        let args = unsafe { Args::new(&values, &codes) };
        loader.call_args(&args, &mut ret)?;
    }
    let used = stream.position();
    match ret {
        Value::Module(m) => Ok((m, used)),
        other => Err(Error::tvm(format!("{name} returned {} instead of a module", code_name(other.type_code())))),
    }
}

/// Loads one module of kind `key` from its serialized bytes with the classic loader
/// `runtime.module.loadbinary_<key>` (the device modules a TVM v0.20+ library binary holds);
/// `None` when no such loader is registered.
pub fn load_bytes(key: &str, bytes: &[u8]) -> Option<Result<Module>> {
    let name = format!("{LOADER_PREFIX}{key}");
    let loader = registry::get(&name)?;
    Some(call_loader(&name, &loader, key, bytes, None).map(|(m, _)| m))
}

/// Builds the module tree of a blob payload. `make_lib` makes a new library
/// module for the DSO (for `_lib`, and as the root of legacy blobs).
pub fn process(payload: &[u8], make_lib: &dyn Fn() -> Module) -> Result<LoadedBlob> {
    process_in(payload, make_lib, None)
}

/// [`process`] for a payload inside a library's mapping (`region`): the pages behind each entry
/// are given back to the kernel once the entry is loaded (its data copied out, or kept where a
/// loader uses it in place), so the blob does not stay resident beside what was made of it.
pub(crate) fn process_in(payload: &[u8], make_lib: &dyn Fn() -> Module, region: Option<&Region>) -> Result<LoadedBlob> {
    let mut r = Reader::new(payload, "__tvm_dev_mblob").with_region(region);
    // Each entry has at least its 8-byte key length.
    let count = r.count(8)?;
    let mut modules: Vec<Module> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut lib_index = None;
    let mut tree: Option<(Vec<u64>, Vec<u64>)> = None;
    for entry in 0..count {
        let raw = r.str_bytes()?;
        let key = std::str::from_utf8(raw)
            .ok()
            .filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| r.error(format!("entry {entry} has no valid type key: {:?}", String::from_utf8_lossy(raw))))?
            .to_owned();
        match key.as_str() {
            "_lib" => {
                if lib_index.is_some() {
                    return Err(Error::tvm(
                        "Multiple dso module detected, please upgrade tvm  to the latest before exporting the module",
                    ));
                }
                lib_index = Some(modules.len());
                modules.push(make_lib());
            }
            "_import_tree" => {
                if tree.is_some() {
                    return Err(r.error("a second _import_tree entry"));
                }
                let row_ptr = r.vec_u64()?;
                let child = r.vec_u64()?;
                tree = Some((row_ptr, child));
            }
            _ => {
                let m = load_entry(&key, payload, &mut r).map_err(|e| {
                    if e.is_already_set() {
                        e
                    } else {
                        e.context(format_args!("blob entry {entry}"))
                    }
                })?;
                modules.push(m);
            }
        }
        r.release_consumed();
        keys.push(key);
    }
    keys.retain(|k| k != "_import_tree");
    match tree {
        None => {
            // Legacy layout: a new library module imports everything, in order.
            let root = make_lib();
            for m in modules {
                root.import(m)?;
            }
            Ok(LoadedBlob { dso_module: Some(root.clone()), root })
        }
        Some((row_ptr, child)) => {
            let children = super::import_tree::check(modules.len(), &row_ptr, &child, &keys)?;
            for (i, kids) in children.iter().enumerate() {
                for &c in kids {
                    modules[i].import(modules[c].clone())?;
                }
            }
            let dso_module = lib_index.map(|i| modules[i].clone());
            Ok(LoadedBlob { root: modules[0].clone(), dso_module })
        }
    }
}

/// Writes blobs (for tests and tools): the framing and entries read above.
#[derive(Default)]
pub struct BlobWriter {
    entries: Vec<u8>,
    count: u64,
}

impl BlobWriter {
    fn str(&mut self, s: &[u8]) {
        self.entries.extend_from_slice(&(s.len() as u64).to_le_bytes());
        self.entries.extend_from_slice(s);
    }

    /// The `_lib` placeholder.
    pub fn lib(&mut self) -> &mut Self {
        self.str(b"_lib");
        self.count += 1;
        self
    }

    /// A module entry: its type key and serialized data.
    pub fn module(&mut self, type_key: &str, data: &[u8]) -> &mut Self {
        self.str(type_key.as_bytes());
        self.entries.extend_from_slice(data);
        self.count += 1;
        self
    }

    /// The import tree (CSR row pointers and child indices).
    pub fn import_tree(&mut self, row_ptr: &[u64], child: &[u64]) -> &mut Self {
        self.str(b"_import_tree");
        for v in [row_ptr, child] {
            self.entries.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for x in v {
                self.entries.extend_from_slice(&x.to_le_bytes());
            }
        }
        self.count += 1;
        self
    }

    /// The framed blob: length prefix, entry count, entries.
    pub fn finish(&self) -> Vec<u8> {
        let payload_len = 8 + self.entries.len() as u64;
        let mut out = Vec::with_capacity(16 + self.entries.len());
        out.extend_from_slice(&payload_len.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.entries);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::function::PackedFunc;
    use crate::module::ModuleNode;
    use std::any::Any;

    struct Leaf(String, u64);
    impl ModuleNode for Leaf {
        fn type_key(&self) -> &str {
            &self.0
        }
        fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
            let v = self.1 as i64;
            Ok((name == "value").then(|| PackedFunc::from_fn(move |_| Ok(Value::Int(v)))))
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    /// Registers a loader for `key` whose data is one u64.
    fn leaf_loader(key: &'static str) {
        let f = PackedFunc::from_fn(move |a| {
            let v = with_stream(a.handle(0)?, |s| s.reader().u64())?;
            Ok(Value::Module(Module::new(Leaf(key.to_owned(), v))))
        });
        registry::register(&format!("{LOADER_PREFIX}{key}"), f, true).unwrap();
    }

    fn lib() -> Module {
        Module::new(crate::module::FunctionModule::new("library"))
    }

    #[test]
    fn nested_tree() {
        leaf_loader("blobtest_a");
        leaf_loader("blobtest_b");
        let blob = BlobWriter::default()
            .lib()
            .module("blobtest_a", &7u64.to_le_bytes())
            .module("blobtest_b", &9u64.to_le_bytes())
            .import_tree(&[0, 1, 2, 2], &[1, 2])
            .finish();
        let t = process(frame(&blob).unwrap(), &lib).unwrap();
        assert_eq!(t.root.type_key(), "library");
        assert!(t.dso_module.unwrap().ptr_eq(&t.root));
        let a = &t.root.imports()[0];
        assert_eq!(a.type_key(), "blobtest_a");
        assert_eq!(a.imports()[0].type_key(), "blobtest_b");
        let f = t.root.get_function("value", true).unwrap().unwrap();
        assert!(matches!(f.call(&[]).unwrap(), Value::Int(7)));
    }

    #[test]
    fn legacy_layout() {
        leaf_loader("blobtest_c");
        let blob = BlobWriter::default().module("blobtest_c", &1u64.to_le_bytes()).finish();
        let t = process(frame(&blob).unwrap(), &lib).unwrap();
        assert_eq!(t.root.type_key(), "library");
        assert_eq!(t.root.imports().len(), 1);
    }

    fn err(blob: &[u8]) -> String {
        match frame(blob).and_then(|p| process(p, &lib)) {
            Ok(_) => panic!("accepted a bad blob"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bad_blobs() {
        leaf_loader("blobtest_d");
        let good = BlobWriter::default()
            .lib()
            .module("blobtest_d", &1u64.to_le_bytes())
            .import_tree(&[0, 1, 1], &[1])
            .finish();
        assert!(process(frame(&good).unwrap(), &lib).is_ok());
        assert!(err(&good[..5]).contains("shorter than its 8-byte length prefix"));
        assert!(err(&good[..good.len() - 1]).contains("announces a"));
        // A payload length that cuts the import tree short.
        let mut cut = good.clone();
        cut[..8].copy_from_slice(&((good.len() - 8 - 4) as u64).to_le_bytes());
        assert!(err(&cut).contains("count 1 runs past the end (at byte 106 of 110)"), "{}", err(&cut));
        // Huge counts are refused before anything is allocated.
        let mut huge = good.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&huge).contains("runs past the end"));
        let out_of_range = BlobWriter::default()
            .lib()
            .module("blobtest_d", &1u64.to_le_bytes())
            .import_tree(&[0, 1, 1], &[5])
            .finish();
        assert!(err(&out_of_range).contains("imports module 5, but there are only 2 modules"));
        let cycle = BlobWriter::default()
            .lib()
            .module("blobtest_d", &1u64.to_le_bytes())
            .import_tree(&[0, 1, 2], &[1, 0])
            .finish();
        assert!(err(&cycle).contains("cycle"), "{}", err(&cycle));
        let self_loop = BlobWriter::default()
            .lib()
            .module("blobtest_d", &1u64.to_le_bytes())
            .import_tree(&[0, 1, 2], &[1, 1])
            .finish();
        assert!(err(&self_loop).contains("cycle"));
        let two_roots =
            BlobWriter::default().lib().module("blobtest_d", &1u64.to_le_bytes()).import_tree(&[0, 0, 0], &[]).finish();
        assert!(err(&two_roots).contains("exactly one root"));
        let short_rows = BlobWriter::default().lib().import_tree(&[0], &[]).finish();
        assert!(err(&short_rows).contains("1 row pointers for 1 modules"));
        let empty = BlobWriter::default().import_tree(&[0], &[]).finish();
        assert!(err(&empty).contains("modules cannot be empty"));
        let two_libs = BlobWriter::default().lib().lib().finish();
        assert!(err(&two_libs).contains("Multiple dso module"));
        let unknown = BlobWriter::default().lib().module("blobtest_nope", b"").finish();
        let e = err(&unknown);
        assert!(e.contains("runtime.module.loadbinary_blobtest_nope") && e.contains("blobtest_d"), "{e}");
        // The loader wants 8 bytes; only 3 are there.
        let short_entry = BlobWriter::default().lib().module("blobtest_d", &[1, 2, 3]).finish();
        assert!(err(&short_entry).contains("needs 8 more bytes"));
    }

    #[test]
    fn stream_handles_are_checked() {
        let mut x = 0u64;
        let e = with_stream((&mut x as *mut u64).cast(), |s| s.reader().u64()).unwrap_err();
        assert!(e.to_string().contains("is not the stream of a blob loader"));
    }
}
