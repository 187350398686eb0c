//! The classic runtime's `tvm.contrib.*` globals (sort, random, BLAS, ...) as tvm-ffi
//! functions: the same code, with tvm-ffi values turned into classic ones on the way in and
//! back on the way out. Compiled kernels of TVM v0.20+ find them through
//! `TVMFFIEnvModLookupFromImports` (the topk/sort kernels call `tvm.contrib.sort.*`).

use super::any::{Any, TVMFFIAny};
use super::classic_values::{plain_to_ffi, view_to_classic};
use super::registry::{Builder, Fallback};
use super::{FfiError, FfiResult};
use tvm_runtime_classic::function::PackedFunc;

/// The prefixes of the classic globals that are bridged.
const PREFIXES: &[&str] = &["tvm.contrib."];

/// A tvm-ffi function calling classic function `f`.
pub fn bridge(name: &str, f: PackedFunc) -> impl Fn(&[TVMFFIAny]) -> FfiResult<Any> + Send + Sync + 'static {
    let name = name.to_owned();
    move |args| {
        let vals = args.iter().enumerate().map(|(i, v)| view_to_classic(&name, i, v)).collect::<FfiResult<Vec<_>>>()?;
        plain_to_ffi(&name, f.call(&vals)?)
    }
}

fn bridged(name: &str) -> bool {
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The classic global `name` as a tvm-ffi function, looked up when asked: a classic global
/// registered or overridden at any time is what the tvm-ffi side sees. One function object per
/// classic function, kept while that function is the global: asking twice gives the same
/// object, as for the registry's own globals.
fn lookup(name: &str) -> Option<super::object::ObjectRef> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Cache = Mutex<HashMap<String, (PackedFunc, super::object::ObjectRef)>>;
    static MADE: OnceLock<Cache> = OnceLock::new();
    if !bridged(name) {
        return None;
    }
    let f = tvm_runtime_classic::registry::get(name)?;
    let mut made = MADE.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    match made.get(name) {
        Some((g, obj)) if g.ptr_eq(&f) => Some(obj.clone()),
        _ => {
            let obj = super::function::from_fn(bridge(name, f.clone()));
            made.insert(name.to_owned(), (f, obj.clone()));
            Some(obj)
        }
    }
}

fn names() -> Vec<String> {
    tvm_runtime_classic::registry::list_names().into_iter().filter(|n| bridged(n)).collect()
}

/// Makes the bridged classic globals visible through the tvm-ffi registry, live.
pub fn register(b: &mut Builder) {
    b.fallback(Fallback { get: lookup, names });
}

/// A classic module (a device module: OpenCL, CUDA) as an `ffi.Module`: its functions are
/// bridged as above.
struct ClassicModule(tvm_runtime_classic::module::Module);

impl super::module::NativeModule for ClassicModule {
    fn kind(&self) -> &str {
        self.0.type_key()
    }

