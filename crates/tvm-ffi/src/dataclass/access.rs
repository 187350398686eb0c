//! What the dataclass operations need of the containers, strings and shapes: reached through
//! the container globals (`ffi.List`, `ffi.MapForwardIterFunctor`, ...) so that the container
//! layouts stay the containers' business.

use crate::any::{Any, TVMFFIAny};
use crate::containers::array::seq_items;
use crate::containers::map;
use crate::object::ObjectRef;
use crate::{function, registry, string, ti, FfiError, FfiResult};

/// Calls a global function with owned arguments.
pub fn call_global(name: &str, args: &[Any]) -> FfiResult<Any> {
    let f = registry::get(name).ok_or_else(|| FfiError::runtime(format!("global function `{name}` is missing")))?;
    function::call_any(&f, args)
}

/// The elements of an `ffi.Array` or `ffi.List`.
pub fn seq(o: &ObjectRef) -> Vec<Any> {
    seq_items(o).to_vec()
}

/// The entries of an `ffi.Map` or `ffi.Dict`, in iteration order.
pub fn map_items(o: &ObjectRef) -> FfiResult<Vec<(Any, Any)>> {
    map::map_items(o)
}

/// The value at `key` in an `ffi.Map` or `ffi.Dict`.
pub fn map_get(o: &ObjectRef, key: &Any) -> FfiResult<Option<Any>> {
    map::map_get(o, key)
}

/// Makes a container (`ffi.Array`, `ffi.List`, `ffi.Map`, `ffi.Dict`; maps from key, value,
/// key, value...).
pub fn make(name: &str, items: Vec<Any>) -> FfiResult<Any> {
    let pairs = |items: Vec<Any>| {
        let mut it = items.into_iter();
        let mut out = Vec::new();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            out.push((k, v));
        }
        out
    };
    Ok(Any::object(match name {
        "ffi.Array" => crate::containers::array::make_array(items),
        "ffi.List" => crate::containers::list::make_list(items),
        "ffi.Map" => map::make_map(pairs(items))?,
        "ffi.Dict" => map::make_dict(pairs(items))?,
        _ => return call_global(name, &items),
    }))
}

/// The bytes of a string or bytes value (small or object).
pub fn str_bytes(v: &TVMFFIAny) -> &[u8] {
    // SAFETY: an owned value's bytes live as long as the value.
    unsafe { string::view_str_bytes(v) }.unwrap_or(&[])
}

/// Whether the index is a string type.
pub(crate) fn is_str(t: i32) -> bool {
    t == ti::STR || t == ti::SMALL_STR
}

/// Whether the index is a bytes type.
pub(crate) fn is_bytes(t: i32) -> bool {
    t == ti::BYTES || t == ti::SMALL_BYTES
}

/// The dimensions of an `ffi.Shape`.
pub fn shape_dims(o: &ObjectRef) -> &[i64] {
    crate::containers::shape::shape_dims(o)
}

/// Whether a type is `ffi.Enum` or derives from it.
pub(crate) fn is_enum(type_index: i32) -> bool {
    crate::types::key_to_index("ffi.Enum").is_some_and(|e| crate::types::is_instance(type_index, e))
}

/// A type attribute's function for a type, if registered.
pub(crate) fn attr_fn(name: &str, type_index: i32) -> Option<ObjectRef> {
    crate::types::attr_value(name, type_index)
        .and_then(|v| v.into_object().ok())
        .filter(|o| o.type_index() == ti::FUNCTION)
}

/// The type-key hash of a type (`type_key_hash` of its info).
pub(crate) fn type_key_hash(type_index: i32) -> u64 {
    // SAFETY: type infos live for the process.
    crate::types::type_info(type_index).map_or(0, |i| unsafe { (*i).type_key_hash })
}

/// Fails (instead of overflowing the stack) when a recursive traversal nears the end of the
/// thread's stack: object graphs nested tens of thousands deep.
pub(crate) fn check_stack(what: &str) -> FfiResult<()> {
    if tvm_runtime_classic::threading::stack::near_end() {
        return Err(FfiError::value(format!(
            "{what}: maximum traversal depth exceeded (the object graph is nested too deep)"
        )));
    }
    Ok(())
}
