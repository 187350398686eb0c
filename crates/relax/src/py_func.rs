//! Functions the host registers for `R.call_py_func` (TVM's `builtin.cc`): the compiler lowers
//! the call to `vm.builtin.call_py_func((name, (args...)))`, which calls the function
//! registered under that name with `vm.builtin.register_py_func` (any `ffi.Function`; TVM's
//! `BasePyModule` registers Python functions).

use super::builtins::add_fn;
use super::objects::NamedObjects;
use tvm_runtime_tvm_ffi::any::{Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::containers::array::seq_items;
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{function, string, ti, types, FfiError, FfiResult};

/// name -> function. A static, so never dropped at exit: a Python function must not be
/// released after the interpreter has gone.
static FUNCS: NamedObjects = NamedObjects::new();

fn name_arg(what: &str, v: Option<&TVMFFIAny>) -> FfiResult<String> {
    v
        // SAFETY: a valid view.
        .and_then(|v| unsafe { string::view_str_bytes(v) })
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .ok_or_else(|| FfiError::type_error(format!("{what}: the function name must be a string")))
}

fn lookup(name: &str) -> FfiResult<ObjectRef> {
    FUNCS.get(name).ok_or_else(|| FfiError::value(format!("Python function '{name}' not found in registry")))
}

fn array(what: &str, v: Option<&TVMFFIAny>) -> FfiResult<ObjectRef> {
    let v = v.filter(|v| v.type_index == ti::ARRAY && !v.obj_ptr().is_null()).ok_or_else(|| {
        FfiError::type_error(format!(
            "{what}: expected a tuple, got {}",
            v.map_or("nothing".into(), |v| types::type_key(v.type_index))
        ))
    })?;
    // SAFETY: a view of a live array.
    Ok(unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null"))
}

fn call_py_func(a: &[TVMFFIAny]) -> FfiResult<Any> {
    let what = "vm.builtin.call_py_func";
    if a.len() != 1 {
        return Err(FfiError::value(format!("{what} expects exactly 1 argument (tuple), got {}", a.len())));
    }
    let pair = array(what, a.first())?;
    let pair = seq_items(&pair);
    if pair.len() != 2 {
        return Err(FfiError::value(format!(
            "{what} tuple should contain (func_name, args), got {} items",
            pair.len()
        )));
    }
    let f = lookup(&name_arg(what, Some(pair[0].raw()))?)?;
    let args = array(what, Some(pair[1].raw()))?;
    let views: Vec<TVMFFIAny> = seq_items(&args).iter().map(|x| *x.raw()).collect();
    function::call(&f, &views)
}

/// Registers the `call_py_func` globals.
pub(crate) fn register(b: &mut Builder) {
    add_fn(b, "vm.builtin.call_py_func", call_py_func);
    add_fn(b, "vm.builtin.register_py_func", |a| {
        let what = "vm.builtin.register_py_func";
        let name = name_arg(what, a.first())?;
        let f = a
            .get(1)
            .filter(|v| v.type_index == ti::FUNCTION && !v.obj_ptr().is_null())
            .ok_or_else(|| FfiError::type_error(format!("{what}: argument 1 must be a function")))?;
        // SAFETY: a view of a live function object.
        let f = unsafe { ObjectRef::from_borrowed(f.obj_ptr()) }.expect("non-null");
        FUNCS.insert(name, f, true)?;
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.get_py_func", |a| Ok(Any::object(lookup(&name_arg("vm.builtin.get_py_func", a.first())?)?)));
    add_fn(b, "vm.builtin.clear_py_func_registry", |_| {
        FUNCS.clear();
        Ok(Any::none())
    });
}
