//! `runtime.TVMTensor*`: allocation, byte copies in and out, tensor to tensor copies, views and
//! the storage-sharing test of TVM v0.27's `src/runtime/tensor.cc`. Sizes are tvm-ffi's
//! `GetDataSize` (`ceil(elements * bits * lanes / 8)`: sub-byte types such as `int4` pack).

use super::super::any::Any;
use super::super::object::ObjectRef;
use super::super::registry::Builder;
use super::super::tensor::{dltensor, is_contiguous};
use super::super::{FfiError, FfiResult};
use super::{api, check_failed, Sig};
use std::ffi::c_void;
use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLTensor};
use tvm_runtime_classic::device::{DeviceApi, CPU, CUDA_HOST, RPC_SESS_MASK};

/// `kDLROCMHost`.
const ROCM_HOST: i32 = 11;

/// The extents of a tensor (empty for a 0-d one).
pub(super) fn dims_of(t: &DLTensor) -> FfiResult<&[i64]> {
    let n =
        usize::try_from(t.ndim).map_err(|_| FfiError::value(format!("ndim must not be negative, got {}", t.ndim)))?;
    if n == 0 {
        return Ok(&[]);
    }
    if t.shape.is_null() {
        return Err(FfiError::value(format!("the shape of a {n}-d tensor is NULL")));
    }
    // SAFETY: a DLTensor's shape holds `ndim` extents.
    Ok(unsafe { std::slice::from_raw_parts(t.shape, n) })
}

/// `ceil(prod(shape) * bits * lanes / 8)` (tvm-ffi's `GetDataSize`), checked.
pub(crate) fn shape_data_size(shape: &[i64], dtype: DLDataType) -> FfiResult<usize> {
    let mut n: u128 = 1;
    for &d in shape {
        let d = u64::try_from(d).map_err(|_| FfiError::value(format!("negative extent {d} in shape {shape:?}")))?;
        n = n.saturating_mul(d as u128);
    }
    let bits = n.saturating_mul(dtype.bits as u128).saturating_mul(dtype.lanes as u128);
    usize::try_from(bits.div_ceil(8))
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| FfiError::value(format!("shape {shape:?} is too large")))
}

/// The byte size of a tensor's data (tvm-ffi's `GetDataSize`).
pub fn data_size(t: &DLTensor) -> FfiResult<usize> {
    shape_data_size(dims_of(t)?, t.dtype)
}

fn fmt_dims(d: &[i64]) -> String {
    let v: Vec<String> = d.iter().map(i64::to_string).collect();
    format!("[{}]", v.join(", "))
}

fn fmt_dtype(t: DLDataType) -> String {
    super::super::dtype::format(t).unwrap_or_else(|_| format!("({}, {}, {})", t.code, t.bits, t.lanes))
}

/// `runtime.TVMTensorAllocWithScope` (`Tensor::Empty`): a new tensor from the device's
/// allocator; the scope None, "" or "global" is flat memory.
pub fn alloc_with_scope(shape: &[i64], dtype: DLDataType, dev: DLDevice, scope: Option<&str>) -> FfiResult<ObjectRef> {
    api(dev.device_type)?;
    let scope = scope.filter(|s| !s.is_empty() && *s != "global");
    super::super::tensor::empty_scoped(shape, dtype, dev, scope)
}

/// Copies `nbytes` (the size both tensors were checked to have) from `from` to `to` through
/// `api`; nothing to do for no bytes.
fn device_copy(
    api: &dyn DeviceApi,
    from: &DLTensor,
    to: &DLTensor,
    nbytes: usize,
    stream: *mut c_void,
) -> FfiResult<()> {
    if nbytes == 0 {
        return Ok(());
    }
    if from.data.is_null() || to.data.is_null() {
        return Err(FfiError::value("cannot copy a tensor whose data pointer is NULL"));
    }
    if !is_contiguous(from) || !is_contiguous(to) {
        return Err(check_failed(
            "(ffi::IsContiguous(*from) && ffi::IsContiguous(*to)) is false: CopyDataFromTo only support contiguous \
             array for now",
        ));
    }
    if from.device.device_type >= RPC_SESS_MASK || to.device.device_type >= RPC_SESS_MASK {
        // Remote memory handles are not addresses: the RPC device API moves whole tensors.
        return Ok(api.copy_data_from_to(from, to, stream)?);
    }
    Ok(api.copy_flat(
        from.data,
        from.byte_offset,
        to.data,
        to.byte_offset,
        nbytes,
        from.device,
        to.device,
        from.dtype,
        stream,
    )?)
}

