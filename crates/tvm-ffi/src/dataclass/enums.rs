//! tvm-ffi's enum support (`enum.h`): `ffi.EnumState` (entries: List, indexes: Dict, attrs:
//! Dict; `__ffi_init__` makes an empty state) and the enum singletons `ffi.Enum`
//! (`_int_index`, `_str_index`), `ffi.IntEnum` and `ffi.StrEnum` (`value` aliasing one of them),
//! with the layouts of the C++ classes (C++ enum definitions make and read them inline).

use super::access;
use super::fields::{self, INIT_OFF, SEQ_HASH_IGNORE};
use crate::any::{Any, TVMFFIAny};
use crate::error::safe_call;
use crate::object::{make_object, ObjectRef};
use crate::types::{self, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeMetadata};
use crate::{function, ti, FfiError, FfiResult, TVMFFIByteArray};
use std::ffi::c_void;

/// `EnumStateObj`'s fields after the header.
#[repr(C)]
struct EnumStatePayload {
    entries: Option<ObjectRef>,
    indexes: Option<ObjectRef>,
    attrs: Option<ObjectRef>,
}

/// `EnumObj`'s fields after the header.
#[repr(C)]
struct EnumPayload {
    int_index: i64,
    str_index: Any,
}

const _: () = assert!(std::mem::size_of::<EnumStatePayload>() == 24);
const _: () = assert!(std::mem::size_of::<EnumPayload>() == 24);

fn make_state() -> FfiResult<ObjectRef> {
    let idx =
        types::key_to_index("ffi.EnumState").ok_or_else(|| FfiError::runtime("ffi.EnumState is not registered"))?;
    let obj = |name: &str| -> FfiResult<Option<ObjectRef>> { Ok(access::make(name, Vec::new())?.into_object().ok()) };
    Ok(make_object(
        idx,
        EnumStatePayload { entries: obj("ffi.List")?, indexes: obj("ffi.Dict")?, attrs: obj("ffi.Dict")? },
    ))
}

unsafe extern "C" fn create_state(out: *mut *mut c_void) -> i32 {
    safe_call(|| {
        let o = make_state()?;
        // SAFETY: the caller passes a writable slot.
        unsafe { *out = o.into_raw().cast() };
        Ok(())
    })
}

fn enum_creator(key: &'static str) -> FfiResult<ObjectRef> {
    let idx = types::key_to_index(key).ok_or_else(|| FfiError::runtime(format!("{key} is not registered")))?;
    Ok(make_object(idx, EnumPayload { int_index: 0, str_index: Any::string("") }))
}

macro_rules! creator {
    ($name:ident, $key:literal) => {
        unsafe extern "C" fn $name(out: *mut *mut c_void) -> i32 {
            safe_call(|| {
                let o = enum_creator($key)?;
                // SAFETY: the caller passes a writable slot.
                unsafe { *out = o.into_raw().cast() };
                Ok(())
            })
        }
    };
}
creator!(create_enum, "ffi.Enum");
creator!(create_int_enum, "ffi.IntEnum");
creator!(create_str_enum, "ffi.StrEnum");

unsafe extern "C" fn set_i64(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: the field is an i64; the value a valid view.
        unsafe { fields::write_field_value(field.cast(), ti::INT, Any::from_view(&*value)?) }
    })
}

fn field(
    name: &'static str,
    doc: &'static str,
    schema: &'static str,
    flags: i64,
    size: i64,
    offset: i64,
    sti: i32,
) -> TVMFFIFieldInfo {
    let (getter, setter): (types::FieldGetter, fields::FieldSetter) = match sti {
        ti::INT => (fields::getter_for(ti::INT).expect("int getter"), set_i64),
        ti::ANY => (fields::get_any, fields::set_any),
        _ => (fields::get_objref, fields::set_objref),
    };
    TVMFFIFieldInfo {
        name: TVMFFIByteArray::of(name.as_bytes()),
        doc: TVMFFIByteArray::of(doc.as_bytes()),
        metadata: TVMFFIByteArray::of(schema.as_bytes()),
        flags,
        size,
        alignment: 8,
        offset,
        getter: Some(getter),
        setter: setter as *mut c_void,
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: sti,
    }
}

