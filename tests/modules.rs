//! The module system through the C API, as a C program uses it: libraries generated in TVM's
//! export conventions (nested import trees of custom type keys, loaders written in C and in
//! Rust, damaged variants), the system library, and the real libraries exported by TVM v0.8
//! (`../shared/fixtures`; skipped with a message when absent, required under `CI=true`).

mod common;

use common::*;
use std::ffi::{c_int, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Once;
use tvm_runtime::abi::TVMValue;
use tvm_runtime::classic_api::backend as bapi;
use tvm_runtime::classic_api::ndarray as napi;
use tvm_runtime::classic_api::runtime_api as api;
use tvm_runtime::error::{Error, Result};
use tvm_runtime::function::PackedFunc;
use tvm_runtime::module::{blob, FunctionModule, Module};
use tvm_runtime::registry;
use tvm_runtime::value::Value;

// ---------------------------------------------------------------------------------------------
// Loaders used by the generated libraries

/// A C callback returning its resource handle as an int.
unsafe extern "C" fn return_resource(
    _args: *mut TVMValue,
    _codes: *mut c_int,
    _n: c_int,
    ret: *mut c_void,
    res: *mut c_void,
) -> c_int {
    let mut v = TVMValue { v_int64: res as i64 };
    let mut code: c_int = 0;
    // SAFETY: `ret` is the return slot this callback received.
    unsafe { api::TVMCFuncSetReturn(ret, &mut v, &mut code, 1) }
}

/// `runtime.ModuleFromFunctions(key, name, f)` with `f` returning `value`.
fn c_value_module(key: &str, name: &str, value: u64) -> std::result::Result<Mod, String> {
    let mut f = std::ptr::null_mut();
    // SAFETY: a valid callback and out-pointer.
    if unsafe { api::TVMFuncCreateFromCFunc(Some(return_resource), value as usize as *mut c_void, None, &mut f) } != 0 {
        return Err(last_error());
    }
    let f = Func(f);
    match call_global("runtime.ModuleFromFunctions", &[Arg::Str(key), Arg::Str(name), Arg::Func(&f)])? {
        Ret::Module(h) => Ok(Mod(h)),
        other => Err(format!("ModuleFromFunctions returned {other:?}")),
    }
}

/// Returns `m` from a C loader (the return slot takes its own reference).
fn set_return_module(ret: *mut c_void, m: &Mod) -> c_int {
    let mut v = TVMValue { v_handle: m.0 };
    let mut code: c_int = 9;
    // SAFETY: `ret` is the return slot of the running callback.
    unsafe { api::TVMCFuncSetReturn(ret, &mut v, &mut code, 1) }
}

fn fail(msg: &str) -> c_int {
    let c = c(msg);
    // SAFETY: a valid C string.
    unsafe { api::TVMAPISetLastError(c.as_ptr()) };
    -1
}

/// The loader of `test_a`, written against the C API only: reads its data (a u64) with
/// `runtime.module.blob_stream_read`, makes its module with `runtime.ModuleFromFunctions`.
unsafe extern "C" fn load_test_a(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut c_void,
    _res: *mut c_void,
) -> c_int {
    // SAFETY: the runtime passes two arguments: (handle, bytes).
    let (stream, code0) = unsafe { ((*args).v_handle, *codes) };
    if n != 2 || code0 != 3 {
        return fail("load_test_a: unexpected arguments");
    }
    let bytes = match call_global("runtime.module.blob_stream_read", &[Arg::Handle(stream), Arg::Int(8)]) {
        Ok(Ret::Bytes(b)) if b.len() == 8 => b,
        other => return fail(&format!("load_test_a: read failed: {other:?}")),
    };
    let v = u64::from_le_bytes(bytes.try_into().unwrap_or_default());
    match c_value_module("test_a", "a_value", v) {
        Ok(m) => set_return_module(ret, &m),
        Err(e) => fail(&e),
    }
}

/// The loader of `test_skip`, also C-API only, but parsing the `rest` view (argument 1) itself:
/// a u64 and a length-prefixed string; it returns their sum of value and string length, then
/// says what it used with `runtime.module.blob_stream_skip`.
unsafe extern "C" fn load_test_skip(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut c_void,
    _res: *mut c_void,
) -> c_int {
    if n != 2 {
        return fail("load_test_skip: expected 2 arguments");
    }
    // SAFETY: two arguments, per the protocol.
    let (stream, view, code1) = unsafe { ((*args).v_handle, (*args.add(1)).v_handle, *codes.add(1)) };
    if code1 != 12 {
        return fail("load_test_skip: argument 1 is not bytes");
    }
    // SAFETY: code 12 carries a TVMByteArray*, valid for the call.
    let ba = unsafe { &*view.cast::<tvm_runtime::abi::TVMByteArray>() };
    // SAFETY: `data` holds `size` bytes.
    let rest = unsafe { std::slice::from_raw_parts(ba.data.cast::<u8>(), ba.size) };
    let word = |at: usize| rest.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
    let (Some(v), Some(len)) = (word(0), word(8)) else { return fail("load_test_skip: short data") };
    let used = 16 + len as usize;
    if used > rest.len() {
        return fail("load_test_skip: string runs past the end");
    }
    if call_global("runtime.module.blob_stream_skip", &[Arg::Handle(stream), Arg::Int(used as i64)]).is_err() {
        return -1;
    }
    match c_value_module("test_skip", "skip_value", v + len) {
        Ok(m) => set_return_module(ret, &m),
        Err(e) => fail(&e),
    }
}

/// The loader of `test_lazy`: consumes nothing (a broken loader).
unsafe extern "C" fn load_test_lazy(
    _args: *mut TVMValue,
    _codes: *mut c_int,
    _n: c_int,
    ret: *mut c_void,
    _res: *mut c_void,
) -> c_int {
    match c_value_module("test_lazy", "lazy_value", 0) {
        Ok(m) => set_return_module(ret, &m),
        Err(e) => fail(&e),
    }
}

fn register_c_loader(
    name: &str,
    f: unsafe extern "C" fn(*mut TVMValue, *mut c_int, c_int, *mut c_void, *mut c_void) -> c_int,
) {
    let mut h = std::ptr::null_mut();
    // SAFETY: a valid callback and out-pointer.
    assert_eq!(unsafe { api::TVMFuncCreateFromCFunc(Some(f), std::ptr::null_mut(), None, &mut h) }, 0);
    let h = Func(h);
    let n = c(name);
    // SAFETY: valid name and live handle.
    assert_eq!(unsafe { api::TVMFuncRegisterGlobal(n.as_ptr(), h.0, 1) }, 0, "{}", last_error());
}

/// Registers the loaders and helper globals once per process.
fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_c_loader("runtime.module.loadbinary_test_a", load_test_a);
        register_c_loader("runtime.module.loadbinary_test_skip", load_test_skip);
        register_c_loader("runtime.module.loadbinary_test_lazy", load_test_lazy);
        // `test_b`: a loader compiled into the runtime's process, using the Rust stream.
        let b = PackedFunc::from_fn(|a| {
            let v = blob::with_stream(a.handle(0)?, |s| s.reader().u64())? as i64;
            let mut m = FunctionModule::new("test_b");
            m.add("b_value", PackedFunc::from_fn(move |_| Ok(Value::Int(v))));
            m.add("leaf_value", PackedFunc::from_fn(move |_| Ok(Value::Int(v))));
            Ok(Value::Module(Module::new(m)))
        });
        registry::register("runtime.module.loadbinary_test_b", b, true).unwrap();
        let failing = PackedFunc::from_fn(|_| Err(Error::value("test_fails: this loader always fails")));
        registry::register("runtime.module.loadbinary_test_fails", failing, true).unwrap();
        let double = PackedFunc::from_fn(|a| Ok(Value::Int(2 * a.i64(0)?)));
        registry::register("test.modules.double", double, true).unwrap();
        let make = PackedFunc::from_fn(|_| Ok(Value::Module(Module::new(FunctionModule::new("test_made")))));
        registry::register("test.modules.make_module", make, true).unwrap();
    });
}