/// A host tensor over `data` shaped like `like`.
fn host_like(like: &DLTensor, data: *mut c_void) -> DLTensor {
    DLTensor {
        data,
        device: DLDevice { device_type: CPU, device_id: 0 },
        ndim: like.ndim,
        dtype: like.dtype,
        shape: like.shape,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

fn check_bytes(t: &DLTensor, data: *const c_void, nbytes: usize, what: &str) -> FfiResult<()> {
    let arr_size = data_size(t)?;
    if arr_size != nbytes {
        return Err(check_failed(format!("arr_size == nbytes ({arr_size} vs. {nbytes}) : {what}: size mismatch")));
    }
    if !is_contiguous(t) {
        return Err(check_failed(format!(
            "(ffi::IsContiguous(*handle)) is false: {what} only support contiguous array for now"
        )));
    }
    if nbytes > 0 && data.is_null() {
        return Err(FfiError::value(format!("{what}: the host data pointer is NULL")));
    }
    Ok(())
}

/// `runtime.TVMTensorCopyFromBytes`: `nbytes` host bytes into the tensor, then a sync.
pub fn copy_from_bytes(t: &DLTensor, data: *const c_void, nbytes: usize) -> FfiResult<()> {
    check_bytes(t, data, nbytes, "TensorCopyFromBytes")?;
    let api = api(t.device.device_type)?;
    device_copy(api, &host_like(t, data.cast_mut()), t, nbytes, std::ptr::null_mut())?;
    Ok(api.stream_sync(t.device, std::ptr::null_mut())?)
}

/// `runtime.TVMTensorCopyToBytes`: the tensor into `nbytes` host bytes, then a sync.
pub fn copy_to_bytes(t: &DLTensor, data: *mut c_void, nbytes: usize) -> FfiResult<()> {
    check_bytes(t, data, nbytes, "ArrayCopyToBytes")?;
    let api = api(t.device.device_type)?;
    device_copy(api, t, &host_like(t, data), nbytes, std::ptr::null_mut())?;
    Ok(api.stream_sync(t.device, std::ptr::null_mut())?)
}

/// `runtime.TVMTensorCopyFromTo`: equal byte sizes, devices of one type or one side on the host;
/// the copy is queued on the non-CPU side's default stream (not waited for).
pub fn copy_from_to(from: &DLTensor, to: &DLTensor) -> FfiResult<()> {
    let (from_size, to_size) = (data_size(from)?, data_size(to)?);
    if from_size != to_size {
        return Err(check_failed(format!(
            "from_size == to_size ({from_size} vs. {to_size}) : TVMTensorCopyFromTo: The size in bytes must exactly \
             match."
        )));
    }
    let (ft, tt) = (from.device.device_type, to.device.device_type);
    let host = |t: i32| t == CPU || t == CUDA_HOST || t == ROCM_HOST;
    if ft != tt && !host(ft) && !host(tt) {
        return Err(check_failed(format!(
            "(from->device.device_type == to->device.device_type || ...) is false: Can not copy across different \
             device types directly. From device type: {ft} to device type: {tt}"
        )));
    }
    let dev = if ft != CPU { from.device } else { to.device };
    let api = api(dev.device_type)?;
    device_copy(api, from, to, from_size, std::ptr::null_mut())
}

/// `runtime.TVMTensorCreateView` (`Tensor::CreateView`): a tensor of `shape` and `dtype` over
/// the compact tensor `t`'s bytes from `relative_byte_offset` on, keeping `t` alive.
pub fn create_view(t: &ObjectRef, shape: &[i64], dtype: DLDataType, relative_byte_offset: u64) -> FfiResult<ObjectRef> {
    // SAFETY: the callers pass a live ffi.Tensor.
    let cur = unsafe { dltensor(t.as_ptr()) };
    let cur_dims = dims_of(cur)?;
    if !is_contiguous(cur) {
        // SAFETY: a tensor with ndim > 0 and strides has `ndim` of them (checked non-null by
        // `is_contiguous` returning false only when they exist).
        let strides = unsafe { std::slice::from_raw_parts(cur.strides, cur_dims.len()) };
        return Err(check_failed(format!(
            "(IsContiguous()) is false: Can only create view for compact tensor, but found strides {}, for shape {}",
            fmt_dims(strides),
            fmt_dims(cur_dims)
        )));
    }
    if shape.len() > i32::MAX as usize {
        return Err(FfiError::value("too many dimensions"));
    }
    let curr_size = data_size(cur)?;
    let view_size = shape_data_size(shape, dtype)?;
    let end = relative_byte_offset.saturating_add(view_size as u64);
    if end > curr_size as u64 {
        return Err(FfiError::value(format!(
            "Check failed: relative_byte_offset + view_size <= curr_size ({end} vs. {curr_size}) : View with shape {} \
             and datatype {} would have a size of {view_size} bytes.  This would occupy bytes {relative_byte_offset} \
             <= i_byte < {end} within the backing array.  However, the Tensor being viewed only contains {curr_size} \
             bytes (shape = {}, dtype= {}).",
            fmt_dims(shape),
            fmt_dtype(dtype),
            fmt_dims(cur_dims),
            fmt_dtype(cur.dtype)
        )));
    }
    let mut dims_copy = shape.to_vec();
    let proto = DLTensor {
        data: cur.data,
        device: cur.device,
        ndim: shape.len() as i32,
        dtype,
        shape: dims_copy.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: cur.byte_offset + relative_byte_offset,
    };
    // SAFETY: `t` is a live tensor; the prototype is valid for the call (the view copies it).
    unsafe { super::super::tensor::create_view(t.as_ptr(), &proto) }
}

/// `Tensor::IsStorageShared`: same device, same first and last byte.
pub(crate) fn is_storage_shared(a: &DLTensor, b: &DLTensor) -> FfiResult<bool> {
    if a.device.device_type != b.device.device_type || a.device.device_id != b.device.device_id {
        return Ok(false);
    }
    let begin = |t: &DLTensor| (t.data as usize).wrapping_add(t.byte_offset as usize);
    Ok(begin(a) == begin(b) && begin(a).wrapping_add(data_size(a)?) == begin(b).wrapping_add(data_size(b)?))
}

pub(super) fn register(b: &mut Builder) {
    const ALLOC: Sig = Sig {
        name: "runtime.TVMTensorAllocWithScope",
        params: &["ffi.Shape", "DataType", "Device", "Optional<ffi.String>"],
        ret: "ffi.Tensor",
    };
    b.add(ALLOC.name, |a| {
        ALLOC.check_count(a)?;
        let t = alloc_with_scope(&ALLOC.shape(a, 0)?, ALLOC.dtype(a, 1)?, ALLOC.device(a, 2)?, ALLOC.opt_str(a, 3)?)?;
        Ok(Any::object(t))
    });
    const VIEW: Sig = Sig {
        name: "runtime.TVMTensorCreateView",
        params: &["ffi.Tensor", "ffi.Shape", "DataType", "uint64_t"],
        ret: "ffi.Tensor",
    };
    b.add(VIEW.name, |a| {
        VIEW.check_count(a)?;
        let v = create_view(&VIEW.tensor(a, 0)?, &VIEW.shape(a, 1)?, VIEW.dtype(a, 2)?, VIEW.size(a, 3)?)?;
        Ok(Any::object(v))
    });
    const FROM_BYTES: Sig =
        Sig { name: "runtime.TVMTensorCopyFromBytes", params: &["DLTensor*", "void*", "int"], ret: "void" };
    b.add(FROM_BYTES.name, |a| {
        FROM_BYTES.check_count(a)?;
        let t = FROM_BYTES.dltensor(a, 0)?;
        let (p, n) = (FROM_BYTES.ptr(a, 1)?, FROM_BYTES.size(a, 2)?);
        copy_from_bytes(t, p, n as usize)?;
        Ok(Any::none())
    });
    const TO_BYTES: Sig =
        Sig { name: "runtime.TVMTensorCopyToBytes", params: &["DLTensor*", "void*", "int"], ret: "void" };
    b.add(TO_BYTES.name, |a| {
        TO_BYTES.check_count(a)?;
        let t = TO_BYTES.dltensor(a, 0)?;
        let (p, n) = (TO_BYTES.ptr(a, 1)?, TO_BYTES.size(a, 2)?);
        copy_to_bytes(t, p, n as usize)?;
        Ok(Any::none())
    });
    const FROM_TO: Sig = Sig { name: "runtime.TVMTensorCopyFromTo", params: &["DLTensor*", "DLTensor*"], ret: "void" };
    b.add(FROM_TO.name, |a| {
        FROM_TO.check_count(a)?;
        copy_from_to(FROM_TO.dltensor(a, 0)?, FROM_TO.dltensor(a, 1)?)?;
        Ok(Any::none())
    });
    const SHARED: Sig =
        Sig { name: "runtime.TVMTensorIsStorageShared", params: &["ffi.Tensor", "ffi.Tensor"], ret: "bool" };
    b.add(SHARED.name, |a| {
        SHARED.check_count(a)?;
        let (x, y) = (SHARED.tensor(a, 0)?, SHARED.tensor(a, 1)?);
        // SAFETY: both are live tensors, held for the call.
        let shared = unsafe { is_storage_shared(dltensor(x.as_ptr()), dltensor(y.as_ptr())) }?;
        Ok(Any::bool(shared))
    });
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn dl(t: &Any) -> &DLTensor {
        // SAFETY: a live tensor held by `t`.
        unsafe { dltensor(t.raw().obj_ptr()) }
    }

    #[test]
    fn alloc_round_trips_many_dtypes_and_shapes() {
        for (dtype, dims, elem_bits) in [
            ("float32", vec![2i64, 3], 32usize),
            ("float16", vec![5], 16),
            ("int8", vec![4, 1, 2], 8),
            ("bool", vec![3], 8),
            ("uint64", vec![2], 64),
            ("float64", vec![], 64),
            ("int32", vec![0, 3], 32),
            ("float32x4", vec![2], 128),
        ] {
            let n = dims.iter().product::<i64>() as usize * elem_bits / 8;
            let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
            let t = tensor_of(&dims, dtype, &bytes);
            let d = dl(&t);
            assert_eq!(d.ndim as usize, dims.len(), "{dtype}");
            assert_eq!(super::super::super::dtype::format(d.dtype).unwrap(), dtype);
            assert_eq!(d.device.device_type, 1);
            assert_eq!(bytes_of(&t), bytes, "{dtype} {dims:?}");
        }
        // int4 packs two elements a byte.
        let t = tensor_of(&[4], "int4", &[0x12, 0x34]);
        assert_eq!(data_size(dl(&t)).unwrap(), 2);
        assert_eq!(bytes_of(&t), vec![0x12, 0x34]);
        // A data type value works as well as its text, and so does an array for the shape.
        let t = call(
            "runtime.TVMTensorAllocWithScope",
            &[
                Any::object(super::super::super::containers::array::make_array(vec![Any::int(2), Any::int(2)])),
                Any::dtype(DLDataType { code: 0, bits: 16, lanes: 1 }),
                cpu(),
                Any::string("global"),
            ],
        )
        .unwrap();
        assert_eq!(data_size(dl(&t)).unwrap(), 8);
        assert_eq!(dl(&t).data as usize % 64, 0);
    }

    #[test]
    fn alloc_errors() {
        let alloc = |shape: Any, dtype: Any, dev: Any, scope: Any| {
            call("runtime.TVMTensorAllocWithScope", &[shape, dtype, dev, scope]).unwrap_err()
        };
        let e = alloc(shape(&[-1, 2]), Any::string("float32"), cpu(), Any::none());
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("negative extent -1"), "{}", e.message());
        let e = alloc(shape(&[2]), Any::string("floaty"), cpu(), Any::none());
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("floaty"), "{}", e.message());
        let e = alloc(shape(&[2]), Any::string("float32"), cpu(), Any::string("texture"));
        assert!(e.message().contains("specified memory scope: texture"), "{}", e.message());
        let vulkan = Any::device(DLDevice { device_type: 7, device_id: 0 });
        let e = alloc(shape(&[2]), Any::string("float32"), vulkan, Any::none());
        assert_eq!(e.kind(), "InternalError");
        assert_eq!(e.message(), "Check failed: (allow_missing) is false: Device API vulkan is not enabled.");
        let e = alloc(shape(&[2]), Any::string("float32"), Any::int(1), Any::none());
        assert!(e.message().contains("Expected `Device` but got `int`"), "{}", e.message());
        let e = alloc(Any::int(2), Any::string("float32"), cpu(), Any::none());
        assert!(e.message().contains("Expected `ffi.Shape` but got `int`"), "{}", e.message());
    }

    #[test]
    fn byte_copies_check_sizes_and_pointers() {
        let t = tensor_of(&[2, 3], "float32", &[0u8; 24]);
        let buf = [0u8; 20];
        let p = Any::opaque_ptr(buf.as_ptr().cast_mut().cast());
        let e = call("runtime.TVMTensorCopyFromBytes", &[t.clone(), p.clone(), Any::int(20)]).unwrap_err();
        assert_eq!(
            (e.kind().as_str(), e.message().as_str()),
            ("InternalError", "Check failed: arr_size == nbytes (24 vs. 20) : TensorCopyFromBytes: size mismatch")
        );
        let e = call("runtime.TVMTensorCopyToBytes", &[t.clone(), p, Any::int(20)]).unwrap_err();
        assert_eq!(e.message(), "Check failed: arr_size == nbytes (24 vs. 20) : ArrayCopyToBytes: size mismatch");
        let e = call("runtime.TVMTensorCopyFromBytes", &[t.clone(), Any::none(), Any::int(24)]).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("NULL"), "{}", e.message());
        let e = call("runtime.TVMTensorCopyFromBytes", &[t.clone(), Any::none(), Any::int(-1)]).unwrap_err();
        assert!(e.message().contains("must not be negative"), "{}", e.message());
        // Empty tensors copy nothing, from anywhere.
        let e0 = tensor_of(&[0], "int32", &[]);
        call("runtime.TVMTensorCopyToBytes", &[e0, Any::none(), Any::int(0)]).unwrap();
    }

    #[test]
    fn copy_from_to_checks_sizes_and_copies() {
        let a = tensor_of(&[2], "int32", &[1, 0, 0, 0, 2, 0, 0, 0]);
        let b = tensor_of(&[8], "uint8", &[0; 8]);
        call("runtime.TVMTensorCopyFromTo", &[a.clone(), b.clone()]).unwrap();
        assert_eq!(bytes_of(&b), vec![1, 0, 0, 0, 2, 0, 0, 0]);
        let c = tensor_of(&[7], "uint8", &[0; 7]);
        let e = call("runtime.TVMTensorCopyFromTo", &[a, c]).unwrap_err();
        assert_eq!(
            e.message(),
            "Check failed: from_size == to_size (8 vs. 7) : TVMTensorCopyFromTo: The size in bytes must exactly match."
        );
    }

    #[test]
    fn views_share_storage_and_check_bounds() {
        let bytes: Vec<u8> = (0..24).collect();
        let t = tensor_of(&[2, 3], "float32", &bytes);
        let view = |s: &[i64], dtype: &str, off: i64| {
            call("runtime.TVMTensorCreateView", &[t.clone(), shape(s), Any::string(dtype), Any::int(off)])
        };
        let v = view(&[3], "float32", 12).unwrap();
        assert_eq!(bytes_of(&v), bytes[12..].to_vec());
        assert_eq!(dl(&v).byte_offset, 12);
        assert_eq!(dl(&v).data, dl(&t).data);
        let w = view(&[6], "int32", 0).unwrap();
        assert_eq!(bytes_of(&w), bytes);
        let shared = |x: &Any, y: &Any| call("runtime.TVMTensorIsStorageShared", &[x.clone(), y.clone()]).unwrap();
        assert_eq!(shared(&t, &w).as_bool(), Some(true));
        assert_eq!(shared(&t, &v).as_bool(), Some(false));
        // A view of a view accumulates the offsets.
        let vv = call("runtime.TVMTensorCreateView", &[v.clone(), shape(&[1]), Any::string("float32"), Any::int(8)])
            .unwrap();
        assert_eq!(dl(&vv).byte_offset, 20);
        assert_eq!(bytes_of(&vv), bytes[20..].to_vec());
        // Writes through the view land in the source.
        call(
            "runtime.TVMTensorCopyFromBytes",
            &[vv.clone(), Any::opaque_ptr([9u8; 4].as_ptr().cast_mut().cast()), Any::int(4)],
        )
        .unwrap();
        assert_eq!(bytes_of(&t)[20..], [9, 9, 9, 9]);
        let e = view(&[7], "float32", 0).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert_eq!(
            e.message(),
            "Check failed: relative_byte_offset + view_size <= curr_size (28 vs. 24) : View with shape [7] and \
             datatype float32 would have a size of 28 bytes.  This would occupy bytes 0 <= i_byte < 28 within the \
             backing array.  However, the Tensor being viewed only contains 24 bytes (shape = [2, 3], dtype= float32)."
        );
        assert!(view(&[3], "float32", 16).unwrap_err().message().contains("(28 vs. 24)"));
        assert!(view(&[-1], "float32", 0).unwrap_err().message().contains("negative extent"));
        assert!(view(&[1], "float32", -4).unwrap_err().message().contains("must not be negative"));
        let e = call("runtime.TVMTensorCreateView", &[Any::none(), shape(&[1]), Any::string("int8"), Any::int(0)])
            .unwrap_err();
        assert!(e.message().contains("Expected `ffi.Tensor` but got `None`"), "{}", e.message());
        drop(t);
        // The view keeps the source's memory alive.
        assert_eq!(bytes_of(&w)[..4], [0, 1, 2, 3]);
    }

    #[test]
    fn non_compact_sources_have_no_views() {
        let t = tensor_of(&[2, 2], "int8", &[1, 2, 3, 4]);
        let mut proto = *dl(&t);
        let mut strides = [1i64, 2];
        proto.strides = strides.as_mut_ptr();
        // SAFETY: a live tensor and a prototype valid for the call.
        let s = Any::object(unsafe { super::super::super::tensor::create_view(t.raw().obj_ptr(), &proto) }.unwrap());
        let e = call("runtime.TVMTensorCreateView", &[s.clone(), shape(&[4]), Any::string("int8"), Any::int(0)])
            .unwrap_err();
        assert_eq!(e.kind(), "InternalError");
        assert!(e.message().ends_with("but found strides [1, 2], for shape [2, 2]"), "{}", e.message());
        let out = [0u8; 4];
        let e =
            call("runtime.TVMTensorCopyToBytes", &[s, Any::opaque_ptr(out.as_ptr().cast_mut().cast()), Any::int(4)])
                .unwrap_err();
        assert!(e.message().contains("only support contiguous array"), "{}", e.message());
    }
}
