//! The `ffi.*` global functions of this crate (installed in the registry by the library's face,
//! `tvm_runtime::init`, with those of the crates above this one).

use super::any::{Any, TVMFFIAny};
use super::registry::{self, Builder};
use super::{string, types, FfiError, FfiResult};

/// Adds every built-in global of this crate.
pub fn register_all(b: &mut Builder) {
    // Called by C++ types' static initializers (an error there aborts the process): accepted,
    // and the auto-generated `__ffi_init__` is registered once dataclasses are built.
    b.add("ffi._RegisterFFIInit", |_| Ok(Any::none()));
    register_core(b);
    super::containers::register(b);
    super::tensor::register(b);
    super::bigint::register(b);
    super::module::register(b);
    super::dataclass::register(b);
    super::structural::register(b);
    super::serialization::register(b);
    super::runtime_api::register(b);
    super::classic_bridge::register(b);
    // What no subsystem provides yet raises a clear error (the Python package binds every
    // `ffi.*` name at import).
    for name in PENDING {
        if !b.has(name) {
            b.add(name, move |_| Err(FfiError::runtime(format!("{name} is not implemented by this library yet"))));
        }
    }
}

/// The `ffi.*` globals of apache-tvm-ffi 0.1.15 whose subsystem is not built yet: each raises a
/// clear error naming itself (the Python package binds every `ffi.*` name at import).
const PENDING: &[&str] = &[
    "ffi.Array",
    "ffi.ArrayContains",
    "ffi.ArrayGetItem",
    "ffi.ArraySize",
    "ffi.ContainerFindFirstNonCPUDevice",
    "ffi.DeepCopy",
    "ffi.Dict",
    "ffi.DictClear",
    "ffi.DictCount",
    "ffi.DictErase",
    "ffi.DictForwardIterFunctor",
    "ffi.DictGetItem",
    "ffi.DictGetItemOrMissing",
    "ffi.DictSetItem",
    "ffi.DictSize",
    "ffi.FromJSONGraph",
    "ffi.FromJSONGraphString",
    "ffi.FunctionFromExternC",
    "ffi.GetFirstStructuralMismatch",
    "ffi.List",
    "ffi.ListAppend",
    "ffi.ListClear",
    "ffi.ListContains",
    "ffi.ListErase",
    "ffi.ListEraseRange",
    "ffi.ListGetItem",
    "ffi.ListInsert",
    "ffi.ListPop",
    "ffi.ListReplaceSlice",
    "ffi.ListReserve",
    "ffi.ListReverse",
    "ffi.ListSetItem",
    "ffi.ListSize",
    "ffi.MakeFieldGetter",
    "ffi.MakeFieldSetter",
    "ffi.MakeObjectFromPackedArgs",
    "ffi.Map",
    "ffi.MapCount",
    "ffi.MapForwardIterFunctor",
    "ffi.MapGetItem",
    "ffi.MapGetItemOrMissing",
    "ffi.MapSize",
    "ffi.Module.load_from_file.so",
    "ffi.ModuleClearImports",
    "ffi.ModuleGetFunction",
    "ffi.ModuleGetFunctionDoc",
    "ffi.ModuleGetFunctionMetadata",
    "ffi.ModuleGetKind",
    "ffi.ModuleGetPropertyMask",
    "ffi.ModuleGetWriteFormats",
    "ffi.ModuleGlobalsAdd",
    "ffi.ModuleGlobalsRemove",
    "ffi.ModuleImplementsFunction",
    "ffi.ModuleImportModule",
    "ffi.ModuleInspectSource",
    "ffi.ModuleLoadFromFile",
    "ffi.ModuleWriteToFile",
    "ffi.RecursiveEq",
    "ffi.RecursiveGe",
    "ffi.RecursiveGt",
    "ffi.RecursiveHash",
    "ffi.RecursiveLe",
    "ffi.RecursiveLt",
    "ffi.ReprPrint",
    "ffi.Shape",
    "ffi.StructuralEqual",
    "ffi.StructuralHash",
    "ffi.StructuralKey",
    "ffi.StructuralKeyEqual",
    "ffi.StructuralMap",
    "ffi.StructuralMutate",
    "ffi.StructuralMutatorDefRegionKind",
    "ffi.StructuralMutatorDefaultMutate",
    "ffi.StructuralMutatorMutate",
    "ffi.StructuralMutatorVarRemapGet",
    "ffi.StructuralMutatorVarRemapSet",
    "ffi.StructuralMutatorWithDefRegionKind",
    "ffi.StructuralVisit",
    "ffi.StructuralVisitorDefRegionKind",
    "ffi.StructuralVisitorDefaultVisit",
    "ffi.StructuralVisitorVisit",
    "ffi.StructuralVisitorWithDefRegionKind",
    "ffi.StructuralWalk",
    "ffi.SystemLib",
    "ffi.ToJSONGraph",
    "ffi.ToJSONGraphString",
    "ffi.VisitErrorContext.FindAccessPaths",
    "ffi.VisitInterrupt",
    "ffi._PyClassRegisterTypeAttrColumns",
    "ffi.json.Parse",
    "ffi.json.Stringify",
];

