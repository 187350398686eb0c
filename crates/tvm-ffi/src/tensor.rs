//! `ffi.Tensor`: the object header followed by a `DLTensor` (tvm-ffi's `TensorObj`, which C++
//! and Cython read in place: `TVMFFITensorGetDLTensorPtr` is the header plus 24 bytes), then
//! what keeps the memory alive: a DLPack producer's managed tensor (legacy or versioned), the
//! tensor a view was cut from, or an array of the classic runtime (whose device allocator made
//! the memory).
//!
//! As in tvm-ffi, a tensor adopted from DLPack keeps pointing at the producer's shape; it keeps
//! the producer's strides too, or strides of its own (compact row-major) when the producer gave
//! none, so that `strides` is never NULL for `ndim > 0`.

pub mod classic;
pub mod dlpack;

use self::dlpack::{DLManagedTensorVersioned, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
use super::object::{dec_ref, inc_ref, make_inplace_object, make_object, make_object_with, ObjectRef, TVMFFIObject};
use super::registry::Builder;
use super::{ti, FfiError, FfiResult};
use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLManagedTensor, DLTensor};

/// What keeps a tensor's memory alive.
enum Owner {
    /// A legacy DLPack tensor: its deleter runs when the tensor goes.
    Legacy(*mut DLManagedTensor),
    /// A versioned DLPack tensor: likewise.
    Versioned(*mut DLManagedTensorVersioned),
    /// A view of another tensor (`TVMFFITensorCreateUnsafeView`), kept alive.
    View(#[expect(dead_code, reason = "held for its reference only")] ObjectRef),
}

impl Drop for Owner {
    #[inline]
    fn drop(&mut self) {
        match *self {
            // SAFETY: the managed tensor was handed over to this tensor, whose payload drops
            // exactly once; its deleter (when any) runs once with it.
            Owner::Legacy(m) => unsafe {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            },
            // SAFETY: as above.
            Owner::Versioned(m) => unsafe {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            },
            Owner::View(_) => {}
        }
    }
}

/// The payload of an `ffi.Tensor`: the `DLTensor` right after the header, then ours.
#[repr(C)]
pub(crate) struct TensorPayload {
    /// The tensor; `shape` and `strides` point into the producer's or into `dims`.
    pub dl: DLTensor,
    /// Shape and/or strides this object owns (the pointers above may point here).
    dims: Box<[i64]>,
    owner: Owner,
}

/// `IsContiguous` of tvm-ffi: no strides, an empty tensor, or compact row-major strides
/// (dimensions of extent 1 may have any stride).
pub fn is_contiguous(t: &DLTensor) -> bool {
    if t.strides.is_null() || t.ndim <= 0 {
        return true;
    }
    // SAFETY: a valid DLTensor has `ndim` shape and stride entries.
    let (shape, strides) = unsafe { (dims(t.shape, t.ndim), dims(t.strides, t.ndim)) };
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    for k in (0..shape.len()).rev() {
        if shape[k] == 1 {
            continue;
        }
        if strides[k] != expected {
            return false;
        }
        expected = expected.wrapping_mul(shape[k]);
    }
    true
}

/// `IsDirectAddressDevice`: devices whose addresses say the alignment (CPU, CUDA, CUDA host,
/// CUDA managed, ROCm, ROCm host).
fn is_direct_address(d: DLDevice) -> bool {
    d.device_type <= 3 || matches!(d.device_type, 10 | 11 | 13)
}

/// `IsAligned` of tvm-ffi: the data address plus byte offset (or the offset alone, on devices
/// whose handles are not addresses) is a multiple of `alignment`.
pub fn is_aligned(t: &DLTensor, alignment: usize) -> bool {
    if alignment == 0 {
        return true;
    }
    if is_direct_address(t.device) {
        (t.data as usize).wrapping_add(t.byte_offset as usize) % alignment == 0
    } else {
        t.byte_offset as usize % alignment == 0
    }
}

/// Compact row-major strides of a shape.
#[inline]
pub fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    fill_compact_strides(shape, &mut out);
    out
}

