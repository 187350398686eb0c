//! The tvm-ffi object model (apache-tvm-ffi 0.1.15, what TVM v0.20+ and its Python package stand
//! on), beside the classic one of crate `tvm-runtime-classic`, which it sits on: the library's
//! second face (`tvm_runtime::tvm_ffi_api`, the `extern "C"` functions of `c_api.h`) is built
//! on this crate.
//!
//! The objects here have tvm-ffi's layouts (a 24-byte header, `TVMFFIAny` cells, the cells of
//! `c_api.h` after the header) because C and C++ code compiled against tvm-ffi's headers reads
//! and writes them inline. What is not layout (devices, workspaces, the thread pool, loading
//! libraries) is the same core the classic API uses. The classic globals are seen from here
//! through [`classic_bridge`], and every value conversion between the two object models is in
//! [`classic_values`]. Nothing here exports a C symbol or installs itself in a registry: the
//! face does (it installs [`globals::register_all`] with the Relax VM's globals).

#![warn(unreachable_pub)]

pub mod abi;
pub mod any;
pub mod backtrace;
pub mod bigint;
pub mod classic_bridge;
pub mod classic_values;
pub mod containers;
pub mod dataclass;
pub mod dtype;
pub mod env;
pub mod error;
pub mod function;
pub mod globals;
pub mod hash;
pub mod module;
pub mod object;
pub mod registry;
pub mod runtime_api;
pub mod serialization;
pub mod string;
pub(crate) mod structural;
pub mod tensor;
pub mod types;

pub use any::{Any, TVMFFIAny};
pub use error::{FfiError, FfiResult};
pub use object::ObjectRef;

/// `TVMFFIByteArray`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TVMFFIByteArray {
    /// The bytes (may be null when `size` is 0).
    pub data: *const std::ffi::c_char,
    /// How many.
    pub size: usize,
}

impl TVMFFIByteArray {
    /// No bytes.
    pub const EMPTY: TVMFFIByteArray = TVMFFIByteArray { data: std::ptr::null(), size: 0 };

    /// A view of a Rust slice (valid while the slice is).
    pub fn of(b: &[u8]) -> Self {
        TVMFFIByteArray { data: b.as_ptr().cast(), size: b.len() }
    }
    /// The bytes.
    ///
    /// # Safety
    /// `data` points to `size` readable bytes (or `size` is 0).
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.size == 0 || self.data.is_null() {
            &[]
        } else {
            // SAFETY: by contract.
            unsafe { std::slice::from_raw_parts(self.data.cast(), self.size) }
        }
    }
}

/// `kTVMFFIFieldFlagBitMaskHasDefault`.
pub(crate) const FIELD_HAS_DEFAULT: i64 = 1 << 1;
/// `kTVMFFIFieldFlagBitSetterIsFunctionObj`.
pub(crate) const FIELD_SETTER_IS_FUNCTION_OBJ: i64 = 1 << 11;