/// Checks the argument count of a global.
pub(crate) fn expect_args(name: &str, args: &[TVMFFIAny], n: usize) -> FfiResult<()> {
    if args.len() != n {
        return Err(FfiError::type_error(format!(
            "Mismatched number of arguments when calling: `{name}`. Expected {n} but got {} arguments",
            args.len()
        )));
    }
    Ok(())
}

/// A string argument.
pub fn arg_str<'a>(name: &str, args: &'a [TVMFFIAny], i: usize) -> FfiResult<&'a str> {
    let v = args.get(i).ok_or_else(|| FfiError::type_error(format!("`{name}`: missing argument #{i}")))?;
    // SAFETY: argument cells are valid views for the call's duration.
    let b = unsafe { string::view_str_bytes(v) }.ok_or_else(|| {
        FfiError::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{name}`. Expected `str` but got `{}`",
            types::type_key(v.type_index)
        ))
    })?;
    std::str::from_utf8(b).map_err(|_| FfiError::value(format!("`{name}`: argument #{i} is not UTF-8")))
}

/// An owned copy of an argument.
pub fn arg_any(name: &str, args: &[TVMFFIAny], i: usize) -> FfiResult<Any> {
    let v = args.get(i).ok_or_else(|| FfiError::type_error(format!("`{name}`: missing argument #{i}")))?;
    // SAFETY: argument cells are valid views for the call's duration.
    unsafe { Any::from_view(v) }
}

/// A plain `ffi.Object` that lives for the process (the MISSING and KWARGS markers).
fn singleton(cell: &'static std::sync::OnceLock<super::ObjectRef>) -> Any {
    Any::object(cell.get_or_init(|| super::object::make_object(super::ti::OBJECT, ())).clone())
}

static MISSING: std::sync::OnceLock<super::ObjectRef> = std::sync::OnceLock::new();
static KWARGS: std::sync::OnceLock<super::ObjectRef> = std::sync::OnceLock::new();

/// The `MISSING` marker object (`ffi.GetInvalidObject`).
pub(crate) fn missing_object() -> Any {
    singleton(&MISSING)
}

/// The `KWARGS` marker object (`ffi.GetKwargsObject`).
pub(crate) fn kwargs_object() -> Any {
    singleton(&KWARGS)
}

fn register_core(b: &mut Builder) {
    b.add("ffi.GetInvalidObject", |_| Ok(missing_object()));
    b.add("ffi.GetKwargsObject", |_| Ok(kwargs_object()));
    b.add("ffi.GetRegisteredTypeKeys", |_| {
        let keys = types::registered_keys().iter().map(|k| Any::string(k)).collect();
        Ok(Any::object(super::containers::array::make_array(keys)))
    });
    b.add("ffi.String", |a| {
        expect_args("ffi.String", a, 1)?;
        Ok(Any::string(arg_str("ffi.String", a, 0)?))
    });
    b.add("ffi.Bytes", |a| {
        expect_args("ffi.Bytes", a, 1)?;
        // SAFETY: argument cells are valid views.
        let bytes =
            unsafe { string::view_str_bytes(&a[0]) }.ok_or_else(|| FfiError::type_error("ffi.Bytes expects bytes"))?;
        Ok(Any::bytes(bytes))
    });
    b.add("ffi.FunctionRemoveGlobal", |a| {
        expect_args("ffi.FunctionRemoveGlobal", a, 1)?;
        Ok(Any::bool(registry::remove(arg_str("ffi.FunctionRemoveGlobal", a, 0)?)))
    });
    b.add("ffi.GetGlobalFuncMetadata", |a| {
        expect_args("ffi.GetGlobalFuncMetadata", a, 1)?;
        let n = arg_str("ffi.GetGlobalFuncMetadata", a, 0)?;
        Ok(registry::metadata(n).map(|m| Any::string(&m)).unwrap_or_default())
    });
    b.add("ffi.FunctionListGlobalNamesFunctor", |a| {
        expect_args("ffi.FunctionListGlobalNamesFunctor", a, 0)?;
        // A functor: f(-1) is the count, f(i) the i-th name (a snapshot taken now).
        let names = registry::names();
        Ok(Any::object(super::function::from_fn(move |a| {
            let i =
                a.first().and_then(super::any::view_as_i64).ok_or_else(|| FfiError::type_error("expects an int"))?;
            if i < 0 {
                return Ok(Any::int(names.len() as i64));
            }
            names
                .get(i as usize)
                .map(|n| Any::string(n))
                .ok_or_else(|| FfiError::index(format!("index {i} out of range")))
        })))
    });
}
