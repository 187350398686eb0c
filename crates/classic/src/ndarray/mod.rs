//! NDArray: a counted tensor whose C handle is the `DLTensor` inside its container
//! (`[header 16 B][DLTensor 48 B][manager_ctx 8 B][...]`).

pub mod serialize;

use crate::abi::{DLDataType, DLDevice, DLManagedTensor, DLTensor};
use crate::device::{self, is_contiguous, tensor_bytes, tensor_shape};
use crate::error::{Error, Result};
use crate::object::{index, ObjBox, ObjectBody, ObjectHeader, ObjectRef};
use crate::value::dtype::check_alloc_dtype;
use crate::value::NDARRAY_HANDLE_OFFSET;
use std::ffi::c_void;
use std::mem::offset_of;

/// Where an array's data comes from, and so how it is released.
enum Source {
    /// Allocated through the device API; freed there.
    Owned,
    /// Borrowed from a DLPack producer; its deleter runs at the end.
    DLPack(*mut DLManagedTensor),
    /// A view of another array's data, kept alive by this reference.
    View(NDArray),
    /// Memory owned elsewhere for the array's whole life (linked parameters); never freed.
    External,
    /// Read-only bytes of a file mapping (a weight used in place), kept mapped by the keeper.
    Mapped(#[expect(dead_code, reason = "held only to keep the mapping alive")] crate::mapped::KeepAlive),
    /// Memory owned by another object (a VM storage block), kept alive by this reference.
    Keep(#[expect(dead_code, reason = "held only to keep the owner alive")] ObjectRef),
}

/// The body of an NDArray object.
#[repr(C)]
pub(crate) struct NDArrayObj {
    tensor: DLTensor,
    manager_ctx: *mut c_void,
    shape: Box<[i64]>,
    source: Source,
}

// SAFETY: the container's fields are written only at construction; the data it points to is
// shared memory that TVM lets any thread read and write (synchronisation is the user's).
unsafe impl Send for NDArrayObj {}
// SAFETY: as above.
unsafe impl Sync for NDArrayObj {}

impl ObjectBody for NDArrayObj {
    fn type_index() -> u32 {
        index::NDARRAY
    }
}

const _: () = assert!(offset_of!(ObjBox<NDArrayObj>, body) + offset_of!(NDArrayObj, tensor) == NDARRAY_HANDLE_OFFSET);

impl Drop for NDArrayObj {
    fn drop(&mut self) {
        match self.source {
            Source::Owned => {
                if !self.tensor.data.is_null() {
                    if let Ok(api) = device::api(self.tensor.device.device_type) {
                        let _ = api.free_data_space(self.tensor.device, self.tensor.data);
                    }
                }
            }
            Source::DLPack(m) => {
                // SAFETY: we own the managed tensor since TVMArrayFromDLPack; its deleter runs once.
                if let Some(del) = unsafe { (*m).deleter } {
                    // SAFETY: as above.
                    unsafe { del(m) };
                }
            }
            Source::View(_) | Source::External | Source::Mapped(_) | Source::Keep(_) => {}
        }
    }
}

/// A counted reference to an NDArray.
#[derive(Clone, Debug)]
pub struct NDArray(ObjectRef);

impl NDArray {
    fn make(mut tensor: DLTensor, shape: Vec<i64>, source: Source) -> NDArray {
        let shape = shape.into_boxed_slice();
        tensor.shape = shape.as_ptr().cast_mut();
        tensor.ndim = shape.len() as i32;
        let obj = ObjectRef::new(NDArrayObj { tensor, manager_ctx: std::ptr::null_mut(), shape, source });
        NDArray(obj)
    }

    /// A new array with uninitialized memory (`TVMArrayAlloc`).
    pub fn empty(shape: &[i64], dtype: DLDataType, dev: DLDevice) -> Result<NDArray> {
        Self::empty_scoped(shape, dtype, dev, None)
    }

    /// A new array in a memory scope (`runtime.TVMArrayAllocWithScope`).
    pub fn empty_scoped(shape: &[i64], dtype: DLDataType, dev: DLDevice, scope: Option<&str>) -> Result<NDArray> {
        check_alloc_dtype(dtype)?;
        if shape.len() > i32::MAX as usize {
            return Err(Error::value("too many dimensions"));
        }
        device::shape_bytes(shape, dtype)?;
        let api = device::api(dev.device_type)?;
        let data = api.alloc_data_space_scoped(dev, shape, dtype, scope)?;
        let tensor = bare_tensor(data, dev, dtype);
        Ok(Self::make(tensor, shape.to_vec(), Source::Owned))
    }

    /// Adopts a DLPack tensor without copying (`TVMArrayFromDLPack`): its deleter runs when
    /// the last reference goes.
    ///
    /// # Safety
    /// `m` is a live managed tensor whose ownership moves to the array.
    pub unsafe fn from_dlpack(m: *mut DLManagedTensor) -> Result<NDArray> {
        if m.is_null() {
            return Err(Error::value("TVMArrayFromDLPack: null DLManagedTensor"));
        }
        // SAFETY: live per contract.
        let t = unsafe { (*m).dl_tensor };
        let shape = match tensor_shape(&t) {
            Ok(s) => s.to_vec(),
            Err(e) => return Err(e),
        };
        Ok(Self::make(t, shape, Source::DLPack(m)))
    }

    /// Exports to DLPack (`TVMArrayToDLPack`): the result holds a reference until its deleter runs.
    pub fn to_dlpack(&self) -> *mut DLManagedTensor {
        unsafe extern "C" fn deleter(m: *mut DLManagedTensor) {
            // SAFETY: `m` is the box made below, whose manager_ctx holds one array reference.
            let b = unsafe { Box::from_raw(m) };
            // SAFETY: as above.
            unsafe { crate::object::release_raw(b.manager_ctx.cast()) };
        }
        let ctx = self.0.clone().into_raw();
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: *self.tensor(),
            manager_ctx: ctx.cast(),
            deleter: Some(deleter),
        }))
    }

    /// An array over memory owned elsewhere (never freed by the array), such as a linked
    /// parameter inside a loaded library.
    pub(crate) fn from_external(data: *mut c_void, shape: &[i64], dtype: DLDataType, dev: DLDevice) -> Result<NDArray> {
        device::shape_bytes(shape, dtype)?;
        let tensor = bare_tensor(data, dev, dtype);
        Ok(Self::make(tensor, shape.to_vec(), Source::External))
    }

    /// A read-only CPU array over bytes of a file mapping that `keep` keeps in place (see
    /// [`crate::mapped`]); writing into it faults, so it is only for owners that never write.
    pub(crate) fn from_mapped(
        data: *mut c_void,
        shape: &[i64],
        dtype: DLDataType,
        keep: crate::mapped::KeepAlive,
    ) -> Result<NDArray> {
        device::shape_bytes(shape, dtype)?;
        let tensor = bare_tensor(data, DLDevice { device_type: device::CPU, device_id: 0 }, dtype);
        Ok(Self::make(tensor, shape.to_vec(), Source::Mapped(keep)))
    }

    /// Whether the data is read-only memory (a weight used in place in a library's mapping).
    pub(crate) fn is_read_only(&self) -> bool {
        match &self.body().source {
            Source::Mapped(_) => true,
            Source::View(base) => base.is_read_only(),
            _ => false,
        }
    }

    /// An array at `byte_offset` of memory that `owner` holds (a VM storage block); the
    /// reference keeps the owner alive while the array lives.
    pub fn in_storage(
        data: *mut c_void,
        byte_offset: u64,
        shape: &[i64],
        dtype: DLDataType,
        dev: DLDevice,
        owner: ObjectRef,
    ) -> Result<NDArray> {
        device::shape_bytes(shape, dtype)?;
        let mut tensor = bare_tensor(data, dev, dtype);
        tensor.byte_offset = byte_offset;
        Ok(Self::make(tensor, shape.to_vec(), Source::Keep(owner)))
    }

    /// An array over data already allocated through the device API of `dev`, which frees it
    /// when the last reference goes (the remote arrays of an RPC session).
    pub fn adopt(
        data: *mut c_void,
        shape: &[i64],
        dtype: DLDataType,
        dev: DLDevice,
        byte_offset: u64,
    ) -> Result<NDArray> {
        device::shape_bytes(shape, dtype)?;
        let mut tensor = bare_tensor(data, dev, dtype);
        tensor.byte_offset = byte_offset;
        Ok(Self::make(tensor, shape.to_vec(), Source::Owned))
    }

    /// A view of this array's data with another shape/dtype (must not be larger).
    pub fn create_view(&self, shape: &[i64], dtype: DLDataType) -> Result<NDArray> {
        self.create_view_at(shape, dtype, 0)
    }

    /// A view of this array's data from byte `offset` on, with another shape/dtype (it must
    /// fit; TVM v0.9+'s `CreateView` with a relative byte offset).
    pub(crate) fn create_view_at(&self, shape: &[i64], dtype: DLDataType, offset: u64) -> Result<NDArray> {
        let want = device::shape_bytes(shape, dtype)?;
        let have = self.byte_size()?;
        let end = usize::try_from(offset).ok().and_then(|o| o.checked_add(want));
        if !matches!(end, Some(e) if e <= have) {
            return Err(Error::value(format!(
                "CreateView: the view of shape {shape:?} needs {want} bytes from byte {offset} but the array has {have}"
            )));
        }
        if !is_contiguous(self.tensor()) {
            return Err(Error::value("Can only create view for compact tensor"));
        }
        let mut t = *self.tensor();
        t.dtype = dtype;
        t.strides = std::ptr::null_mut();
        t.byte_offset += offset;
        Ok(Self::make(t, shape.to_vec(), Source::View(self.clone())))
    }

    /// Views an object as an NDArray (type index 2).
    pub fn from_object(obj: ObjectRef) -> Option<NDArray> {
        obj.downcast::<NDArrayObj>().is_some().then_some(NDArray(obj))
    }

    /// A new reference from a C handle (`DLTensor*` into a container).
    ///
    /// # Safety
    /// `h` is NULL or a live NDArray handle made by this runtime.
    pub unsafe fn from_handle_borrowed(h: *mut DLTensor) -> Option<NDArray> {
        if h.is_null() {
            return None;
        }
        let header = h.cast::<u8>().wrapping_sub(NDARRAY_HANDLE_OFFSET).cast::<ObjectHeader>();
        // SAFETY: an NDArray handle is 16 bytes past its container's live header.
        unsafe { ObjectRef::from_borrowed(header) }.and_then(NDArray::from_object)
    }

    /// The container header of a handle (`handle - 16`).
    pub fn header_of_handle(h: *mut DLTensor) -> *mut ObjectHeader {
        h.cast::<u8>().wrapping_sub(NDARRAY_HANDLE_OFFSET).cast()
    }

    fn body(&self) -> &NDArrayObj {
        self.0.downcast::<NDArrayObj>().unwrap_or_else(|| unreachable!("NDArray without NDArray body"))
    }

    /// The C handle: the `DLTensor` inside the container.
    pub fn handle(&self) -> *mut DLTensor {
        (&self.body().tensor as *const DLTensor).cast_mut()
    }

    /// Gives one reference to C as a handle.
    pub fn into_handle(self) -> *mut DLTensor {
        let h = self.handle();
        let _ = self.0.into_raw();
        h
    }

    /// The tensor.
    pub fn tensor(&self) -> &DLTensor {
        &self.body().tensor
    }

    /// The object.
    pub fn as_object(&self) -> &ObjectRef {
        &self.0
    }

    /// The object, by value.
    pub fn into_object(self) -> ObjectRef {
        self.0
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.body().shape
    }

    /// The element type.
    pub fn dtype(&self) -> DLDataType {
        self.tensor().dtype
    }

    /// The device.
    pub fn device(&self) -> DLDevice {
        self.tensor().device
    }

    /// Byte size of the data.
    pub fn byte_size(&self) -> Result<usize> {
        tensor_bytes(self.tensor())
    }

    /// Whether two references name the same array.
    pub fn ptr_eq(&self, other: &NDArray) -> bool {
        self.0.ptr_eq(&other.0)
    }

    /// Copies host bytes in (`TVMArrayCopyFromBytes`), synchronously.
    pub fn copy_from_bytes(&self, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        copy_from_bytes(self.tensor(), data.as_ptr().cast(), data.len())
    }

    fn check_writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::value("the array is read-only (a weight used in place in a library)"));
        }
        Ok(())
    }

    /// Copies the data out to host bytes (`TVMArrayCopyToBytes`), synchronously.
    pub fn copy_to_bytes(&self, out: &mut [u8]) -> Result<()> {
        copy_to_bytes(self.tensor(), out.as_mut_ptr().cast(), out.len())
    }

    /// The data as a host byte vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.byte_size()?];
        self.copy_to_bytes(&mut v)?;
        Ok(v)
    }

    /// Copies from another tensor (`TVMArrayCopyFromTo` rules).
    pub fn copy_from(&self, from: &DLTensor) -> Result<()> {
        self.check_writable()?;
        copy_tensor(from, self.tensor(), std::ptr::null_mut())
    }
}

