//! The AOT metadata (TVM v0.9-v0.19): the C structs `TVMMetadata`, `TVMTensorInfo` and
//! `TVMConstantInfo` that an AOT library's `get_c_metadata()` returns, read once into a
//! [`Metadata`] object, and the `metadata_module` whose `get_metadata` does that.
//!
//! In an AOT export the blob is `AotExecutorFactory > metadata_module > _lib`: the metadata
//! module serializes nothing and, on its first `get_metadata` call, looks `get_c_metadata` up
//! through `TVMBackendGetFuncFromEnv` rules (its imports, then the global registry), calls it
//! with no arguments and takes the `TVMMetadata*` (an opaque handle) it returns.

use crate::abi::DLDataType;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::{Module, ModuleNode};
use crate::ndarray::NDArray;
use crate::object::ObjectRef;
use crate::registry;
use crate::value::{dtype, Value};
use std::any::Any;
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

/// The only metadata layout released (`TVM_METADATA_VERSION`, v0.9 through v0.19).
pub(crate) const METADATA_VERSION: i64 = 1;

/// Largest element count of one metadata array, rank of one tensor and length of one string
/// this reader accepts: far above any real model, and a guard against reading a wrong pointer
/// as a huge array.
const MAX_ITEMS: i64 = 1 << 20;
const MAX_RANK: i64 = 64;
const MAX_STR: usize = 1 << 16;

/// `struct TVMMetadata` (include/tvm/runtime/metadata_types.h).
#[repr(C)]
pub struct TVMMetadata {
    /// [`METADATA_VERSION`].
    pub version: i64,
    /// Inputs of the main function, in argument order.
    pub inputs: *const TVMTensorInfo,
    /// Length of `inputs`.
    pub num_inputs: i64,
    /// Outputs, after the inputs.
    pub outputs: *const TVMTensorInfo,
    /// Length of `outputs`.
    pub num_outputs: i64,
    /// Workspace pools (USMP), after the outputs and the constant pool.
    pub workspace_pools: *const TVMTensorInfo,
    /// Length of `workspace_pools`.
    pub num_workspace_pools: i64,
    /// Constants merged into one pool (USMP).
    pub constant_pools: *const TVMConstantInfo,
    /// Length of `constant_pools`.
    pub num_constant_pools: i64,
    /// The model's name as mangled by the compiler (`tvmgen_default`).
    pub mod_name: *const c_char,
}

/// `struct TVMTensorInfo`.
#[repr(C)]
pub struct TVMTensorInfo {
    /// Name (sanitized by the compiler).
    pub name: *const c_char,
    /// Extents.
    pub shape: *const i64,
    /// Rank.
    pub num_shape: i64,
    /// Element type.
    pub dtype: DLDataType,
}

/// `struct TVMConstantInfo`.
#[repr(C)]
pub struct TVMConstantInfo {
    /// Name.
    pub name_hint: *const c_char,
    /// Offset of the constant in the constant pool.
    pub byte_offset: i64,
    /// Length of `data_bytes`.
    pub data_len: i64,
    /// A serialized NDArray record.
    pub data_bytes: *const c_void,
}

/// One tensor of the metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Name.
    pub name: String,
    /// Extents.
    pub shape: Vec<i64>,
    /// Element type.
    pub dtype: DLDataType,
}

/// One constant of the constant pool.
#[derive(Clone, Debug)]
pub struct ConstantInfo {
    /// Name.
    pub name_hint: String,
    /// Offset in the pool.
    pub byte_offset: usize,
    /// The value (None when the record is empty).
    pub data: Option<NDArray>,
}

/// The metadata of an AOT model (object type `metadata.MetadataNode`), owned: everything the
/// C structs point to is copied.
#[derive(Clone, Debug)]
pub struct Metadata {
    /// [`METADATA_VERSION`].
    pub version: i64,
    /// Inputs.
    pub inputs: Vec<TensorInfo>,
    /// Outputs.
    pub outputs: Vec<TensorInfo>,
    /// Workspace pools.
    pub workspace_pools: Vec<TensorInfo>,
    /// Constant pools.
    pub constant_pools: Vec<ConstantInfo>,
    /// Model name (`tvmgen_default`).
    pub mod_name: String,
}