/// tvm-ffi's static type indices (`TVMFFITypeIndex`).
pub mod ti {
    /// `kTVMFFIAny`.
    pub(crate) const ANY: i32 = -1;
    /// `kTVMFFINone`.
    pub const NONE: i32 = 0;
    /// `kTVMFFIInt`.
    pub const INT: i32 = 1;
    /// `kTVMFFIBool`.
    pub const BOOL: i32 = 2;
    /// `kTVMFFIFloat`.
    pub const FLOAT: i32 = 3;
    /// `kTVMFFIOpaquePtr`.
    pub const OPAQUE_PTR: i32 = 4;
    /// `kTVMFFIDataType`.
    pub const DATA_TYPE: i32 = 5;
    /// `kTVMFFIDevice`.
    pub const DEVICE: i32 = 6;
    /// `kTVMFFIDLTensorPtr`.
    pub const DLTENSOR_PTR: i32 = 7;
    /// `kTVMFFIRawStr`.
    pub(crate) const RAW_STR: i32 = 8;
    /// `kTVMFFIByteArrayPtr`.
    pub(crate) const BYTE_ARRAY_PTR: i32 = 9;
    /// `kTVMFFIObjectRValueRef`.
    pub(crate) const OBJECT_RVALUE_REF: i32 = 10;
    /// `kTVMFFISmallStr`.
    pub const SMALL_STR: i32 = 11;
    /// `kTVMFFISmallBytes`.
    pub(crate) const SMALL_BYTES: i32 = 12;
    /// `kTVMFFIUnchanged`.
    pub(crate) const UNCHANGED: i32 = 13;
    /// `kTVMFFIStaticObjectBegin`.
    pub(crate) const STATIC_OBJECT_BEGIN: i32 = 64;
    /// `kTVMFFIObject`.
    pub const OBJECT: i32 = 64;
    /// `kTVMFFIStr`.
    pub const STR: i32 = 65;
    /// `kTVMFFIBytes`.
    pub const BYTES: i32 = 66;
    /// `kTVMFFIError`.
    pub(crate) const ERROR: i32 = 67;
    /// `kTVMFFIFunction`.
    pub const FUNCTION: i32 = 68;
    /// `kTVMFFIShape`.
    pub const SHAPE: i32 = 69;
    /// `kTVMFFITensor`.
    pub const TENSOR: i32 = 70;
    /// `kTVMFFIArray`.
    pub const ARRAY: i32 = 71;
    /// `kTVMFFIMap`.
    pub const MAP: i32 = 72;
    /// `kTVMFFIModule`.
    pub const MODULE: i32 = 73;
    /// `kTVMFFIOpaquePyObject`.
    pub const OPAQUE_PY_OBJECT: i32 = 74;
    /// `kTVMFFIList`.
    pub const LIST: i32 = 75;
    /// `kTVMFFIDict`.
    pub(crate) const DICT: i32 = 76;
    /// `kTVMFFIVisitInterrupt`.
    pub(crate) const VISIT_INTERRUPT: i32 = 77;
    /// `kTVMFFIBigInt`.
    pub(crate) const BIG_INT: i32 = 78;
    /// `kTVMFFIDynObjectBegin`.
    pub(crate) const DYN_OBJECT_BEGIN: i32 = 128;

    /// The POD types' keys, as tvm-ffi registers them.
    pub(crate) const POD_KEYS: &[(&str, i32)] = &[
        ("None", NONE),
        ("int", INT),
        ("bool", BOOL),
        ("float", FLOAT),
        ("void*", OPAQUE_PTR),
        ("DataType", DATA_TYPE),
        ("Device", DEVICE),
        ("DLTensor*", DLTENSOR_PTR),
        ("const char*", RAW_STR),
        ("TVMFFIByteArray*", BYTE_ARRAY_PTR),
        ("ObjectRValueRef", OBJECT_RVALUE_REF),
        ("ffi.SmallStr", SMALL_STR),
        ("ffi.SmallBytes", SMALL_BYTES),
        ("ffi.Unchanged", UNCHANGED),
    ];
    /// The static object types' keys (all children of `ffi.Object`), in tvm-ffi's order.
    pub(crate) const OBJECT_KEYS: &[(&str, i32)] = &[
        ("ffi.String", STR),
        ("ffi.BigInt", BIG_INT),
        ("ffi.Bytes", BYTES),
        ("ffi.Error", ERROR),
        ("ffi.Function", FUNCTION),
        ("ffi.Shape", SHAPE),
        ("ffi.Tensor", TENSOR),
        ("ffi.Array", ARRAY),
        ("ffi.List", LIST),
        ("ffi.Map", MAP),
        ("ffi.Dict", DICT),
        ("ffi.Module", MODULE),
        ("ffi.OpaquePyObject", OPAQUE_PY_OBJECT),
    ];
}

#[cfg(test)]
mod tests;

/// The unit tests of this crate run with its globals and the classic crate's installed, as the
/// library's face installs them when it loads.
#[cfg(test)]
#[used]
#[link_section = ".init_array"]
static INSTALL_FOR_TESTS: extern "C" fn() = {
    extern "C" fn run() {
        tvm_runtime_classic::registry::install_builtins(tvm_runtime_classic::globals::register_builtins);
        registry::install_builtins(globals::register_all);
    }
    run
};