const INT_SCHEMA: &str = r#"{"type_schema":"{\"type\":\"int\"}"}"#;
const STR_SCHEMA: &str = r#"{"type_schema":"{\"type\":\"ffi.String\"}"}"#;
const INIT_SCHEMA: &str = r#"{"type_schema":"{\"type\":\"ffi.Function\",\"named_args\":{\"return\":[{\"type\":\"ffi.Object\"}],\"params\":[]}}"}"#;

fn metadata(creator: types::ObjectCreator, kind: i32) -> TVMFFITypeMetadata {
    TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: Some(creator),
        total_size: 48,
        structural_eq_hash_kind: kind,
    }
}

/// Registers the enum types' fields, methods, metadata and attributes (once, at start-up).
pub(crate) fn register_types() -> FfiResult<()> {
    let idx = |k: &str| types::key_to_index(k).ok_or_else(|| FfiError::runtime(format!("{k} is not registered")));
    let state = idx("ffi.EnumState")?;
    let base = idx("ffi.Enum")?;
    let int_enum = idx("ffi.IntEnum")?;
    let str_enum = idx("ffi.StrEnum")?;
    if types::type_info(state).is_some_and(|i| {
        // SAFETY: type infos live for the process.
        unsafe { (*i).num_fields > 0 }
    }) {
        return Ok(());
    }
    types::register_field(
        state,
        &field(
            "entries",
            "Enum singletons in registration order.",
            r#"{"type_schema":"{\"type\":\"ffi.List\",\"args\":[{\"type\":\"ffi.Object\"}]}"}"#,
            INIT_OFF,
            8,
            24,
            ti::LIST,
        ),
    )?;
    types::register_field(
        state,
        &field(
            "indexes",
            "Canonical integer and string indices to enum singletons.",
            r#"{"type_schema":"{\"type\":\"ffi.Dict\",\"args\":[{\"type\":\"Any\"},{\"type\":\"ffi.Object\"}]}"}"#,
            INIT_OFF,
            8,
            32,
            ti::OBJECT,
        ),
    )?;
    types::register_field(
        state,
        &field(
            "attrs",
            "Extensible-attribute columns keyed by enum singleton.",
            r#"{"type_schema":"{\"type\":\"ffi.Dict\",\"args\":[{\"type\":\"ffi.String\"},{\"type\":\"ffi.Dict\",\"args\":[{\"type\":\"ffi.Object\"},{\"type\":\"Any\"}]}]}"}"#,
            INIT_OFF,
            8,
            40,
            ti::OBJECT,
        ),
    )?;
    types::register_metadata(state, &metadata(create_state, 0))?;
    let init = Any::object(function::from_fn(|_| Ok(Any::object(make_state()?))));
    types::register_method(
        state,
        &TVMFFIMethodInfo {
            name: TVMFFIByteArray::of(b"__ffi_init__"),
            doc: TVMFFIByteArray::EMPTY,
            metadata: TVMFFIByteArray::of(INIT_SCHEMA.as_bytes()),
            flags: 1 << 2,
            method: *init.raw(),
        },
    )?;
    types::register_attr(state, "__ffi_init__", init.raw())?;
    types::register_field(
        base,
        &field("_int_index", "Canonical integer index.", INT_SCHEMA, SEQ_HASH_IGNORE, 8, 24, ti::INT),
    )?;
    types::register_field(base, &field("_str_index", "Canonical string index.", STR_SCHEMA, 0, 16, 32, ti::ANY))?;
    types::register_metadata(base, &metadata(create_enum, 5))?;
    types::register_field(
        int_enum,
        &field("value", "Canonical integer index.", INT_SCHEMA, INIT_OFF | SEQ_HASH_IGNORE, 8, 24, ti::INT),
    )?;
    types::register_metadata(int_enum, &metadata(create_int_enum, 5))?;
    types::register_field(
        str_enum,
        &field("value", "Canonical string index.", STR_SCHEMA, INIT_OFF | SEQ_HASH_IGNORE, 16, 32, ti::ANY),
    )?;
    types::register_metadata(str_enum, &metadata(create_str_enum, 5))?;
    for t in [base, int_enum, str_enum] {
        let new_fn = Any::object(function::from_fn(move |_| {
            Ok(Any::object(enum_creator(if t == base {
                "ffi.Enum"
            } else if t == int_enum {
                "ffi.IntEnum"
            } else {
                "ffi.StrEnum"
            })?))
        }));
        types::register_attr(t, "__ffi_new__", new_fn.raw())?;
    }
    Ok(())
}
