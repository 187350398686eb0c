//! The `__ffi_convert__` type attributes of the built-in object types and the enum types
//! (`def_convert` in tvm-ffi's `object.cc`): a function taking any value and returning it as the
//! type (the container conversions make a new container), or raising "Cannot cast".

use super::access;
use crate::any::Any;
use crate::globals::arg_any;
use crate::{function, ti, types, FfiError, FfiResult};

fn cannot(v: &Any, to: &str) -> FfiError {
    FfiError::type_error(format!("Cannot cast from `{}` to `{to}`", types::type_key(v.type_index())))
}

fn convert(target: i32, to: &str, v: Any) -> FfiResult<Any> {
    let t = v.type_index();
    let obj = v.as_object();
    let ok = match target {
        ti::OBJECT => t == ti::NONE || (t >= ti::STATIC_OBJECT_BEGIN),
        ti::FUNCTION | ti::TENSOR => t == ti::NONE || t == target,
        ti::STR => t == ti::STR || t == ti::SMALL_STR,
        ti::BYTES => t == ti::BYTES || t == ti::SMALL_BYTES,
        _ => obj.as_ref().is_some_and(|o| o.is_instance(target)),
    };
    if ok {
        return Ok(v);
    }
    let Some(o) = obj else { return Err(cannot(&v, to)) };
    match (target, t) {
        (ti::ARRAY, ti::LIST) => access::make("ffi.Array", access::seq(&o)),
        (ti::LIST, ti::ARRAY) => access::make("ffi.List", access::seq(&o)),
        (ti::MAP, ti::DICT) | (ti::DICT, ti::MAP) => {
            let items = access::map_items(&o)?.into_iter().flat_map(|(k, x)| [k, x]).collect();
            access::make(if target == ti::MAP { "ffi.Map" } else { "ffi.Dict" }, items)
        }
        (ti::SHAPE, ti::ARRAY | ti::LIST) => {
            let dims: Option<Vec<i64>> =
                access::seq(&o).iter().map(|x| (x.type_index() == ti::INT).then(|| x.as_i64()).flatten()).collect();
            let dims = dims.ok_or_else(|| cannot(&v, to))?;
            Ok(Any::object(crate::containers::shape::make_shape(&dims)))
        }
        _ => Err(cannot(&v, to)),
    }
}

/// Registers `__ffi_convert__` on the built-in types and the enum types.
pub(crate) fn register_converters() {
    let mut targets: Vec<(i32, String)> = vec![
        (ti::OBJECT, "ffi.Object".into()),
        (ti::STR, "str".into()),
        (ti::BYTES, "bytes".into()),
        (ti::ERROR, "ffi.Error".into()),
        (ti::FUNCTION, "ffi.Function".into()),
        (ti::SHAPE, "ffi.Shape".into()),
        (ti::TENSOR, "ffi.Tensor".into()),
        (ti::ARRAY, "Array<Any>".into()),
        (ti::MAP, "Map<Any, Any>".into()),
        (ti::LIST, "List<Any>".into()),
        (ti::DICT, "Dict<Any, Any>".into()),
    ];
    for k in ["ffi.IntEnum", "ffi.StrEnum"] {
        if let Some(i) = types::key_to_index(k) {
            targets.push((i, k.into()));
        }
    }
    for (target, name) in targets {
        if types::attr_value("__ffi_convert__", target).is_some() {
            continue;
        }
        let f = function::from_fn(move |a| convert(target, &name, arg_any("__ffi_convert__", a, 0)?));
        let _ = types::register_attr(target, "__ffi_convert__", Any::object(f).raw());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_like_def_convert() {
        assert!(convert(ti::STR, "str", Any::int(1)).is_err());
        assert_eq!(convert(ti::STR, "str", Any::string("x")).unwrap().as_str(), Some("x"));
        assert!(convert(ti::OBJECT, "ffi.Object", Any::none()).unwrap().is_none());
        let e = convert(ti::ARRAY, "Array<Any>", Any::none()).unwrap_err();
        assert_eq!(e.message(), "Cannot cast from `None` to `Array<Any>`");
    }
}