    fn get_function(
        &self,
        _this: &super::object::ObjectRef,
        name: &str,
    ) -> FfiResult<Option<super::object::ObjectRef>> {
        Ok(self.0.get_function(name, false)?.map(|f| super::function::from_fn(bridge(name, f))))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A classic module as an `ffi.Module` (its functions bridged).
pub fn ffi_module(m: tvm_runtime_classic::module::Module) -> super::object::ObjectRef {
    super::module::make_native_module(Box::new(ClassicModule(m)))
}

/// `ffi.Module.load_from_bytes.<kind>` for a kind only the classic runtime loads
/// (`runtime.module.loadbinary_<kind>`: the OpenCL and CUDA modules of a v0.20+ library
/// binary); `None` when there is no classic loader either.
pub fn load_from_bytes(kind: &str, bytes: &[u8]) -> Option<FfiResult<super::object::ObjectRef>> {
    let m = device_module(kind, bytes).or_else(|| tvm_runtime_classic::module::blob::load_bytes(kind, bytes))?;
    Some(
        m.map(|m| super::module::make_native_module(Box::new(ClassicModule(m))))
            .map_err(|e| FfiError::runtime(format!("loading the {kind} module of the library binary: {e}"))),
    )
}

/// The device code of a v0.20+ library binary (`opencl`, `cuda`: the loaders the face installed
/// in [`tvm_runtime_classic::module::device_code`]): `fmt`, the function map (with `arg_extra_tags`), the
/// code; read here rather than by the classic loaders, which read the v0.8 function map.
fn device_module(
    kind: &str,
    bytes: &[u8],
) -> Option<tvm_runtime_classic::error::Result<tvm_runtime_classic::module::Module>> {
    let load = tvm_runtime_classic::module::device_code::loader(kind)?;
    let mut r = tvm_runtime_classic::io::Reader::new(bytes, "device module");
    Some(tvm_runtime_classic::device::kernel::read_payload_tagged(&mut r).and_then(|(fmt, fmap, data)| {
        let (fmt, data) = if kind == "cuda" && fmt == "cuda" { compile_cuda_source(&data)? } else { (fmt, data) };
        load(fmt, fmap, data)
    }))
}

/// A `cuda` module saved as CUDA C (what TVM v0.27 exports where its CUDA runtime is absent):
/// compiled at load, as TVM's CUDA module does, by the global `tvm_callback_cuda_compile`
/// (registered by TVM's Python, `tvm.support.nvcc`); PTX when the result starts with `/`, else
/// a cubin.
fn compile_cuda_source(source: &[u8]) -> tvm_runtime_classic::error::Result<(String, Vec<u8>)> {
    use tvm_runtime_classic::error::Error;
    let f = super::registry::get("tvm_callback_cuda_compile").ok_or_else(|| {
        Error::value(
            "fmt=='cuda' requires tvm_callback_cuda_compile to be registered. Import tvm.support.nvcc. \
             (the export holds CUDA C source, which is compiled when it is loaded)",
        )
    })?;
    let src = Any::string(&String::from_utf8_lossy(source));
    let out = super::function::call_any(&f, &[src])
        .map_err(|e| Error::value(format!("tvm_callback_cuda_compile: {}", e.message())))?;
    let code = out
        .as_str_bytes()
        .ok_or_else(|| Error::value("tvm_callback_cuda_compile returned neither bytes nor a string"))?
        .to_vec();
    let fmt = if code.first() == Some(&b'/') { "ptx" } else { "cubin" };
    Ok((fmt.to_owned(), code))
}

#[cfg(test)]
mod tests {
    use super::super::{function, registry};
    use super::*;
    use tvm_runtime_classic::value::Value;

    #[test]
    fn classic_globals_are_seen_live() {
        // The tvm-ffi registry is up before the classic globals below exist.
        assert!(registry::get("ffi.String").is_some());
        let name = "tvm.contrib.bridge_test.twice";
        assert!(registry::get(name).is_none());
        let twice = |k: i64| PackedFunc::from_fn(move |a| Ok(Value::Int(a.i64(0)? * k)));
        tvm_runtime_classic::registry::register(name, twice(2), false).unwrap();
        let f = registry::get(name).expect("a classic global registered later is seen");
        assert_eq!(function::call_any(&f, &[Any::int(21)]).unwrap().as_i64(), Some(42));
        // The same function object each time while the classic function stays.
        assert!(registry::get(name).unwrap().same_as(&f));
        assert!(registry::names().iter().any(|n| n == name));
        // Setting it from the tvm-ffi side without override is refused, as for its own globals.
        assert!(registry::set(name, f.clone(), false, None).is_err());
        // An override on the classic side is seen too.
        tvm_runtime_classic::registry::register(name, twice(3), true).unwrap();
        let g = registry::get(name).unwrap();
        assert!(!g.same_as(&f));
        assert_eq!(function::call_any(&g, &[Any::int(5)]).unwrap().as_i64(), Some(15));
        // The first one still works while held.
        assert_eq!(function::call_any(&f, &[Any::int(5)]).unwrap().as_i64(), Some(10));
        let f = g;
        // Globals outside the bridged prefixes are not shown.
        tvm_runtime_classic::registry::register("bridge_test.not_contrib", twice(1), true).unwrap();
        assert!(registry::get("bridge_test.not_contrib").is_none());
        // A bad argument is a clear error.
        let e = function::call_any(&f, &[Any::object(registry::get("ffi.String").unwrap())]).unwrap_err();
        assert!(e.message().contains("cannot be passed"), "{}", e.message());
    }

    #[test]
    fn cuda_source_is_compiled_by_the_registered_callback() {
        let name = "tvm_callback_cuda_compile";
        super::super::registry::remove(name);
        let e = compile_cuda_source(b"__global__ void k() {}").unwrap_err().to_string();
        assert!(e.contains("requires tvm_callback_cuda_compile"), "{e}");
        let f = super::super::function::from_fn(|a| {
            // SAFETY: a valid view.
            let src = unsafe { super::super::string::view_str_bytes(&a[0]) }.unwrap().to_vec();
            Ok(if src.starts_with(b"ptx:") { Any::string("// ptx text") } else { Any::bytes(b"\x7fELF cubin") })
        });
        super::super::registry::set(name, f, true, None).unwrap();
        assert_eq!(compile_cuda_source(b"ptx: k").unwrap(), ("ptx".to_owned(), b"// ptx text".to_vec()));
        assert_eq!(compile_cuda_source(b"k").unwrap().0, "cubin");
        super::super::registry::remove(name);
    }
}