/// Reads a NUL-terminated string of at most [`MAX_STR`] bytes.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_string(p: *const c_char, what: &str) -> Result<String> {
    if p.is_null() {
        return Err(Error::value(format!("AOT metadata: {what} is NULL")));
    }
    // SAFETY: per contract.
    let s = unsafe { CStr::from_ptr(p) }.to_bytes();
    if s.len() > MAX_STR {
        return Err(Error::value(format!("AOT metadata: {what} is {} bytes long", s.len())));
    }
    Ok(String::from_utf8_lossy(s).into_owned())
}

/// The elements of a C array announced as `n` long.
///
/// # Safety
/// `p` points to `n` elements when `n > 0`.
unsafe fn c_array<'a, T>(p: *const T, n: i64, what: &str) -> Result<&'a [T]> {
    if !(0..=MAX_ITEMS).contains(&n) {
        return Err(Error::value(format!("AOT metadata: {what} has {n} elements")));
    }
    // SAFETY: per contract (`slice_from_raw` refuses NULL with a non-zero length).
    unsafe { crate::value::slice_from_raw(p, n as usize) }
        .map_err(|_| Error::value(format!("AOT metadata: {what} is NULL but has {n} elements")))
}

/// # Safety
/// `t` is a valid `TVMTensorInfo`.
unsafe fn tensor_info(t: &TVMTensorInfo, what: &str) -> Result<TensorInfo> {
    // SAFETY: per contract.
    let name = unsafe { c_string(t.name, &format!("{what} name"))? };
    if t.num_shape > MAX_RANK {
        return Err(Error::value(format!("AOT metadata: {what} {name} has rank {}", t.num_shape)));
    }
    // SAFETY: per contract.
    let shape = unsafe { c_array(t.shape, t.num_shape, &format!("{what} {name} shape"))? }.to_vec();
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(Error::value(format!("AOT metadata: {what} {name} has a negative extent {d}")));
    }
    dtype::format(t.dtype).map_err(|e| e.context(format!("AOT metadata: {what} {name}")))?;
    Ok(TensorInfo { name, shape, dtype: t.dtype })
}

impl Metadata {
    /// Reads the structs behind `p` (the handle `get_c_metadata` returned), checking the
    /// version, counts, ranks and strings.
    ///
    /// # Safety
    /// `p` is NULL or points to a `TVMMetadata` whose pointers are valid, as an AOT library's
    /// `get_c_metadata` returns it (static data of the library, alive during the call).
    pub unsafe fn from_c(p: *const TVMMetadata) -> Result<Metadata> {
        // SAFETY: per contract.
        let m = unsafe { p.as_ref() }.ok_or_else(|| Error::value("get_c_metadata returned nullptr"))?;
        if m.version != METADATA_VERSION {
            return Err(Error::value(format!(
                "AOT metadata version {} is not supported: this runtime reads version {METADATA_VERSION}, \
                 the one TVM v0.9-v0.19 emit",
                m.version
            )));
        }
        let tensors = |p, n, what: &str| -> Result<Vec<TensorInfo>> {
            // SAFETY: per contract, the array holds `n` valid structs.
            let arr = unsafe { c_array::<TVMTensorInfo>(p, n, what)? };
            // SAFETY: as above.
            arr.iter().map(|t| unsafe { tensor_info(t, what) }).collect()
        };
        let inputs = tensors(m.inputs, m.num_inputs, "input")?;
        let outputs = tensors(m.outputs, m.num_outputs, "output")?;
        let workspace_pools = tensors(m.workspace_pools, m.num_workspace_pools, "workspace pool")?;
        // SAFETY: per contract.
        let consts = unsafe { c_array(m.constant_pools, m.num_constant_pools, "constant pool")? };
        let constant_pools = consts
            .iter()
            .map(|c| {
                // SAFETY: per contract.
                let name_hint = unsafe { c_string(c.name_hint, "constant name")? };
                let byte_offset = usize::try_from(c.byte_offset).map_err(|_| {
                    Error::value(format!("AOT metadata: constant {name_hint} at offset {}", c.byte_offset))
                })?;
                let len = usize::try_from(c.data_len)
                    .map_err(|_| Error::value(format!("AOT metadata: constant {name_hint} of {} bytes", c.data_len)))?;
                let data = if len == 0 {
                    None
                } else {
                    // SAFETY: per contract, `data_bytes` holds `data_len` bytes.
                    let bytes = unsafe { crate::value::slice_from_raw(c.data_bytes.cast::<u8>(), len)? };
                    let mut r = crate::io::Reader::new(bytes, "AOT constant");
                    Some(
                        crate::ndarray::serialize::load_ndarray(&mut r)
                            .map_err(|e| e.context(format!("AOT metadata: constant {name_hint}")))?,
                    )
                };
                Ok(ConstantInfo { name_hint, byte_offset, data })
            })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: per contract.
        let mod_name = unsafe { c_string(m.mod_name, "mod_name")? };
        Ok(Metadata { version: m.version, inputs, outputs, workspace_pools, constant_pools, mod_name })
    }