fn func(m: &Mod, name: &str) -> Func {
    get_function(m, name, false).unwrap_or_else(|| panic!("function {name} not found"))
}

fn call_env(m: &Mod, args: &[Arg<'_>]) -> std::result::Result<Ret, String> {
    call(&func(m, "test_call_env"), args)
}

fn ctx_of(m: &Mod) -> *mut c_void {
    match call(&func(m, "test_module_ctx"), &[]).unwrap() {
        Ret::Handle(h) => h,
        Ret::Null => std::ptr::null_mut(),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Generated libraries

#[test]
fn nested_import_tree() {
    setup();
    // Root library imports test_a, which imports test_b.
    let blob = Blob::default()
        .lib()
        .module("test_a", &u64_data(7))
        .module("test_b", &u64_data(9))
        .tree(&[0, 1, 2, 2], &[1, 2]);
    let path = build_testlib("nested", Some(&blob.bytes()));
    let m = load(&path).unwrap();
    assert_eq!(type_key(&m), "library");
    assert_eq!(imports_size(&m), 1);
    let a = import(&m, 0);
    assert_eq!(type_key(&a), "test_a");
    assert_eq!(imports_size(&a), 1);
    let b = import(&a, 0);
    assert_eq!(type_key(&b), "test_b");
    assert_eq!(imports_size(&b), 0);
    assert!(call_global("runtime.ModuleGetImport", &[Arg::Module(&b), Arg::Int(0)]).is_err());

    // GetFunction with and without the imports.
    assert!(get_function(&m, "b_value", false).is_none());
    assert_eq!(call(&get_function(&m, "b_value", true).unwrap(), &[]).unwrap().int(), 9);
    assert_eq!(call(&get_function(&a, "b_value", true).unwrap(), &[]).unwrap().int(), 9);
    assert_eq!(call(&get_function(&m, "a_value", true).unwrap(), &[]).unwrap().int(), 7);
    assert!(get_function(&m, "no_such_function", true).is_none());

    // The library's own functions, the entry function, data symbols.
    assert_eq!(call(&func(&m, "test_answer"), &[]).unwrap().int(), 42);
    assert_eq!(call(&func(&m, "__tvm_main__"), &[]).unwrap().int(), 42);
    assert!(get_function(&m, "__tvm_module_ctx", false).is_none());
    assert!(get_function(&m, "__TVMFuncCall", false).is_none());
    assert_eq!(call(&func(&m, "test_preset_code"), &[]).unwrap().int(), 4);
    assert!(matches!(call(&func(&m, "test_none"), &[]).unwrap(), Ret::Null));
    assert_eq!(call(&func(&m, "test_parallel_sum"), &[Arg::Int(1000)]).unwrap().int(), 499_500);

    // __tvm_module_ctx names the library module (here the root).
    assert_eq!(ctx_of(&m), m.0);

    // TVMBackendGetFuncFromEnv from generated code: imports in order, recursively, then globals.
    assert_eq!(call_env(&m, &[Arg::Str("a_value")]).unwrap().int(), 7);
    assert_eq!(call_env(&m, &[Arg::Str("b_value")]).unwrap().int(), 9);
    assert_eq!(call_env(&m, &[Arg::Str("test.modules.double"), Arg::Int(21)]).unwrap().int(), 42);
    assert_eq!(call(&func(&m, "test_call_cached"), &[]).unwrap().int(), 9);
    let e = call_env(&m, &[Arg::Str("no_such_fn")]).unwrap_err();
    assert!(
        e.starts_with("TVMError: Check failed: ret == 0 (-1 vs. 0) : Cannot find function no_such_fn in the imported modules or global registry"),
        "{e}"
    );
    // The module itself is not searched.
    assert!(call_env(&m, &[Arg::Str("test_answer")]).unwrap_err().contains("Cannot find function test_answer"));

    // Values returned by generated code are adopted (module) or copied (string).
    match call_env(&m, &[Arg::Str("test.modules.make_module")]).unwrap() {
        Ret::Module(h) => assert_eq!(type_key(&Mod(h)), "test_made"),
        other => panic!("{other:?}"),
    }
    match call_env(&m, &[Arg::Str("runtime.ModuleGetTypeKey"), Arg::Module(&a)]).unwrap() {
        Ret::Str(s) => assert_eq!(s, "test_a"),
        other => panic!("{other:?}"),
    }

    // Errors of generated code: the message it set, wrapped as TVM does, kind first.
    assert_eq!(
        call(&func(&m, "test_fail"), &[]).unwrap_err(),
        "ValueError: Check failed: ret == 0 (-1 vs. 0) : test_fail was asked to fail"
    );
    assert_eq!(
        call(&func(&m, "test_assert"), &[]).unwrap_err(),
        "TVMError: Check failed: ret == 0 (-1 vs. 0) : Assert fail: 1 == 0, test_assert: always fails"
    );
    let e = call(&func(&m, "test_answer"), &[Arg::Int(1)]).unwrap_err();
    assert_eq!(e, "TVMError: Check failed: ret == 0 (-1 vs. 0) : test_answer: num_args should be 0");

    // Functions keep their module and the library alive.
    let env = func(&m, "test_call_env");
    let cached = func(&m, "test_call_cached");
    let b_value = get_function(&m, "b_value", true).unwrap();
    drop((m, a, b));
    assert!(is_loaded(&path));
    assert_eq!(call(&env, &[Arg::Str("b_value")]).unwrap().int(), 9);
    assert_eq!(call(&cached, &[]).unwrap().int(), 9);
    assert_eq!(call(&b_value, &[]).unwrap().int(), 9);
    drop((env, cached));
    assert!(!is_loaded(&path), "library still loaded after its last function went");
    drop(b_value);
}

#[test]
fn legacy_blob_without_import_tree() {
    setup();
    let blob = Blob::default().module("test_b", &u64_data(5)).module("test_a", &u64_data(6));
    let path = build_testlib("legacy", Some(&blob.bytes()));
    let m = load(&path).unwrap();
    assert_eq!(type_key(&m), "library");
    assert_eq!(imports_size(&m), 2);
    assert_eq!(type_key(&import(&m, 0)), "test_b");
    assert_eq!(type_key(&import(&m, 1)), "test_a");
    assert_eq!(ctx_of(&m), m.0);
    assert_eq!(call_env(&m, &[Arg::Str("b_value")]).unwrap().int(), 5);
    assert_eq!(call_env(&m, &[Arg::Str("a_value")]).unwrap().int(), 6);
    drop(m);
    assert!(!is_loaded(&path));
}

#[test]
fn library_under_a_custom_root() {
    setup();
    // Like a GraphExecutorFactory export: the root is another module that imports the library,
    // which gets __tvm_module_ctx.
    let blob = Blob::default().module("test_a", &u64_data(3)).lib().tree(&[0, 1, 1], &[1]);
    let path = build_testlib("custom-root", Some(&blob.bytes()));
    let root = load(&path).unwrap();
    assert_eq!(type_key(&root), "test_a");
    assert_eq!(imports_size(&root), 1);
    let lib = import(&root, 0);
    assert_eq!(type_key(&lib), "library");
    let env = get_function(&root, "test_call_env", true).unwrap();
    let ctx = call(&get_function(&root, "test_module_ctx", true).unwrap(), &[]).unwrap();
    assert!(matches!(ctx, Ret::Handle(h) if h == lib.0), "{ctx:?}");
    // The library module has no imports: only globals are found.
    assert!(call(&env, &[Arg::Str("a_value")]).unwrap_err().contains("Cannot find function a_value"));
    assert_eq!(call(&env, &[Arg::Str("test.modules.double"), Arg::Int(4)]).unwrap().int(), 8);
    assert_eq!(call(&get_function(&root, "a_value", false).unwrap(), &[]).unwrap().int(), 3);
}

#[test]
fn library_without_blob() {
    setup();
    let path = build_testlib("plain", None);
    let m = load(&path).unwrap();
    assert_eq!(type_key(&m), "library");
    assert_eq!(imports_size(&m), 0);
    assert_eq!(ctx_of(&m), m.0);
    assert_eq!(call(&func(&m, "__tvm_main__"), &[]).unwrap().int(), 42);
    assert_eq!(call_env(&m, &[Arg::Str("test.modules.double"), Arg::Int(5)]).unwrap().int(), 10);
    // Library modules cannot be saved (TVM's message).
    let e = call_global("runtime.ModuleSaveToFile", &[Arg::Module(&m), Arg::Str("/tmp/x.so"), Arg::Str("so")]);
    assert!(e.unwrap_err().contains("Module[library] does not support SaveToFile"));
    // The format can be given explicitly, and `dso` means `so`.
    let p = c(path.to_str().unwrap());
    let fmt = c("dso");
    let mut out = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    assert_eq!(unsafe { api::TVMModLoadFromFile(p.as_ptr(), fmt.as_ptr(), &mut out) }, 0);
    let m2 = Mod(out);
    assert_eq!(call(&func(&m2, "test_answer"), &[]).unwrap().int(), 42);
    // runtime.module.loadfile_so directly, with an extra argument (ignored).
    match call_global("runtime.module.loadfile_so", &[Arg::Str(path.to_str().unwrap()), Arg::Str("so"), Arg::Int(1)]) {
        Ok(Ret::Module(h)) => assert_eq!(type_key(&Mod(h)), "library"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn loading_the_same_library_twice() {
    setup();
    let path = build_testlib("twice", None);
    let first = load(&path).unwrap();
    let first_ctx = func(&first, "test_module_ctx");
    assert_eq!(call(&first_ctx, &[]).unwrap(), first.0);
    let second = load(&path).unwrap();
    // One copy of the library's globals: the second load took the context over.
    assert_eq!(ctx_of(&second), second.0);
    assert_eq!(call(&first_ctx, &[]).unwrap(), second.0);
    drop(second);
    // ... and gave it back when it went.
    assert_eq!(call(&first_ctx, &[]).unwrap(), first.0);
    let second = load(&path).unwrap();
    drop(first);
    // The first module stays alive behind the second (cached handles may point into it).
    assert_eq!(ctx_of(&second), second.0);
    drop(second);
    drop(first_ctx);
    assert!(!is_loaded(&path));
}

impl PartialEq<*mut c_void> for Ret {
    fn eq(&self, other: &*mut c_void) -> bool {
        matches!(self, Ret::Handle(h) if h == other)
    }
}

#[test]
fn loaders_written_in_c() {
    setup();
    let mut data = u64_data(40);
    data.extend_from_slice(&u64_data(2));
    data.extend_from_slice(b"hi");
    let blob =
        Blob::default().lib().module("test_skip", &data).module("test_a", &u64_data(1)).tree(&[0, 2, 2, 2], &[1, 2]);
    let path = build_testlib("c-loaders", Some(&blob.bytes()));
    let m = load(&path).unwrap();
    assert_eq!(type_key(&import(&m, 0)), "test_skip");
    assert_eq!(type_key(&import(&m, 1)), "test_a");
    assert_eq!(call_env(&m, &[Arg::Str("skip_value")]).unwrap().int(), 42);
    assert_eq!(call_env(&m, &[Arg::Str("a_value")]).unwrap().int(), 1);

    // The stream functions only accept the stream of a running loader on this thread.
    let mut x = 0u64;
    let e = call_global("runtime.module.blob_stream_read", &[Arg::Handle((&mut x as *mut u64).cast()), Arg::Int(1)]);
    assert!(e.unwrap_err().contains("is not the stream of a blob loader running on this thread"));

    // A loader that consumes less than its data makes the next entry unreadable.
    let blob = Blob::default()
        .lib()
        .module("test_lazy", &u64_data(3))
        .module("test_a", &u64_data(1))
        .tree(&[0, 2, 2, 2], &[1, 2]);
    let path = build_testlib("lazy-loader", Some(&blob.bytes()));
    expect_load_error(&path, "__tvm_dev_mblob: entry 2 has no valid type key");
}

/// Loads `path`, expects an error containing `text`, and checks nothing stays loaded.
fn expect_load_error(path: &Path, text: &str) {
    let e = load(path).err().unwrap_or_else(|| panic!("{} loaded", path.display()));
    assert!(e.contains(text), "{}: expected {text:?} in {e:?}", path.display());
    assert!(e.starts_with("TVMError: ") || e.starts_with("ValueError: "), "{e}");
    assert!(!is_loaded(path), "{} left loaded after a failed load", path.display());
}

#[test]
fn damaged_libraries() {
    setup();
    let good = Blob::default()
        .lib()
        .module("test_a", &u64_data(1))
        .module("test_b", &u64_data(2))
        .tree(&[0, 1, 2, 2], &[1, 2]);

    // The length prefix announces more than the symbol holds.
    let mut bytes = good.bytes();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) + 16;
    bytes[..8].copy_from_slice(&n.to_le_bytes());
    expect_load_error(&build_testlib("oversized", Some(&bytes)), "announces a");
    // An absurd length prefix.
    let mut bytes = good.bytes();
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    expect_load_error(&build_testlib("huge-prefix", Some(&bytes)), "announces a 18446744073709551615-byte payload");
    // A prefix that cuts the payload short.
    let mut bytes = good.bytes();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) - 20;
    bytes[..8].copy_from_slice(&n.to_le_bytes());
    expect_load_error(&build_testlib("truncated", Some(&bytes)), "__tvm_dev_mblob: needs 8 more bytes, only 4 left");
    // A symbol shorter than the prefix itself.
    expect_load_error(&build_testlib("tiny-blob", Some(&[1, 2, 3])), "shorter than its 8-byte length prefix");
    // An entry whose data runs past the end of the payload.
    let short = Blob::default().lib().module("test_b", &[1, 2, 3]);
    expect_load_error(&build_testlib("short-entry", Some(&short.bytes())), "needs 8 more bytes, only 3 left");
    // Import-tree indices out of range, cycles, several roots, a wrong number of rows.
    let b = Blob::default().lib().module("test_a", &u64_data(1)).module("test_b", &u64_data(2));
    let bad_index = b.clone().tree(&[0, 1, 2, 2], &[1, 7]);
    expect_load_error(
        &build_testlib("bad-index", Some(&bad_index.bytes())),
        "imports module 7, but there are only 3 modules",
    );
    let cycle = b.clone().tree(&[0, 1, 2, 3], &[1, 2, 1]);
    expect_load_error(
        &build_testlib("cycle", Some(&cycle.bytes())),
        "cycle: module 2 (test_b) imports module 1 (test_a)",
    );
    let roots = b.clone().tree(&[0, 1, 1, 1], &[1]);
    expect_load_error(&build_testlib("two-roots", Some(&roots.bytes())), "module 2 (test_b) is imported by no module");
    let rows = b.clone().tree(&[0, 1, 2], &[1, 2]);
    expect_load_error(&build_testlib("rows", Some(&rows.bytes())), "3 row pointers for 3 modules");
    let decreasing = b.clone().tree(&[0, 2, 1, 2], &[1, 2]);
    expect_load_error(&build_testlib("decreasing", Some(&decreasing.bytes())), "row pointers decrease");
    // No loader for a type key.
    let unknown = Blob::default().lib().module("test_unknown_key", b"xyz").tree(&[0, 1, 1], &[1]);
    let path = build_testlib("unknown-key", Some(&unknown.bytes()));
    expect_load_error(&path, "Binary was created using test_unknown_key but a loader of that name is not registered (runtime.module.loadbinary_test_unknown_key)");
    expect_load_error(&path, "Available loaders are ");
    // A loader that fails.
    let failing = Blob::default().lib().module("test_fails", b"").tree(&[0, 1, 1], &[1]);
    expect_load_error(&build_testlib("failing-loader", Some(&failing.bytes())), "test_fails: this loader always fails");
    // Two `_lib` entries.
    expect_load_error(
        &build_testlib("two-libs", Some(&Blob::default().lib().lib().bytes())),
        "Multiple dso module detected",
    );

    // A library that needs a symbol nobody defines.
    let missing = "extern int tvm_test_missing_function(void);\n\
                   __attribute__((visibility(\"default\"))) int uses_missing(void) { return tvm_test_missing_function(); }\n";
    let path = build_shared("missing-symbol", &[testlib_c()], missing);
    expect_load_error(&path, "undefined symbol: tvm_test_missing_function");
    // Not a shared library; empty; absent.
    let dir = out_dir();
    let text = dir.join(format!("not-a-library-{}.so", std::process::id()));
    std::fs::write(&text, "this is not an ELF file\n").unwrap();
    expect_load_error(&text, &format!("Failed to load dynamic shared library {}", text.display()));
    let empty = dir.join(format!("empty-{}.so", std::process::id()));
    std::fs::write(&empty, "").unwrap();
    expect_load_error(&empty, "Failed to load dynamic shared library");
    expect_load_error(&dir.join("does-not-exist.so"), "No such file or directory");
    // The file format cannot be deduced / has no loader.
    assert!(load(Path::new("/tmp/no_extension"))
        .unwrap_err()
        .contains("Cannot deduce format of file /tmp/no_extension"));
    assert!(load(Path::new("/tmp/x.weird")).unwrap_err().contains("runtime.module.loadfile_weird"));
}

// ---------------------------------------------------------------------------------------------
// The system library (symbols registered by hand, as `--system-lib` objects do from their static
// initialisers; ctests/syslib.c links TVM's real object file)

static SYSLIB_CTX: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static SYSLIB_SET_LAST_ERROR: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

unsafe extern "C" fn syslib_answer(
    _args: *mut TVMValue,
    _codes: *mut c_int,
    _n: c_int,
    ret: *mut TVMValue,
    ret_code: *mut c_int,
    _res: *mut c_void,
) -> c_int {
    // SAFETY: the return slot of the call.
    unsafe {
        (*ret).v_int64 = 77;
        *ret_code = 0;
    }
    0
}

/// `syslib_env(name)`: the env lookup through the registered module context.
unsafe extern "C" fn syslib_env(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut TVMValue,
    ret_code: *mut c_int,
    _res: *mut c_void,
) -> c_int {
    let mut f = std::ptr::null_mut();
    // SAFETY: one string argument; the context variable is what the runtime wrote.
    unsafe {
        if bapi::TVMBackendGetFuncFromEnv(SYSLIB_CTX.load(Ordering::Acquire), (*args).v_str, &mut f) != 0 {
            return -1;
        }
        api::TVMFuncCall(f, args.add(1), codes.add(1), n - 1, ret, ret_code)
    }
}

fn register_syslib(name: &str, addr: *mut c_void) {
    let n = c(name);
    // SAFETY: a valid name; the address is a static of this program.
    assert_eq!(unsafe { bapi::TVMBackendRegisterSystemLibSymbol(n.as_ptr(), addr) }, 0);
}

#[test]
fn system_library() {
    setup();
    register_syslib("syslib_answer", syslib_answer as *mut c_void);
    register_syslib("syslib_env", syslib_env as *mut c_void);
    register_syslib("__tvm_module_ctx", SYSLIB_CTX.as_ptr().cast());
    register_syslib("__TVMAPISetLastError", SYSLIB_SET_LAST_ERROR.as_ptr().cast());
    // A blob registered by the system library: it imports test_b.
    static BLOB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let blob =
        BLOB.get_or_init(|| Blob::default().lib().module("test_b", &u64_data(31)).tree(&[0, 1, 1], &[1]).bytes());
    register_syslib("__tvm_dev_mblob", blob.as_ptr().cast_mut().cast());

    let m = match call_global("runtime.SystemLib", &[]).unwrap() {
        Ret::Module(h) => Mod(h),
        other => panic!("{other:?}"),
    };
    assert_eq!(type_key(&m), "library");
    assert_eq!(imports_size(&m), 1);
    assert_eq!(type_key(&import(&m, 0)), "test_b");
    // The singleton: the same module every time.
    match call_global("runtime.SystemLib", &[]).unwrap() {
        Ret::Module(h) => assert_eq!(Mod(h).0, m.0),
        other => panic!("{other:?}"),
    }
    // The context variable and the registered slot were written.
    assert_eq!(SYSLIB_CTX.load(Ordering::Acquire), m.0);
    assert_eq!(SYSLIB_SET_LAST_ERROR.load(Ordering::Acquire), api::TVMAPISetLastError as *mut c_void);
    assert_eq!(call(&func(&m, "syslib_answer"), &[]).unwrap().int(), 77);
    assert_eq!(call(&func(&m, "syslib_env"), &[Arg::Str("b_value")]).unwrap().int(), 31);
    // Symbols registered later are found at call time.
    assert!(get_function(&m, "syslib_late", false).is_none());
    register_syslib("syslib_late", syslib_answer as *mut c_void);
    assert_eq!(call(&func(&m, "syslib_late"), &[]).unwrap().int(), 77);
}

// ---------------------------------------------------------------------------------------------
// Libraries exported by TVM v0.8

fn alloc_f32(shape: &[i64]) -> *mut tvm_runtime::abi::DLTensor {
    let mut h = std::ptr::null_mut();
    // SAFETY: valid shape array and out-pointer.
    let rc = unsafe { napi::TVMArrayAlloc(shape.as_ptr(), shape.len() as c_int, 2, 32, 1, 1, 0, &mut h) };
    assert_eq!(rc, 0, "{}", last_error());
    h
}

#[test]
fn tvm_add_one() {
    let (Some(so), Some(a_npy), Some(b_npy)) =
        (fixture("add_one.so"), fixture("add_one.A.npy"), fixture("add_one.B.npy"))
    else {
        return;
    };
    let (shape, a) = read_npy_f32(&a_npy);
    let (_, want) = read_npy_f32(&b_npy);
    let m = load(&so).unwrap();
    assert_eq!(type_key(&m), "library");
    assert_eq!(imports_size(&m), 0);
    let x = alloc_f32(&shape);
    let y = alloc_f32(&shape);
    // SAFETY: `x` holds `a.len()` bytes.
    assert_eq!(unsafe { napi::TVMArrayCopyFromBytes(x, a.as_ptr().cast_mut().cast(), a.len()) }, 0);
    for name in ["add_one", "__tvm_main__"] {
        let f = func(&m, name);
        assert!(matches!(call(&f, &[Arg::Array(x.cast()), Arg::Array(y.cast())]).unwrap(), Ret::Null));
        let mut got = vec![0u8; want.len()];
        // SAFETY: `y` holds `got.len()` bytes.
        assert_eq!(unsafe { napi::TVMArrayCopyToBytes(y, got.as_mut_ptr().cast(), got.len()) }, 0);
        assert!(got == want, "{name}: output differs from add_one.B.npy");
    }
    // Generated argument checks come back as errors, TVM's way.
    let e = call(&func(&m, "add_one"), &[Arg::Array(x.cast())]).unwrap_err();
    assert!(e.contains("Check failed: ret == 0 (-1 vs. 0) : ") && e.contains("num_args should be 2"), "{e}");
    // SAFETY: owned handles.
    unsafe {
        napi::TVMArrayFree(x);
        napi::TVMArrayFree(y);
    }
    drop(m);
    assert!(!is_loaded(&so));
}

#[test]
fn tvm_mlp_kernel_library() {
    let Some(so) = fixture("mlp.lib.so") else { return };
    let m = load(&so).unwrap();
    assert_eq!(type_key(&m), "library");
    assert_eq!(imports_size(&m), 0);
    for name in [
        "tvmgen_default_fused_nn_batch_flatten",
        "tvmgen_default_fused_nn_contrib_dense_pack_add",
        "tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu",
        "tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu_1",
        "tvmgen_default_fused_nn_softmax",
    ] {
        assert!(get_function(&m, name, false).is_some(), "{name} missing");
    }
    assert!(get_function(&m, "no_such_kernel", true).is_none());
    // Wrong arguments are reported by the kernel, not a crash.
    let e = call(&func(&m, "tvmgen_default_fused_nn_softmax"), &[]).unwrap_err();
    assert!(e.contains("num_args should be"), "{e}");
}

/// A stand-in `GraphExecutorFactory` loader (the real one comes with the graph executor): reads
/// the factory's payload and exposes its parts.
fn fake_factory_loader() -> PackedFunc {
    PackedFunc::from_fn(|a| {
        let (n, module_name, json_len) = blob::with_stream(a.handle(0)?, |s| -> Result<(usize, String, usize)> {
            let r = s.reader();
            let json = r.string()?;
            let n = r.u64()? as usize;
            let names = r.vec_string()?;
            if names.len() != n {
                return Err(Error::value("parameter count mismatch"));
            }
            for _ in 0..n {
                tvm_runtime::ndarray::serialize::load_ndarray(r)?;
            }
            Ok((n, r.string()?, json.len()))
        })?;
        let mut m = FunctionModule::new("GraphExecutorFactory");
        m.add("param_count", PackedFunc::from_fn(move |_| Ok(Value::Int(n as i64))));
        m.add("json_len", PackedFunc::from_fn(move |_| Ok(Value::Int(json_len as i64))));
        m.add(&module_name, PackedFunc::from_fn(|_| Ok(Value::Null)));
        Ok(Value::Module(Module::new(m)))
    })
}

#[test]
fn tvm_graph_executor_factory_exports() {
    const LOADER: &str = "runtime.module.loadbinary_GraphExecutorFactory";
    let exports: Vec<_> = ["mlp.so", "resnet18.so", "mobilenet.so"].iter().filter_map(|f| fixture(f)).collect();
    // No other test of this binary loads these exports, so the loader can be swapped here.
    let real = registry::get(LOADER);
    registry::remove(LOADER);
    for so in &exports {
        expect_load_error(so, "Binary was created using GraphExecutorFactory but a loader of that name is not registered (runtime.module.loadbinary_GraphExecutorFactory)");
    }
    registry::register(LOADER, fake_factory_loader(), true).unwrap();
    let check = |so: &Path, fake: bool| {
        let root = load(so).unwrap();
        assert_eq!(type_key(&root), "GraphExecutorFactory");
        assert_eq!(imports_size(&root), 1, "{}", so.display());
        let lib = import(&root, 0);
        assert_eq!(type_key(&lib), "library");
        assert_eq!(imports_size(&lib), 0);
        assert!(get_function(&root, "default", false).is_some());
        if so.ends_with("mlp.so") {
            // The kernels are reachable from the root through its imports.
            assert!(get_function(&root, "tvmgen_default_fused_nn_softmax", false).is_none());
            assert!(get_function(&root, "tvmgen_default_fused_nn_softmax", true).is_some());
        }
        if fake {
            assert!(call(&func(&root, "param_count"), &[]).unwrap().int() > 0);
            assert!(call(&func(&root, "json_len"), &[]).unwrap().int() > 0);
        }
    };
    for so in &exports {
        check(so, true);
    }
    registry::remove(LOADER);
    if let Some(real) = real {
        registry::register(LOADER, real, false).unwrap();
        for so in &exports {
            check(so, false);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The blob of the C test (ctests/modules.c): generated here, checked in

/// `tests/fixtures/c_loader_blob.c`: `_lib` importing a `test_c` module whose data is a u64
/// (123) and a function name (`c_value`). `UPDATE_FIXTURES=1` rewrites the file.
#[test]
fn c_loader_blob_source_is_current() {
    let mut data = u64_data(123);
    data.extend_from_slice(&u64_data(7));
    data.extend_from_slice(b"c_value");
    let blob = Blob::default().lib().module("test_c", &data).tree(&[0, 1, 1], &[1]);
    let text = blob_c_source(&blob.bytes());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/c_loader_blob.c");
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(current == text, "{} is out of date; run UPDATE_FIXTURES=1 cargo test --test modules", path.display());
}
