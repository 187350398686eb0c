//! The `runtime.*` (and `device_api.*`, `__tvm_set_device`, `cache_flush_cpu_non_first_arg`,
//! `tvm.runtime.threading.set_current_thread_affinity`)
//! globals that TVM v0.27's `libtvm_runtime` puts in the tvm-ffi registry and that its Python
//! package calls for tensors (`tvm/runtime/_tensor.py`), devices (`device.py`), timing
//! (`module.py`'s `time_evaluator`) and parameter blobs (`params.py`), over the same core as the
//! classic API (the device APIs of [`tvm_runtime_classic::device`], [`tvm_runtime_classic::ndarray`]).
//!
//! Arguments are converted as tvm-ffi's typed C++ functions convert them, and a wrong argument
//! gets the same message naming the function's signature (see [`Sig`]). Failed `ICHECK`s of
//! the C++ are `InternalError`s with its wording; what the C++ would crash on (NULL pointers,
//! negative extents, unknown device types) is a clear error here.

mod device;
mod params;
mod tensor;
mod timer;

use super::any::{view_as_i64, Any, TVMFFIAny};
use super::containers::array::seq_items;
use super::containers::shape::shape_dims;
use super::object::ObjectRef;
use super::registry::Builder;
use super::{string, ti, types, FfiError, FfiResult};
use std::ffi::c_void;
use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLTensor};

pub use device::{api, device_type_name, get_api};
pub use tensor::{alloc_with_scope, copy_from_bytes, copy_from_to, copy_to_bytes, create_view, data_size};

/// Adds the globals.
pub fn register(b: &mut Builder) {
    tensor::register(b);
    device::register(b);
    timer::register(b);
    params::register(b);
}

/// An `InternalError` with the wording of a failed `TVM_FFI_ICHECK` (`Check failed: ...`).
pub(crate) fn check_failed(what: impl std::fmt::Display) -> FfiError {
    FfiError::new("InternalError", format!("Check failed: {what}"))
}

/// The signature of a global as tvm-ffi prints it in argument errors, e.g.
/// `runtime.TVMTensorCopyFromTo(0: DLTensor*, 1: DLTensor*) -> void`, and the argument
/// conversions of its parameter types.
#[derive(Clone, Copy)]
pub(crate) struct Sig {
    /// The global's name.
    pub name: &'static str,
    /// The parameter types, as tvm-ffi names them.
    pub params: &'static [&'static str],
    /// The return type.
    pub ret: &'static str,
}