/// A compact tensor over `data` whose shape the container fills in.
fn bare_tensor(data: *mut c_void, dev: DLDevice, dtype: DLDataType) -> DLTensor {
    DLTensor {
        data,
        device: dev,
        ndim: 0,
        dtype,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

fn host_tensor(like: &DLTensor, data: *mut c_void) -> DLTensor {
    DLTensor {
        data,
        device: DLDevice { device_type: device::CPU, device_id: 0 },
        ndim: like.ndim,
        dtype: like.dtype,
        shape: like.shape,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// Host bytes into a tensor, then a sync of its device.
pub fn copy_from_bytes(t: &DLTensor, data: *const c_void, nbytes: usize) -> Result<()> {
    if tensor_bytes(t)? != nbytes {
        return Err(Error::value(format!("ArrayCopyFromBytes: size mismatch ({} vs. {nbytes})", tensor_bytes(t)?)));
    }
    if !is_contiguous(t) {
        return Err(Error::value("ArrayCopyFromBytes only support contiguous array for now"));
    }
    if nbytes > 0 && data.is_null() {
        return Err(Error::value("ArrayCopyFromBytes: null data pointer"));
    }
    let api = device::api(t.device.device_type)?;
    api.copy_data_from_to(&host_tensor(t, data.cast_mut()), t, std::ptr::null_mut())?;
    api.stream_sync(t.device, std::ptr::null_mut())
}

/// A tensor into host bytes, then a sync of its device.
pub fn copy_to_bytes(t: &DLTensor, data: *mut c_void, nbytes: usize) -> Result<()> {
    if tensor_bytes(t)? != nbytes {
        return Err(Error::value(format!("ArrayCopyToBytes: size mismatch ({} vs. {nbytes})", tensor_bytes(t)?)));
    }
    if !is_contiguous(t) {
        return Err(Error::value("ArrayCopyToBytes only support contiguous array for now"));
    }
    if nbytes > 0 && data.is_null() {
        return Err(Error::value("ArrayCopyToBytes: null data pointer"));
    }
    let api = device::api(t.device.device_type)?;
    api.copy_data_from_to(t, &host_tensor(t, data), std::ptr::null_mut())?;
    api.stream_sync(t.device, std::ptr::null_mut())
}

/// `TVMArrayCopyFromTo`: equal byte sizes, compatible devices, routed to the non-CPU side.
pub fn copy_tensor(from: &DLTensor, to: &DLTensor, stream: *mut c_void) -> Result<()> {
    let (a, b) = (tensor_bytes(from)?, tensor_bytes(to)?);
    if a != b {
        return Err(Error::value(format!("TVMArrayCopyFromTo: The size must exactly match ({a} vs. {b})")));
    }
    let (ft, tt) = (from.device.device_type, to.device.device_type);
    let ok = ft == tt || ft == device::CPU || tt == device::CPU || ft == device::CUDA_HOST || tt == device::CUDA_HOST;
    if !ok {
        return Err(Error::value(format!(
            "Can not copy across different device types directly. From device type: {ft} to device type: {tt}"
        )));
    }
    copy_routed(from, to, stream)
}

/// `TVMDeviceCopyDataFromTo`: the API of `from` unless it is CPU, else of `to`; no checks
/// beyond the device API's own.
pub fn copy_routed(from: &DLTensor, to: &DLTensor, stream: *mut c_void) -> Result<()> {
    let dev = if from.device.device_type != device::CPU { from.device } else { to.device };
    device::api(dev.device_type)?.copy_data_from_to(from, to, stream)
}

#[cfg(test)]
mod mapped_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::dtype::{dtype, FLOAT32};

    const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

    #[test]
    fn alloc_align_copy() {
        let a = NDArray::empty(&[2, 3], FLOAT32, CPU0).unwrap();
        assert_eq!(a.tensor().data as usize % 128, 0);
        assert_eq!(a.byte_size().unwrap(), 24);
        let src: Vec<u8> = (0..24).collect();
        a.copy_from_bytes(&src).unwrap();
        assert_eq!(a.to_bytes().unwrap(), src);
        assert!(a.copy_from_bytes(&src[..8]).unwrap_err().to_string().contains("size mismatch"));
        let b = NDArray::empty(&[6], FLOAT32, CPU0).unwrap();
        b.copy_from(a.tensor()).unwrap();
        assert_eq!(b.to_bytes().unwrap(), src);
        let c = NDArray::empty(&[7], FLOAT32, CPU0).unwrap();
        assert!(c.copy_from(a.tensor()).is_err());
        // The handle round-trips to the same container.
        // SAFETY: `a` keeps the handle alive.
        let again = unsafe { NDArray::from_handle_borrowed(a.handle()) }.unwrap();
        assert!(again.ptr_eq(&a));
        assert!(NDArray::empty(&[1], dtype(0, 24, 1), CPU0).is_err());
        assert!(NDArray::empty(&[-1], FLOAT32, CPU0).is_err());
        assert!(NDArray::empty(&[1], FLOAT32, DLDevice { device_type: 7, device_id: 0 }).is_err());
    }

    #[test]
    fn views_and_dlpack() {
        let a = NDArray::empty(&[4], FLOAT32, CPU0).unwrap();
        let v = a.create_view(&[2, 2], FLOAT32).unwrap();
        assert_eq!(v.tensor().data, a.tensor().data);
        assert!(a.create_view(&[5], FLOAT32).is_err());
        let m = a.to_dlpack();
        assert_eq!(a.as_object().ref_count(), 3);
        // SAFETY: `m` is a fresh managed tensor whose ownership moves to `b`.
        let b = unsafe { NDArray::from_dlpack(m) }.unwrap();
        assert_eq!(b.tensor().data, a.tensor().data);
        drop(b);
        assert_eq!(a.as_object().ref_count(), 2);
    }
}
