//! The Relay VM's `vm.Storage` objects: blocks of a [`crate::memory::Allocator`] that
//! `AllocStorage` makes and `AllocTensor` carves tensors out of.

use crate::abi::{DLDataType, DLDevice};
use crate::device;
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::object::{register_type, ObjectBody, ObjectRef};
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

pub use crate::memory::{release_all_pools, Allocator, AllocatorKind, PAGE_SIZE};

/// The body of a `vm.Storage` object: one block of an allocator.
pub struct StorageObj {
    data: *mut c_void,
    size: usize,
    alignment: usize,
    alloc: Arc<Allocator>,
}

// SAFETY: the block is device memory owned by this object; the pointer is only handed to tensors
// and returned to the allocator once, in Drop.
unsafe impl Send for StorageObj {}
// SAFETY: as above; the object is immutable.
unsafe impl Sync for StorageObj {}

impl Drop for StorageObj {
    fn drop(&mut self) {
        self.alloc.free(self.data, self.size, self.alignment);
    }
}

impl ObjectBody for StorageObj {
    fn type_index() -> u32 {
        storage_type_index()
    }
}

/// The type index of `vm.Storage` (registered by key on first use).
pub(crate) fn storage_type_index() -> u32 {
    static IDX: OnceLock<u32> = OnceLock::new();
    *IDX.get_or_init(|| register_type("vm.Storage", "runtime.Object"))
}

impl StorageObj {
    /// A new storage object of `nbytes` from `alloc`.
    pub fn new_object(alloc: &Arc<Allocator>, nbytes: usize, alignment: usize, hint: DLDataType) -> Result<ObjectRef> {
        let (data, size) = alloc.alloc(nbytes, alignment, hint)?;
        Ok(ObjectRef::new(StorageObj { data, size, alignment, alloc: alloc.clone() }))
    }

    /// The storage body of an object, if it is a `vm.Storage`.
    pub fn of(obj: &ObjectRef) -> Option<&StorageObj> {
        obj.downcast::<StorageObj>()
    }

    /// The block's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device.
    pub fn device(&self) -> DLDevice {
        self.alloc.device()
    }

    /// `StorageObj::AllocNDArray`: a tensor at byte `offset` of the block (the block's pointer
    /// with `byte_offset`, as TVM makes it), keeping `this` (the storage object) alive.
    pub(crate) fn alloc_ndarray(
        &self,
        this: &ObjectRef,
        offset: i64,
        shape: &[i64],
        dtype: DLDataType,
    ) -> Result<NDArray> {
        super::executable::verify_dtype(dtype)?;
        let needed = device::shape_bytes(shape, dtype)?;
        let off = usize::try_from(offset).map_err(|_| Error::value(format!("negative storage offset {offset}")))?;
        if !matches!(off.checked_add(needed), Some(end) if end <= self.size) {
            return Err(Error::value(format!(
                "storage allocation failure, attempted to allocate {needed} at offset {off} in region that is {}bytes",
                self.size
            )));
        }
        NDArray::in_storage(self.data, off as u64, shape, dtype, self.alloc.device(), this.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::dtype::FLOAT32;

    const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

    #[test]
    fn pooled_reuses_and_closes() {
        let a = Allocator::new(CPU0, AllocatorKind::Pooled).unwrap();
        let s = StorageObj::new_object(&a, 100, 64, FLOAT32).unwrap();
        let p = StorageObj::of(&s).unwrap().data;
        assert_eq!(StorageObj::of(&s).unwrap().size(), PAGE_SIZE);
        drop(s);
        assert_eq!(a.pooled_bytes(), PAGE_SIZE);
        let s2 = StorageObj::new_object(&a, 4000, 64, FLOAT32).unwrap();
        assert_eq!(StorageObj::of(&s2).unwrap().data, p);
        let t = StorageObj::of(&s2).unwrap().alloc_ndarray(&s2, 16, &[10], FLOAT32).unwrap();
        assert_eq!(t.tensor().byte_offset, 16);
        assert!(StorageObj::of(&s2).unwrap().alloc_ndarray(&s2, 4096 - 39, &[10], FLOAT32).is_err());
        drop(s2);
        // The tensor keeps its storage.
        assert_eq!(a.pooled_bytes(), 0);
        a.close();
        drop(t);
        assert_eq!(a.pooled_bytes(), 0);
        assert_eq!(a.held_bytes(), 0);
    }

    #[test]
    fn naive_frees_at_once() {
        let a = Allocator::new(CPU0, AllocatorKind::Naive).unwrap();
        let s = StorageObj::new_object(&a, 100, 64, FLOAT32).unwrap();
        assert_eq!(a.held_bytes(), 100);
        drop(s);
        assert_eq!(a.held_bytes(), 0);
        assert!(AllocatorKind::from_code(3).is_err());
    }
}
