//! One runtime for the exports and clients of TVM v0.8-v0.19, through the C API: TVM v0.18's
//! own exports (`../shared/fixtures-v0.18`: add_one, mlp and its split form, the AOT
//! `aot_mlp.so`), AOT libraries of the project's own making (with and without USMP pools),
//! prefixed system libraries, the calling conventions of later clients (bool arguments, Python
//! exceptions travelling with errors, both forms of changed globals) and the errors that name
//! a later release's feature.

mod common;
#[path = "common/compat.rs"]
mod compat_fx;

use common::*;
use compat_fx::*;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicUsize, Ordering};
use tvm_runtime::abi::{DLTensor, TVMValue};
use tvm_runtime::classic_api::backend as bapi;
use tvm_runtime::classic_api::error_api as eapi;
use tvm_runtime::classic_api::object as oapi;
use tvm_runtime::classic_api::runtime_api as api;

// ---------------------------------------------------------------------------------------------
// Helpers

/// An owned object handle (code 8 results).
struct Obj(*mut c_void);

impl Drop for Obj {
    fn drop(&mut self) {
        // SAFETY: an owned handle, freed once.
        assert_eq!(unsafe { oapi::TVMObjectFree(self.0) }, 0);
    }
}

fn obj(r: Ret) -> Obj {
    match r {
        Ret::Other(8, h) => Obj(h as *mut c_void),
        other => panic!("expected an object, got {other:?}"),
    }
}

/// Calls with raw (value, code) pairs, for codes the `Arg` enum has not (bool = 15, objects).
fn call_raw(f: &Func, args: &[(TVMValue, c_int)]) -> Result<(TVMValue, c_int), String> {
    let mut values: Vec<TVMValue> = args.iter().map(|a| a.0).collect();
    let mut codes: Vec<c_int> = args.iter().map(|a| a.1).collect();
    let mut rv = TVMValue { v_int64: 0 };
    let mut rc: c_int = -1;
    // SAFETY: live function, arrays of `args.len()` valid values, valid out-pointers.
    let status = unsafe {
        api::TVMFuncCall(f.0, values.as_mut_ptr(), codes.as_mut_ptr(), values.len() as c_int, &mut rv, &mut rc)
    };
    if status != 0 {
        return Err(last_error());
    }
    Ok((rv, rc))
}

fn h(p: *mut c_void, code: c_int) -> (TVMValue, c_int) {
    (TVMValue { v_handle: p }, code)
}

fn func(m: &Mod, name: &str) -> Func {
    get_function(m, name, false).unwrap_or_else(|| panic!("{name} missing"))
}

fn module_ret(r: Ret) -> Mod {
    match r {
        Ret::Module(p) => Mod(p),
        other => panic!("expected a module, got {other:?}"),
    }
}

fn str_ret(r: Ret) -> String {
    match r {
        Ret::Str(s) => s,
        Ret::Other(8, p) => {
            let o = Obj(p as *mut c_void);
            match call_raw(&global("runtime.GetFFIString").unwrap(), &[h(o.0, 8)]).unwrap() {
                // SAFETY: code 11 carries a thread-local string.
                (v, 11) => unsafe { from_c(v.v_str) },
                other => panic!("GetFFIString: code {}", other.1),
            }
        }
        other => panic!("expected a string, got {other:?}"),
    }
}

/// `map[key]` of a Map object.
fn map_get(map: &Obj, key: &str) -> (TVMValue, c_int) {
    let k = c(key);
    call_raw(&global("runtime.MapGetItem").unwrap(), &[h(map.0, 8), (TVMValue { v_str: k.as_ptr() }, 11)])
        .unwrap_or_else(|e| panic!("MapGetItem({key}): {e}"))
}

fn map_size(map: &Obj) -> i64 {
    // SAFETY: code 0 result.
    unsafe { call_raw(&global("runtime.MapSize").unwrap(), &[h(map.0, 8)]).unwrap().0.v_int64 }
}

fn shape_of(t: &Obj) -> Vec<i64> {
    let n = call_raw(&global("runtime.GetShapeTupleSize").unwrap(), &[h(t.0, 8)]).unwrap().0.into_i64();
    (0..n)
        .map(|i| {
            let r = call_raw(&global("runtime.GetShapeTupleElem").unwrap(), &[h(t.0, 8), (TVMValue { v_int64: i }, 0)]);
            // SAFETY: code 0 result.
            unsafe { r.unwrap().0.v_int64 }
        })
        .collect()
}

/// A CPU float32 array with `data`.
fn array(shape: &[i64], data: &[f32]) -> DevArray {
    let a = DevArray::new(shape, 2, 1);
    a.write(data.as_ptr().cast(), data.len() * 4);
    a
}

fn close(got: &[f32], want: &[f32], rtol: f32, atol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "element {i}: {g} vs {w}");
    }
}

fn f32s_of(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn join<'a>(mut a: Vec<Arg<'a>>, b: Vec<Arg<'a>>) -> Vec<Arg<'a>> {
    a.extend(b);
    a
}

fn cpu() -> Arg<'static> {
    Arg::Device(1, 0)
}

// ---------------------------------------------------------------------------------------------
// TVM v0.18's own exports

#[test]
fn v018_add_one() {
    let Some((dir, man)) = v018_manifest() else { return };
    let spec = &man["fixtures"]["add_one"];
    let m = load(&dir.join(spec["file"].as_str().unwrap())).unwrap();
    assert_eq!(type_key(&m), "library");
    let (shape, a) = read_npy_f32(&dir.join(spec["args"][0]["input"].as_str().unwrap()));
    let (_, want) = read_npy_f32(&dir.join(spec["args"][1]["output"].as_str().unwrap()));
    let (da, db) = (array(&shape, &f32s_of(&a)), DevArray::new(&shape, 2, 1));
    call(&func(&m, "add_one"), &[Arg::Array(da.0.cast()), Arg::Array(db.0.cast())]).unwrap();
    assert_eq!(db.f32s(shape[0] as usize), f32s_of(&want));
    // `__tvm_main__` is a string naming the entry function in v0.18's exports too.
    call(&func(&m, "__tvm_main__"), &[Arg::Array(da.0.cast()), Arg::Array(db.0.cast())]).unwrap();
    assert_eq!(db.f32s(shape[0] as usize), f32s_of(&want));
}