/// Writes the compact row-major strides of `shape` into `out` (as long as `shape`).
#[inline]
fn fill_compact_strides(shape: &[i64], out: &mut [i64]) {
    let mut stride = 1i64;
    for (o, &d) in out.iter_mut().zip(shape).rev() {
        *o = stride;
        stride = stride.wrapping_mul(d);
    }
}

/// `ndim` entries at `p` (empty when `ndim` is 0).
///
/// # Safety
/// `p` points to `ndim` readable values when `ndim > 0`.
unsafe fn dims<'a>(p: *const i64, ndim: i32) -> &'a [i64] {
    if ndim <= 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: by contract.
        unsafe { std::slice::from_raw_parts(p, ndim as usize) }
    }
}

/// Checks the fields a consumer reads: a sane rank, a shape when there are dimensions, no
/// negative extents. (The checks are inline, the messages out of line: this is on every import.)
#[inline]
fn check_dltensor(t: &DLTensor, what: &str) -> FfiResult<()> {
    if t.ndim < 0 || (t.ndim > 0 && t.shape.is_null()) {
        return Err(bad_dltensor(t, what));
    }
    // SAFETY: checked non-null above; a DLTensor's shape has `ndim` entries. (One test of the
    // extents' sign bits together: no branch per dimension.)
    if unsafe { dims(t.shape, t.ndim) }.iter().fold(0i64, |acc, &s| acc | s) < 0 {
        return Err(bad_dltensor(t, what));
    }
    Ok(())
}

/// What [`check_dltensor`] refused.
#[cold]
#[inline(never)]
fn bad_dltensor(t: &DLTensor, what: &str) -> FfiError {
    if t.ndim < 0 {
        return FfiError::value(format!("{what}: ndim must be non-negative, got {}", t.ndim));
    }
    if t.shape.is_null() {
        return FfiError::value(format!("{what}: shape is NULL for a {}-d tensor", t.ndim));
    }
    // SAFETY: as in `check_dltensor`, which found a negative extent.
    let shape = unsafe { dims(t.shape, t.ndim) };
    let d = shape.iter().position(|&s| s < 0).unwrap_or(0);
    FfiError::value(format!("{what}: shape[{d}] is negative ({})", shape[d]))
}

#[inline]
fn check_import(t: &DLTensor, alignment: i32, contiguous: bool) -> FfiResult<()> {
    check_dltensor(t, "FromDLPack")?;
    let ok = match usize::try_from(alignment) {
        Ok(align) => (align == 0 || is_aligned(t, align)) && (!contiguous || is_contiguous(t)),
        Err(_) => false,
    };
    if ok {
        Ok(())
    } else {
        Err(bad_import(t, alignment, contiguous))
    }
}

/// What [`check_import`] refused (after [`check_dltensor`] passed).
#[cold]
#[inline(never)]
fn bad_import(t: &DLTensor, alignment: i32, contiguous: bool) -> FfiError {
    match usize::try_from(alignment) {
        Err(_) => FfiError::value(format!("FromDLPack: require_alignment must be non-negative, got {alignment}")),
        Ok(align) if align != 0 && !is_aligned(t, align) => {
            FfiError::runtime(format!("FromDLPack: Data is not aligned to {align} bytes."))
        }
        _ => {
            debug_assert!(contiguous && !is_contiguous(t));
            FfiError::runtime("FromDLPack: Tensor is not contiguous.")
        }
    }
}

/// A tensor over `*dl` (its shape pointer kept); strides of its own when `dl` has none, kept in
/// the object's own tail as tvm-ffi keeps them (one allocation). The `DLTensor` is copied from
/// the producer's straight into the new object.
#[inline(always)]
fn adopt(dl: &DLTensor, owner: Owner) -> ObjectRef {
    if dl.strides.is_null() && dl.ndim > 0 {
        let n = dl.ndim as usize;
        return make_inplace_object(
            ti::TENSOR,
            n * std::mem::size_of::<i64>(),
            |tail| {
                let strides = tail.cast::<i64>();
                // SAFETY: the tail has room for `n` strides (8-aligned), written before any
                // read; the shape was checked by the callers (check_dltensor).
                unsafe {
                    std::ptr::write_bytes(strides, 0, n);
                    fill_compact_strides(dims(dl.shape, dl.ndim), std::slice::from_raw_parts_mut(strides, n));
                }
                TensorPayload { dl: DLTensor { strides, ..*dl }, dims: Box::default(), owner }
            },
            None,
        );
    }
    make_object_with(ti::TENSOR, || TensorPayload { dl: *dl, dims: Box::default(), owner })
}

