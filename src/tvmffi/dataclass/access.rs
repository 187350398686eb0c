//! What the dataclass operations need of the containers, strings and shapes: reached through
//! the container globals (`ffi.List`, `ffi.MapForwardIterFunctor`, ...) so that the container
//! layouts stay the containers' business.

use crate::tvmffi::any::{Any, TVMFFIAny};
use crate::tvmffi::containers::array::seq_items;
use crate::tvmffi::object::ObjectRef;
use crate::tvmffi::{function, registry, string, ti, FfiError, FfiResult};

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
    let dict = o.type_index() == ti::DICT;
    let size = call_global(if dict { "ffi.DictSize" } else { "ffi.MapSize" }, &[Any::object(o.clone())])?
        .as_i64()
        .unwrap_or(0);
    let mut out = Vec::with_capacity(size.max(0) as usize);
    if size <= 0 {
        return Ok(out);
    }
    let it = call_global(
        if dict { "ffi.DictForwardIterFunctor" } else { "ffi.MapForwardIterFunctor" },
        &[Any::object(o.clone())],
    )?
    .into_object()
    .map_err(|_| FfiError::runtime("map iterator is not a function"))?;
    for _ in 0..size {
        let k = function::call_any(&it, &[Any::int(0)])?;
        let v = function::call_any(&it, &[Any::int(1)])?;
        out.push((k, v));
        if !function::call_any(&it, &[Any::int(2)])?.as_bool().unwrap_or(false) {
            break;
        }
    }
    Ok(out)
}

/// The value at `key` in an `ffi.Map` or `ffi.Dict`.
pub fn map_get(o: &ObjectRef, key: &Any) -> FfiResult<Option<Any>> {
    let dict = o.type_index() == ti::DICT;
    let v = call_global(
        if dict { "ffi.DictGetItemOrMissing" } else { "ffi.MapGetItemOrMissing" },
        &[Any::object(o.clone()), key.clone()],
    )?;
    let missing = crate::tvmffi::globals::missing_object();
    Ok((!(v.raw().is_object() && v.raw().obj_ptr() == missing.raw().obj_ptr())).then_some(v))
}

/// Makes a container through its global (`ffi.List`, `ffi.Map`, `ffi.Dict`, `ffi.Array`).
pub fn make(name: &str, items: Vec<Any>) -> FfiResult<Any> {
    if name == "ffi.Array" {
        return Ok(Any::object(crate::tvmffi::containers::array::make_array(items)));
    }
    call_global(name, &items)
}

/// The bytes of a string or bytes value (small or object).
pub fn str_bytes(v: &TVMFFIAny) -> &[u8] {
    // SAFETY: an owned value's bytes live as long as the value.
    unsafe { string::view_str_bytes(v) }.unwrap_or(&[])
}

/// Whether the index is a string type.
pub fn is_str(t: i32) -> bool {
    t == ti::STR || t == ti::SMALL_STR
}

/// Whether the index is a bytes type.
pub fn is_bytes(t: i32) -> bool {
    t == ti::BYTES || t == ti::SMALL_BYTES
}

/// The dimensions of an `ffi.Shape` (header, then a data pointer and a size).
pub fn shape_dims(o: &ObjectRef) -> &[i64] {
    #[repr(C)]
    struct ShapeCell {
        data: *const i64,
        size: usize,
    }
    // SAFETY: a shape object holds this cell after the header, pointing to `size` dimensions.
    unsafe {
        let c = o.payload::<ShapeCell>();
        if c.data.is_null() || c.size == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(c.data, c.size)
        }
    }
}

/// Whether a type is `ffi.Enum` or derives from it.
pub fn is_enum(type_index: i32) -> bool {
    crate::tvmffi::types::key_to_index("ffi.Enum").is_some_and(|e| crate::tvmffi::types::is_instance(type_index, e))
}

/// A type attribute's function for a type, if registered.
pub fn attr_fn(name: &str, type_index: i32) -> Option<ObjectRef> {
    crate::tvmffi::types::attr_value(name, type_index)
        .and_then(|v| v.into_object().ok())
        .filter(|o| o.type_index() == ti::FUNCTION)
}

/// The type-key hash of a type (`type_key_hash` of its info).
pub fn type_key_hash(type_index: i32) -> u64 {
    // SAFETY: type infos live for the process.
    crate::tvmffi::types::type_info(type_index).map_or(0, |i| unsafe { (*i).type_key_hash })
}

thread_local! {
    /// The lowest stack address this thread's traversals may reach (0: not known yet).
    static STACK_FLOOR: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Room kept free below a traversal frame (for the calls it makes: hooks, setters, allocation).
const STACK_RESERVE: usize = 512 << 10;

fn stack_floor() -> usize {
    // SAFETY: pthread_getattr_np fills `attr` for the calling thread; it is destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 1;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 || addr.is_null() {
            return 1;
        }
        addr as usize + STACK_RESERVE.min(size / 2)
    }
}

/// Fails (instead of overflowing the stack) when a recursive traversal nears the end of the
/// thread's stack: object graphs nested tens of thousands deep.
pub fn check_stack(what: &str) -> FfiResult<()> {
    let floor = STACK_FLOOR.with(|f| {
        if f.get() == 0 {
            f.set(stack_floor());
        }
        f.get()
    });
    let marker = 0u8;
    let here = std::ptr::addr_of!(marker) as usize;
    if here < floor {
        return Err(FfiError::value(format!(
            "{what}: maximum traversal depth exceeded (the object graph is nested too deep)"
        )));
    }
    Ok(())
}
