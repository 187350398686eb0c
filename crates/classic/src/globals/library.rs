//! What the library and its modules answer: params files (`runtime.SaveParams`, `LoadParams`),
//! module files, imports and sources, the thread pool's setting, the build info
//! (`support.GetLibInfo`).

use crate::error::{Error, Result};
use crate::module::{self, Module};
use crate::ndarray::serialize::{load_params, save_params};
use crate::object::{index, MapObj, StringObj};
use crate::registry::Registrar;
use crate::value::{Args, Value};

fn module_arg(a: &Args<'_>, i: usize) -> Result<Module> {
    a.module(i)?.ok_or_else(|| Error::value(format!("argument {i}: expected a module, got None")))
}

/// A `Map<String, NDArray>` argument as named arrays (in the map's order).
pub(crate) fn params_arg(a: &Args<'_>, i: usize, func: &str) -> Result<Vec<(String, crate::ndarray::NDArray)>> {
    let o = a.object_of(i, index::MAP, "Map")?;
    let m = o.downcast::<MapObj>().ok_or_else(|| Error::type_error("expected Map"))?;
    m.entries
        .values()
        .map(|(k, v)| {
            let name = k
                .downcast::<StringObj>()
                .map(StringObj::to_string_lossy)
                .ok_or_else(|| Error::type_error(format!("{func}: keys must be strings")))?;
            let arr = v
                .clone()
                .and_then(crate::ndarray::NDArray::from_object)
                .ok_or_else(|| Error::type_error(format!("{func}: value of {name} is not an NDArray")))?;
            Ok((name, arr))
        })
        .collect()
}

/// Named arrays as a `Map<String, NDArray>`.
pub(crate) fn params_map(params: Vec<(String, crate::ndarray::NDArray)>) -> Value {
    let pairs =
        params.into_iter().map(|(n, arr)| (StringObj::new_object(n.as_bytes()), Some(arr.into_object()))).collect();
    Value::Object(MapObj::new_object(pairs))
}

pub(super) fn register(r: &mut Registrar<'_>) {
    r.func("runtime.SaveParams", |a| {
        a.expect_len("runtime.SaveParams", 1)?;
        Ok(Value::bytes(save_params(&params_arg(a, 0, "runtime.SaveParams")?)?))
    });
    r.func("runtime.LoadParams", |a| {
        a.expect_len("runtime.LoadParams", 1)?;
        Ok(params_map(load_params(&a.bytes_view(0)?)?))
    });

    r.func("runtime.ModuleLoadFromFile", |a| {
        a.expect_at_least("runtime.ModuleLoadFromFile", 1)?;
        let fmt = if a.len() > 1 { a.string(1)? } else { String::new() };
        Ok(Value::Module(module::load_from_file(&a.string(0)?, &fmt)?))
    });
    r.func("runtime.ModuleGetTypeKey", |a| {
        a.expect_len("runtime.ModuleGetTypeKey", 1)?;
        Ok(Value::str(module_arg(a, 0)?.type_key().to_owned()))
    });
    r.func("runtime.ModuleImportsSize", |a| {
        a.expect_len("runtime.ModuleImportsSize", 1)?;
        Ok(Value::Int(module_arg(a, 0)?.imports().len() as i64))
    });
    r.func("runtime.ModuleGetImport", |a| {
        a.expect_len("runtime.ModuleGetImport", 2)?;
        let imports = module_arg(a, 0)?.imports();
        let i = a.i64(1)?;
        let m = usize::try_from(i).ok().and_then(|k| imports.get(k).cloned()).ok_or_else(|| {
            Error::index(format!("import index {i} out of range: the module has {} imports", imports.len()))
        })?;
        Ok(Value::Module(m))
    });
    r.func("runtime.ModuleSaveToFile", |a| {
        a.expect_len("runtime.ModuleSaveToFile", 3)?;
        module_arg(a, 0)?.node().save_to_file(&a.string(1)?, &a.string(2)?)?;
        Ok(Value::Null)
    });
    r.func("runtime.ModuleGetSource", |a| {
        a.expect_len("runtime.ModuleGetSource", 2)?;
        Ok(Value::str(module_arg(a, 0)?.node().get_source(&a.string(1)?)?))
    });
    r.func("runtime.config_threadpool", |a| {
        a.expect_len("runtime.config_threadpool", 2)?;
        // `Args::i32` takes ints (code 0) only, as the spec requires.
        crate::threading::config_threadpool(a.i32(0)?, a.i32(1)?)?;
        Ok(Value::Null)
    });
    r.func("support.GetLibInfo", |_| {
        let info = [
            ("GIT_COMMIT_HASH", env!("CARGO_PKG_VERSION")),
            ("USE_GRAPH_EXECUTOR", "ON"),
            ("USE_OPENCL", "ON (driver opened at run time)"),
            ("USE_CUDA", "ON (driver opened at run time)"),
            ("USE_RUST_RUNTIME", "ON"),
            ("TVM_VERSION", "0.8.0"),
        ];
        let pairs = info
            .iter()
            .map(|(k, v)| (StringObj::new_object(k.as_bytes()), Some(StringObj::new_object(v.as_bytes()))))
            .collect();
        Ok(Value::Object(MapObj::new_object(pairs)))
    });
}

#[cfg(test)]
mod tests {
    use crate::registry;
    use crate::value::Value;

    #[test]
    fn config_threadpool_global() {
        let f = registry::get("runtime.config_threadpool").expect("registered");
        assert!(matches!(f.call(&[Value::Int(0), Value::Int(1)]), Ok(Value::Null)));
        let e = f.call(&[Value::Int(0), Value::Float(1.0)]).unwrap_err().to_string();
        assert!(e.contains("converting argument 1: expected int but got float"), "{e}");
        assert!(f.call(&[Value::Int(0)]).is_err());
        let info = registry::get("support.GetLibInfo").unwrap().call(&[]).unwrap();
        assert!(matches!(info, Value::Object(_)));
    }
}