/// `Tensor::FromDLPack`: adopts a legacy DLPack tensor (its deleter then runs when the tensor
/// goes). On error the caller still owns `m`.
///
/// # Safety
/// `m` is null or a live managed tensor.
#[inline]
pub unsafe fn from_dlpack(m: *mut DLManagedTensor, alignment: i32, contiguous: bool) -> FfiResult<ObjectRef> {
    // SAFETY: by contract.
    let t = unsafe { m.as_ref() }.ok_or_else(|| FfiError::value("FromDLPack: the DLManagedTensor is NULL"))?;
    check_import(&t.dl_tensor, alignment, contiguous)?;
    Ok(adopt(&t.dl_tensor, Owner::Legacy(m)))
}

/// `Tensor::FromDLPackVersioned`: adopts a versioned DLPack tensor. On error the caller still
/// owns `m`.
///
/// # Safety
/// `m` is null or a live managed tensor.
#[inline]
pub unsafe fn from_dlpack_versioned(
    m: *mut DLManagedTensorVersioned,
    alignment: i32,
    contiguous: bool,
) -> FfiResult<ObjectRef> {
    // SAFETY: by contract.
    let t = unsafe { m.as_ref() }.ok_or_else(|| FfiError::value("FromDLPack: the DLManagedTensorVersioned is NULL"))?;
    if t.version.major != DLPACK_MAJOR_VERSION {
        return Err(FfiError::runtime(format!(
            "FromDLPack: unsupported DLPack major version {} (this library reads {DLPACK_MAJOR_VERSION})",
            t.version.major
        )));
    }
    check_import(&t.dl_tensor, alignment, contiguous)?;
    if t.flags & dlpack::FLAG_IS_SUBBYTE_TYPE_PADDED != 0 {
        return Err(FfiError::runtime("Subbyte type padded is not yet supported"));
    }
    Ok(adopt(&t.dl_tensor, Owner::Versioned(m)))
}

/// The `DLTensor` of a tensor object.
///
/// # Safety
/// `obj` is a live `ffi.Tensor` (any maker: the layout is the ABI's).
#[inline]
pub unsafe fn dltensor<'a>(obj: *mut TVMFFIObject) -> &'a DLTensor {
    // SAFETY: a tensor has its DLTensor right after the 24-byte header.
    unsafe { &*(obj as *const u8).add(24).cast::<DLTensor>() }
}

/// Checks that a handle is a live tensor.
///
/// # Safety
/// `obj` is null or a live object.
pub unsafe fn expect_tensor(obj: *mut TVMFFIObject, what: &str) -> FfiResult<()> {
    // SAFETY: by contract.
    let o = unsafe { obj.as_ref() }.ok_or_else(|| FfiError::value(format!("{what}: the tensor handle is NULL")))?;
    if !super::types::is_instance(o.type_index, ti::TENSOR) {
        return Err(FfiError::type_error(format!(
            "{what}: expected ffi.Tensor, got {}",
            super::types::type_key(o.type_index)
        )));
    }
    Ok(())
}

/// `TensorObj::ToDLPack`: a legacy managed tensor holding a reference to the tensor.
///
/// # Safety
/// `obj` is a live `ffi.Tensor`.
pub unsafe fn to_dlpack(obj: *mut TVMFFIObject) -> *mut DLManagedTensor {
    unsafe extern "C" fn deleter(m: *mut DLManagedTensor) {
        // SAFETY: `m` is the box made below; its manager_ctx holds one tensor reference.
        unsafe {
            let b = Box::from_raw(m);
            dec_ref(b.manager_ctx.cast());
        }
    }
    // SAFETY: live by contract.
    unsafe {
        inc_ref(obj);
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: *dltensor(obj),
            manager_ctx: obj.cast(),
            deleter: Some(deleter),
        }))
    }
}