    /// The object type index of metadata objects (`metadata.MetadataNode`).
    pub fn type_index() -> u32 {
        static I: OnceLock<u32> = OnceLock::new();
        *I.get_or_init(|| {
            crate::object::register_type("metadata.MetadataBaseNode", "runtime.Object");
            crate::object::register_type("metadata.MetadataNode", "metadata.MetadataBaseNode")
        })
    }

    /// Wraps the metadata as an object.
    pub fn into_object(self) -> ObjectRef {
        ObjectRef::alloc(Self::type_index(), self)
    }

    /// The metadata of an object made by [`Metadata::into_object`].
    pub fn from_object(o: &ObjectRef) -> Option<&Metadata> {
        // SAFETY: objects of this index are only made by `into_object`, with a `Metadata` body.
        unsafe { o.downcast_index::<Metadata>(Self::type_index()) }
    }
}

/// `get_c_metadata` as `TVMBackendGetFuncFromEnv` finds it for `m`: its imports (each with
/// their imports), then the global registry.
fn find_c_metadata(m: &Module) -> Result<PackedFunc> {
    const NAME: &str = "get_c_metadata";
    for i in m.imports() {
        if let Some(f) = i.get_function(NAME, true)? {
            return Ok(f);
        }
    }
    registry::get(NAME).ok_or_else(|| Error::tvm(format!("Unable to locate {NAME} PackedFunc")))
}

/// The `metadata_module` (type key of TVM v0.9+).
#[derive(Default)]
pub struct MetadataModule {
    metadata: OnceLock<ObjectRef>,
}

impl MetadataModule {
    /// The metadata object, read on the first call.
    pub fn metadata(&self, this: &Module) -> Result<ObjectRef> {
        if let Some(o) = self.metadata.get() {
            return Ok(o.clone());
        }
        let f = find_c_metadata(this)?;
        let handle = match f.call(&[])? {
            Value::Handle(p) => p,
            other => {
                return Err(Error::tvm(format!(
                    "Expected kOpaqueHandle returned; got {}",
                    crate::value::code_name(other.type_code())
                )))
            }
        };
        // SAFETY: `get_c_metadata` of an AOT library returns its static `TVMMetadata`, whose
        // library stays loaded while this module (which imports it) lives.
        let md = unsafe { Metadata::from_c(handle.cast::<TVMMetadata>().cast_const())? };
        Ok(self.metadata.get_or_init(|| md.into_object()).clone())
    }
}

impl ModuleNode for MetadataModule {
    fn type_key(&self) -> &str {
        "metadata_module"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        if name != "get_metadata" {
            return Ok(None);
        }
        let m = this.clone();
        Ok(Some(PackedFunc::from_fn(move |_| match m.downcast::<MetadataModule>() {
            Some(mm) => Ok(Value::Object(mm.metadata(&m)?)),
            None => Err(Error::internal("metadata module expected")),
        })))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        Ok(Vec::new())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