/// Runs a graph executor module on the mlp manifest entry and checks its output.
fn check_mlp_run(ex: &Mod, dir: &std::path::Path, spec: &serde_json::Value) {
    let (shape, x) = read_npy_f32(&dir.join(spec["inputs"]["data"].as_str().unwrap()));
    let (oshape, want) = read_npy_f32(&dir.join(spec["outputs"][0].as_str().unwrap()));
    let input = array(&shape, &f32s_of(&x));
    call(&func(ex, "set_input"), &[Arg::Str("data"), Arg::Array(input.0.cast())]).unwrap();
    call(&func(ex, "run"), &[]).unwrap();
    let out = DevArray::new(&oshape, 2, 1);
    call(&func(ex, "get_output"), &[Arg::Int(0), Arg::Array(out.0.cast())]).unwrap();
    let n = oshape.iter().product::<i64>() as usize;
    close(&out.f32s(n), &f32s_of(&want), spec["rtol"].as_f64().unwrap() as f32, spec["atol"].as_f64().unwrap() as f32);
}

#[test]
fn v018_mlp_graph_export_split_form_and_input_info() {
    let Some((dir, man)) = v018_manifest() else { return };
    let spec = &man["fixtures"]["mlp"];
    let lib = load(&dir.join(spec["file"].as_str().unwrap())).unwrap();
    assert_eq!(type_key(&lib), "GraphExecutorFactory");
    let ex = module_ret(call(&func(&lib, "default"), &[cpu()]).unwrap());
    check_mlp_run(&ex, &dir, spec);

    // v0.9+: get_input_info of a factory-made executor lists its params too, as TVM's does.
    let info = obj(call(&func(&ex, "get_input_info"), &[]).unwrap());
    let shapes = obj_from(map_get(&info, "shape"));
    assert!(map_size(&shapes) > 1);
    let data_shape = obj_from(map_get(&shapes, "data"));
    let (shape, _) = read_npy_f32(&dir.join(spec["inputs"]["data"].as_str().unwrap()));
    assert_eq!(shape_of(&data_shape), shape);
    let dtypes = obj_from(map_get(&info, "dtype"));
    assert_eq!(str_ret(Ret::Other(8, map_get(&dtypes, "data").0.into_i64())), "float32");
    let out_info = obj(call(&func(&ex, "get_output_info"), &[]).unwrap());
    assert_eq!(map_size(&obj_from(map_get(&out_info, "shape"))), 1);
    // get_output by the output node's name (v0.9+).
    let graph: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("mlp.json")).unwrap()).unwrap();
    let head = graph["heads"][0][0].as_u64().unwrap() as usize;
    let out_name = graph["nodes"][head]["name"].as_str().unwrap().to_owned();
    assert!(matches!(call(&func(&ex, "get_output"), &[Arg::Str(&out_name)]).unwrap(), Ret::Other(13, _)));
    assert_eq!(call(&func(&ex, "get_output_index"), &[Arg::Str(&out_name)]).unwrap().int(), 0);
    assert_eq!(call(&func(&ex, "get_output_index"), &[Arg::Str(&format!("{out_name}:0"))]).unwrap().int(), 0);
    assert_eq!(call(&func(&ex, "get_output_index"), &[Arg::Str("nope")]).unwrap().int(), -1);
    let e = call(&func(&ex, "get_output"), &[Arg::Str("no_such_node")]).unwrap_err();
    assert!(e.contains("Invalid output node:no_such_node"), "{e}");
    // The factory's params (v0.9+'s get_graph_params).
    let params = obj(call(&func(&lib, "get_graph_params"), &[]).unwrap());
    assert_eq!(map_size(&params), map_size(&shapes) - 1);

    // The split form: graph JSON + library + params file; after load_params the params are
    // left out of get_input_info.
    let split = &spec["split"];
    let code = load(&dir.join(split["lib"].as_str().unwrap())).unwrap();
    let json = std::fs::read_to_string(dir.join(split["graph_json"].as_str().unwrap())).unwrap();
    let ex2 = module_ret(
        call_global("tvm.graph_executor.create", &[Arg::Str(&json), Arg::Module(&code), Arg::Int(1), Arg::Int(0)])
            .unwrap(),
    );
    let blob = std::fs::read(dir.join(split["params"].as_str().unwrap())).unwrap();
    let f = func(&ex2, "load_params");
    let ba = tvm_runtime::abi::TVMByteArray { data: blob.as_ptr().cast(), size: blob.len() };
    call_raw(&f, &[h((&ba as *const tvm_runtime::abi::TVMByteArray).cast_mut().cast(), 12)]).unwrap();
    let info2 = obj(call(&func(&ex2, "get_input_info"), &[]).unwrap());
    assert_eq!(map_size(&obj_from(map_get(&info2, "shape"))), 1);
    check_mlp_run(&ex2, &dir, spec);
}

trait IntoI64 {
    fn into_i64(self) -> i64;
}
impl IntoI64 for TVMValue {
    fn into_i64(self) -> i64 {
        // SAFETY: every member is 8 bytes.
        unsafe { self.v_int64 }
    }
}

fn obj_from(v: (TVMValue, c_int)) -> Obj {
    assert_eq!(v.1, 8, "expected an object");
    // SAFETY: code 8 carries an owned object handle.
    Obj(unsafe { v.0.v_handle })
}