/// `TensorObj::ToDLPackVersioned`: a versioned managed tensor holding a reference.
///
/// # Safety
/// `obj` is a live `ffi.Tensor`.
pub unsafe fn to_dlpack_versioned(obj: *mut TVMFFIObject) -> *mut DLManagedTensorVersioned {
    unsafe extern "C" fn deleter(m: *mut DLManagedTensorVersioned) {
        // SAFETY: `m` is the box made below; its manager_ctx holds one tensor reference.
        unsafe {
            let b = Box::from_raw(m);
            dec_ref(b.manager_ctx.cast());
        }
    }
    // SAFETY: live by contract.
    unsafe {
        inc_ref(obj);
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: dlpack::DLPackVersion { major: DLPACK_MAJOR_VERSION, minor: DLPACK_MINOR_VERSION },
            manager_ctx: obj.cast(),
            deleter: Some(deleter),
            flags: 0,
            dl_tensor: *dltensor(obj),
        }))
    }
}

/// `TVMFFITensorCreateUnsafeView`: a tensor over `prototype` (data, dtype, device, offset, its
/// shape and strides copied) that keeps `source` alive.
///
/// # Safety
/// `source` is a live object (or null); `prototype` is null or a valid DLTensor.
pub unsafe fn create_view(source: *mut TVMFFIObject, prototype: *const DLTensor) -> FfiResult<ObjectRef> {
    // SAFETY: by contract.
    unsafe { expect_tensor(source, "TVMFFITensorCreateUnsafeView") }?;
    // SAFETY: by contract.
    let p = unsafe { prototype.as_ref() }
        .ok_or_else(|| FfiError::value("TVMFFITensorCreateUnsafeView: the prototype is NULL"))?;
    check_dltensor(p, "TVMFFITensorCreateUnsafeView")?;
    // SAFETY: checked above.
    let shape = unsafe { dims(p.shape, p.ndim) };
    let strides = if p.strides.is_null() {
        compact_strides(shape)
    } else {
        // SAFETY: a DLTensor's strides have `ndim` entries.
        unsafe { dims(p.strides, p.ndim) }.to_vec()
    };
    let n = shape.len();
    let mut own: Box<[i64]> = shape.iter().chain(strides.iter()).copied().collect();
    let mut dl = *p;
    dl.shape = own.as_mut_ptr();
    // SAFETY: `own` holds 2n values.
    dl.strides = unsafe { own.as_mut_ptr().add(n) };
    // SAFETY: `source` is a live tensor (checked above).
    let src = unsafe { ObjectRef::from_borrowed(source) }.expect("checked non-null");
    Ok(make_object(ti::TENSOR, TensorPayload { dl, dims: own, owner: Owner::View(src) }))
}

/// A compact tensor over memory that `owner` holds (`data` plus `byte_offset`): the tensor
/// keeps `owner` alive (the Relax VM's tensors carved out of a `vm.Storage` block). The caller
/// checked that the extent fits in the owner's memory.
#[inline]
pub fn in_owner(
    owner: ObjectRef,
    data: *mut std::ffi::c_void,
    byte_offset: u64,
    shape: &[i64],
    dtype: DLDataType,
    device: DLDevice,
) -> ObjectRef {
    let n = shape.len();
    let mut own: Box<[i64]> = shape.iter().copied().chain(compact_strides(shape)).collect();
    let dl = DLTensor {
        data,
        device,
        ndim: n as i32,
        dtype,
        shape: own.as_mut_ptr(),
        // SAFETY: `own` holds 2n values.
        strides: unsafe { own.as_mut_ptr().add(n) },
        byte_offset,
    };
    make_object(ti::TENSOR, TensorPayload { dl, dims: own, owner: Owner::View(owner) })
}

/// A new tensor on `device` made by the classic runtime's device allocator (contents
/// uninitialized): the array lives as long as the tensor.
pub fn empty(shape: &[i64], dtype: DLDataType, device: DLDevice) -> FfiResult<ObjectRef> {
    empty_scoped(shape, dtype, device, None)
}