impl Sig {
    /// `name(0: T0, 1: T1) -> R`.
    pub(crate) fn text(&self) -> String {
        let ps: Vec<String> = self.params.iter().enumerate().map(|(i, p)| format!("{i}: {p}")).collect();
        format!("{}({}) -> {}", self.name, ps.join(", "), self.ret)
    }
    /// Checks the argument count.
    pub(crate) fn check_count(&self, args: &[TVMFFIAny]) -> FfiResult<()> {
        if args.len() != self.params.len() {
            return Err(FfiError::type_error(format!(
                "Mismatched number of arguments when calling: `{}`. Expected {} but got {} arguments",
                self.text(),
                self.params.len(),
                args.len()
            )));
        }
        Ok(())
    }
    /// The error for argument `i` of the wrong type.
    pub(crate) fn mismatch(&self, args: &[TVMFFIAny], i: usize) -> FfiError {
        let got = args.get(i).map_or_else(|| "nothing".to_string(), |a| types::type_key(a.type_index));
        FfiError::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{}`. Expected `{}` but got `{got}`",
            self.text(),
            self.params.get(i).copied().unwrap_or("?")
        ))
    }
    fn arg<'a>(&self, args: &'a [TVMFFIAny], i: usize) -> FfiResult<&'a TVMFFIAny> {
        args.get(i).ok_or_else(|| self.mismatch(args, i))
    }
    /// An integer (int or bool).
    pub(crate) fn int(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<i64> {
        view_as_i64(self.arg(args, i)?).ok_or_else(|| self.mismatch(args, i))
    }
    /// A C++ `int`: an integer that fits 32 bits.
    pub(crate) fn i32(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<i32> {
        let v = self.int(args, i)?;
        i32::try_from(v)
            .map_err(|_| FfiError::value(format!("`{}`: argument #{i} ({v}) does not fit a 32-bit int", self.name)))
    }
    /// A size or byte offset (`size_t`, `uint64_t`): a non-negative integer.
    pub(crate) fn size(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<u64> {
        let v = self.int(args, i)?;
        u64::try_from(v)
            .map_err(|_| FfiError::value(format!("`{}`: argument #{i} must not be negative, got {v}", self.name)))
    }
    /// A `void*`: an opaque pointer, or None for NULL.
    pub(crate) fn ptr(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<*mut c_void> {
        let v = self.arg(args, i)?;
        match v.type_index {
            ti::OPAQUE_PTR => Ok(v.obj_ptr().cast()),
            ti::NONE => Ok(std::ptr::null_mut()),
            _ => Err(self.mismatch(args, i)),
        }
    }
    /// A `DLTensor*`: a raw tensor pointer or an `ffi.Tensor` (whose DLTensor is borrowed for
    /// the call).
    pub(crate) fn dltensor<'a>(&self, args: &'a [TVMFFIAny], i: usize) -> FfiResult<&'a DLTensor> {
        let v = self.arg(args, i)?;
        let p: *const DLTensor = match v.type_index {
            ti::DLTENSOR_PTR => v.obj_ptr().cast(),
            t if t >= ti::STATIC_OBJECT_BEGIN && types::is_instance(t, ti::TENSOR) => {
                if v.obj_ptr().is_null() {
                    std::ptr::null()
                } else {
                    // SAFETY: a (non-null) tensor object has its DLTensor after the header.
                    unsafe { super::tensor::dltensor(v.obj_ptr()) }
                }
            }
            _ => return Err(self.mismatch(args, i)),
        };
        // SAFETY: a DLTensor* argument points to a tensor valid for the call.
        unsafe { p.as_ref() }
            .ok_or_else(|| FfiError::value(format!("`{}`: argument #{i} is a NULL DLTensor*", self.name)))
    }
    /// An `ffi.Tensor` object.
    pub(crate) fn tensor(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<ObjectRef> {
        let v = self.arg(args, i)?;
        if v.type_index < ti::STATIC_OBJECT_BEGIN || !types::is_instance(v.type_index, ti::TENSOR) {
            return Err(self.mismatch(args, i));
        }
        // SAFETY: argument cells are valid views; an object cell points to a live object.
        unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.ok_or_else(|| self.mismatch(args, i))
    }
    /// A `DLDataType`: a data type, or its text form.
    pub(crate) fn dtype(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<DLDataType> {
        let v = self.arg(args, i)?;
        if v.type_index == ti::DATA_TYPE {
            // SAFETY: the union is read as the variant the type index names.
            return Ok(unsafe { v.v.v_dtype });
        }
        match self.opt_str(args, i)? {
            Some(s) => super::dtype::parse(s),
            None => Err(self.mismatch(args, i)),
        }
    }
    /// A `Device`.
    pub(crate) fn device(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<DLDevice> {
        let v = self.arg(args, i)?;
        if v.type_index != ti::DEVICE {
            return Err(self.mismatch(args, i));
        }
        // SAFETY: as above.
        Ok(unsafe { v.v.v_device })
    }
    /// An `ffi.Shape`, or (tvm-ffi's fallback) an array of integers.
    pub(crate) fn shape(&self, args: &[TVMFFIAny], i: usize) -> FfiResult<Vec<i64>> {
        // SAFETY: argument cells are valid views.
        let a = unsafe { Any::from_view(self.arg(args, i)?) }?;
        match a.as_object() {
            Some(o) if o.type_index() == ti::SHAPE => Ok(shape_dims(&o).to_vec()),
            Some(o) if o.type_index() == ti::ARRAY => {
                seq_items(&o).iter().map(|x| x.as_i64().ok_or_else(|| self.mismatch(args, i))).collect()
            }
            _ => Err(self.mismatch(args, i)),
        }
    }
    /// A string, or None (`Optional<String>`); anything else is a mismatch.
    pub(crate) fn opt_str<'a>(&self, args: &'a [TVMFFIAny], i: usize) -> FfiResult<Option<&'a str>> {
        let v = self.arg(args, i)?;
        if v.type_index == ti::NONE {
            return Ok(None);
        }
        // SAFETY: argument cells are valid views, alive for the call.
        let b = unsafe { string::view_str_bytes(v) }.ok_or_else(|| self.mismatch(args, i))?;
        if v.type_index == ti::BYTES || v.type_index == ti::SMALL_BYTES || v.type_index == ti::BYTE_ARRAY_PTR {
            return Err(self.mismatch(args, i));
        }
        std::str::from_utf8(b)
            .map(Some)
            .map_err(|_| FfiError::value(format!("`{}`: argument #{i} is not UTF-8", self.name)))
    }
    /// A string.
    pub(crate) fn str<'a>(&self, args: &'a [TVMFFIAny], i: usize) -> FfiResult<&'a str> {
        self.opt_str(args, i)?.ok_or_else(|| self.mismatch(args, i))
    }
    /// Bytes (`ffi.Bytes`; strings are accepted as their UTF-8 bytes, as tvm-ffi does).
    pub(crate) fn bytes<'a>(&self, args: &'a [TVMFFIAny], i: usize) -> FfiResult<&'a [u8]> {
        // SAFETY: argument cells are valid views, alive for the call.
        unsafe { string::view_str_bytes(self.arg(args, i)?) }.ok_or_else(|| self.mismatch(args, i))
    }
    /// An object of `type_index` (or a descendant), or None.
    pub(crate) fn opt_object(&self, args: &[TVMFFIAny], i: usize, type_index: i32) -> FfiResult<Option<ObjectRef>> {
        let v = self.arg(args, i)?;
        if v.type_index == ti::NONE {
            return Ok(None);
        }
        if v.type_index < ti::STATIC_OBJECT_BEGIN || !types::is_instance(v.type_index, type_index) {
            return Err(self.mismatch(args, i));
        }
        // SAFETY: as above.
        Ok(unsafe { ObjectRef::from_borrowed(v.obj_ptr()) })
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::super::{function, registry};
    use super::*;

    /// Calls a global with owned arguments.
    pub(crate) fn call(name: &str, args: &[Any]) -> FfiResult<Any> {
        let f = registry::get(name).unwrap_or_else(|| panic!("global {name} is not registered"));
        function::call_any(&f, args)
    }

    /// The CPU.
    pub(crate) fn cpu() -> Any {
        Any::device(DLDevice { device_type: 1, device_id: 0 })
    }

    /// An `ffi.Shape`.
    pub(crate) fn shape(dims: &[i64]) -> Any {
        Any::object(super::super::containers::shape::make_shape(dims))
    }

    /// A new CPU tensor of `dtype` holding `bytes`.
    pub(crate) fn tensor_of(dims: &[i64], dtype: &str, bytes: &[u8]) -> Any {
        let t = call("runtime.TVMTensorAllocWithScope", &[shape(dims), Any::string(dtype), cpu(), Any::none()])
            .expect("alloc");
        call(
            "runtime.TVMTensorCopyFromBytes",
            &[t.clone(), Any::opaque_ptr(bytes.as_ptr().cast_mut().cast()), Any::int(bytes.len() as i64)],
        )
        .expect("copy in");
        t
    }

    /// The bytes of a tensor.
    pub(crate) fn bytes_of(t: &Any) -> Vec<u8> {
        let o = t.as_object().expect("a tensor");
        // SAFETY: a live tensor.
        let n = data_size(unsafe { super::super::tensor::dltensor(o.as_ptr()) }).expect("size");
        let mut out = vec![0u8; n];
        call(
            "runtime.TVMTensorCopyToBytes",
            &[t.clone(), Any::opaque_ptr(out.as_mut_ptr().cast()), Any::int(n as i64)],
        )
        .expect("copy out");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn signature_errors_name_the_function_and_types() {
        let e = call("runtime.TVMTensorCopyFromTo", &[Any::none()]).unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert_eq!(
            e.message(),
            "Mismatched number of arguments when calling: `runtime.TVMTensorCopyFromTo(0: DLTensor*, 1: DLTensor*) \
             -> void`. Expected 2 but got 1 arguments"
        );
        let t = tensor_of(&[2], "int8", &[1, 2]);
        let e = call("runtime.TVMTensorCopyFromTo", &[t, Any::none()]).unwrap_err();
        assert_eq!(
            e.message(),
            "Mismatched type on argument #1 when calling: `runtime.TVMTensorCopyFromTo(0: DLTensor*, 1: DLTensor*) \
             -> void`. Expected `DLTensor*` but got `None`"
        );
        let e = call("runtime.TVMTensorCopyFromBytes", &[Any::int(3), Any::none(), Any::int(0)]).unwrap_err();
        assert!(e.message().contains("Expected `DLTensor*` but got `int`"), "{}", e.message());
    }

    #[test]
    fn every_global_is_registered() {
        for n in [
            "runtime.TVMTensorAllocWithScope",
            "runtime.TVMTensorCopyFromBytes",
            "runtime.TVMTensorCopyToBytes",
            "runtime.TVMTensorCopyFromTo",
            "runtime.TVMTensorCreateView",
            "runtime.TVMTensorIsStorageShared",
            "runtime.GetDeviceAttr",
            "runtime.Device_StreamCreate",
            "runtime.Device_StreamFree",
            "runtime.Device_SetStream",
            "runtime.Device_StreamSync",
            "runtime.Device_StreamSyncFromTo",
            "runtime.TVMSetStream",
            "runtime.RuntimeEnabled",
            "runtime.NumThreads",
            "runtime.config_threadpool",
            "tvm.runtime.threading.set_current_thread_affinity",
            "device_api.cpu",
            "__tvm_set_device",
            "runtime.RPCTimeEvaluator",
            "cache_flush_cpu_non_first_arg",
            "runtime.SaveParams",
            "runtime.SaveParamsToFile",
            "runtime.LoadParams",
            "runtime.LoadParamsFromFile",
        ] {
            assert!(super::super::registry::get(n).is_some(), "{n}");
        }
    }
}