#[test]
fn v018_aot_export() {
    let Some((dir, man)) = v018_manifest() else { return };
    let spec = &man["fixtures"]["aot_mlp"];
    let lib = load(&dir.join(spec["file"].as_str().unwrap())).unwrap();
    assert_eq!(type_key(&lib), "AotExecutorFactory");
    let md = import(&lib, 0);
    assert_eq!(type_key(&md), "metadata_module");
    assert_eq!(type_key(&import(&md, 0)), "library");
    let ex = module_ret(call(&func(&lib, "default"), &[cpu()]).unwrap());
    assert_eq!(type_key(&ex), "AotExecutor");
    assert_eq!(call(&func(&ex, "get_num_inputs"), &[]).unwrap().int(), 1);
    assert_eq!(call(&func(&ex, "get_num_outputs"), &[]).unwrap().int(), 1);
    assert_eq!(str_ret(call(&func(&ex, "get_input_name"), &[Arg::Int(0)]).unwrap()), "data");
    assert_eq!(call(&func(&ex, "get_input_index"), &[Arg::Str("data")]).unwrap().int(), 0);
    let (shape, x) = read_npy_f32(&dir.join(spec["inputs"]["data"].as_str().unwrap()));
    let (oshape, want) = read_npy_f32(&dir.join(spec["outputs"][0].as_str().unwrap()));
    let input = array(&shape, &f32s_of(&x));
    call(&func(&ex, "set_input"), &[Arg::Str("data"), Arg::Array(input.0.cast())]).unwrap();
    for _ in 0..2 {
        call(&func(&ex, "run"), &[]).unwrap();
        let out = DevArray::new(&oshape, 2, 1);
        call(&func(&ex, "get_output"), &[Arg::Int(0), Arg::Array(out.0.cast())]).unwrap();
        let n = oshape.iter().product::<i64>() as usize;
        close(
            &out.f32s(n),
            &f32s_of(&want),
            spec["rtol"].as_f64().unwrap() as f32,
            spec["atol"].as_f64().unwrap() as f32,
        );
    }
    let e = call(&func(&lib, "default"), &[Arg::Device(2, 0)]).unwrap_err();
    assert!(e.contains("supports only execution on kDLCPU 0"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// AOT libraries of the project's own making

fn run_own_aot(path: &std::path::Path, usmp: bool) {
    let lib = load(path).unwrap();
    assert_eq!(type_key(&lib), "AotExecutorFactory");
    let ex = module_ret(call(&func(&lib, "default"), &[cpu()]).unwrap());
    assert_eq!(call(&func(&ex, "get_num_inputs"), &[]).unwrap().int(), 2);
    assert_eq!(str_ret(call(&func(&ex, "get_input_name"), &[Arg::Int(1)]).unwrap()), "scale");
    // The factory set the param `scale` = 2.0: get_input returns the executor's own array.
    let scale = match call(&func(&ex, "get_input"), &[Arg::Str("scale")]).unwrap() {
        Ret::Other(13, p) => DevArray(p as *mut DLTensor),
        other => panic!("get_input: {other:?}"),
    };
    assert_eq!(scale.f32s(1), [2.0]);
    let xs = [1.0f32, 2.0, 3.0, -4.0, 0.5, 10.0];
    let x = array(&[2, 3], &xs);
    // Names are sanitized as TVM does (`x` stays `x`).
    call(&func(&ex, "set_input"), &[Arg::Str("x"), Arg::Array(x.0.cast())]).unwrap();
    call(&func(&ex, "run"), &[]).unwrap();
    let out = match call(&func(&ex, "get_output"), &[Arg::Int(0)]).unwrap() {
        Ret::Other(13, p) => DevArray(p as *mut DLTensor),
        other => panic!("get_output: {other:?}"),
    };
    assert_eq!(out.f32s(6), aot_expected(&xs, 2.0, usmp));
    // Writing the input array through get_input sets it (what v0.18's AotModule.set_input does).
    scale.write([3.0f32].as_ptr().cast(), 4);
    call(&func(&ex, "run"), &[]).unwrap();
    assert_eq!(out.f32s(6), aot_expected(&xs, 3.0, usmp));

    // Errors are named, never a crash.
    let e = call(&func(&ex, "set_input"), &[Arg::Str("nope"), Arg::Array(x.0.cast())]).unwrap_err();
    assert!(e.contains("Invalid input name"), "{e}");
    let e = call(&func(&ex, "get_input_name"), &[Arg::Int(7)]).unwrap_err();
    assert!(e.starts_with("IndexError: input index 7 out of range"), "{e}");
    let e = call(&func(&ex, "get_output"), &[Arg::Int(1)]).unwrap_err();
    assert!(e.starts_with("IndexError"), "{e}");
    let wrong = array(&[3], &[1.0, 2.0, 3.0]);
    assert!(call(&func(&ex, "set_input"), &[Arg::Int(0), Arg::Array(wrong.0.cast())]).is_err());
    let e = call(&func(&lib, "default"), &[cpu(), cpu()]).unwrap_err();
    assert!(e.contains("Expect exactly 1 device"), "{e}");
    assert!(call(&func(&lib, "default"), &[]).unwrap_err().contains("at least one device"));
    assert!(call(&func(&ex, "set_input_zero_copy"), &[Arg::Int(0), Arg::Array(x.0.cast())]).is_err());

    // Factory functions and module properties (v0.12+ masks).
    let names = obj(call(&func(&lib, "list_module_names"), &[]).unwrap());
    let first = call_raw(&global("runtime.ArrayGetItem").unwrap(), &[h(names.0, 8), (TVMValue { v_int64: 0 }, 0)]);
    assert_eq!(str_ret(Ret::Other(8, first.unwrap().0.into_i64())), "default");
    let bare = module_ret(call(&func(&lib, "remove_params"), &[]).unwrap());
    assert_eq!(type_key(&bare), "AotExecutorFactory");
    assert_eq!(type_key(&import(&bare, 0)), "metadata_module");
    let mask = |m: &Mod| call_global("runtime.ModuleGetPropertyMask", &[Arg::Module(m)]).unwrap().int();
    assert_eq!(mask(&lib), 0b001);
    assert_eq!(mask(&import(&lib, 0)), 0b001);
    assert_eq!(mask(&ex), 0b010);
    assert_eq!(mask(&import(&import(&lib, 0), 0)), 0b011);
}

#[test]
fn own_aot_libraries_run() {
    run_own_aot(&build_aot("aot_plain", &AotModel::default(), Some(2.0)), false);
    run_own_aot(&build_aot("aot_usmp", &AotModel { usmp: true, ..AotModel::default() }, Some(2.0)), true);
    // Another model name: the main function is `<mod_name>___tvm_main__`.
    let other = build_aot("aot_named", &AotModel { mod_name: "tvmgen_net2", ..AotModel::default() }, Some(2.0));
    run_own_aot(&other, false);
}

#[test]
fn aot_factory_from_the_global_and_metadata_errors() {
    // tvm.aot_executor_factory.create over a metadata module importing a library.
    let so = build_aot("aot_global", &AotModel::default(), None);
    let lib = load(&so).unwrap();
    let md = import(&lib, 0);
    let scale = array(&[1], &[5.0]);
    let fac = module_ret(
        call_global(
            "tvm.aot_executor_factory.create",
            &[Arg::Module(&md), Arg::Str("net"), Arg::Str("scale"), Arg::Array(scale.0.cast())],
        )
        .unwrap(),
    );
    assert!(get_function(&fac, "default", false).is_none());
    let ex = module_ret(call(&func(&fac, "net"), &[cpu()]).unwrap());
    let xs = [1.0f32; 6];
    let x = array(&[2, 3], &xs);
    call(&func(&ex, "set_input"), &[Arg::Int(0), Arg::Array(x.0.cast())]).unwrap();
    call(&func(&ex, "run"), &[]).unwrap();
    let out = DevArray::new(&[2, 3], 2, 1);
    call(&func(&ex, "get_output"), &[Arg::Int(0), Arg::Array(out.0.cast())]).unwrap();
    assert_eq!(out.f32s(6), aot_expected(&xs, 5.0, false));
    assert!(call_global("tvm.aot_executor_factory.create", &[Arg::Module(&md)]).is_err());

    // A metadata layout of a later release is named, not guessed at.
    let v2 = load(&build_aot("aot_v2", &AotModel { version: 2, ..AotModel::default() }, None)).unwrap();
    let e = call(&func(&v2, "default"), &[cpu()]).unwrap_err();
    assert!(e.contains("AOT metadata version 2 is not supported") && e.contains("v0.9-v0.19"), "{e}");
    let none = load(&build_aot("aot_nomd", &AotModel { with_metadata: false, ..AotModel::default() }, None)).unwrap();
    let e = call(&func(&none, "default"), &[cpu()]).unwrap_err();
    assert!(e.contains("Unable to locate get_c_metadata"), "{e}");
    // A truncated factory entry is refused at load.
    let mut data = aot_factory_data(&[("scale", &[1.0])], "default");
    data.truncate(data.len() - 3);
    let blob = aot_blob(&data).bytes();
    let bad = build_testlib("aot_truncated", Some(&blob));
    // Entries are not framed: the short factory reads into the next entry, and the blob is
    // refused as a whole with a clean error.
    let e = load(&bad).unwrap_err();
    assert!(e.starts_with("ValueError") && e.contains("__tvm_dev_mblob"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Calling conventions of later clients

static INC: AtomicI64 = AtomicI64::new(0);
static DEC: AtomicI64 = AtomicI64::new(0);
static GIL: AtomicI64 = AtomicI64::new(0);
/// Whether the GIL functions are registered yet (v0.14's Python registers none).
static GIL_KNOWN: AtomicI64 = AtomicI64::new(0);

unsafe extern "C" fn fake_inc(_o: *mut c_void) {
    assert!(GIL_KNOWN.load(Ordering::SeqCst) == 0 || GIL.load(Ordering::SeqCst) > 0, "Py_IncRef without the GIL");
    INC.fetch_add(1, Ordering::SeqCst);
}
unsafe extern "C" fn fake_dec(_o: *mut c_void) {
    assert!(GIL_KNOWN.load(Ordering::SeqCst) == 0 || GIL.load(Ordering::SeqCst) > 0, "Py_DecRef without the GIL");
    DEC.fetch_add(1, Ordering::SeqCst);
}
unsafe extern "C" fn fake_gil_ensure() -> c_int {
    GIL.fetch_add(1, Ordering::SeqCst);
    7
}
unsafe extern "C" fn fake_gil_release(state: c_int) {
    assert_eq!(state, 7);
    GIL.fetch_sub(1, Ordering::SeqCst);
}

/// The "exception object" a failing Python callback hands over.
static EXC: u64 = 0xE4C;

/// A callback that fails the way v0.14+'s Python does: TVMAPISetLastPythonError, then -1.
unsafe extern "C" fn raising_callback(
    _a: *mut TVMValue,
    _c: *mut c_int,
    _n: c_int,
    _ret: *mut c_void,
    _res: *mut c_void,
) -> c_int {
    // SAFETY: the fake Python API is registered; the object is a static.
    unsafe { eapi::TVMAPISetLastPythonError(std::ptr::addr_of!(EXC).cast_mut().cast()) };
    -1
}

/// A callback that calls the function in its resource (a nested call through the runtime).
unsafe extern "C" fn forwarding_callback(
    _a: *mut TVMValue,
    _c: *mut c_int,
    _n: c_int,
    _ret: *mut c_void,
    res: *mut c_void,
) -> c_int {
    let mut rv = TVMValue { v_int64: 0 };
    let mut rc = 0;
    // SAFETY: `res` is a live function handle.
    unsafe { api::TVMFuncCall(res, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut rv, &mut rc) }
}

fn c_func(f: tvm_runtime::classic_api::runtime_api::TVMPackedCFunc, res: *mut c_void) -> Func {
    let mut out = std::ptr::null_mut();
    // SAFETY: valid callback and out-pointer; no finalizer.
    assert_eq!(unsafe { api::TVMFuncCreateFromCFunc(f, res, None, &mut out) }, 0);
    Func(out)
}

#[test]
fn python_exceptions_travel_with_the_error() {
    let exc = std::ptr::addr_of!(EXC).cast_mut().cast::<c_void>();
    // Before the Python API is registered, the runtime refuses to hold the object.
    // SAFETY: a valid pointer (not dereferenced by the runtime).
    unsafe { eapi::TVMAPISetLastPythonError(exc) };
    assert!(eapi::TVMGetLastPythonError().is_null());
    assert!(last_error().contains("TVMBackendRegisterEnvCAPI"), "{}", last_error());
    let register = |name: &str, f: *mut c_void| {
        let n = c(name);
        // SAFETY: valid name; the functions have Python's signatures.
        assert_eq!(unsafe { bapi::TVMBackendRegisterEnvCAPI(n.as_ptr(), f) }, 0);
    };
    // v0.14's Python registers the reference functions only: they are called without a GIL.
    register("Py_IncRef", fake_inc as *mut c_void);
    register("Py_DecRef", fake_dec as *mut c_void);
    let raising = c_func(Some(raising_callback), std::ptr::null_mut());
    assert!(call(&raising, &[]).is_err());
    assert_eq!(eapi::TVMGetLastPythonError(), exc);
    eapi::TVMDropLastPythonError();
    assert!(INC.load(Ordering::SeqCst) >= 1);
    assert_eq!(INC.load(Ordering::SeqCst), DEC.load(Ordering::SeqCst), "every reference is given back");
    // v0.15+ also registers the GIL functions: from now on every count change holds the GIL.
    register("PyGILState_Ensure", fake_gil_ensure as *mut c_void);
    register("PyGILState_Release", fake_gil_release as *mut c_void);
    GIL_KNOWN.store(1, Ordering::SeqCst);
    let n = c("Py_Unknown");
    // SAFETY: valid name.
    assert_eq!(unsafe { bapi::TVMBackendRegisterEnvCAPI(n.as_ptr(), std::ptr::null_mut()) }, -1);
    assert!(last_error().contains("Unknown env API Py_Unknown"));

    // Directly, and through a second callback and a registered global (C -> runtime -> C).
    let name = c("compat.raising");
    // SAFETY: valid name and function.
    assert_eq!(unsafe { api::TVMFuncRegisterGlobal(name.as_ptr(), raising.0, 0) }, 0);
    let via_global = global("compat.raising").unwrap();
    let nested = c_func(Some(forwarding_callback), via_global.0);
    for f in [&raising, &via_global, &nested] {
        let e = call(f, &[]).unwrap_err();
        assert!(e.contains("Python callback raised an exception"), "{e}");
        assert_eq!(eapi::TVMGetLastPythonError(), exc, "the same object comes back");
        assert!(eapi::TVMGetLastBacktrace().is_null());
        eapi::TVMThrowLastError();
        assert_eq!(eapi::TVMGetLastPythonError(), exc, "TVMThrowLastError keeps the error");
        eapi::TVMDropLastPythonError();
        assert!(eapi::TVMGetLastPythonError().is_null());
        assert_eq!(last_error(), "");
        assert_eq!(INC.load(Ordering::SeqCst), DEC.load(Ordering::SeqCst), "every reference is given back");
    }
    assert!(INC.load(Ordering::SeqCst) > 0);
    assert_eq!(GIL.load(Ordering::SeqCst), 0);
    // A new string error replaces a pending Python one (and releases it).
    let _ = call(&raising, &[]);
    // SAFETY: a valid string.
    unsafe { api::TVMAPISetLastError(c("ValueError: plain").as_ptr()) };
    assert!(eapi::TVMGetLastPythonError().is_null());
    assert_eq!(INC.load(Ordering::SeqCst), DEC.load(Ordering::SeqCst));
    // SAFETY: valid name.
    assert_eq!(unsafe { api::TVMFuncRemoveGlobal(name.as_ptr()) }, 0);
}

/// Returns its first argument's code and value (as int) through TVMCFuncSetReturn, or the
/// bool `true` (code 15) when called without arguments.
unsafe extern "C" fn echo_code(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut c_void,
    _res: *mut c_void,
) -> c_int {
    let (mut v, mut code) = if n == 0 {
        (TVMValue { v_int64: 1 }, 15)
    } else {
        // SAFETY: one argument.
        unsafe { (TVMValue { v_int64: i64::from(*codes) * 100 + (*args).v_int64 }, 0) }
    };
    // SAFETY: the running callback's return slot.
    unsafe { api::TVMCFuncSetReturn(ret, &mut v, &mut code, 1) }
}

#[test]
fn bool_arguments_and_results() {
    let m = load(&build_testlib("compat_bool", None)).unwrap();
    let f = global("runtime.ModuleImplementsFunction").unwrap();
    let name = c("no_such_function");
    let (t, fl) = ((TVMValue { v_int64: 1 }, 15), (TVMValue { v_int64: 0 }, 15));
    let r = call_raw(&f, &[h(m.0, 9), (TVMValue { v_str: name.as_ptr() }, 11), t]).unwrap();
    // Bools come back as ints (code 0), which the clients of every release read.
    assert_eq!((r.1, r.0.into_i64()), (0, 0));
    let r = call_raw(
        &global("runtime.ModuleGetFunction").unwrap(),
        &[h(m.0, 9), (TVMValue { v_str: name.as_ptr() }, 11), fl],
    );
    assert_eq!(r.unwrap().1, 4);
    // A C callback sees code 15 unchanged; its bool result becomes an int.
    let echo = c_func(Some(echo_code), std::ptr::null_mut());
    let r = call_raw(&echo, &[(TVMValue { v_int64: 1 }, 15)]).unwrap();
    assert_eq!((r.1, r.0.into_i64()), (0, 1501));
    let r = call_raw(&echo, &[]).unwrap();
    assert_eq!((r.1, r.0.into_i64()), (0, 1));
    // Code 15 is a bool, never an extension value: a global taking an int takes it.
    let r = call_raw(&global("runtime.ShapeTuple").unwrap(), &[t, fl]).unwrap();
    let st = obj_from(r);
    assert_eq!(shape_of(&st), [1, 0]);
}

#[test]
fn changed_globals_take_every_release_form() {
    // runtime.TVMArrayAllocWithScope: v0.8 (pointer, ndim, ...) and v0.9+ (ShapeTuple, ...).
    let shape = [2i64, 5];
    let f = global("runtime.TVMArrayAllocWithScope").unwrap();
    let dt = c("float32");
    let dev = TVMValue { v_device: tvm_runtime::abi::DLDevice { device_type: 1, device_id: 0 } };
    let r8 = call_raw(
        &f,
        &[
            h(shape.as_ptr().cast_mut().cast(), 3),
            (TVMValue { v_int64: 2 }, 0),
            (TVMValue { v_str: dt.as_ptr() }, 11),
            (dev, 6),
            h(std::ptr::null_mut(), 4),
        ],
    )
    .unwrap();
    let st = obj_from(
        call_raw(&global("runtime.ShapeTuple").unwrap(), &[(TVMValue { v_int64: 2 }, 0), (TVMValue { v_int64: 5 }, 0)])
            .unwrap(),
    );
    let r18 = call_raw(&f, &[h(st.0, 8), (TVMValue { v_str: dt.as_ptr() }, 11), (dev, 6), h(std::ptr::null_mut(), 4)])
        .unwrap();
    for r in [r8, r18] {
        assert_eq!(r.1, 13);
        // SAFETY: an owned NDArray handle.
        let a = DevArray(unsafe { r.0.v_handle }.cast());
        // SAFETY: a live tensor.
        let t = unsafe { &*a.0 };
        // SAFETY: ndim extents.
        assert_eq!(unsafe { std::slice::from_raw_parts(t.shape, 2) }, shape);
    }
    assert!(call_raw(&f, &[h(st.0, 8)]).unwrap_err().contains("expects 4 arguments"));

    // runtime.RPCTimeEvaluator: 8 (v0.8), 10 (v0.9), 11 (v0.10-v0.13), 12 (v0.14+) arguments.
    let m = load(&build_testlib("compat_timer", None)).unwrap();
    let mut forms: Vec<Vec<Arg<'_>>> = Vec::new();
    let head = || {
        vec![Arg::Module(&m), Arg::Str("test_answer"), Arg::Int(1), Arg::Int(0), Arg::Int(2), Arg::Int(3), Arg::Int(0)]
    };
    forms.push(join(head(), vec![Arg::Str("")]));
    forms.push(join(head(), vec![Arg::Int(0), Arg::Int(1), Arg::Str("")]));
    forms.push(join(head(), vec![Arg::Int(100), Arg::Int(0), Arg::Int(1), Arg::Str("")]));
    forms.push(join(head(), vec![Arg::Int(100), Arg::Int(0), Arg::Int(1), Arg::Int(4096), Arg::Str("")]));
    for args in &forms {
        let ev = match call_global("runtime.RPCTimeEvaluator", args).unwrap() {
            Ret::Other(10, p) => Func(p as *mut c_void),
            other => panic!("{other:?}"),
        };
        match call(&ev, &[]).unwrap() {
            Ret::Bytes(b) => {
                assert_eq!(b.len(), 3 * 8);
                assert!(b.chunks_exact(8).all(|c| f64::from_ne_bytes(c.try_into().unwrap()) >= 0.0));
            }
            other => panic!("{other:?}"),
        }
    }
    let e = call_global("runtime.RPCTimeEvaluator", &join(head(), vec![Arg::Str(""), Arg::Int(1)])).unwrap_err();
    assert!(e.contains("expects 8 (TVM v0.8), 10 (v0.9), 11 (v0.10-v0.13) or 12"), "{e}");

    // runtime.Array takes strings (v0.9+).
    let arr = obj(call_global("runtime.Array", &[Arg::Str("a"), Arg::Str("bc")]).unwrap());
    let second = call_raw(&global("runtime.ArrayGetItem").unwrap(), &[h(arr.0, 8), (TVMValue { v_int64: 1 }, 0)]);
    assert_eq!(str_ret(Ret::Other(8, second.unwrap().0.into_i64())), "bc");
}

#[test]
fn debug_executor_in_every_release_form() {
    let Some((dir, man)) = v018_manifest() else { return };
    let split = &man["fixtures"]["mlp"]["split"];
    let code = load(&dir.join(split["lib"].as_str().unwrap())).unwrap();
    let json = std::fs::read_to_string(dir.join(split["graph_json"].as_str().unwrap())).unwrap();
    let nodes = serde_json::from_str::<serde_json::Value>(&json).unwrap()["nodes"].as_array().unwrap().len();
    let ex = module_ret(
        call_global(
            "tvm.graph_executor_debug.create",
            &[Arg::Str(&json), Arg::Module(&code), Arg::Int(1), Arg::Int(0)],
        )
        .unwrap(),
    );
    // v0.8: text with one time per node.
    match call(&func(&ex, "run_individual"), &[Arg::Int(2), Arg::Int(1), Arg::Int(0)]).unwrap() {
        Ret::Str(s) => assert_eq!(s.split(',').filter(|x| !x.is_empty()).count(), nodes),
        other => panic!("{other:?}"),
    }
    // v0.9 (5 settings) and v0.10+ (6): an i64 node count, then `repeat` f64s per node.
    for extra in [vec![Arg::Int(0), Arg::Int(1)], vec![Arg::Int(100), Arg::Int(0), Arg::Int(1)]] {
        let args = join(vec![Arg::Int(2), Arg::Int(2), Arg::Int(0)], extra);
        match call(&func(&ex, "run_individual"), &args).unwrap() {
            Ret::Bytes(b) => {
                assert_eq!(i64::from_ne_bytes(b[..8].try_into().unwrap()), nodes as i64);
                assert_eq!(b.len(), 8 + nodes * 2 * 8);
            }
            other => panic!("{other:?}"),
        }
    }
    let args = [Arg::Int(1), Arg::Int(2), Arg::Int(3), Arg::Int(0), Arg::Int(100), Arg::Int(0), Arg::Int(1)];
    match call(&func(&ex, "run_individual_node"), &args).unwrap() {
        Ret::Bytes(b) => assert_eq!(b.len(), 3 * 8),
        other => panic!("{other:?}"),
    }
    assert!(call(
        &func(&ex, "run_individual_node"),
        &[Arg::Int(9999), Arg::Int(1), Arg::Int(1), Arg::Int(0), Arg::Int(0), Arg::Int(1)]
    )
    .is_err());
    // v0.9+: debug_get_output(node) returns the node's output.
    assert!(matches!(call(&func(&ex, "debug_get_output"), &[Arg::Int(1)]).unwrap(), Ret::Other(13, _)));
}

// ---------------------------------------------------------------------------------------------
// Prefixed system libraries (TVM v0.13+)

static P1_CTX: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static CALLS: AtomicUsize = AtomicUsize::new(0);

macro_rules! answer_fn {
    ($name:ident, $v:expr) => {
        unsafe extern "C" fn $name(
            _a: *mut TVMValue,
            _c: *mut c_int,
            _n: c_int,
            rv: *mut TVMValue,
            rc: *mut c_int,
            _r: *mut c_void,
        ) -> c_int {
            CALLS.fetch_add(1, Ordering::SeqCst);
            // SAFETY: the runtime passes valid return slots.
            unsafe {
                (*rv).v_int64 = $v;
                *rc = 0;
            }
            0
        }
    };
}
answer_fn!(p1_answer, 1);
answer_fn!(plain_answer, 100);

fn register_syslib(name: &str, addr: *mut c_void) {
    let n = c(name);
    // SAFETY: valid name; the address lives as long as the process.
    assert_eq!(unsafe { bapi::TVMBackendRegisterSystemLibSymbol(n.as_ptr(), addr) }, 0);
}

#[test]
fn prefixed_system_libraries() {
    register_syslib("p1_answer", p1_answer as *mut c_void);
    register_syslib("answer", plain_answer as *mut c_void);
    register_syslib("p1___tvm_module_ctx", P1_CTX.as_ptr().cast());
    let p1 = module_ret(call_global("runtime.SystemLib", &[Arg::Str("p1_")]).unwrap());
    let p2 = module_ret(call_global("runtime.SystemLib", &[Arg::Str("p2_")]).unwrap());
    let plain = module_ret(call_global("runtime.SystemLib", &[]).unwrap());
    // The prefixed name first, then the plain one.
    assert_eq!(call(&func(&p1, "answer"), &[]).unwrap().int(), 1);
    assert_eq!(call(&func(&p2, "answer"), &[]).unwrap().int(), 100);
    assert_eq!(call(&func(&plain, "answer"), &[]).unwrap().int(), 100);
    // One module per prefix, for the life of the process.
    let again = module_ret(call_global("runtime.SystemLib", &[Arg::Str("p1_")]).unwrap());
    assert_eq!(again.0, p1.0);
    assert_ne!(p1.0, plain.0);
    // The prefix's module context names its module.
    assert_eq!(P1_CTX.load(Ordering::SeqCst), p1.0);
}

// ---------------------------------------------------------------------------------------------
// Formats of later releases: named, never guessed

#[test]
fn later_module_kinds_name_their_release() {
    let blob = Blob::default().lib().module("vulkan", &[0u8; 16]).tree(&[0, 1, 1], &[1]).bytes();
    let so = build_testlib("compat_vulkan", Some(&blob));
    let e = load(&so).unwrap_err();
    assert!(e.contains("vulkan (vulkan is Vulkan SPIR-V kernels (TVM v0.7+)"), "{e}");
    // Relax executables of v0.14-v0.19 load (the Relax VM behind the classic API): a damaged one
    // is refused by its parser, naming it.
    let blob = Blob::default().lib().module("relax.Executable", &[0u8; 16]).tree(&[0, 1, 1], &[1]).bytes();
    let so = build_testlib("compat_relax", Some(&blob));
    let e = load(&so).unwrap_err();
    assert!(e.contains("relax.Executable: ") && e.contains("header"), "{e}");
}

#[test]
fn tvm_ffi_exports_are_refused_by_the_classic_loader() {
    // A TVM v0.22+ export keeps its module tree in `__tvm_ffi__library_bin`: the classic loader
    // names the release and the ABI to use rather than returning an empty library.
    let src = "__attribute__((visibility(\"default\"))) const unsigned char __tvm_ffi__library_bin[16] = {0};\n";
    let so = build_shared("compat_ffi_bin", &[testlib_c()], src);
    let e = load(&so).unwrap_err();
    assert!(e.contains("an export of TVM v0.22 or later") && e.contains("__tvm_ffi__library_bin"), "{e}");
    assert!(e.contains("tvm-ffi ABI"), "{e}");
}

#[test]
fn texture_scopes_are_refused_with_their_release() {
    let m = load(&build_testlib("compat_scope", None)).unwrap();
    let json = r#"{"nodes": [{"op": "null", "name": "x", "inputs": []}], "arg_nodes": [0], "node_row_ptr": [0, 1],
      "heads": [[0, 0, 0]], "attrs": {"dltype": ["list_str", ["float32"]], "storage_id": ["list_int", [0]],
      "shape": ["list_shape", [[4]]], "storage_scope": ["list_str", ["SCOPE"]]}}"#;
    let ok = json.replace("SCOPE", "global");
    let ex = call_global("tvm.graph_executor.create", &[Arg::Str(&ok), Arg::Module(&m), Arg::Int(1), Arg::Int(0)]);
    assert!(matches!(ex, Ok(Ret::Module(_))), "{ex:?}");
    if let Ok(Ret::Module(p)) = ex {
        drop(Mod(p));
    }
    let tex = json.replace("SCOPE", "global.texture");
    let e = call_global("tvm.graph_executor.create", &[Arg::Str(&tex), Arg::Module(&m), Arg::Int(1), Arg::Int(0)])
        .unwrap_err();
    assert!(e.contains("texture memory (TVM v0.9+, OpenCL)"), "{e}");
    // Device numbers that changed meaning in v0.9 are named with both meanings.
    let e = DevArray::try_new(&[4], 2, 14).err().unwrap();
    assert!(e.contains("hexagon in TVM v0.8, oneapi from v0.9 on"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Globals of later releases and type indices

#[test]
fn module_and_params_globals_of_later_releases() {
    let m = load(&build_testlib("compat_mod", None)).unwrap();
    let mask = call_global("runtime.ModuleGetPropertyMask", &[Arg::Module(&m)]).unwrap().int();
    assert_eq!(mask, 0b011);
    assert_eq!(str_ret(call_global("runtime.ModuleGetFormat", &[Arg::Module(&m)]).unwrap()), "");
    assert_eq!(
        call_global("runtime.ModuleImplementsFunction", &[Arg::Module(&m), Arg::Str("test_answer")]).unwrap().int(),
        1
    );
    assert!(matches!(
        call_global("runtime.ModuleGetFunction", &[Arg::Module(&m), Arg::Str("test_answer"), Arg::Int(0)]).unwrap(),
        Ret::Other(10, _)
    ));
    assert!(call_global("runtime.NumThreads", &[]).unwrap().int() >= 1);
    assert_eq!(str_ret(call_global("runtime.SanitizeName", &[Arg::Str("a.b-c:0")]).unwrap()), "a_b_c_0");

    // ModuleClearImports.
    let root = load(&build_testlib("compat_imports", Some(&Blob::default().lib().bytes()))).unwrap();
    let child = load(&build_testlib("compat_child", None)).unwrap();
    // SAFETY: live handles.
    assert_eq!(unsafe { api::TVMModImport(root.0, child.0) }, 0);
    assert!(imports_size(&root) >= 1);
    call_global("runtime.ModuleClearImports", &[Arg::Module(&root)]).unwrap();
    assert_eq!(imports_size(&root), 0);

    // Params files, and views with a byte offset.
    let a = array(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let map = obj(call_global("runtime.Map", &[Arg::Str("w"), Arg::Array(a.0.cast())]).unwrap());
    let path = out_dir().join(format!("compat-{}.params", std::process::id()));
    let p = c(path.to_str().unwrap());
    call_raw(&global("runtime.SaveParamsToFile").unwrap(), &[h(map.0, 8), (TVMValue { v_str: p.as_ptr() }, 11)])
        .unwrap();
    let back = obj(call_global("runtime.LoadParamsFromFile", &[Arg::Str(path.to_str().unwrap())]).unwrap());
    let w = map_get(&back, "w");
    assert_eq!(w.1, 13);
    // SAFETY: an owned NDArray handle.
    let w = DevArray(unsafe { w.0.v_handle }.cast());
    assert_eq!(w.f32s(4), [1.0, 2.0, 3.0, 4.0]);
    let st = obj_from(call_raw(&global("runtime.ShapeTuple").unwrap(), &[(TVMValue { v_int64: 2 }, 0)]).unwrap());
    let view_args = |off: i64| {
        let dt = c("float32");
        call_raw(
            &global("runtime.TVMArrayCreateView").unwrap(),
            &[h(a.0.cast(), 13), h(st.0, 8), (TVMValue { v_str: dt.as_ptr() }, 11), (TVMValue { v_int64: off }, 0)],
        )
    };
    let v = view_args(8).unwrap();
    // SAFETY: an owned NDArray handle.
    let view = DevArray(unsafe { v.0.v_handle }.cast());
    assert_eq!(view.f32s(2), [3.0, 4.0]);
    assert!(view_args(12).unwrap_err().contains("needs 8 bytes from byte 12"));

    // static_library: loaded from a file, saved into a blob and read back.
    let obj_path = out_dir().join(format!("compat-{}.o", std::process::id()));
    std::fs::write(&obj_path, b"\x7fELF-object-bytes").unwrap();
    let names = obj(call_global("runtime.Array", &[Arg::Str("f1"), Arg::Str("f2")]).unwrap());
    let o = c(obj_path.to_str().unwrap());
    let (v, code) = call_raw(
        &global("runtime.ModuleLoadStaticLibrary").unwrap(),
        &[(TVMValue { v_str: o.as_ptr() }, 11), h(names.0, 8)],
    )
    .unwrap();
    assert_eq!(code, 9);
    // SAFETY: an owned module handle.
    let sl = Mod(unsafe { v.v_handle });
    assert_eq!(type_key(&sl), "static_library");
    assert_eq!(call_global("runtime.ModuleGetPropertyMask", &[Arg::Module(&sl)]).unwrap().int(), 0b101);
    assert_eq!(call_global("runtime.ModuleImplementsFunction", &[Arg::Module(&sl), Arg::Str("f2")]).unwrap().int(), 1);
    let mut data = Vec::new();
    data.extend_from_slice(&(17u64).to_le_bytes());
    data.extend_from_slice(b"\x7fELF-object-bytes");
    data.extend_from_slice(&1u64.to_le_bytes());
    data.extend_from_slice(&2u64.to_le_bytes());
    data.extend_from_slice(b"f1");
    let so = build_testlib(
        "compat_static",
        Some(&Blob::default().lib().module("static_library", &data).tree(&[0, 1, 1], &[1]).bytes()),
    );
    let root = load(&so).unwrap();
    let sl2 = import(&root, 0);
    assert_eq!(type_key(&sl2), "static_library");
    assert_eq!(call_global("runtime.ModuleImplementsFunction", &[Arg::Module(&sl2), Arg::Str("f1")]).unwrap().int(), 1);
}

#[test]
fn type_indices_serve_every_release() {
    let idx = |key: &str| {
        let k = c(key);
        let mut out: c_uint = 0;
        // SAFETY: valid key and out-pointer.
        let rc = unsafe { oapi::TVMObjectTypeKey2Index(k.as_ptr(), &mut out) };
        (rc == 0).then_some(out)
    };
    // 0-6 are the same in every release; v0.8's 7 and 8 are kept.
    let statics = ["runtime.Module", "runtime.NDArray", "runtime.String", "Array", "Map", "runtime.ShapeTuple"];
    for (i, key) in statics.iter().enumerate() {
        assert_eq!(idx(key), Some(i as u32 + 1), "{key}");
    }
    assert_eq!(idx("runtime.Closure"), Some(7));
    assert_eq!(idx("runtime.ADT"), Some(8));
    // Later releases' keys resolve (by key, as their Python packages ask).
    for key in ["runtime.PackedFunc", "runtime.disco.DRef", "runtime.RPCObjectRef"] {
        assert!(idx(key).is_some_and(|i| i >= 9), "{key}");
    }
}

// ---------------------------------------------------------------------------------------------
// A const-loader export (TVM v0.9+'s BYOC constants), for the loader of the BYOC subsystem

#[test]
fn const_loader_export_of_our_making() {
    let m = load(&build_const_loader_export("compat_const_loader")).unwrap();
    assert_eq!(type_key(&m), "const_loader");
    assert_eq!(call_global("runtime.ModuleGetPropertyMask", &[Arg::Module(&m)]).unwrap().int(), 0b001);
    // The first lookup initialises the external function with one Array of its constants.
    let f = get_function(&m, "ext_fn", false).expect("ext_fn through the const loader");
    assert_eq!(call(&f, &[]).unwrap().int(), 101);
    let again = get_function(&m, "ext_fn", false).expect("ext_fn");
    assert_eq!(call(&again, &[]).unwrap().int(), 101, "initialised once");
}