/// [`empty`] in a memory scope of the device (None: flat memory).
pub fn empty_scoped(shape: &[i64], dtype: DLDataType, device: DLDevice, scope: Option<&str>) -> FfiResult<ObjectRef> {
    from_ndarray(&tvm_runtime_classic::ndarray::NDArray::empty_scoped(shape, dtype, device, scope)?)
}

/// A new tensor on `dev` with the contents of `t`.
pub fn copy_tensor_to(t: &tvm_runtime_classic::abi::DLTensor, dev: DLDevice) -> FfiResult<ObjectRef> {
    let shape = tvm_runtime_classic::device::tensor_shape(t)?.to_vec();
    let out = empty(&shape, t.dtype, dev)?;
    // SAFETY: `out` is a live tensor.
    let to = unsafe { dltensor(out.as_ptr()) };
    tvm_runtime_classic::ndarray::copy_tensor(t, to, std::ptr::null_mut())?;
    Ok(out)
}

/// A tensor over an array of the classic runtime (sharing its memory, keeping it alive; the
/// classic `uint1` bool becomes tvm-ffi's `kDLBool`).
pub fn from_ndarray(a: &tvm_runtime_classic::ndarray::NDArray) -> FfiResult<ObjectRef> {
    classic::from_classic(a)
}

/// `TVMFFIEnvTensorAlloc`: a tensor like `prototype` from the environment's DLPack allocator.
///
/// # Safety
/// `prototype` is null or a valid DLTensor.
pub unsafe fn env_alloc(prototype: *mut DLTensor) -> FfiResult<ObjectRef> {
    let alloc = super::env::get_allocator();
    if alloc.is_null() {
        return Err(FfiError::runtime(
            "TVMFFIEnvTensorAlloc: allocator is nullptr, likely because \
             TVMFFIEnvSetDLPackManagedTensorAllocator has not been called.",
        ));
    }
    // SAFETY: by contract.
    let p =
        unsafe { prototype.as_ref() }.ok_or_else(|| FfiError::value("TVMFFIEnvTensorAlloc: the prototype is NULL"))?;
    check_dltensor(p, "TVMFFIEnvTensorAlloc")?;
    unsafe extern "C" fn set_error(
        _ctx: *mut std::ffi::c_void,
        kind: *const std::ffi::c_char,
        message: *const std::ffi::c_char,
    ) {
        let s = |p: *const std::ffi::c_char| {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: the allocator passes NUL-terminated strings.
                unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        let (k, m) = (s(kind), s(message));
        super::error::set_raised(Some(super::error::make_error(&k, &m, "", None, None)));
    }
    // SAFETY: the frontend registered a `DLPackManagedTensorAllocator`.
    let f: dlpack::DLPackManagedTensorAllocator = unsafe { std::mem::transmute(alloc) };
    let mut out: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: the allocator's contract: a prototype in, a managed tensor or an error out.
    let rc = unsafe { f(prototype, &mut out, std::ptr::null_mut(), set_error) };
    if rc != 0 {
        return Err(FfiError::take_raised(rc));
    }
    if out.is_null() {
        return Err(FfiError::runtime("TVMFFIEnvTensorAlloc: failed to allocate a tensor from the allocator"));
    }
    // SAFETY: the allocator handed us a live managed tensor.
    let t = unsafe { &*out };
    Ok(adopt(&t.dl_tensor, Owner::Versioned(out)))
}

/// Adds this subsystem's globals (none: `ffi.Shape` is the containers').
pub fn register(_b: &mut Builder) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32() -> DLDataType {
        DLDataType { code: 2, bits: 32, lanes: 1 }
    }
    fn cpu() -> DLDevice {
        DLDevice { device_type: 1, device_id: 0 }
    }

    struct Producer {
        shape: Vec<i64>,
        data: Vec<f32>,
        /// Counts the deleter's calls (one counter per test: tests run in parallel).
        deleted: &'static std::sync::atomic::AtomicUsize,
    }
    unsafe extern "C" fn deleter(m: *mut DLManagedTensorVersioned) {
        // SAFETY: made by `versioned` below.
        let p = unsafe {
            let b = Box::from_raw(m);
            Box::from_raw(b.manager_ctx.cast::<Producer>())
        };
        p.deleted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    fn versioned(shape: &[i64], deleted: &'static std::sync::atomic::AtomicUsize) -> *mut DLManagedTensorVersioned {
        let n = shape.iter().product::<i64>() as usize;
        let mut p = Box::new(Producer { shape: shape.to_vec(), data: (0..n).map(|i| i as f32).collect(), deleted });
        let dl = DLTensor {
            data: p.data.as_mut_ptr().cast(),
            device: cpu(),
            ndim: shape.len() as i32,
            dtype: f32(),
            shape: p.shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: dlpack::DLPackVersion { major: 1, minor: 0 },
            manager_ctx: Box::into_raw(p).cast(),
            deleter: Some(deleter),
            flags: 0,
            dl_tensor: dl,
        }))
    }

    #[test]
    fn versioned_round_trip_keeps_shape_fills_strides_and_runs_deleter_once() {
        static DELETED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let before = DELETED.load(std::sync::atomic::Ordering::SeqCst);
        let m = versioned(&[2, 3], &DELETED);
        // SAFETY: a fresh managed tensor.
        let t = unsafe { from_dlpack_versioned(m, 4, true) }.unwrap();
        assert_eq!(t.type_index(), ti::TENSOR);
        // SAFETY: a live tensor.
        let dl = unsafe { dltensor(t.as_ptr()) };
        // SAFETY: ndim entries.
        unsafe {
            assert_eq!(dims(dl.shape, dl.ndim), &[2, 3]);
            assert_eq!(dims(dl.strides, dl.ndim), &[3, 1]);
            assert_eq!(dl.shape, (*m).dl_tensor.shape);
        }
        // SAFETY: a live tensor.
        let out = unsafe { to_dlpack_versioned(t.as_ptr()) };
        assert_eq!(t.use_count(), 2);
        drop(t);
        assert_eq!(DELETED.load(std::sync::atomic::Ordering::SeqCst), before);
        // SAFETY: our own export.
        unsafe {
            assert_eq!((*out).version.major, 1);
            assert_eq!(*(*out).dl_tensor.data.cast::<f32>().add(4), 4.0);
            ((*out).deleter.unwrap())(out);
        }
        assert_eq!(DELETED.load(std::sync::atomic::Ordering::SeqCst), before + 1);
    }

    #[test]
    fn bad_inputs_are_errors_and_leave_ownership_with_the_caller() {
        // SAFETY: null is allowed.
        let e = unsafe { from_dlpack_versioned(std::ptr::null_mut(), 0, false) }.unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        static DELETED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let m = versioned(&[4], &DELETED);
        // SAFETY: m is live; we adjust its fields before each try.
        unsafe {
            (*m).dl_tensor.byte_offset = 2;
            let e = from_dlpack_versioned(m, 4, false).unwrap_err();
            assert_eq!(e.message(), "FromDLPack: Data is not aligned to 4 bytes.");
            (*m).dl_tensor.byte_offset = 0;
            let mut strides = [2i64];
            (*m).dl_tensor.strides = strides.as_mut_ptr();
            let e = from_dlpack_versioned(m, 0, true).unwrap_err();
            assert_eq!(e.message(), "FromDLPack: Tensor is not contiguous.");
            (*m).dl_tensor.strides = std::ptr::null_mut();
            *(*m).dl_tensor.shape = -1;
            let e = from_dlpack_versioned(m, 0, false).unwrap_err();
            assert_eq!(e.kind(), "ValueError");
            assert!(e.message().contains("negative"), "{}", e.message());
            *(*m).dl_tensor.shape = 4;
            ((*m).deleter.unwrap())(m);
        }
    }

    unsafe extern "C" fn test_alloc(
        proto: *mut DLTensor,
        out: *mut *mut DLManagedTensorVersioned,
        ctx: *mut std::ffi::c_void,
        set_error: dlpack::SetErrorFn,
    ) -> std::ffi::c_int {
        // SAFETY: called by env_alloc with a valid prototype and out slot.
        unsafe {
            if (*proto).ndim == 3 {
                set_error(ctx, c"ValueError".as_ptr(), c"no 3-d tensors".as_ptr());
                return -1;
            }
            static ALLOCATED_DELETED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            *out = versioned(dims((*proto).shape, (*proto).ndim), &ALLOCATED_DELETED);
        }
        0
    }

    #[test]
    fn env_alloc_uses_the_thread_allocator_and_reports_its_errors() {
        let mut shape = [2i64, 5, 1];
        let mut proto = DLTensor {
            data: std::ptr::null_mut(),
            device: cpu(),
            ndim: 2,
            dtype: f32(),
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        super::super::env::set_allocator(std::ptr::null_mut(), false);
        // SAFETY: a valid prototype.
        let e = unsafe { env_alloc(&mut proto) }.unwrap_err();
        assert!(e.message().contains("allocator is nullptr"), "{}", e.message());
        super::super::env::set_allocator(test_alloc as *mut _, false);
        // SAFETY: a valid prototype.
        let t = unsafe { env_alloc(&mut proto) }.unwrap();
        // SAFETY: a live tensor; ndim entries.
        unsafe {
            let dl = dltensor(t.as_ptr());
            assert_eq!(dims(dl.shape, dl.ndim), &[2, 5]);
            assert_eq!(dims(dl.strides, dl.ndim), &[5, 1]);
        }
        proto.ndim = 3;
        // SAFETY: a valid prototype.
        let e = unsafe { env_alloc(&mut proto) }.unwrap_err();
        assert_eq!((e.kind(), e.message()), ("ValueError".to_string(), "no 3-d tensors".to_string()));
        super::super::env::set_allocator(std::ptr::null_mut(), false);
    }

    #[test]
    fn contiguity_ignores_unit_dims_and_empty_tensors() {
        let mut shape = [2i64, 1, 3];
        let mut strides = [3i64, 99, 1];
        let mut t = DLTensor {
            data: std::ptr::null_mut(),
            device: cpu(),
            ndim: 3,
            dtype: f32(),
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        };
        assert!(is_contiguous(&t));
        // SAFETY: the tensor points at the arrays above.
        unsafe { *t.strides = 4 };
        assert!(!is_contiguous(&t));
        // SAFETY: as above.
        unsafe { *t.shape.add(2) = 0 };
        assert!(is_contiguous(&t));
        t.device.device_type = 4; // OpenCL: handles are not addresses
        t.data = 3usize as *mut _;
        assert!(is_aligned(&t, 64));
        t.byte_offset = 8;
        assert!(!is_aligned(&t, 64));
    }

    #[test]
    fn views_keep_their_source_and_own_their_dims() {
        let t = empty(&[4, 2], f32(), cpu()).unwrap();
        // SAFETY: a live tensor.
        let mut proto = unsafe { *dltensor(t.as_ptr()) };
        let mut shape = [2i64];
        proto.ndim = 1;
        proto.shape = shape.as_mut_ptr();
        proto.strides = std::ptr::null_mut();
        proto.byte_offset = 8;
        // SAFETY: live tensor and a valid prototype.
        let v = unsafe { create_view(t.as_ptr(), &proto) }.unwrap();
        assert_eq!(t.use_count(), 2);
        // SAFETY: the prototype's shape is the array above; the view must not see the change.
        unsafe { *proto.shape = 7 };
        // SAFETY: a live tensor.
        let dl = unsafe { dltensor(v.as_ptr()) };
        // SAFETY: ndim entries.
        unsafe { assert_eq!((dims(dl.shape, 1), dims(dl.strides, 1)), (&[2i64][..], &[1i64][..])) };
        assert_eq!(dl.byte_offset, 8);
        drop(v);
        assert_eq!(t.use_count(), 1);
        // SAFETY: null prototypes are rejected.
        assert!(unsafe { create_view(t.as_ptr(), std::ptr::null()) }.is_err());
    }
}
